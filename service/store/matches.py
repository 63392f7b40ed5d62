"""Matches in Redis: created, read, changed by one compare-and-set script per event (which
also publishes the event, moves the deadline, keeps the bots' lists and queues ended matches
for settlement), and the published events as the feed reads them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.model.live_match import LiveMatch, MatchStatus
from service.store.archive import Archive
from service.store.keys import (
    DEADLINES,
    LIVE_MATCHES,
    UNSETTLED,
    WEBHOOK_CALLS,
    bot_key,
    bot_matches_key,
    bot_waiting_key,
    events_key,
    match_key,
    settle_claim_key,
)
from service.store.queues import CLAIM_QUEUED
from service.store.script_line import ScriptLine
from wizard.record import state_to_bytes

# Queue the webhook calls due: for each of ``hooks`` bots (KEYS[{first_key} + i - 1], its
# hash), when it has a webhook, its call (ARGV[{first_arg} + i - 1]: 'match|version|seat|kind|bot')
# goes on the dispatchers' stream (KEYS[{first_key} - 1]), which keeps about its last 100000.
QUEUE_WEBHOOK_CALLS = """
for i = 1, hooks do
  if redis.call('HEXISTS', KEYS[{first_key} + i - 1], 'webhook') == 1 then
    redis.call('XADD', KEYS[{first_key} - 1], 'MAXLEN', '~', 100000, '*', 'c', ARGV[{first_arg} + i - 1])
  end
end
"""

# Queue the webhook calls of a match created with every seat taken (a tournament's).
# KEYS: the dispatchers' stream, then the bots' hashes. ARGV: the calls.
ANNOUNCE = "local hooks = #ARGV\n" + QUEUE_WEBHOOK_CALLS.format(first_key="2", first_arg="1")

# Commit one event: compare the version (and the id of the latest event, so that a snapshot
# guessed from before a Redis failover cannot pass for the current one), append the event,
# store the new snapshot, publish the event to the processes that follow the match (see
# service.feed), move the deadline, keep the bots' lists of open matches (and tell a bot
# that joined), and put a match that ends into the settlement queue (ratings, tournaments):
# all at once, so none of it can be missed; the stream keeps about its last ARGV[12] events
# (0: all of them). The bots that must now be called at their webhooks (a turn, a start, an
# end: ARGV[14..], see QUEUE_WEBHOOK_CALLS) are queued for the workers' dispatcher, those whose
# bot hash holds a webhook; the queue and their hashes are the last ARGV[13] + 1 KEYS
# (none when ARGV[13] is '0'). Returns {1, version, event id} on success,
# {0, current} when the match moved on, {-1, 0} when there is no such match.
# KEYS: match, events, deadlines, unsettled, then per bot: its open matches, then (when the
# match stops WAITING) its creator's waiting matches.
# ARGV: expected version, match id, state, live, event, when the sweeper is due or '', record
# or '', '1' if the match ends, expected event id or '', 'join' | 'end' | '', '1' if the
# match stops WAITING else '0', how many events the stream keeps (about; 0: all), how many
# webhook calls may be due, then each of them.
# Channels are named after the keys: {m:<id>}:wake for a match, {b:<id>}:wake for a bot.
COMMIT_EVENT = """
local hooks = tonumber(ARGV[13])
local last = #KEYS
if hooks > 0 then last = #KEYS - hooks - 1 end
local current = redis.call('HGET', KEYS[1], 'version')
if not current then return {-1, 0} end
current = tonumber(current)
if current ~= tonumber(ARGV[1]) then return {0, current} end
if ARGV[9] ~= '' and redis.call('HGET', KEYS[1], 'eid') ~= ARGV[9] then return {0, current} end
local version = current + 1
local eid
if ARGV[12] == '0' then
  eid = redis.call('XADD', KEYS[2], '*', 'v', version, 'e', ARGV[5])
else
  eid = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[12], '*', 'v', version, 'e', ARGV[5])
end
redis.call('HSET', KEYS[1], 'version', version, 'state', ARGV[3], 'live', ARGV[4], 'eid', eid)
redis.call('PUBLISH', string.sub(KEYS[1], 1, -6) .. 'wake', version .. '|' .. eid .. '|' .. ARGV[5])
if ARGV[6] == '' then
  redis.call('ZREM', KEYS[3], ARGV[2])
else
  redis.call('ZADD', KEYS[3], ARGV[6], ARGV[2])
end
if ARGV[7] ~= '' then
  redis.call('HSET', KEYS[1], 'record', ARGV[7])
end
if ARGV[8] == '1' then
  local now = redis.call('TIME')
  redis.call('ZADD', KEYS[4], tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000), ARGV[2])
end
if ARGV[10] == 'join' then
  redis.call('SADD', KEYS[5], ARGV[2])
  redis.call('PUBLISH', string.sub(KEYS[5], 1, -8) .. 'wake', ARGV[2])
elseif ARGV[10] == 'end' then
  for i = 5, last - tonumber(ARGV[11]) do redis.call('SREM', KEYS[i], ARGV[2]) end
end
if ARGV[11] == '1' then
  redis.call('ZREM', KEYS[last], ARGV[2])
end
""" + QUEUE_WEBHOOK_CALLS.format(first_key="last + 2", first_arg="14") + """
return {1, version, eid}
"""

# Create a match with its first events (a tournament's match is created with every seat
# taken), unless it exists: deterministic ids make creating a tournament round idempotent.
# Each seated bot's open matches gain it, and the bot is told on its channel.
# A match created with free seats counts among its creator's waiting matches until they are
# taken (or it is aborted): refused, {-1, the earliest of them to be aborted}, when the
# creator has as many as the limit.
# The match joins the live matches the listings read (by its creation time), until settlement
# has archived it.
# KEYS: match, events, deadlines, live matches, then the open matches of each seated bot, then
# (for a match with free seats) its creator's waiting matches.
# ARGV: id, version, settings, state, live, when the sweeper is due or '', sealed or '', the
# creator's limit of waiting matches or '', when it was created (ms), then the events.
CREATE_MATCH = """
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, 0} end
local bots = #KEYS
if ARGV[8] ~= '' then
  bots = bots - 1
  if redis.call('ZCARD', KEYS[#KEYS]) >= tonumber(ARGV[8]) then
    return {-1, redis.call('ZRANGE', KEYS[#KEYS], 0, 0, 'WITHSCORES')[2]}
  end
  redis.call('ZADD', KEYS[#KEYS], ARGV[6], ARGV[1])
end
local count = #ARGV - 9
for i = 1, count do
  redis.call('XADD', KEYS[2], '0-' .. i, 'v', i, 'e', ARGV[9 + i])
end
redis.call('ZADD', KEYS[4], ARGV[9], ARGV[1])
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'settings', ARGV[3], 'state', ARGV[4], 'live', ARGV[5],
  'eid', '0-' .. count)
if ARGV[6] ~= '' then redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1]) end
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'sealed', ARGV[7]) end
for i = 5, bots do
  redis.call('SADD', KEYS[i], ARGV[1])
  redis.call('PUBLISH', string.sub(KEYS[i], 1, -8) .. 'wake', ARGV[1])
end
return {1, 0}
"""


# Mark (ARGV[2] '1') or unmark ('0') bot ARGV[1] in the match's ``hooked`` field ('|<bot>|<bot>|':
# the seated bots that have a webhook, whose calls the commit script queues), if the match is
# there. KEYS: the match. Returns 1 when the match is there, else 0.
SET_HOOKED = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local hooked = redis.call('HGET', KEYS[1], 'hooked') or '|'
local mark = '|' .. ARGV[1] .. '|'
local at = string.find(hooked, mark, 1, true)
if ARGV[2] == '1' and not at then
  redis.call('HSET', KEYS[1], 'hooked', hooked .. ARGV[1] .. '|')
elseif ARGV[2] == '0' and at then
  redis.call('HSET', KEYS[1], 'hooked', string.sub(hooked, 1, at) .. string.sub(hooked, at + #mark))
end
return 1
"""


def _due(match: LiveMatch) -> str:
    return "" if match.due_ms is None else str(match.due_ms)


def _webhook_calls(match: LiveMatch, event: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """The KEYS (the dispatchers' stream, then each bot's hash) and ARGV of the webhook calls
    that may be due after ``event`` (see QUEUE_WEBHOOK_CALLS); none: two empty lists."""
    due = match.calls_due(event)
    if not due:
        return [], []
    keys = [WEBHOOK_CALLS, *(bot_key(bot) for _, bot, _ in due)]
    return keys, [f"{match.id}|{match.version}|{seat}|{kind}|{bot}" for seat, bot, kind in due]


class CorruptMatch(RuntimeError):
    """What Redis holds of a match cannot be read: the server's fault (a bug, or a format this
    version does not know), never the client's, so it is answered as an internal error."""


class WaitingFull(Exception):
    """The creator has as many WAITING matches as allowed; the earliest is aborted at ``until_ms``."""

    def __init__(self, until_ms: int) -> None:
        super().__init__(until_ms)
        self.until_ms = until_ms


class MatchEvent:
    """One event of a match: as read from its stream, or as published with its commit. The
    feed sets ``match``: the match just after the event, shared by every waiter of the
    process, never changed (None where the feed could not tell it)."""

    __slots__ = ("event", "event_id", "match", "match_id", "version")

    def __init__(self, match_id: str, version: int, event_id: bytes, event: dict[str, Any]) -> None:
        self.match_id = match_id
        self.version = version
        self.event_id = event_id
        self.event = event
        self.match: LiveMatch | None = None


def after_event(match: LiveMatch, item: MatchEvent) -> LiveMatch | None:
    """The match after one of its events: a changed copy (the match given stays as it was:
    it may be shared); the same match for an event it has already; None when it cannot follow
    on (an event missed in between, or one this code cannot apply): read it whole instead."""
    if item.version <= match.version:
        return match
    if item.version != match.version + 1:
        return None
    changed = match.copy()
    try:
        changed.apply_event(item.event)
    except (ValueError, KeyError):  # the engine's errors are ValueErrors
        return None
    changed.event_id = item.event_id
    return changed


class Seated:
    """A bot took a seat in a match (its own join, or a tournament's match made with it)."""

    __slots__ = ("bot_id", "match_id")

    def __init__(self, bot_id: str, match_id: str) -> None:
        self.bot_id = bot_id
        self.match_id = match_id


class Notice:
    """A message on one of a bot's channels other than its seats' (``{b:<id>}:invited``: a
    tournament's id), for the waiter that follows it to read what it names; ``payload`` None
    tells that waiter to read everything such messages name again (at the start, or after
    the feed lost messages)."""

    __slots__ = ("bot_id", "payload")

    def __init__(self, bot_id: str, payload: str | None) -> None:
        self.bot_id = bot_id
        self.payload = payload


def decode_published(channel: bytes, data: bytes) -> MatchEvent | Seated | Notice | None:
    """A message as the scripts publish it on a match's or a bot's channel (None for one
    this code cannot read)."""
    try:
        tag, _, _ = channel.partition(b"}")
        kind, owner = tag[1:].decode().split(":", 1)
        if kind == "m":
            version, event_id, event = data.split(b"|", 2)
            decoded = orjson.loads(event)
            decoded["v"] = int(version)
            return MatchEvent(owner, int(version), event_id, decoded)
        if kind == "b":
            return Seated(owner, data.decode()) if channel.endswith(b":wake") else Notice(owner, data.decode())
    except (ValueError, orjson.JSONDecodeError):
        pass
    return None


class Stored:
    """A match as read: the live match and the id of its latest event."""

    __slots__ = ("event_id", "match")

    def __init__(self, match: LiveMatch, event_id: bytes) -> None:
        self.match = match
        self.event_id = event_id


class MatchStore:
    """Matches in Redis: create, read, commit an event atomically, follow the events."""

    FIELDS = ("version", "settings", "state", "live", "eid", "sealed")

    def __init__(
        self, redis: Redis, scripts: ScriptLine, archive: Archive | None = None, grace_seconds: int = 600,
        events_kept: int = 64,
    ) -> None:
        self.redis = redis
        #: how many of a match's latest events its stream keeps, about (Redis trims whole
        #: nodes); 0: all. A follower that lost its connection reads what it missed from
        #: there; one that missed more reads the match whole and goes on from it.
        self.events_kept = events_kept
        #: where a match is read once Redis no longer holds it (None: nowhere)
        self.archive = archive
        self.grace_seconds = grace_seconds
        #: the hot path's scripts (commits) go down the process's pipelined connection
        self.scripts = scripts
        self._commit = redis.register_script(COMMIT_EVENT)
        self._create = redis.register_script(CREATE_MATCH)
        self._announce = redis.register_script(ANNOUNCE)
        self._claim_unsettled = redis.register_script(CLAIM_QUEUED)
        self._set_hooked = redis.register_script(SET_HOOKED)

    async def create(
        self, match: LiveMatch, events: Sequence[dict[str, Any]] = (), sealed: bool = False,
        waiting_limit: int | None = None,
    ) -> bool:
        """Store a new match with the events that made it (after the implicit ``create``),
        and note it among its seated bots' open matches; False, and nothing written, when a
        match with its id exists. A match still WAITING counts among its creator's waiting
        matches, of which there may be ``waiting_limit``: :class:`WaitingFull` beyond."""
        keys = [match_key(match.id), events_key(match.id), DEADLINES, LIVE_MATCHES]
        keys += [bot_matches_key(bot_id) for bot_id in sorted(match.bot_ids())]
        waiting = match.status is MatchStatus.WAITING
        if waiting:
            keys.append(bot_waiting_key(match.settings.created_by))
        created, earliest = await self._create(
            keys=keys,
            args=[
                match.id, match.version, match.settings.to_json(), state_to_bytes(match.state), match.live_json(),
                _due(match), "1" if sealed else "", str(waiting_limit) if waiting and waiting_limit else "",
                match.settings.created_at_ms, orjson.dumps({"t": "create"}), *(orjson.dumps(e) for e in events),
            ],
        )
        if created == -1:
            raise WaitingFull(int(float(earliest)))
        match.event_id = f"0-{len(events) + 1}".encode()
        return bool(created)

    async def announce(self, match: LiveMatch) -> None:
        """Queue the webhook calls of a match created with every seat taken (it starts at once)."""
        keys, calls = _webhook_calls(match, None)
        if calls:
            await self._announce(keys=keys, args=calls)

    async def set_hooked(self, match_id: str, bot_id: str, on: bool) -> bool:
        """Whether the match's commits queue webhook calls for ``bot_id`` (one of its seats'
        bots): it set (``on``) or removed its webhook. False: no such match in Redis."""
        return bool(await self._set_hooked(keys=[match_key(match_id)], args=[bot_id, "1" if on else "0"]))

    async def unseal(self, match_ids: Iterable[str]) -> None:
        """The matches of a duplicate set that has finished show their play: in Redis, and in
        the archive for those already there."""
        ids = list(match_ids)
        async with self.redis.pipeline(transaction=True) as pipe:
            for match_id in ids:
                pipe.hdel(match_key(match_id), "sealed")
            await pipe.execute()
        if self.archive is not None:
            await self.archive.unseal(ids)

    async def load(self, match_id: str) -> Stored | None:
        """The match from Redis, or once it has left Redis, from the archive (None: unknown)."""
        return (await self.load_many([match_id]))[0]

    async def load_many(self, match_ids: Sequence[str]) -> list[Stored | None]:
        if len(match_ids) == 1:
            rows = [await self.redis.hmget(match_key(match_ids[0]), self.FIELDS)]
        else:
            async with self.redis.pipeline(transaction=False) as pipe:
                for match_id in match_ids:
                    pipe.hmget(match_key(match_id), self.FIELDS)
                rows = await pipe.execute()
        gone = [m for m, values in zip(match_ids, rows, strict=True) if values[0] is None]
        if gone and self.archive is not None:
            archived = await self.archive.stored_fields(gone)
            rows = [archived.get(m, values) if values[0] is None else values for m, values in zip(match_ids, rows, strict=True)]
        return [self._stored(m, values) for m, values in zip(match_ids, rows, strict=True)]

    async def heads(self, match_ids: Sequence[str]) -> list[tuple[dict[str, Any], dict[str, Any]] | None]:
        """Each match's settings and live part (status, seats) as Redis holds them, decoded,
        without the engine's state: what listings filter on (None: not in Redis)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for match_id in match_ids:
                pipe.hmget(match_key(match_id), ("settings", "live"))
            rows = await pipe.execute()
        return [None if settings is None or live is None else (orjson.loads(settings), orjson.loads(live))
                for settings, live in rows]

    @staticmethod
    def _stored(match_id: str, values: list[Any]) -> Stored | None:
        version, settings, state, live, eid, sealed = values
        if version is None:
            return None
        try:
            match = LiveMatch.from_stored(match_id, int(version), settings, state, live)
        except (ValueError, KeyError, TypeError) as error:  # the engine's RecordError is a ValueError
            raise CorruptMatch(f"match {match_id} is stored in a form this server cannot read: {error}") from error
        match.sealed = sealed is not None
        match.event_id = eid
        return Stored(match, eid)

    async def commit(self, match: LiveMatch, event: dict[str, Any], record: str | bytes = "") -> bool:
        """Store ``match`` (already changed by ``event``) if nobody changed it meanwhile.

        False means another change won the race: the caller reloads and decides again."""
        keys = [match_key(match.id), events_key(match.id), DEADLINES, UNSETTLED]
        mode = ""
        if event["t"] == "join" and not event["bot"].get("house"):
            mode = "join"
            keys.append(bot_matches_key(event["bot"]["id"]))
        elif match.ended:
            mode = "end"
            keys += [bot_matches_key(bot_id) for bot_id in sorted(match.bot_ids())]
        elif event["t"] == "leave":
            mode = "end"  # the same as for an ended match: the match leaves the bot's open matches
            keys.append(bot_matches_key(event["bot"]))
        leaves_waiting = event["t"] in ("join", "abort") and match.settings.waiting_until_ms is not None and (
            match.status is not MatchStatus.WAITING
        )
        if leaves_waiting:
            keys.append(bot_waiting_key(match.settings.created_by))
        event_json = orjson.dumps(event)
        args = [
            match.version - 1, match.id, state_to_bytes(match.state), match.live_json(), event_json, _due(match), record,
            "1" if match.ended else "", match.event_id or "", mode, "1" if leaves_waiting else "0", self.events_kept,
        ]
        calls = _webhook_calls(match, event)
        args.append(len(calls[1]))
        if calls[1]:
            keys += calls[0]
            args += calls[1]
        try:
            answer = await self.scripts.run(self._commit, keys, args)
        except (RedisConnectionError, RedisTimeoutError):
            # The connection failed with the commit on it: it may have run, its answer lost.
            # If the match's latest event is this one, at this version, it did.
            if await self._landed(match, event_json):
                return True
            raise
        if answer[0] != 1:
            return False
        match.event_id = answer[2]
        return True

    async def _landed(self, match: LiveMatch, event_json: bytes) -> bool:
        """Whether the match stored is at ``match.version`` with ``event_json`` as its latest
        event (and if so, note the event's id); False also when Redis cannot tell."""
        try:
            version, event_id = await self.redis.hmget(match_key(match.id), ("version", "eid"))
            if version is None or int(version) != match.version or event_id is None:
                return False
            rows = await self.redis.xrange(events_key(match.id), event_id, event_id)
        except (RedisConnectionError, RedisTimeoutError):
            return False
        if not rows or rows[0][1].get(b"e") != event_json:
            return False
        match.event_id = event_id
        return True

    async def live_records(self, match_ids: Sequence[str]) -> list[bytes | None]:
        """The records stored with the matches' last moves in Redis (None: none there)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for match_id in match_ids:
                pipe.hget(match_key(match_id), "record")
            return list(await pipe.execute())

    async def record(self, match_id: str) -> bytes | None:
        """A finished match's record as JSON, from Redis or else the archive (None: none stored)."""
        record = await self.redis.hget(match_key(match_id), "record")
        if record is None and self.archive is not None:
            archived = await self.archive.record(match_id)
            record = None if archived is None else orjson.dumps(archived)
        return record

    async def events_after(self, match_id: str, event_id: bytes | None) -> list[MatchEvent]:
        """The match's events after ``event_id`` (all of them for None), oldest first."""
        rows = await self.redis.xrange(events_key(match_id), b"(" + event_id if event_id else "-", "+")
        out = []
        for eid, fields in rows:
            event = orjson.loads(fields[b"e"])
            event["v"] = version = int(fields[b"v"])
            out.append(MatchEvent(match_id, version, eid, event))
        return out

    async def claim_unsettled(self, limit: int, claim_seconds: int) -> list[str]:
        """Ended matches waiting for their settlement that nobody has claimed (a claim lapses
        after ``claim_seconds``, so a dead worker's is taken again): now claimed by the caller."""
        claimed = await self._claim_unsettled(keys=[UNSETTLED], args=[limit, claim_seconds, settle_claim_key("")])
        return [m.decode() for m in claimed]

    async def ended_ms(self, match_ids: Sequence[str]) -> list[int | None]:
        """When each ended match ended (its time in the settlement queue; None once it left it)."""
        scores = await self.redis.zmscore(UNSETTLED, list(match_ids))
        return [None if score is None else int(score) for score in scores]

    async def settled(self, match_ids: Sequence[tuple[str, bool]]) -> None:
        """The matches' settlement is done (each with whether it is archived): they leave the
        queue, and the archived ones leave the live matches the listings read, their keys
        leaving Redis after the grace period (their readers find them in the archive)."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.zrem(UNSETTLED, *(match_id for match_id, _ in match_ids))
            for match_id, archived in match_ids:
                if archived:
                    pipe.zrem(LIVE_MATCHES, match_id)  # the listings find it in the archive now
                    pipe.expire(match_key(match_id), self.grace_seconds)
                    pipe.expire(events_key(match_id), self.grace_seconds)
            await pipe.execute()

    async def retry_settling(self, match_ids: Sequence[str], seconds: int) -> None:
        """The matches' settlement could not finish (the archive's database is away): they stay
        queued, claimed again after ``seconds`` rather than when their claims would lapse."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for match_id in match_ids:
                pipe.set(settle_claim_key(match_id), "1", ex=max(1, seconds))
            await pipe.execute()

    async def set_due(self, match_id: str, due_ms: int | None) -> None:
        """Put a match in the sweeper's index at ``due_ms`` (out of it for None)."""
        if due_ms is None:
            await self.redis.zrem(DEADLINES, match_id)
        else:
            await self.redis.zadd(DEADLINES, {match_id: due_ms})

    async def due_deadlines(self, now: int, limit: int = 100) -> list[str]:
        rows = await self.redis.zrangebyscore(DEADLINES, "-inf", now, start=0, num=limit)
        return [r.decode() for r in rows]

    async def next_deadline(self) -> int | None:
        rows = await self.redis.zrange(DEADLINES, 0, 0, withscores=True)
        return int(rows[0][1]) if rows else None
