"""Everything the service keeps in Redis, and the only code that knows the key names.

Keys (hash tags keep each match's keys, and each bot's, in one Cluster slot):
- ``{m:<id>}:match``   hash: version, settings (JSON), state (engine bytes), live (JSON),
  eid (id of the match's latest event), record (JSON, once finished)
- ``{m:<id>}:events``  stream: one entry per change, ``v`` (version) and ``e`` (event JSON);
  the match's event log and replay source
- ``{m:<id>}:wake``    pub/sub channel: each event as it is committed, ``<version>|<event id>|<event
  JSON>``; what wakes the waiters of every API process (``service.feed``)
- ``deadlines``        sorted set: match id by when the workers' sweeper must look at it (ms):
  the deadline of its seats to act, or while seats are free, when it is aborted unless taken
- ``{b:<id>}:bot``     hash: name, created; ``botname:<casefolded name>`` -> bot id
- ``botlook:<look-alike key>`` -> bot id (``service.bot_names``); ``botnames:lookalike-index``
  the key version that index is built for (absent: to be built)
- ``{t:<sha256>}:bot`` the bot a token hash belongs to (tokens themselves are never stored)
- ``{b:<id>}:matches`` set: matches the bot sits in that have not ended
- ``{b:<id>}:waiting`` sorted set: matches the bot created whose seats are not all taken yet,
  by when they are aborted if they still are not
- ``{b:<id>}:wake``    pub/sub channel: a match's id when the bot is seated in it
- ``{t:<sha256>}:rate`` a token's request bucket
- ``registrations:<address>`` bots registered from a client address this hour
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from enum import Enum
from typing import Any, TypeVar

import orjson
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.live_match import LiveMatch, MatchStatus
from service.redis_line import ScriptLine

DEADLINES = "deadlines"
#: Ended matches not yet settled (ratings, tournament standings), by when they ended.
UNSETTLED = "matches:unsettled"

T = TypeVar("T")

# Commit one event: compare the version (and the id of the latest event, so that a snapshot
# guessed from before a Redis failover cannot pass for the current one), append the event,
# store the new snapshot, publish the event to the processes that follow the match (see
# service.feed), move the deadline, keep the bots' lists of open matches (and tell a bot
# that joined), and put a match that ends into the settlement queue (ratings, tournaments):
# all at once, so none of it can be missed. Returns {1, version, event id} on success,
# {0, current} when the match moved on, {-1, 0} when there is no such match.
# KEYS: match, events, deadlines, unsettled, then per bot: its open matches, then (when the
# match stops WAITING) its creator's waiting matches.
# ARGV: expected version, match id, state, live, event, when the sweeper is due or '', record
# or '', '1' if the match ends, expected event id or '', 'join' | 'end' | '', '1' if the
# match stops WAITING else '0'.
# Channels are named after the keys: {m:<id>}:wake for a match, {b:<id>}:wake for a bot.
COMMIT_EVENT = """
local current = redis.call('HGET', KEYS[1], 'version')
if not current then return {-1, 0} end
current = tonumber(current)
if current ~= tonumber(ARGV[1]) then return {0, current} end
if ARGV[9] ~= '' and redis.call('HGET', KEYS[1], 'eid') ~= ARGV[9] then return {0, current} end
local version = current + 1
local eid = redis.call('XADD', KEYS[2], '*', 'v', version, 'e', ARGV[5])
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
  for i = 5, #KEYS - tonumber(ARGV[11]) do redis.call('SREM', KEYS[i], ARGV[2]) end
end
if ARGV[11] == '1' then
  redis.call('ZREM', KEYS[#KEYS], ARGV[2])
end
return {1, version, eid}
"""

# Create a match with its first events (a tournament's match is created with every seat
# taken), unless it exists: deterministic ids make creating a tournament round idempotent.
# Each seated bot's open matches gain it, and the bot is told on its channel.
# A match created with free seats counts among its creator's waiting matches until they are
# taken (or it is aborted): refused, {-1, the earliest of them to be aborted}, when the
# creator has as many as the limit.
# KEYS: match, events, deadlines, then the open matches of each seated bot, then (for a
# match with free seats) its creator's waiting matches.
# ARGV: id, version, settings, state, live, when the sweeper is due or '', sealed or '', the
# creator's limit of waiting matches or '', then the events.
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
local count = #ARGV - 8
for i = 1, count do
  redis.call('XADD', KEYS[2], '0-' .. i, 'v', i, 'e', ARGV[8 + i])
end
redis.call('HSET', KEYS[1], 'version', ARGV[2], 'settings', ARGV[3], 'state', ARGV[4], 'live', ARGV[5],
  'eid', '0-' .. count)
if ARGV[6] ~= '' then redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1]) end
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'sealed', ARGV[7]) end
for i = 4, bots do
  redis.call('SADD', KEYS[i], ARGV[1])
  redis.call('PUBLISH', string.sub(KEYS[i], 1, -8) .. 'wake', ARGV[1])
end
return {1, 0}
"""

# Authenticate a request and lease requests from the token's bucket: the bot a token hash
# belongs to, and up to ARGV[3] requests taken from its bucket at once (the first for the
# request at hand, the rest for the asking process to spend within ARGV[4] ms). Redis's own
# clock, so every API process shares one limit.
#
# Requests leased and not yet spent still count against the bucket: it holds at most the
# burst minus them, so the requests admitted in any time window never exceed what one bucket
# would admit (burst + rate x window). Processes do not report what they spent, so a lease
# counts in full until it has surely lapsed: leases are kept by the epoch (ARGV[4] ms) they
# were taken in, ``o1`` for the current one and ``o0`` for the one before; a lease from two
# epochs ago has lapsed everywhere. ARGV: rate in requests per ms, burst, requests wanted
# (>= 1), lease span in ms. Returns {bot JSON or '', requests granted, ms to wait when none}.
AUTHENTICATE = """
local bot = redis.call('GET', KEYS[1])
if not bot then return {'', 0, 0} end
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local span = tonumber(ARGV[4])
local bucket = redis.call('HMGET', KEYS[2], 't', 'n', 'e', 'o1', 'o0')
local last = tonumber(bucket[1]) or now
local tokens = tonumber(bucket[2]) or burst
local epoch = math.floor(now / span)
local seen = tonumber(bucket[3]) or epoch
local o1 = tonumber(bucket[4]) or 0
local o0 = tonumber(bucket[5]) or 0
if epoch == seen + 1 then
  o0 = o1
  o1 = 0
elseif epoch > seen + 1 then
  o0 = 0
  o1 = 0
end
epoch = math.max(epoch, seen)
local cap = burst - o0 - o1
tokens = math.min(cap, tokens + math.max(0, now - last) * rate)
if tokens < 1 then
  local wait = math.ceil((1 - tokens) / rate)
  if cap < 1 then
    local free = (epoch + 2) * span
    if burst - o1 >= 1 then free = (epoch + 1) * span end
    wait = math.max(wait, free - now)
  end
  return {bot, 0, wait}
end
local granted = math.min(tonumber(ARGV[3]), math.floor(tokens))
tokens = tokens - granted
o1 = o1 + granted - 1
redis.call('HSET', KEYS[2], 't', now, 'n', tostring(tokens), 'e', epoch, 'o1', o1, 'o0', o0)
redis.call('PEXPIRE', KEYS[2], math.ceil(burst / rate) + 2 * span + 1000)
return {bot, granted, 0}
"""


def match_key(match_id: str) -> str:
    return f"{{m:{match_id}}}:match"


def events_key(match_id: str) -> str:
    return f"{{m:{match_id}}}:events"


def match_channel(match_id: str) -> bytes:
    """The pub/sub channel the commit script publishes a match's events on (named after its keys)."""
    return f"{{m:{match_id}}}:wake".encode()


def bot_channel(bot_id: str) -> bytes:
    """The pub/sub channel the commit script names the matches a bot is seated in on."""
    return f"{{b:{bot_id}}}:wake".encode()


def bot_waiting_key(bot_id: str) -> str:
    """The matches a bot created that still have free seats, by when they are aborted."""
    return f"{{b:{bot_id}}}:waiting"


def _due(match: LiveMatch) -> str:
    return "" if match.due_ms is None else str(match.due_ms)


class WaitingFull(Exception):
    """The creator has as many WAITING matches as allowed; the earliest is aborted at ``until_ms``."""

    def __init__(self, until_ms: int) -> None:
        super().__init__(until_ms)
        self.until_ms = until_ms


def bot_key(bot_id: str) -> str:
    return f"{{b:{bot_id}}}:bot"


def bot_matches_key(bot_id: str) -> str:
    return f"{{b:{bot_id}}}:matches"


def now_ms() -> int:
    return int(time.time() * 1000)


class MatchEvent:
    """One event of a match: as read from its stream, or as published with its commit."""

    __slots__ = ("match_id", "version", "event_id", "event")

    def __init__(self, match_id: str, version: int, event_id: bytes, event: dict[str, Any]) -> None:
        self.match_id = match_id
        self.version = version
        self.event_id = event_id
        self.event = event


class Seated:
    """A bot took a seat in a match (its own join, or a tournament's match made with it)."""

    __slots__ = ("bot_id", "match_id")

    def __init__(self, bot_id: str, match_id: str) -> None:
        self.bot_id = bot_id
        self.match_id = match_id


def decode_published(channel: bytes, data: bytes) -> MatchEvent | Seated | None:
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
            return Seated(owner, data.decode())
    except (ValueError, orjson.JSONDecodeError):
        pass
    return None


class Stored:
    """A match as read: the live match and the id of its latest event."""

    __slots__ = ("match", "event_id")

    def __init__(self, match: LiveMatch, event_id: bytes) -> None:
        self.match = match
        self.event_id = event_id


class MatchStore:
    """Matches in Redis: create, read, commit an event atomically, follow the events."""

    FIELDS = ("version", "settings", "state", "live", "eid", "sealed")

    def __init__(self, redis: Redis, scripts: ScriptLine) -> None:
        self.redis = redis
        #: the hot path's scripts (commits) go down the process's pipelined connection
        self.scripts = scripts
        self._commit = redis.register_script(COMMIT_EVENT)
        self._create = redis.register_script(CREATE_MATCH)

    async def create(
        self, match: LiveMatch, events: Sequence[dict[str, Any]] = (), sealed: bool = False,
        waiting_limit: int | None = None,
    ) -> bool:
        """Store a new match with the events that made it (after the implicit ``create``),
        and note it among its seated bots' open matches; False, and nothing written, when a
        match with its id exists. A match still WAITING counts among its creator's waiting
        matches, of which there may be ``waiting_limit``: :class:`WaitingFull` beyond."""
        keys = [match_key(match.id), events_key(match.id), DEADLINES]
        keys += [bot_matches_key(bot_id) for bot_id in sorted(match.bot_ids())]
        waiting = match.status is MatchStatus.WAITING
        if waiting:
            keys.append(bot_waiting_key(match.settings.created_by))
        created, earliest = await self._create(
            keys=keys,
            args=[
                match.id, match.version, match.settings.to_json(), match.state.to_bytes(), match.live_json(),
                _due(match), "1" if sealed else "", str(waiting_limit) if waiting and waiting_limit else "",
                orjson.dumps({"t": "create"}), *(orjson.dumps(e) for e in events),
            ],
        )
        if created == -1:
            raise WaitingFull(int(float(earliest)))
        match.event_id = f"0-{len(events) + 1}".encode()
        return bool(created)

    async def unseal(self, match_ids: Iterable[str]) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            for match_id in match_ids:
                pipe.hdel(match_key(match_id), "sealed")
            await pipe.execute()

    async def load(self, match_id: str) -> Stored | None:
        values = await self.redis.hmget(match_key(match_id), self.FIELDS)
        return self._stored(match_id, values)

    async def load_many(self, match_ids: Sequence[str]) -> list[Stored | None]:
        async with self.redis.pipeline(transaction=False) as pipe:
            for match_id in match_ids:
                pipe.hmget(match_key(match_id), self.FIELDS)
            rows = await pipe.execute()
        return [self._stored(m, values) for m, values in zip(match_ids, rows, strict=True)]

    @staticmethod
    def _stored(match_id: str, values: list[Any]) -> Stored | None:
        version, settings, state, live, eid, sealed = values
        if version is None:
            return None
        match = LiveMatch.from_stored(match_id, int(version), settings, state, live)
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
        leaves_waiting = event["t"] in ("join", "abort") and match.settings.waiting_until_ms is not None and (
            match.status is not MatchStatus.WAITING
        )
        if leaves_waiting:
            keys.append(bot_waiting_key(match.settings.created_by))
        event_json = orjson.dumps(event)
        args = [
            match.version - 1, match.id, match.state.to_bytes(), match.live_json(), event_json, _due(match), record,
            "1" if match.ended else "", match.event_id or "", mode, "1" if leaves_waiting else "0",
        ]
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

    async def record(self, match_id: str) -> bytes | None:
        return await self.redis.hget(match_key(match_id), "record")

    async def events_after(self, match_id: str, event_id: bytes | None) -> list[MatchEvent]:
        """The match's events after ``event_id`` (all of them for None), oldest first."""
        rows = await self.redis.xrange(events_key(match_id), b"(" + event_id if event_id else "-", "+")
        out = []
        for eid, fields in rows:
            event = orjson.loads(fields[b"e"])
            event["v"] = version = int(fields[b"v"])
            out.append(MatchEvent(match_id, version, eid, event))
        return out

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


# Take one registration from a client address's hourly allowance: 0, or when it is spent,
# the ms until it is renewed. KEYS: the address's count. ARGV: the allowance, the window (ms).
TAKE_REGISTRATION = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if n > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return math.max(1, redis.call('PTTL', KEYS[1]))
end
return 0
"""


def registrations_key(address: str) -> str:
    return f"registrations:{address}"


async def _batches(items: AsyncIterator[T], size: int) -> AsyncIterator[list[T]]:
    batch: list[T] = []
    async for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


# Register a bot, all or nothing: refused while the look-alike index is not built for this
# key version (-1), when the case-folded name or its look-alike key is taken (0); else the
# name, its look-alike key, the bot and its token hash, at once (1), so no half-registered
# bot is ever visible and of two racing look-alikes exactly one wins.
# KEYS: botname, botlook, bot, token, index version. ARGV: bot id, name, created, token JSON,
# the key version.
REGISTER_BOT = """
if redis.call('GET', KEYS[5]) ~= ARGV[5] then return -1 end
if redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], 'name', ARGV[2], 'created', ARGV[3])
redis.call('SET', KEYS[4], ARGV[4])
return 1
"""
#: the version of ``service.bot_names`` keys the look-alike index holds
LOOKALIKE_INDEX = "botnames:lookalike-index"


class Registration(Enum):
    REGISTERED = 1
    TAKEN = 0
    INDEX_NOT_BUILT = -1


def lookalike_key_name(key: str) -> str:
    return f"botlook:{key}"


class BotStore:
    """Registered bots, their token hashes, their open matches and the request buckets."""

    def __init__(self, redis: Redis, scripts: ScriptLine) -> None:
        self.redis = redis
        #: the hot path's scripts (authentication) go down the process's pipelined connection
        self.scripts = scripts
        self._authenticate = redis.register_script(AUTHENTICATE)
        self._take_registration = redis.register_script(TAKE_REGISTRATION)
        self._register = redis.register_script(REGISTER_BOT)

    async def take_registration(self, address: str, per_hour: int) -> int:
        """One registration from the address's hourly allowance: 0, or the ms to wait."""
        return int(await self._take_registration(keys=[registrations_key(address)], args=[per_hour, 3_600_000]))

    async def give_back_registration(self, address: str) -> None:
        """A registration that did not happen (its name was taken) costs the address nothing."""
        await self.redis.decr(registrations_key(address))

    async def register(self, bot_id: str, name: str, token_hash: str, lookalike: str, key_version: str) -> Registration:
        """Register the bot unless its name (case-insensitive) or its look-alike key is taken,
        or the look-alike index is not built for ``key_version`` (:meth:`index_lookalikes`)."""
        keys = [f"botname:{name.casefold()}", lookalike_key_name(lookalike), bot_key(bot_id), f"{{t:{token_hash}}}:bot", LOOKALIKE_INDEX]
        token_json = json.dumps({"id": bot_id, "name": name, "hash": token_hash})
        return Registration(int(await self._register(keys=keys, args=[bot_id, name, now_ms(), token_json, key_version])))

    async def lookalike_index_version(self) -> str | None:
        """The key version the look-alike index is built for (None: not built)."""
        version = await self.redis.get(LOOKALIKE_INDEX)
        return None if version is None else version.decode()

    async def index_lookalikes(self, lookalike_of: Callable[[str], str], key_version: str) -> int:
        """Give every registered bot its look-alike key (bots registered before the index, or
        under another key version), then mark the index built; idempotent, so processes that
        do it at once agree. Of two earlier bots whose names look alike, the key names one;
        either blocks every later look-alike. Returns the bots seen."""
        seen = 0
        async for name_keys in _batches(self.redis.scan_iter(match="botname:*", count=500), 500):
            bot_ids = [b.decode() for b in await self.redis.mget(name_keys) if b is not None]
            async with self.redis.pipeline(transaction=False) as pipe:
                for bot_id in bot_ids:
                    pipe.hget(bot_key(bot_id), "name")
                names = await pipe.execute()
            async with self.redis.pipeline(transaction=False) as pipe:
                for bot_id, name in zip(bot_ids, names, strict=True):
                    if name is not None:  # (the old two-step registration could leave a bot half-made)
                        pipe.set(lookalike_key_name(lookalike_of(name.decode())), bot_id, nx=True)
                        seen += 1
                await pipe.execute()
        await self.redis.set(LOOKALIKE_INDEX, key_version)
        return seen

    async def by_token(
        self, token_hash: str, rate_per_ms: float, burst: int, wanted: int = 1, lease_ms: int = 1000
    ) -> tuple[dict[str, str] | None, int, int]:
        """The bot holding this token hash (or None), the requests granted from its bucket (up
        to ``wanted``: one for the request at hand, the rest to spend within ``lease_ms``), and
        when none is granted, the ms to wait before the next."""
        found, granted, wait_ms = await self.scripts.run(
            self._authenticate, [f"{{t:{token_hash}}}:bot", f"{{t:{token_hash}}}:rate"], [rate_per_ms, burst, wanted, lease_ms]
        )
        return (json.loads(found) if found else None), int(granted), int(wait_ms)

    async def get(self, bot_id: str) -> dict[str, str] | None:
        values = await self.redis.hmget(bot_key(bot_id), ("name", "created"))
        if values[0] is None:
            return None
        return {"id": bot_id, "name": values[0].decode(), "created": values[1].decode()}

    async def get_many(self, bot_ids: Iterable[str]) -> dict[str, dict[str, str]]:
        ids = list(bot_ids)
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id in ids:
                pipe.hget(bot_key(bot_id), "name")
            names = await pipe.execute()
        return {b: {"id": b, "name": n.decode()} for b, n in zip(ids, names, strict=True) if n is not None}

    async def open_matches(self, bot_id: str) -> list[str]:
        return sorted(m.decode() for m in await self.redis.smembers(bot_matches_key(bot_id)))

    async def count_open_matches(self, bot_id: str) -> int:
        return int(await self.redis.scard(bot_matches_key(bot_id)))





def ratings_key(bot_id: str) -> str:
    return f"{{b:{bot_id}}}:ratings"


# Apply one match's rating changes exactly once: skipped when the match is marked applied;
# refused (-1) when a bot's rating moved since it was read (the caller recomputes); else
# every bot's rating, history and leaderboard place, the result for the fit, and the mark,
# all at once. KEYS: applied, leaderboard, results, names, then (ratings, history) per bot.
# ARGV: match id, ruleset, result JSON, time ms, then (bot, name, games read, rating) per bot.
APPLY_RATINGS = """
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 0 end
local bots = (#KEYS - 4) / 2
for i = 1, bots do
  local current = redis.call('HGET', KEYS[3 + 2 * i], ARGV[2])
  local games = 0
  if current then games = cjson.decode(current)['games'] end
  if games ~= tonumber(ARGV[4 + 4 * (i - 1) + 3]) then return -1 end
end
for i = 1, bots do
  local base = 4 + 4 * (i - 1)
  local rating = tonumber(ARGV[base + 4])
  local games = tonumber(ARGV[base + 3]) + 1
  redis.call('HSET', KEYS[3 + 2 * i], ARGV[2], cjson.encode({rating = rating, games = games}))
  redis.call('RPUSH', KEYS[4 + 2 * i], cjson.encode({rating = rating, matchId = ARGV[1], at = tonumber(ARGV[4])}))
  redis.call('ZADD', KEYS[2], rating, ARGV[base + 1])
  redis.call('HSET', KEYS[4], ARGV[base + 1], ARGV[base + 2])
end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[3], ARGV[3])
return 1
"""


def fit_claim_key(ruleset: str) -> str:
    """Held while a refit of ``ruleset`` waits in the queue (the job releases it as it starts)."""
    return f"ratings:fit-queued:{ruleset}"


def leaderboard_key(ruleset: str, method: str) -> str:
    return f"leaderboard:{ruleset}:{method}"


def history_key(bot_id: str, ruleset: str) -> str:
    return f"{{b:{bot_id}}}:history:{ruleset}"


class RatingStore:
    """Ratings per ruleset: Elo moved by each rated match, and the fit of the whole history."""

    APPLIED = "ratings:applied"
    NAMES = "ratings:names"

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._apply = redis.register_script(APPLY_RATINGS)

    async def elo(self, bot_ids: Sequence[str], ruleset: str) -> list[tuple[float, int] | None]:
        """Each bot's (rating, games) under ``ruleset``, None for a bot without one."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id in bot_ids:
                pipe.hget(ratings_key(bot_id), ruleset)
            rows = await pipe.execute()
        out: list[tuple[float, int] | None] = []
        for row in rows:
            data = json.loads(row) if row else None
            out.append(None if data is None else (float(data["rating"]), int(data["games"])))
        return out

    async def is_applied(self, match_id: str) -> bool:
        return bool(await self.redis.sismember(self.APPLIED, match_id))

    async def apply(
        self, match_id: str, ruleset: str, changes: Sequence[tuple[str, str, int, float]], result: dict[str, Any]
    ) -> int:
        """``changes``: (bot, name, games read, new rating). 1 applied, 0 already applied, -1 stale."""
        keys = [self.APPLIED, leaderboard_key(ruleset, "ELO"), f"ratings:results:{ruleset}", self.NAMES]
        args: list[Any] = [match_id, ruleset, json.dumps(result, separators=(",", ":")), now_ms()]
        for bot_id, name, games, rating in changes:
            keys += [ratings_key(bot_id), history_key(bot_id, ruleset)]
            args += [bot_id, name, games, repr(float(rating))]
        return int(await self._apply(keys=keys, args=args))

    async def results(self, ruleset: str) -> list[dict[str, Any]]:
        return [json.loads(r) for r in await self.redis.lrange(f"ratings:results:{ruleset}", 0, -1)]

    async def store_fit(self, ruleset: str, ratings: dict[str, float], games: dict[str, int]) -> None:
        """Replace the fitted leaderboard at once (a rename), so readers never see half of it."""
        staging = f"{leaderboard_key(ruleset, 'FITTED')}:staging"
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(staging, f"ratings:fitted:{ruleset}:staging")
            if ratings:
                pipe.zadd(staging, ratings)
                pipe.hset(f"ratings:fitted:{ruleset}:staging", mapping={b: games[b] for b in ratings})
                pipe.rename(staging, leaderboard_key(ruleset, "FITTED"))
                pipe.rename(f"ratings:fitted:{ruleset}:staging", f"ratings:fitted:{ruleset}")
            await pipe.execute()

    async def leaderboard(self, ruleset: str, method: str, first: int, offset: int) -> list[dict[str, Any]]:
        rows = await self.redis.zrevrange(leaderboard_key(ruleset, method), offset, offset + first - 1, withscores=True)
        ids = [r[0].decode() for r in rows]
        if not ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hmget(self.NAMES, ids)
            if method == "FITTED":
                pipe.hmget(f"ratings:fitted:{ruleset}", ids)
            else:
                for bot_id in ids:
                    pipe.hget(ratings_key(bot_id), ruleset)
            answers = await pipe.execute()
        names = answers[0]
        if method == "FITTED":
            games = [int(g or 0) for g in answers[1]]
        else:
            games = [json.loads(r)["games"] if r else 0 for r in answers[1:]]
        return [
            {"rank": offset + i + 1, "id": bot_id, "name": (names[i] or b"?").decode(), "rating": score, "games": games[i]}
            for i, (bot_id, (_, score)) in enumerate(zip(ids, rows, strict=True))
        ]

    async def current(self, bot_ids: Sequence[str]) -> list[list[dict[str, Any]]]:
        """Each bot's current rating per ruleset (one round trip for all of them)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id in bot_ids:
                pipe.hgetall(ratings_key(bot_id))
            answers = await pipe.execute()
        out = []
        for rows in answers:
            ratings = []
            for ruleset, value in sorted(rows.items()):
                data = json.loads(value)
                ratings.append({"ruleset": ruleset.decode(), "rating": data["rating"], "games": data["games"]})
            out.append(ratings)
        return out

    async def histories(self, wanted: Sequence[tuple[str, str, int]]) -> list[list[dict[str, Any]]]:
        """For each (bot, ruleset, last): the latest ``last`` points of the bot's rating
        history under the ruleset, oldest first (one round trip for all of them)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id, ruleset, last in wanted:
                pipe.lrange(history_key(bot_id, ruleset), -last, -1)
            answers = await pipe.execute()
        return [[json.loads(r) for r in rows] for rows in answers]
