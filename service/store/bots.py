"""Registered bots in Redis: registration (all or nothing, names and look-alikes included),
authentication with the token's request bucket, the registrations allowance per address,
and the bots' open matches."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from enum import Enum
from typing import TypeVar

from redis.asyncio import Redis

from service.store.clock import now_ms
from service.store.keys import (
    LOOKALIKE_INDEX,
    bot_key,
    bot_matches_key,
    lookalike_key_name,
    registrations_key,
)
from service.store.script_line import ScriptLine

T = TypeVar("T")

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


class Registration(Enum):
    REGISTERED = 1
    TAKEN = 0
    INDEX_NOT_BUILT = -1


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
