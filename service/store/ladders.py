"""Ladders in Redis: their members, each bot's memberships and pause, the tables in play and
how often each pair of bots met, and the lock of the one pairing pass running.

Everything that must happen once is one script: a table is stored once (and its meetings
counted with it), and ended once (and its bots' timeout streaks, and pauses, moved with it)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from service.store.clock import now_ms
from service.store.keys import (
    LADDERS,
    bot_key,
    bot_ladder_state_key,
    bot_ladders_key,
    fitted_ratings_key,
    ladder_lock_key,
    ladder_meetings_key,
    ladder_members_key,
    ladder_tables_key,
    ladder_tables_made_key,
    ladder_unstarted_key,
    leaderboard_key,
    ratings_key,
)
from service.store.ratings import StoredRating

# Store a new table once, count the meetings of its bots with it, and add its matches to those
# each of its registered bots plays (in all ladders: the cap is per bot), unless that would
# take one over the cap (-1: the passes of two ladders seated it at once), or one was paused
# (-2) or retired (-3) since the pass read it.
# The table is also listed as unstarted, until its first match is created. Each bot's matches
# of this ladder alone are counted beside (its membership shows them without reading tables).
# KEYS: tables, meetings, unstarted, then each registered bot's ladder state, then each one's
# bot hash (the same order). ARGV: table id,
# table JSON, its matches, the cap, the ladder's count's field, then each pair (``a|b``).
STORE_TABLE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
local bots = (#KEYS - 3) / 2
for i = 4, 3 + bots do
  local playing = tonumber(redis.call('HGET', KEYS[i], 'playing') or '0')
  if playing + tonumber(ARGV[3]) > tonumber(ARGV[4]) then return -1 end
  if redis.call('HEXISTS', KEYS[i], 'paused') == 1 then return -2 end
  if redis.call('HEXISTS', KEYS[i + bots], 'retired') == 1 then return -3 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[1])
for i = 6, #ARGV do redis.call('HINCRBY', KEYS[2], ARGV[i], 1) end
for i = 4, 3 + bots do
  redis.call('HINCRBY', KEYS[i], 'playing', tonumber(ARGV[3]))
  redis.call('HINCRBY', KEYS[i], ARGV[5], tonumber(ARGV[3]))
end
return 1
"""

# End a table once: off the tables in play, its matches off those its registered bots play,
# and (unless ARGV[2] is 0: a table dropped unplayed) each one's streak of tables with a
# timed-out move moved (one more, or back to 0); a streak reaching the limit pauses the bot.
# KEYS: tables, then each bot's ladder state. ARGV: table id, limit (0: no streaks), time ms,
# reason, the table's matches, the ladder's count's field, then '1' or '0' per bot (it timed
# out at this table).
END_TABLE = """
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
for i = 2, #KEYS do
  if redis.call('HINCRBY', KEYS[i], 'playing', -tonumber(ARGV[5])) < 0 then redis.call('HSET', KEYS[i], 'playing', 0) end
  if redis.call('HINCRBY', KEYS[i], ARGV[6], -tonumber(ARGV[5])) <= 0 then redis.call('HDEL', KEYS[i], ARGV[6]) end
  if ARGV[2] == '0' then
  elseif ARGV[5 + i] == '1' then
    local streak = redis.call('HINCRBY', KEYS[i], 'timeouts', 1)
    if streak >= tonumber(ARGV[2]) and redis.call('HEXISTS', KEYS[i], 'paused') == 0 then
      redis.call('HSET', KEYS[i], 'paused', ARGV[3], 'reason', ARGV[4])
    end
  else
    redis.call('HSET', KEYS[i], 'timeouts', 0)
  end
end
return 1
"""

# What a pairing pass reads of each member, in one command (a pipeline of four commands a bot
# cost a pass over 1,000 bots most of its time in the client). KEYS: the FITTED leaderboard,
# then per bot its hash, its ladder state and its ratings. ARGV: the ruleset, then each bot's
# id. Answer: per bot name, retired, paused, reason, playing, FITTED rating, Elo (JSON).
READ_FACTS = """
local out = {}
for i = 3, #KEYS, 3 do
  local id = ARGV[(i - 3) / 3 + 2]
  local bot = redis.call('HMGET', KEYS[i], 'name', 'retired')
  local state = redis.call('HMGET', KEYS[i + 1], 'paused', 'reason', 'playing')
  local row = {bot[1], bot[2], state[1], state[2], state[3], redis.call('ZSCORE', KEYS[1], id),
               redis.call('HGET', KEYS[2], id), redis.call('HGET', KEYS[i + 2], ARGV[1])}
  for j = 1, 8 do table.insert(out, row[j] or false) end
end
return out
"""

#: meetings read with one command at most (a long HMGET holds Redis up)
MEETINGS_SLICE = 5_000

#: a bot's ladder state's field counting its matches in one ladder (the field name then the ladder's)
_PLAYING_IN = "playing:"

UNLOCK = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


@dataclass(frozen=True, slots=True)
class Pause:
    """Why and since when (ms) a bot is paused."""

    since_ms: int
    reason: str


@dataclass(frozen=True, slots=True)
class MemberFacts:
    """What a pairing pass reads of one member (or a house bot's rating identity)."""

    name: str | None
    retired: bool
    paused: Pause | None
    #: the ladder matches it sits in now, in all ladders
    playing: int
    #: its rating in the ruleset's latest refit (None: that refit did not rate it)
    fitted: StoredRating | None
    #: its Elo rating (None: no rated match yet)
    elo: StoredRating | None


def _pause(fields: Sequence[bytes | None]) -> Pause | None:
    since, reason = fields
    return None if since is None else Pause(int(since), (reason or b"").decode())


class LadderStore:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._store_table = redis.register_script(STORE_TABLE)
        self._end_table = redis.register_script(END_TABLE)
        self._unlock = redis.register_script(UNLOCK)
        self._read_facts = redis.register_script(READ_FACTS)

    # ------------------------------------------------------------------ memberships
    async def join(self, ladder: str, bot_id: str) -> int:
        """Make the bot a member (again: nothing changes) and lift its pause; when it joined (ms)."""
        at = now_ms()
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.sadd(LADDERS, ladder)
            pipe.zadd(ladder_members_key(ladder), {bot_id: at}, nx=True)
            pipe.hsetnx(bot_ladders_key(bot_id), ladder, at)
            pipe.hdel(bot_ladder_state_key(bot_id), "paused", "reason", "timeouts")
            pipe.hget(bot_ladders_key(bot_id), ladder)
            answers = await pipe.execute()
        return int(answers[-1])

    async def leave(self, ladder: str, bot_id: str) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zrem(ladder_members_key(ladder), bot_id)
            pipe.hdel(bot_ladders_key(bot_id), ladder)
            await pipe.execute()

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
        """The ladder's first ``first`` members by when they joined: (bot id, joined ms)."""
        rows = await self.redis.zrange(ladder_members_key(ladder), 0, first - 1, withscores=True)
        return [(bot.decode(), int(at)) for bot, at in rows]

    # ------------------------------------------------------------------ pairing
    async def lock(self, ladder: str, seconds: float) -> str | None:
        token = secrets.token_hex(8)
        return token if await self.redis.set(ladder_lock_key(ladder), token, nx=True, px=int(seconds * 1000)) else None

    async def unlock(self, ladder: str, token: str) -> None:
        await self._unlock(keys=[ladder_lock_key(ladder)], args=[token])

    async def facts(self, ruleset: str, identities: Sequence[str]) -> list[MemberFacts]:
        """Each bot's name, retirement, pause, matches in play and ratings under ``ruleset``
        (FITTED when the latest refit rated it, Elo with its games and the deviation kept with
        it), in one round trip."""
        keys = [leaderboard_key(ruleset, "FITTED"), fitted_ratings_key(ruleset)]
        for identity in identities:
            keys += [bot_key(identity), bot_ladder_state_key(identity), ratings_key(identity)]
        answer = await self._read_facts(keys=keys, args=[ruleset, *identities]) if identities else []
        facts = []
        for i in range(len(identities)):
            name, retired, paused, reason, playing, fitted, fit, elo = answer[8 * i:8 * i + 8]
            facts.append(MemberFacts(
                None if name is None else name.decode(), retired is not None, _pause((paused, reason)), int(playing or 0),
                None if fitted is None else StoredRating.of_fit(float(fitted), fit),
                None if elo is None else StoredRating.of_elo(elo),
            ))
        return facts

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

    async def store_table(self, ladder: str, table_id: str, table: dict[str, Any], matches: int,
                          bots: Sequence[str], registered: Sequence[str], cap: int) -> bool:
        """Store a new table (once), count its meetings, and add its ``matches`` to those its
        ``registered`` bots play; False: stored already, or one of them was paused or retired
        since the pass read it, or the table would take it over ``cap`` (another ladder's pass
        seated it meanwhile)."""
        pairs = sorted({"|".join(sorted((a, b))) for a in bots for b in bots if a < b})
        return int(await self._store_table(
            keys=[ladder_tables_key(ladder), ladder_meetings_key(ladder), ladder_unstarted_key(ladder),
                  *(bot_ladder_state_key(b) for b in registered), *(bot_key(b) for b in registered)],
            args=[table_id, json.dumps(table, separators=(",", ":")), matches, cap, _PLAYING_IN + ladder, *pairs],
        )) == 1

    async def started(self, ladder: str, table_id: str) -> None:
        """The table's first match is created (or the table is gone): off the unstarted ones."""
        await self.redis.srem(ladder_unstarted_key(ladder), table_id)

    async def unstarted(self, ladder: str) -> list[str]:
        """Tables stored whose first match was not created (a pass died in between)."""
        return sorted(t.decode() for t in await self.redis.smembers(ladder_unstarted_key(ladder)))

    async def drop_table(self, ladder: str, table_id: str, matches: int, registered: Sequence[str]) -> None:
        """A table whose matches were never made (its pass died half way): off the tables in
        play, and off its bots' ladder matches (no streak moves: nobody played)."""
        await self._end_table(keys=[ladder_tables_key(ladder), *(bot_ladder_state_key(b) for b in registered)],
                              args=[table_id, 0, now_ms(), "", matches, _PLAYING_IN + ladder])

    async def end_table(self, ladder: str, table_id: str, matches: int, timed_out: dict[str, bool],
                        pause_after: int, reason: str) -> bool:
        """The table's end, once: off the tables in play, its ``matches`` off those its
        registered bots play, their timeout streaks moved (``timed_out``: whether each let a move time out
        there), and a bot whose streak reaches ``pause_after`` paused for ``reason``. False:
        ended already."""
        bots = list(timed_out)
        return bool(await self._end_table(
            keys=[ladder_tables_key(ladder), *(bot_ladder_state_key(b) for b in bots)],
            args=[table_id, pause_after, now_ms(), reason, matches, _PLAYING_IN + ladder,
                  *("1" if timed_out[b] else "0" for b in bots)],
        ))
