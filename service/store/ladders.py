"""Ladders in Redis: their members, each bot's memberships and pause, the tables in play and
how often each pair of bots met, and the lock of the one pairing pass running.

A ladder's own keys share one slot (``{l:<ladder>}:...``), each bot's its own: no script
touches both. A table is stored in three single-slot steps, under the pass's lock:
1. it is held as *pending* (the ladder's slot; refused unless the pass holds the lock);
2. each of its registered bots' places is *reserved* (each bot's slot): its matches counted
   in the bot's ``playing`` (what the cap counts, over all ladders) and remembered in a field
   of their own (``keys.ladder_seat_field``), unless that would take it over the cap, or it
   is paused or retired: then the places reserved so far are released and the table dropped;
3. it moves from pending to the tables in play, its meetings counted (the ladder's slot;
   refused unless the pass still holds the lock).
A pass that dies between leaves a pending table: the next pass (holding the lock, so no other
is storing one) releases its bots' places and drops it. A place whose table is neither in
play nor pending (a pass that lost its lock and reserved after the next one cleaned up) is
released by the next pass that reads the bot. So a bot's ``playing`` never exceeds the cap
(each reservation checks it in the bot's own slot) and no place outlives its table for
longer than a pass.

A table ends (once) the other way round: each bot's place released (its streak of tables
with a timed-out move moved with it, in the same step), then the table taken out of play:
an end run again after dying between releases nothing twice (a place goes once) and ends the
table then."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.crc import key_slot

from service.store.clock import now_ms
from service.store.keys import (
    LADDERS,
    bot_key,
    bot_ladder_state_key,
    bot_ladders_key,
    ladder_lock_key,
    ladder_meetings_key,
    ladder_members_key,
    ladder_pending_key,
    ladder_seat_field,
    ladder_tables_key,
    ladder_tables_made_key,
    ladder_unstarted_key,
)
from service.store.redis_client import clustered

# Hold a table as pending while its bots' places are reserved: only by the pass holding the
# lock (-5: it lost it), and not once stored (0). KEYS: lock, pending, tables. ARGV: the
# lock's token, table id, table JSON.
HOLD_TABLE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -5 end
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
"""

# Reserve a bot's place at a table (its matches added to those it plays in all ladders, and
# in this one), unless that would take it over the cap (-1: the passes of two ladders seated
# it at once), or it was paused (-2) or retired (-3) since the pass read it; reserved already:
# nothing changes (1). KEYS: its ladder state, its bot hash. ARGV: the place's field, the
# table's matches, the cap, the ladder's count's field.
RESERVE_PLACE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 1 end
if redis.call('HEXISTS', KEYS[2], 'retired') == 1 then return -3 end
if redis.call('HEXISTS', KEYS[1], 'paused') == 1 then return -2 end
local playing = tonumber(redis.call('HGET', KEYS[1], 'playing') or '0')
if playing + tonumber(ARGV[2]) > tonumber(ARGV[3]) then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[1], 'playing', tonumber(ARGV[2]))
redis.call('HINCRBY', KEYS[1], ARGV[4], tonumber(ARGV[2]))
return 1
"""

# Store a pending table in play, once, and count the meetings of its bots: only by the pass
# holding the lock (-5), and only while it is pending (0: released by another pass). It is
# also listed as unstarted, until its first match is created. KEYS: lock, pending, tables,
# meetings, unstarted. ARGV: the lock's token, table id, then each pair (``a|b``).
STORE_TABLE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -5 end
local table = redis.call('HGET', KEYS[2], ARGV[2])
if not table then return 0 end
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('HSET', KEYS[3], ARGV[2], table)
redis.call('SADD', KEYS[5], ARGV[2])
for i = 3, #ARGV do redis.call('HINCRBY', KEYS[4], ARGV[i], 1) end
return 1
"""

# Release a bot's place at a table, once (0: released already): its matches off those it
# plays, and (unless ARGV[3] is 0: a table dropped unplayed) its streak of tables with a
# timed-out move moved (one more, or back to 0); a streak reaching the limit pauses it.
# KEYS: its ladder state. ARGV: the place's field, the ladder's count's field, limit (0: no
# streak), time ms, reason, '1' if it timed out at this table.
RELEASE_PLACE = """
local matches = redis.call('HGET', KEYS[1], ARGV[1])
if not matches then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
if redis.call('HINCRBY', KEYS[1], 'playing', -tonumber(matches)) < 0 then redis.call('HSET', KEYS[1], 'playing', 0) end
if redis.call('HINCRBY', KEYS[1], ARGV[2], -tonumber(matches)) <= 0 then redis.call('HDEL', KEYS[1], ARGV[2]) end
if ARGV[3] == '0' then return 1 end
if ARGV[6] == '1' then
  local streak = redis.call('HINCRBY', KEYS[1], 'timeouts', 1)
  if streak >= tonumber(ARGV[3]) and redis.call('HEXISTS', KEYS[1], 'paused') == 0 then
    redis.call('HSET', KEYS[1], 'paused', ARGV[4], 'reason', ARGV[5])
  end
else
  redis.call('HSET', KEYS[1], 'timeouts', 0)
end
return 1
"""

# What a pairing pass reads of each member, in one command for the bots of one slot (on one
# server: all of them; a pipeline of four commands a bot cost a pass over 1,000 bots most of
# its time in the client; on a cluster: one call a bot, all at once). KEYS: per bot its hash,
# its ladder state and its ladders. ARGV: the ladder, its count's field. Answer: per bot
# name, retired, paused, reason, playing, playing in this ladder, joined.
READ_FACTS = """
local out = {}
for i = 1, #KEYS, 3 do
  local bot = redis.call('HMGET', KEYS[i], 'name', 'retired')
  local state = redis.call('HMGET', KEYS[i + 1], 'paused', 'reason', 'playing', ARGV[2])
  local row = {bot[1], bot[2], state[1], state[2], state[3], state[4], redis.call('HGET', KEYS[i + 2], ARGV[1])}
  for j = 1, 7 do table.insert(out, row[j] or false) end
end
return out
"""

#: meetings read with one command at most (a long HMGET holds Redis up)
MEETINGS_SLICE = 5_000

#: a bot's ladder state's field counting its matches in one ladder (the field name then the ladder's)
_PLAYING_IN = "playing:"

UNLOCK = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


class LockLost(RuntimeError):
    """The pass's lock lapsed (another pass holds the ladder now): it stores nothing more."""


@dataclass(frozen=True, slots=True)
class Pause:
    """Why and since when (ms) a bot is paused."""

    since_ms: int
    reason: str


@dataclass(frozen=True, slots=True)
class MemberFacts:
    """What a pairing pass reads of one member."""

    name: str | None
    retired: bool
    paused: Pause | None
    #: the ladder matches it sits in now, in all ladders
    playing: int
    #: when it joined this ladder (ms); None: it is not a member (a join or a leave died half way)
    joined_ms: int | None
    #: the matches of this ladder's tables it holds a place at (its tables in play: unless a
    #: pass that lost its lock reserved a place after the next one cleaned up, ``places``)
    playing_here: int


def _pause(fields: Sequence[bytes | None]) -> Pause | None:
    since, reason = fields
    return None if since is None else Pause(int(since), (reason or b"").decode())


class LadderStore:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._hold_table = redis.register_script(HOLD_TABLE)
        self._reserve_place = redis.register_script(RESERVE_PLACE)
        self._store_table = redis.register_script(STORE_TABLE)
        self._release_place = redis.register_script(RELEASE_PLACE)
        self._unlock = redis.register_script(UNLOCK)
        self._read_facts = redis.register_script(READ_FACTS)

    # ------------------------------------------------------------------ memberships
    async def join(self, ladder: str, bot_id: str) -> None:
        """Make the bot a member (again: nothing changes) and lift its pause. The ladder's
        list first, then the bot's own membership, which is what makes it one (a join that
        died between leaves a name on the list that the readers pass over)."""
        at = now_ms()
        await self.redis.sadd(LADDERS, ladder)
        await self.redis.zadd(ladder_members_key(ladder), {bot_id: at}, nx=True)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hsetnx(bot_ladders_key(bot_id), ladder, at)
            pipe.hdel(bot_ladder_state_key(bot_id), "paused", "reason", "timeouts")
            await pipe.execute()

    async def leave(self, ladder: str, bot_id: str) -> None:
        """The bot's own membership first (it is no member from then on), then the ladder's list."""
        await self.redis.hdel(bot_ladders_key(bot_id), ladder)
        await self.redis.zrem(ladder_members_key(ladder), bot_id)

    async def memberships(self, bot_id: str) -> tuple[dict[str, int], Pause | None, dict[str, int]]:
        """The bot's ladders (ladder -> when it joined, ms), its pause, and the matches it
        plays now per ladder (ladder -> matches: those with none left out)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(bot_ladders_key(bot_id))
            pipe.hgetall(bot_ladder_state_key(bot_id))
            joined, state = await pipe.execute()
        prefix = _PLAYING_IN.encode()
        playing = {k[len(prefix):].decode(): int(v) for k, v in state.items() if k.startswith(prefix)}
        pause = _pause((state.get(b"paused"), state.get(b"reason")))
        return {k.decode(): int(v) for k, v in joined.items()}, pause, playing

    async def resume(self, bot_id: str) -> bool:
        """Lift the bot's pause; whether it was paused."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hdel(bot_ladder_state_key(bot_id), "paused", "reason")
            pipe.hset(bot_ladder_state_key(bot_id), "timeouts", 0)
            removed, _ = await pipe.execute()
        return bool(removed)

    async def is_paused(self, bot_id: str) -> bool:
        return bool(await self.redis.hexists(bot_ladder_state_key(bot_id), "paused"))

    async def ladders(self) -> list[str]:
        """Every ladder any bot ever joined."""
        return sorted(name.decode() for name in await self.redis.smembers(LADDERS))

    async def members(self, ladder: str, first: int) -> list[tuple[str, int]]:
        """The ladder's list's first ``first`` bots by when they joined: (bot id, joined ms)
        (the list: ``facts`` says which are members)."""
        rows = await self.redis.zrange(ladder_members_key(ladder), 0, first - 1, withscores=True)
        return [(bot.decode(), int(at)) for bot, at in rows]

    # ------------------------------------------------------------------ pairing
    async def lock(self, ladder: str, seconds: float) -> str | None:
        token = secrets.token_hex(8)
        return token if await self.redis.set(ladder_lock_key(ladder), token, nx=True, px=int(seconds * 1000)) else None

    async def unlock(self, ladder: str, token: str) -> None:
        await self._unlock(keys=[ladder_lock_key(ladder)], args=[token])

    async def facts(self, ladder: str, bot_ids: Sequence[str]) -> list[MemberFacts]:
        """Each bot's name, retirement, pause, matches in play, membership of ``ladder`` and
        places at its tables: one script for the bots of each slot, all in one round trip."""
        if not bot_ids:
            return []
        groups = self._by_slot(bot_ids)
        # (at once: a cluster client's pipelines refuse scripts)
        answers = await asyncio.gather(*(
            self._read_facts(keys=[k for b in group for k in (bot_key(b), bot_ladder_state_key(b), bot_ladders_key(b))],
                             args=[ladder, _PLAYING_IN + ladder])
            for group in groups
        ))
        rows = {b: answer[7 * i:7 * i + 7] for group, answer in zip(groups, answers, strict=True) for i, b in enumerate(group)}
        facts = []
        for bot_id in bot_ids:
            name, retired, paused, reason, playing, playing_here, joined = rows[bot_id]
            facts.append(MemberFacts(
                None if name is None else name.decode(), retired is not None, _pause((paused, reason)), int(playing or 0),
                None if joined is None else int(joined), int(playing_here or 0),
            ))
        return facts

    async def places(self, ladder: str, bot_id: str) -> list[str]:
        """The tables of ``ladder`` the bot holds a place at."""
        prefix = ladder_seat_field(ladder, "").encode()
        return [f[len(prefix):].decode() for f in await self.redis.hkeys(bot_ladder_state_key(bot_id)) if f.startswith(prefix)]

    def _by_slot(self, bot_ids: Sequence[str]) -> list[list[str]]:
        """The bots grouped by the slot of their keys (on one server, slots do not matter: one group)."""
        if not clustered(self.redis):
            return [list(dict.fromkeys(bot_ids))]
        groups: dict[int, list[str]] = {}
        for bot_id in dict.fromkeys(bot_ids):
            groups.setdefault(key_slot(bot_key(bot_id).encode()), []).append(bot_id)
        return list(groups.values())

    async def tables(self, ladder: str) -> dict[str, dict[str, Any]]:
        """The ladder's tables in play, by id."""
        return {k.decode(): json.loads(v) for k, v in (await self.redis.hgetall(ladder_tables_key(ladder))).items()}

    async def table(self, ladder: str, table_id: str) -> dict[str, Any] | None:
        found = await self.redis.hget(ladder_tables_key(ladder), table_id)
        return None if found is None else dict(json.loads(found))

    async def meetings_among(self, ladder: str, bots: Sequence[str]) -> dict[frozenset[str], int]:
        """How often each pair of ``bots`` met (pairs that never did left out): their fields
        alone, read in slices (not the whole hash, which grows towards every pair of members)."""
        ids = sorted(set(bots))
        pairs = [f"{a}|{b}" for i, a in enumerate(ids) for b in ids[i + 1:]]
        out: dict[frozenset[str], int] = {}
        for start in range(0, len(pairs), MEETINGS_SLICE):
            part = pairs[start:start + MEETINGS_SLICE]
            for pair, count in zip(part, await self.redis.hmget(ladder_meetings_key(ladder), part), strict=True):
                if count is not None:
                    out[frozenset(pair.split("|"))] = int(count)
        return out

    async def next_table_id(self, ladder: str) -> str:
        """A new table's id: the ladder's count of tables, and a few random characters (its
        matches' ids never meet an archived match's, should Redis ever start again empty)."""
        return f"{await self.redis.incr(ladder_tables_made_key(ladder))}{secrets.token_hex(2)}"

    async def store_table(self, ladder: str, token: str, table_id: str, table: dict[str, Any], matches: int,
                          bots: Sequence[str], registered: Sequence[str], cap: int) -> bool:
        """Store a new table (once) under the pass's lock (``token``), count its meetings, and
        add its ``matches`` to those its ``registered`` bots play (the steps in the module's
        docstring); False: stored already, or one of them was paused or retired since the pass
        read it, or the table would take it over ``cap`` (another ladder's pass seated it
        meanwhile). LockLost: the lock lapsed (nothing of the table is left held)."""
        held = int(await self._hold_table(keys=[ladder_lock_key(ladder), ladder_pending_key(ladder),
                                                ladder_tables_key(ladder)],
                                          args=[token, table_id, json.dumps(table, separators=(",", ":"))]))
        if held == -5:
            raise LockLost(f"the pairing pass of {ladder} lost its lock")
        if held == 0:
            return False
        field = ladder_seat_field(ladder, table_id)
        reserved = await asyncio.gather(*(  # (each in its own slot: at once)
            self._reserve_place(keys=[bot_ladder_state_key(b), bot_key(b)], args=[field, matches, cap, _PLAYING_IN + ladder])
            for b in registered
        ))
        refused = any(int(answer) < 0 for answer in reserved)
        pairs = sorted({"|".join(sorted((a, b))) for a in bots for b in bots if a < b})
        stored = 0 if refused else int(await self._store_table(
            keys=[ladder_lock_key(ladder), ladder_pending_key(ladder), ladder_tables_key(ladder),
                  ladder_meetings_key(ladder), ladder_unstarted_key(ladder)],
            args=[token, table_id, *pairs],
        ))
        if stored != 1:
            await self.release_pending(ladder, table_id, registered)
        if stored == -5:
            raise LockLost(f"the pairing pass of {ladder} lost its lock")
        return stored == 1

    async def release_pending(self, ladder: str, table_id: str, registered: Sequence[str]) -> None:
        """A pending table not stored (refused, or its pass died): its bots' places released,
        then it is no longer pending."""
        await self.release_places(ladder, table_id, registered)
        await self.redis.hdel(ladder_pending_key(ladder), table_id)

    async def pending(self, ladder: str) -> dict[str, dict[str, Any]]:
        """Tables a pass held but did not store (under the ladder's lock: a dead pass's)."""
        return {k.decode(): json.loads(v) for k, v in (await self.redis.hgetall(ladder_pending_key(ladder))).items()}

    async def release_places(self, ladder: str, table_id: str, bots: Sequence[str]) -> None:
        """The bots' places at a table never played (none or a dead pass's): released, no
        streak moved."""
        await asyncio.gather(*(
            self._release_place(keys=[bot_ladder_state_key(b)],
                                args=[ladder_seat_field(ladder, table_id), _PLAYING_IN + ladder, 0, 0, "", "0"])
            for b in bots
        ))

    async def started(self, ladder: str, table_id: str) -> None:
        """The table's first match is created (or the table is gone): off the unstarted ones."""
        await self.redis.srem(ladder_unstarted_key(ladder), table_id)

    async def unstarted(self, ladder: str) -> list[str]:
        """Tables stored whose first match was not created (a pass died in between)."""
        return sorted(t.decode() for t in await self.redis.smembers(ladder_unstarted_key(ladder)))

    async def drop_table(self, ladder: str, table_id: str, registered: Sequence[str]) -> None:
        """A table whose matches were never made (its pass died half way): its bots' places
        released (no streak moves: nobody played), then it is off the tables in play."""
        await self.release_places(ladder, table_id, registered)
        await self.redis.hdel(ladder_tables_key(ladder), table_id)

    async def end_table(self, ladder: str, table_id: str, timed_out: dict[str, bool],
                        pause_after: int, reason: str) -> bool:
        """The table's end, once: each registered bot's place released with its timeout
        streak moved (``timed_out``: whether it let a move time out there; a streak reaching
        ``pause_after`` pauses it for ``reason``), then the table off the tables in play.
        False: ended already."""
        at = now_ms()
        await asyncio.gather(*(
            self._release_place(keys=[bot_ladder_state_key(b)], args=[
                ladder_seat_field(ladder, table_id), _PLAYING_IN + ladder, pause_after, at, reason, "1" if timed else "0"])
            for b, timed in timed_out.items()
        ))
        return bool(await self.redis.hdel(ladder_tables_key(ladder), table_id))
