"""Matches in Redis: created, read, changed by one compare-and-set script per event (which
also publishes the event, moves the deadline, queues ended matches for settlement and the
webhook calls due), and the published events as the feed reads them.

Every script here touches one Cluster slot: a match's keys and its home's (its deadline, its
place in the settlement queue and the live listing, its webhook calls: ``service.store.keys``).
What a change means for its bots (their open matches, their creator's waiting matches) is in
their slots, written by steps of their own around the match's script (:meth:`MatchStore.create`,
:meth:`MatchStore.commit`). The sweepers' and settlement's reads go over every home."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.model.homes import ALL_HOMES, home_of_match
from service.model.live_match import LiveMatch, MatchStatus
from service.store.archive import Archive
from service.store.clock import now_ms
from service.store.keys import (
    bot_channel,
    bot_key,
    bot_matches_key,
    bot_waiting_key,
    events_key,
    home_key,
    match_home_key,
    match_key,
)
from service.store.script_line import ScriptLine
from wizard.record import state_to_bytes

log = logging.getLogger("wizard_arena.matches")

# Queue the webhook calls due (a Lua function the scripts below share): ARGV[at] calls, each
# 'match|version|seat|kind|bot' in the ARGV after it, go on the home's dispatchers' stream
# (KEYS[5], which keeps about its last 2,000: the 65 homes' streams about what the one stream
# before homes kept), those of bots that have a webhook: the match
# hash's ``hooked`` (|bot|bot|, kept as bots join and set or remove their webhooks), or for a
# match made before homes (one Redis server) whose commit passes each call's bot hash after
# KEYS[5], that hash's webhook field.
QUEUE_WEBHOOK_CALLS = """
local function queue_calls(at)
  local count = tonumber(ARGV[at])
  if count == 0 then return end
  local hooked = redis.call('HGET', KEYS[1], 'hooked') or ''
  for i = 1, count do
    local call = ARGV[at + i]
    local on
    if #KEYS > 5 then
      on = redis.call('HEXISTS', KEYS[5 + i], 'webhook') == 1
    else
      on = string.find(hooked, '|' .. string.match(call, '[^|]*$') .. '|', 1, true)
    end
    if on then redis.call('XADD', KEYS[5], 'MAXLEN', '~', 2000, '*', 'c', call) end
  end
end
"""

# Commit one event: compare the version (and the id of the latest event, so that a snapshot
# guessed from before a Redis failover cannot pass for the current one), append the event,
# store the new snapshot, publish the event to the processes that follow the match (see
# service.feed), move the deadline, put a match that ends into the settlement queue (ratings,
# tournaments), note a joining bot that has a webhook among the match's ``hooked`` and tell
# the bot it is seated, and queue the webhook calls due (a turn, a start, an end: see
# QUEUE_WEBHOOK_CALLS): all at once, in the match's slot, so none of it can be missed. The
# bots' own lists (their open and waiting matches: other slots) are kept by MatchStore.commit
# around this. The stream keeps about its last ARGV[10] events (0: all of them). Returns
# {1, version, event id} on success, {0, current} when the match moved on, {-1, 0} when there
# is no such match.
# KEYS: match, events, and its home's deadlines, unsettled, webhook calls (then, for a match
# made before homes, the bot hash of each call).
# ARGV: expected version, match id, state, live, event, when the sweeper is due or '', record
# or '', '1' if the match ends, expected event id or '', how many events the stream keeps
# (about; 0: all), the joining bot when it has a webhook or '', the channel of the joining bot
# or '', how many webhook calls may be due, then each of them.
# Channels are named after the keys: {m:<id>}:wake for a match, {b:<id>}:wake for a bot. The
# event published on the match's channel carries when it was committed, by Redis's clock, as
# its first key ``ct`` (µs since the epoch; the stream keeps the event without it): what
# ``wizard_arena_turn_frame_seconds`` measures from, in whichever API process the event reaches.
# A key of the event's, not a field of the message: a process that does not know it applies
# the event as before.
COMMIT_EVENT = QUEUE_WEBHOOK_CALLS + """
local current = redis.call('HGET', KEYS[1], 'version')
if not current then return {-1, 0} end
current = tonumber(current)
if current ~= tonumber(ARGV[1]) then return {0, current} end
if ARGV[9] ~= '' and redis.call('HGET', KEYS[1], 'eid') ~= ARGV[9] then return {0, current} end
local version = current + 1
local now = redis.call('TIME')
local eid
if ARGV[10] == '0' then
  eid = redis.call('XADD', KEYS[2], '*', 'v', version, 'e', ARGV[5])
else
  eid = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[10], '*', 'v', version, 'e', ARGV[5])
end
redis.call('HSET', KEYS[1], 'version', version, 'state', ARGV[3], 'live', ARGV[4], 'eid', eid)
redis.call('PUBLISH', string.sub(KEYS[1], 1, -6) .. 'wake', version .. '|' .. eid .. '|{"ct":' .. now[1]
  .. string.rep('0', 6 - #now[2]) .. now[2] .. ',' .. string.sub(ARGV[5], 2))
if ARGV[6] == '' then
  redis.call('ZREM', KEYS[3], ARGV[2])
else
  redis.call('ZADD', KEYS[3], ARGV[6], ARGV[2])
end
if ARGV[7] ~= '' then
  redis.call('HSET', KEYS[1], 'record', ARGV[7])
end
if ARGV[8] == '1' then
  redis.call('ZADD', KEYS[4], tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000), ARGV[2])
end
if ARGV[11] ~= '' then
  local hooked = redis.call('HGET', KEYS[1], 'hooked') or '|'
  if not string.find(hooked, '|' .. ARGV[11] .. '|', 1, true) then
    redis.call('HSET', KEYS[1], 'hooked', hooked .. ARGV[11] .. '|')
  end
end
if ARGV[12] ~= '' then
  redis.call('PUBLISH', ARGV[12], ARGV[2])
end
queue_calls(13)
return {1, version, eid}
"""

# Create a match with its first events (a tournament's match is created with every seat
# taken), unless it exists: deterministic ids make creating a tournament round idempotent.
# The match joins its home's live matches the listings read (by its creation time) until
# settlement has archived it, and its home's deadlines; its seated bots are told on their
# channels and their webhook calls (its start) are queued. Its bots' open matches, and its
# creator's waiting matches for one with free seats (other slots), MatchStore.create notes
# before this. Returns 1, or 0 when the match exists.
# KEYS: match, events, and its home's deadlines, live matches, webhook calls.
# ARGV: id, version, settings, state, live, when the sweeper is due or '', sealed or '', when
# it was created (ms), hooked (|bot|bot|: its bots that have a webhook), how many events,
# the events, how many channels to tell, the channels, how many webhook calls, the calls.
CREATE_MATCH = QUEUE_WEBHOOK_CALLS + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local events = tonumber(ARGV[10])
for i = 1, events do
  redis.call('XADD', KEYS[2], '0-' .. i, 'v', i, 'e', ARGV[10 + i])
end
redis.call('ZADD', KEYS[4], ARGV[8], ARGV[1])
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'settings', ARGV[3], 'state', ARGV[4], 'live', ARGV[5],
  'eid', '0-' .. events, 'hooked', ARGV[9])
if ARGV[6] ~= '' then redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1]) end
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'sealed', ARGV[7]) end
local tell = 11 + events
for i = 1, tonumber(ARGV[tell]) do
  redis.call('PUBLISH', ARGV[tell + i], ARGV[1])
end
queue_calls(tell + 1 + tonumber(ARGV[tell]))
return 1
"""

# Note a bot among a match's ``hooked`` (ARGV[2] '1') or take it off ('0'), if the match exists:
# a bot that set or removed its webhook (service.domain.webhooks). 1: done, 0: no such match.
# KEYS: the match. ARGV: the bot, '1' | '0'.
SET_HOOKED = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local hooked = redis.call('HGET', KEYS[1], 'hooked') or '|'
local mark = '|' .. ARGV[1] .. '|'
local at = string.find(hooked, mark, 1, true)
if ARGV[2] == '1' and not at then
  redis.call('HSET', KEYS[1], 'hooked', hooked .. ARGV[1] .. '|')
elseif ARGV[2] ~= '1' and at then
  redis.call('HSET', KEYS[1], 'hooked', string.sub(hooked, 1, at) .. string.sub(hooked, at + #mark))
end
return 1
"""

# Reserve a place among a bot's waiting matches (those it created whose seats are not all
# taken, and its open challenges) for a match about to be created, unless it has as many as
# the limit: {-1, when the earliest of them is aborted}; {1, 0}: reserved. Entries past their
# time (ms) are dropped first: by then the match is aborted (or the challenge expired), and a
# step that was to drop it may have died. KEYS: the bot's waiting matches.
# ARGV: now (ms), the limit, the match, when it is aborted unless its seats are taken (ms).
def refuse_when_waiting_full(waiting: str, now: str, limit: str) -> str:
    """The Lua that refuses one more waiting entry (its script returns {-1, when the earliest
    ends}) when the sorted set ``waiting`` holds ``limit`` entries not past ``now`` (ms); the
    entries past it are dropped first. One rule for matches (RESERVE_WAITING) and challenges."""
    return f"""
redis.call('ZREMRANGEBYSCORE', {waiting}, '-inf', {now})
if redis.call('ZCARD', {waiting}) >= tonumber({limit}) then
  return {{-1, redis.call('ZRANGE', {waiting}, 0, 0, 'WITHSCORES')[2]}}
end
"""


RESERVE_WAITING = refuse_when_waiting_full("KEYS[1]", "ARGV[1]", "ARGV[2]") + """
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[3])
return {1, 0}
"""

# The oldest ended matches of a home's settlement queue whose claim nobody holds (none, or one
# that lapsed: its worker died), each now claimed until ARGV[3] ms; the claimed ones answered.
# KEYS: the home's unsettled queue, its claims. ARGV: how many to look at, now (ms), until (ms).
CLAIM_UNSETTLED = """
local claimed = {}
for _, item in ipairs(redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)) do
  local held = tonumber(redis.call('HGET', KEYS[2], item))
  if not held or held <= tonumber(ARGV[2]) then
    redis.call('HSET', KEYS[2], item, ARGV[3])
    table.insert(claimed, item)
  end
end
return claimed
"""

# Ended matches of one home whose settlement is done leave its queue (and their claims); the
# archived ones leave its live matches and their keys expire after ARGV[1] s (their readers
# find them in the archive).
# KEYS: the home's unsettled queue, its claims, its live matches, then each match's hash and
# events. ARGV: the grace in s, then each match's id and '1' if archived else '0'.
SETTLED = """
for i = 1, (#ARGV - 1) / 2 do
  local match = ARGV[2 * i]
  if ARGV[2 * i + 1] == '1' then
    redis.call('ZREM', KEYS[3], match)
    redis.call('EXPIRE', KEYS[2 + 2 * i], ARGV[1])
    redis.call('EXPIRE', KEYS[3 + 2 * i], ARGV[1])
  end
  redis.call('ZREM', KEYS[1], match)
  redis.call('HDEL', KEYS[2], match)
end
return 1
"""


# Put the sweeper's index right for a match read at version ARGV[2], unless it moved on since
# (the commit that moved it set the index): at ARGV[3] ms, or out of it for ''. A match no
# longer in Redis leaves the index. 1: written, 0: the match moved on.
# KEYS: the match, its home's deadlines. ARGV: the match, its version, when it is due or ''.
RESYNC_DUE = """
local current = redis.call('HGET', KEYS[1], 'version')
if current and current ~= ARGV[2] then return 0 end
if ARGV[3] == '' or not current then
  redis.call('ZREM', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
end
return 1
"""

def _due(match: LiveMatch) -> str:
    return "" if match.due_ms is None else str(match.due_ms)


def _webhook_calls(match: LiveMatch, event: dict[str, Any] | None) -> list[str]:
    """The webhook calls that may be due after ``event`` (None: the match was created with every
    seat taken), as QUEUE_WEBHOOK_CALLS takes them: ``match|version|seat|kind|bot`` each."""
    return [f"{match.id}|{match.version}|{seat}|{kind}|{bot}" for seat, bot, kind in match.calls_due(event)]


def _hooked(bot_ids: Iterable[str]) -> str:
    """A match's ``hooked`` field: ``|<bot>|<bot>|`` (``|``: none)."""
    return "|" + "".join(f"{bot}|" for bot in sorted(bot_ids))


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
    process, never changed (None where the feed could not tell it). ``committed_at``: when the
    event was committed, by Redis's clock (seconds since the epoch), for a published one (None
    for one read from the stream)."""

    __slots__ = ("committed_at", "event", "event_id", "match", "match_id", "version")

    def __init__(
        self, match_id: str, version: int, event_id: bytes, event: dict[str, Any], committed_at: float | None = None
    ) -> None:
        self.match_id = match_id
        self.version = version
        self.event_id = event_id
        self.event = event
        self.committed_at = committed_at
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
            committed_us = decoded.pop("ct", None)
            decoded["v"] = int(version)
            committed_at = None if committed_us is None else committed_us / 1e6
            return MatchEvent(owner, int(version), event_id, decoded, committed_at)
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
        self._set_hooked = redis.register_script(SET_HOOKED)
        self._reserve = redis.register_script(RESERVE_WAITING)
        self._claim_unsettled = redis.register_script(CLAIM_UNSETTLED)
        self._settled = redis.register_script(SETTLED)
        self._resync_due = redis.register_script(RESYNC_DUE)

    async def create(
        self, match: LiveMatch, events: Sequence[dict[str, Any]] = (), sealed: bool = False,
        waiting_limit: int | None = None,
    ) -> bool:
        """Store a new match with the events that made it (after the implicit ``create``), its
        seated bots told and their start calls queued; False, and nothing written, when a
        match with its id exists. A match still WAITING counts among its creator's waiting
        matches, of which there may be ``waiting_limit``: :class:`WaitingFull` beyond.

        In this order, each step in one slot: the creator's waiting matches gain it (a place
        reserved, which lapses at the match's abort time should the creation never follow);
        its seated bots' open matches gain it, their webhooks read in the same round trip;
        the match is created (CREATE_MATCH); the bots' open matches gain it again and their
        webhooks are read again (a reader that found it noted before it existed may have
        dropped it; a bot that set its webhook meanwhile found no match to mark)."""
        bots = sorted(match.bot_ids())
        reserved = match.status is MatchStatus.WAITING and bool(waiting_limit)
        if reserved:
            await self._reserve_waiting(match, waiting_limit or 0)
        created = await self._create_reserved(match, events, sealed, bots)
        if reserved and not created:  # (one that failed or died on the way holds it until its abort time)
            await self.redis.zrem(bot_waiting_key(match.settings.created_by), match.id)
        return created

    async def _create_reserved(self, match: LiveMatch, events: Sequence[dict[str, Any]], sealed: bool,
                               bots: list[str]) -> bool:
        """:meth:`create` once its creator's waiting place is reserved."""
        hooked = await self.note_open(match.id, bots)
        calls = _webhook_calls(match, None)
        keys = [match_key(match.id), events_key(match.id),
                *(match_home_key(match.id, name) for name in ("deadlines", "live", "webhook-calls"))]
        all_events = [orjson.dumps({"t": "create"}), *(orjson.dumps(e) for e in events)]
        channels = [bot_channel(bot_id) for bot_id in bots]
        args = [
            match.id, match.version, match.settings.to_json(), state_to_bytes(match.state), match.live_json(),
            _due(match), "1" if sealed else "", match.settings.created_at_ms, _hooked(hooked),
            len(all_events), *all_events, len(channels), *channels, len(calls), *calls,
        ]
        created = bool(await self._create(keys=keys, args=args))
        match.event_id = f"0-{len(all_events)}".encode()
        if created and bots:
            for bot_id in await self.note_open(match.id, bots) - hooked:
                await self.set_hooked(match.id, bot_id, True)
        return created

    async def _reserve_waiting(self, match: LiveMatch, limit: int) -> None:
        """A place among its creator's waiting matches for ``match`` (see RESERVE_WAITING), or
        :class:`WaitingFull`. When full, entries of matches that no longer wait for seats (a
        step that was to drop them died) are dropped, and the place asked for again."""
        key = bot_waiting_key(match.settings.created_by)
        args = [now_ms(), limit, match.id, match.settings.waiting_until_ms or match.settings.created_at_ms]
        reserved, earliest = await self._reserve(keys=[key], args=args)
        if reserved == -1:
            entries = [m.decode() for m in await self.redis.zrange(key, 0, -1)]
            heads = await self.heads(entries)  # (a challenge's id reads as no match: kept)
            done = [m for m, head in zip(entries, heads, strict=True)
                    if head is not None and head[1]["status"] != MatchStatus.WAITING.value]
            if done:
                await self.redis.zrem(key, *done)
                reserved, earliest = await self._reserve(keys=[key], args=args)
        if reserved == -1:
            raise WaitingFull(int(float(earliest)))

    async def note_open(self, match_id: str, bot_ids: Sequence[str]) -> set[str]:
        """Note the match among each bot's open matches (idempotent); which of the bots have a
        webhook, read after (each bot's two keys share its slot: one round trip in all)."""
        if not bot_ids:
            return set()
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id in bot_ids:
                pipe.sadd(bot_matches_key(bot_id), match_id)
                pipe.hexists(bot_key(bot_id), "webhook")
            answers = await pipe.execute()
        return {bot_id for bot_id, hooked in zip(bot_ids, answers[1::2], strict=True) if hooked}

    async def drop_open(self, matches: Iterable[LiveMatch]) -> None:
        """Ended matches leave their bots' open matches (idempotent; settlement's step)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for match in matches:
                for bot_id in match.bot_ids():
                    pipe.srem(bot_matches_key(bot_id), match.id)
            await pipe.execute()

    async def set_hooked(self, match_id: str, bot_id: str, on: bool) -> bool:
        """Mark a bot among those of a match that have a webhook (or unmark it), whose calls
        the match's scripts queue: for a bot that set or removed its webhook, each of its
        open matches. False: no such match (nothing written)."""
        return bool(await self._set_hooked(keys=[match_key(match_id)], args=[bot_id, "1" if on else "0"]))

    async def unseal(self, match_ids: Iterable[str]) -> None:
        """The matches of a duplicate set that has finished show their play: in Redis, and in
        the archive for those already there (each match on its own: they are in slots apart)."""
        ids = list(match_ids)
        async with self.redis.pipeline(transaction=False) as pipe:
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

    async def commit(
        self, match: LiveMatch, event: dict[str, Any], record: str | bytes = "",
        sending: Callable[[LiveMatch, bytes], None] | None = None,
    ) -> bool:
        """Store ``match`` (already changed by ``event``) if nobody changed it meanwhile.

        False means another change won the race: the caller reloads and decides again.
        ``sending`` is told the match and the event's JSON just before the commit goes out.

        The match's own change is one script in its slot (COMMIT_EVENT). Its bots' lists are
        other slots, kept by steps around it, each idempotent and ordered so that a crash
        between them leaves at most an entry that readers ignore and settlement drops: a
        joining bot's open matches gain the match before the script (and again after, in case
        a bot's leave of it ran in between); after it, an ended match leaves its bots' open
        matches (and again at its settlement), a left one the leaving bot's, and a match that
        stops waiting for seats its creator's waiting matches."""
        home = home_of_match(match.id)
        keys = [match_key(match.id), events_key(match.id),
                *(home_key(home, name) for name in ("deadlines", "unsettled", "webhook-calls"))]
        joining = event["bot"]["id"] if event["t"] == "join" and not event["bot"].get("house") else None
        hook, tell = "", b""
        if joining is not None:
            hook = joining if await self.note_open(match.id, [joining]) else ""
            tell = bot_channel(joining)
        event_json = orjson.dumps(event)
        calls = _webhook_calls(match, event)
        if home is None:  # a match made before homes (one server): its bots' hashes say who has a webhook
            keys += [bot_key(call.rsplit("|", 1)[1]) for call in calls]
        args = [
            match.version - 1, match.id, state_to_bytes(match.state), match.live_json(), event_json, _due(match), record,
            "1" if match.ended else "", match.event_id or "", self.events_kept, hook, tell, len(calls), *calls,
        ]
        if sending is not None:
            sending(match, event_json)
        try:
            answer = await self.scripts.run(self._commit, keys, args, replicated=True)
        except (RedisConnectionError, RedisTimeoutError):
            # The connection failed with the commit on it: it may have run, its answer lost.
            # If the match's latest event is this one, at this version, it did.
            if not await self._landed(match, event_json):
                raise
        else:
            if answer[0] != 1:
                return False
            match.event_id = answer[2]
        await self._after_commit(match, event, joining)
        return True

    async def _after_commit(self, match: LiveMatch, event: dict[str, Any], joining: str | None) -> None:
        """The bots' side of a commit (see :meth:`commit`). Each step is repaired should it not
        happen (settlement drops an ended match from its bots' open matches, a waiting match's
        entry lapses at its time, readers ignore the rest), so a failure here is only logged:
        the commit stands."""
        leaves_waiting = event["t"] in ("join", "abort") and match.settings.waiting_until_ms is not None and (
            match.status is not MatchStatus.WAITING
        )
        if joining is None and not match.ended and event["t"] != "leave" and not leaves_waiting:
            return  # a move: nothing of its bots' changes (the hot path makes no round trip here)
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                if joining is not None:
                    pipe.sadd(bot_matches_key(joining), match.id)
                if match.ended:
                    for bot_id in match.bot_ids():
                        pipe.srem(bot_matches_key(bot_id), match.id)
                elif event["t"] == "leave":
                    pipe.srem(bot_matches_key(event["bot"]), match.id)
                if leaves_waiting:
                    pipe.zrem(bot_waiting_key(match.settings.created_by), match.id)
                await pipe.execute()
            if event["t"] == "leave":
                # the bot may have joined again meanwhile, its own note of it made before this
                # drop: then it is noted once more
                stored = await self.load(match.id)
                if stored is not None and stored.match.seat_of(event["bot"]) is not None:
                    await self.note_open(match.id, [event["bot"]])
        except RedisError:
            log.warning("match %s: its bots' lists were not all brought up to date after its commit", match.id,
                        exc_info=True)

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

    @staticmethod
    def _by_home(match_ids: Iterable[str]) -> dict[int | None, list[str]]:
        homes: dict[int | None, list[str]] = {}
        for match_id in match_ids:
            homes.setdefault(home_of_match(match_id), []).append(match_id)
        return homes

    async def claim_unsettled(self, limit: int, claim_seconds: int) -> list[str]:
        """Ended matches waiting for their settlement that nobody has claimed (a claim lapses
        after ``claim_seconds``, so a dead worker's is taken again): now claimed by the caller.
        Every home's queue is read in one pipelined round, then the homes with matches waiting
        are claimed from (a script each, at once): the oldest ``limit`` over all homes at most."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for home in ALL_HOMES:
                pipe.zrange(home_key(home, "unsettled"), 0, limit - 1, withscores=True)
            queued = await pipe.execute()
        oldest = sorted((score, home) for home, rows in zip(ALL_HOMES, queued, strict=True) for _, score in rows)[:limit]
        wanted: dict[int | None, int] = {}
        for _, home in oldest:
            wanted[home] = wanted.get(home, 0) + 1
        now = now_ms()
        claimed = await asyncio.gather(*(
            self._claim_unsettled(keys=[home_key(home, "unsettled"), home_key(home, "settle-claims")],
                                  args=[count, now, now + claim_seconds * 1000])
            for home, count in wanted.items()
        ))
        return [m.decode() for home_claimed in claimed for m in home_claimed]

    async def ended_ms(self, match_ids: Sequence[str]) -> list[int | None]:
        """When each ended match ended (its time in the settlement queue; None once it left it)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for match_id in match_ids:
                pipe.zscore(match_home_key(match_id, "unsettled"), match_id)
            scores = await pipe.execute()
        return [None if score is None else int(score) for score in scores]

    async def settled(self, match_ids: Sequence[tuple[str, bool]]) -> None:
        """The matches' settlement is done (each with whether it is archived): they leave the
        queue, and the archived ones leave the live matches the listings read, their keys
        leaving Redis after the grace period (their readers find them in the archive). One
        script per home (SETTLED), the homes at once."""
        archived = dict(match_ids)
        runs = []
        for home, ids in self._by_home(archived).items():
            keys = [home_key(home, "unsettled"), home_key(home, "settle-claims"), home_key(home, "live")]
            args: list[Any] = [self.grace_seconds]
            for match_id in ids:
                keys += [match_key(match_id), events_key(match_id)]
                args += [match_id, "1" if archived[match_id] else "0"]
            runs.append(self._settled(keys=keys, args=args))
        await asyncio.gather(*runs)

    async def retry_settling(self, match_ids: Sequence[str], seconds: int) -> None:
        """The matches' settlement could not finish (the archive's database is away): they stay
        queued, claimed again after ``seconds`` rather than when their claims would lapse."""
        until = now_ms() + max(1, seconds) * 1000
        async with self.redis.pipeline(transaction=False) as pipe:
            for match_id in match_ids:
                pipe.hset(match_home_key(match_id, "settle-claims"), match_id, until)
            await pipe.execute()

    async def resync_due(self, match_id: str) -> None:
        """Put the sweeper's index right for one match, as it is stored now: a sweep found
        nothing due (a commit that raced it, a clock that differs). Written only if the match
        has not moved on since it was read, so a stale read never undoes a newer deadline."""
        stored = await self.load(match_id)
        version, due = ("", "") if stored is None else (str(stored.match.version), _due(stored.match))
        await self._resync_due(keys=[match_key(match_id), match_home_key(match_id, "deadlines")],
                               args=[match_id, version, due])

    async def earliest_deadlines(self, homes: Sequence[int | None], count: int) -> list[list[tuple[str, int]]]:
        """Each home's ``count`` earliest entries in the sweeper's index (match, when due),
        earliest first: one pipelined round, which the cluster client sends each node at once."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for home in homes:
                pipe.zrange(home_key(home, "deadlines"), 0, count - 1, withscores=True)
            read = await pipe.execute()
        return [[(match_id.decode(), int(due)) for match_id, due in rows] for rows in read]
