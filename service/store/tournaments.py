"""Tournaments in Redis: the tournament's head (spec, status, entrants, why it was cancelled),
its invitations (each also listed for its bot), its tables and their results, each written so
that a run repeated by another worker changes nothing (tables and results only if absent,
status only from the status expected), and a lock for the one run that advances it.

A tournament's own keys share one slot (``{tn:<id>}``), and every script and transaction here
touches that slot only. What lies elsewhere (the global indexes, each invited bot's list and
channel) is written by commands of its own, in an order that leaves a crash between them
something the workers' clock completes: whatever a creation or an end still has to write,
the tournament is first made due at once among the active ones (``tournaments:active``), so
the clock's next look at it (:meth:`TournamentStore.make_visible`, :meth:`TournamentStore.unlist_ended`)
finishes the job."""

from __future__ import annotations

import json
import secrets

from redis.asyncio import Redis

from service.model.invitation import Invitation
from service.model.tournament import Entrant, Table, TableResult, Tournament, TournamentSpec, TournamentStatus
from service.store.archive import Archive
from service.store.clock import now_ms
from service.store.keys import (
    ACTIVE_TOURNAMENTS,
    LISTED_TOURNAMENTS,
    UNARCHIVED_TOURNAMENTS,
    archive_claim_key,
    bot_invitations_key,
    bot_invited_channel,
    tournament_invitations_key,
    tournament_key,
    tournament_lock_key,
    tournament_results_key,
    tournament_tables_key,
)
from service.store.queues import claim_queued

# Replace the entrants, and with them the bot's invitation (when KEYS[2] is given), only if
# still SCHEDULED and nobody changed either meanwhile (an answer and the start cannot cross).
# KEYS: tournament[, its invitations]. ARGV: entrants as read, entrants after[, bot id,
# invitation as read ('' for none), invitation after].
SET_ENTRANTS = """
if redis.call('HGET', KEYS[1], 'status') ~= 'SCHEDULED' then return 0 end
if redis.call('HGET', KEYS[1], 'entrants') ~= ARGV[1] then return 0 end
if #KEYS > 1 and (redis.call('HGET', KEYS[2], ARGV[3]) or '') ~= ARGV[4] then return 0 end
redis.call('HSET', KEYS[1], 'entrants', ARGV[2])
if #KEYS > 1 then redis.call('HSET', KEYS[2], ARGV[3], ARGV[5]) end
return 1
"""

# Change the status, only from the one expected (of two racing workers, one wins), and stamp
# the time. (An ended tournament then leaves the active ones: TournamentStore.move_status.)
# KEYS: tournament. ARGV: expected, new, field to stamp or '', time, why it was cancelled or ''.
MOVE_STATUS = """
if redis.call('HGET', KEYS[1], 'status') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'reason', ARGV[5]) end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], ARGV[3], ARGV[4]) end
return 1
"""

# Drop a tournament from the active ones if it is there since before ARGV[2] (ms): one whose
# creation was cut short before it was stored (one being created is there since just now).
# KEYS: active tournaments. ARGV: id, time.
DROP_ABANDONED = """
local since = redis.call('ZSCORE', KEYS[1], ARGV[1])
if since and tonumber(since) < tonumber(ARGV[2]) then return redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
"""

#: how long a tournament may be among the active ones before it is stored, before the clock
#: takes it for a creation cut short (its process died) and drops it
CREATION_GRACE_MS = 60_000

UNLOCK = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


def _entrants_json(entrants: list[Entrant]) -> str:
    return json.dumps([e.to_dict() for e in entrants])


def tournament_of(tid: str, fields: dict[str, dict[str, str]]) -> Tournament:
    """A tournament from its fields as Redis holds them (``TournamentStore.fields``; the
    archive keeps the same)."""
    head, tables, results = fields["head"], fields["tables"], fields["results"]
    return Tournament(
        tid,
        TournamentSpec.from_dict(json.loads(head["spec"])),
        TournamentStatus(head["status"]),
        [Entrant.from_dict(e) for e in json.loads(head["entrants"])],
        int(head["started"]) if "started" in head else None,
        int(head["finished"]) if "finished" in head else None,
        {k: Table.from_dict(json.loads(v)) for k, v in tables.items()},
        {k: TableResult.from_dict(json.loads(v)) for k, v in results.items()},
        int(head["created"]) if "created" in head else None,
        head.get("reason"),
    )


class TournamentStore:
    def __init__(self, redis: Redis, archive: Archive | None = None, grace_seconds: int = 600) -> None:
        self.redis = redis
        #: where an ended tournament is read once Redis no longer holds it (None: nowhere)
        self.archive = archive
        self.grace_seconds = grace_seconds
        self._set_entrants = redis.register_script(SET_ENTRANTS)
        self._move_status = redis.register_script(MOVE_STATUS)
        self._unlock = redis.register_script(UNLOCK)
        self._drop_abandoned = redis.register_script(DROP_ABANDONED)

    async def save_new(self, t: Tournament, invitations: list[Invitation]) -> None:
        """The new tournament with its invitations, each listed for its bot and told on the
        bot's channel (``{b:<id>}:invited``), then listed; due at its start. In steps: due at
        once first, so that if this process dies before the last, the clock completes them."""
        created = t.created_ms or now_ms()
        await self.redis.zadd(ACTIVE_TOURNAMENTS, {t.id: created})
        async with self.redis.pipeline(transaction=True) as pipe:  # the tournament's own slot
            if invitations:
                pipe.hset(tournament_invitations_key(t.id), mapping={
                    invitation.bot_id: json.dumps(invitation.to_dict()) for invitation in invitations
                })
            pipe.hset(tournament_key(t.id), mapping={
                "spec": json.dumps(t.spec.to_dict()), "status": t.status.value, "entrants": _entrants_json(t.entrants),
                "created": created,
            })
            await pipe.execute()
        await self._list(t.id, created, invitations, tell=True)
        await self.redis.zadd(ACTIVE_TOURNAMENTS, {t.id: t.spec.starts_at_ms})

    async def _list(self, tid: str, created: int, invitations: list[Invitation], tell: bool) -> None:
        """List the tournament for its invited bots (and tell them, with ``tell``), then among
        all tournaments: listed last, so a listed tournament's bots are told."""
        if invitations:
            async with self.redis.pipeline(transaction=False) as pipe:
                for invitation in invitations:
                    pipe.zadd(bot_invitations_key(invitation.bot_id), {tid: invitation.invited_ms})
                await pipe.execute()
        if tell:
            for invitation in invitations:  # (a Cluster's pipelines refuse PUBLISH)
                await self.redis.publish(bot_invited_channel(invitation.bot_id), tid)
        await self.redis.zadd(LISTED_TOURNAMENTS, {tid: created})  # the listings' order (newest first), as the archive's

    async def make_visible(self, t: Tournament, tell: bool) -> None:
        """What the clock does for a SCHEDULED tournament: complete a creation cut short after
        the tournament was stored (list it for its invited bots, telling them with ``tell``,
        and among all tournaments); then due at its start. Idempotent."""
        if await self.redis.zscore(LISTED_TOURNAMENTS, t.id) is None:
            await self._list(t.id, t.created_ms or now_ms(), await self.invitations(t.id), tell)
        await self.redis.zadd(ACTIVE_TOURNAMENTS, {t.id: t.spec.starts_at_ms})

    async def drop_abandoned(self, tid: str, now: int) -> None:
        """The clock found no tournament ``tid`` for an active one: if it is there since
        before the creation grace, its creation was cut short before it was stored."""
        await self._drop_abandoned(keys=[ACTIVE_TOURNAMENTS], args=[tid, now - CREATION_GRACE_MS])

    async def load(self, tid: str) -> Tournament | None:
        """The tournament from Redis, or once it has left Redis, from the archive (None: unknown)."""
        fields = await self.fields(tid)
        if fields is None and self.archive is not None:
            fields = await self.archive.tournament_fields(tid)
        return None if fields is None else tournament_of(tid, fields)

    async def fields(self, tid: str) -> dict[str, dict[str, str]] | None:
        """What Redis holds of the tournament, as text: its hash (``head``), its tables and its
        results by id; the archive keeps the same (None: not in Redis)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(tournament_key(tid))
            pipe.hgetall(tournament_tables_key(tid))
            pipe.hgetall(tournament_results_key(tid))
            head, tables, results = await pipe.execute()
        if not head:
            return None
        return {
            name: {k.decode(): v.decode() for k, v in values.items()}
            for name, values in (("head", head), ("tables", tables), ("results", results))
        }

    async def set_entrants(
        self, tid: str, before: list[Entrant], after: list[Entrant],
        invitation: tuple[Invitation | None, Invitation] | None = None,
    ) -> bool:
        """Replace the entrants, and the bot's invitation (as read, as it becomes) with them,
        only if still SCHEDULED and nobody changed either meanwhile."""
        keys, args = [tournament_key(tid)], [_entrants_json(before), _entrants_json(after)]
        if invitation is not None:
            read, new = invitation
            keys.append(tournament_invitations_key(tid))
            args += [new.bot_id, "" if read is None else json.dumps(read.to_dict()), json.dumps(new.to_dict())]
        return bool(await self._set_entrants(keys=keys, args=args))

    async def invitation(self, tid: str, bot_id: str) -> Invitation | None:
        """The bot's invitation to the tournament, as stored (None: it has none)."""
        stored = await self.redis.hget(tournament_invitations_key(tid), bot_id)
        return None if stored is None else Invitation.from_dict(tid, bot_id, json.loads(stored))

    async def invitations(self, tid: str) -> list[Invitation]:
        """Every invitation to the tournament, as stored."""
        stored = await self.redis.hgetall(tournament_invitations_key(tid))
        return [Invitation.from_dict(tid, b.decode(), json.loads(v)) for b, v in stored.items()]

    async def invited_to(self, bot_id: str, count: int) -> list[str]:
        """The tournaments the bot was invited to, newest first: ``count`` at most."""
        return [t.decode() for t in await self.redis.zrevrange(bot_invitations_key(bot_id), 0, count - 1)]

    async def forget_invitations(self, bot_id: str, tids: list[str]) -> None:
        """Drop tournaments that left Redis from the bot's list of invitations."""
        if tids:
            await self.redis.zrem(bot_invitations_key(bot_id), *tids)

    async def move_status(
        self, tid: str, expected: TournamentStatus, new: TournamentStatus, stamp: str | None = None,
        reason: str | None = None,
    ) -> bool:
        """Change the status only from ``expected`` (one worker wins a race); ``stamp`` names the
        field (``started``, ``finished``) that records when, ``reason`` why it was cancelled.
        An ended tournament then moves from the active ones to those the archive awaits; it is
        made due at once first, so that if this process dies in between, the clock moves it."""
        now = now_ms()
        if new.over:
            await self.redis.zadd(ACTIVE_TOURNAMENTS, {tid: now}, xx=True, lt=True)
        moved = bool(await self._move_status(
            keys=[tournament_key(tid)], args=[expected.value, new.value, stamp or "", now, reason or ""],
        ))
        if moved and new.over:
            await self.unlist_ended(tid, now)
        return moved

    async def is_active(self, tid: str) -> bool:
        """Whether the tournament is among the active ones (due or running)."""
        return await self.redis.zscore(ACTIVE_TOURNAMENTS, tid) is not None

    async def unlist_ended(self, tid: str, ended_ms: int) -> None:
        """An ended tournament: among those the archive awaits (queued first: it is never in
        neither), then no longer active. Idempotent."""
        await self.redis.zadd(UNARCHIVED_TOURNAMENTS, {tid: ended_ms}, nx=True)
        await self.redis.zrem(ACTIVE_TOURNAMENTS, tid)

    async def add_tables(self, tid: str, tables: dict[str, Table]) -> dict[str, Table]:
        """Store new tables all at once (a round is stored whole or not at all; a table
        stored before is kept) and answer them as stored."""
        async with self.redis.pipeline(transaction=True) as pipe:
            for table_id, table in tables.items():
                pipe.hsetnx(tournament_tables_key(tid), table_id, json.dumps(table.to_dict()))
            pipe.hmget(tournament_tables_key(tid), list(tables))
            *_, stored = await pipe.execute()
        return {table_id: Table.from_dict(json.loads(value)) for table_id, value in zip(tables, stored, strict=True)}

    async def update_table(self, tid: str, table_id: str, table: Table) -> None:
        await self.redis.hset(tournament_tables_key(tid), table_id, json.dumps(table.to_dict()))

    async def add_result(self, tid: str, match_id: str, result: TableResult) -> None:
        """A match's result, kept only if it has none (a settlement run again changes nothing)."""
        await self.redis.hsetnx(tournament_results_key(tid), match_id, json.dumps(result.to_dict()))

    async def due(self, now: int) -> list[str]:
        """Tournaments whose start has come and that have not ended."""
        return [t.decode() for t in await self.redis.zrangebyscore(ACTIVE_TOURNAMENTS, "-inf", now)]

    async def claim_unarchived(self, limit: int, claim_seconds: int) -> list[str]:
        """Ended tournaments waiting for the archive that nobody has claimed (a claim lapses
        after ``claim_seconds``): now claimed by the caller."""
        return await claim_queued(self.redis, UNARCHIVED_TOURNAMENTS, limit, claim_seconds, archive_claim_key)

    async def archived(self, tid: str) -> None:
        """The tournament is in the archive: no longer awaited there, off the live ones the
        listings read, its keys leaving Redis after the grace period (its readers find it in
        the archive). Its keys' expiry first: a crash before the rest leaves it awaited, and
        archived again (which changes nothing)."""
        if self.archive is not None:
            async with self.redis.pipeline(transaction=True) as pipe:  # the tournament's own slot
                for key in (tournament_key(tid), tournament_tables_key(tid), tournament_results_key(tid),
                            tournament_invitations_key(tid)):
                    pipe.expire(key, self.grace_seconds)
                await pipe.execute()
            await self.redis.zrem(LISTED_TOURNAMENTS, tid)  # the listings find it in the archive now
        await self.redis.zrem(UNARCHIVED_TOURNAMENTS, tid)
        await self.redis.delete(archive_claim_key(tid))

    async def retry_archiving(self, tid: str, seconds: int) -> None:
        """The archive did not take the tournament: claimed again after ``seconds``."""
        await self.redis.set(archive_claim_key(tid), "1", ex=max(1, seconds))

    async def lock(self, tid: str, seconds: float = 10) -> str | None:
        token = secrets.token_hex(8)
        ok = await self.redis.set(tournament_lock_key(tid), token, nx=True, px=int(seconds * 1000))
        return token if ok else None

    async def unlock(self, tid: str, token: str) -> None:
        await self._unlock(keys=[tournament_lock_key(tid)], args=[token])
