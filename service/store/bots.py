"""Registered bots in Redis: registration (in single-slot steps that never show a half-made
bot, names and look-alikes included), their tokens (added and revoked in single-slot steps
too), authentication with the token's request bucket, the registrations allowance per
address, and the bots' open matches."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from enum import Enum
from typing import TypeVar, cast

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.model.challenge import ChallengePolicy
from service.model.invitation import InvitationPolicy
from service.outage import Outage
from service.store.clock import now_ms
from service.store.connections import Backoff
from service.store.feed import RESYNC, EventFeed
from service.store.keys import (
    LOOKALIKE_INDEX,
    REVOKED_TOKENS,
    bot_key,
    bot_matches_key,
    bot_tokens_key,
    lookalike_key_name,
    registrations_key,
    token_key,
    token_rate_key,
    token_used_key,
)
from service.store.matches import Notice
from service.store.redis_client import clustered
from service.store.script_line import ScriptLine

T = TypeVar("T")

log = logging.getLogger("wizard_arena.bots")

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
# (>= 1), lease span in ms. Returns {bot JSON or '', requests granted, ms to wait when none,
# requests left in the bucket after the grant}. A grant also notes when the token was used
# (KEYS[3]): the token's lastUsedAt, true to a lease's span.
AUTHENTICATE = """
local bot = redis.call('GET', KEYS[1])
if not bot then return {'', 0, 0, 0} end
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
  return {bot, 0, wait, 0}
end
local granted = math.min(tonumber(ARGV[3]), math.floor(tokens))
tokens = tokens - granted
o1 = o1 + granted - 1
redis.call('HSET', KEYS[2], 't', now, 'n', tostring(tokens), 'e', epoch, 'o1', o1, 'o0', o0)
redis.call('PEXPIRE', KEYS[2], math.ceil(burst / rate) + 2 * span + 1000)
redis.call('SET', KEYS[3], now)
return {bot, granted, 0, math.floor(tokens)}
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


#: the ``state`` of a token's entry among its bot's tokens while it is made, and while it is
#: revoked (absent: in use; see "A bot's tokens live in two slots" below)
MAKING = "making"
REVOKING = "revoking"


def _with_state(entry: str, state: str) -> str:
    """A token's entry (JSON) with its ``state``."""
    return json.dumps({**json.loads(entry), "state": state})


def _token_records(
    bot_id: str, bot_name: str, token_hash: str, token_id: str, token_name: str, created: int
) -> tuple[str, str]:
    """A token's two records: what its hash names (the bot, for authentication) and its entry
    among the bot's tokens (for listing and revoking)."""
    return (
        json.dumps({"id": bot_id, "name": bot_name, "hash": token_hash, "tid": token_id}),
        json.dumps({"name": token_name, "created": created, "hash": token_hash}),
    )


async def _batches(items: AsyncIterator[T], size: int) -> AsyncIterator[list[T]]:
    batch: list[T] = []
    async for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


# Registration runs on a Redis Cluster too, where one script cannot hold the name's keys, the
# bot's and its token's (each in a slot of its own). It is made of single-slot steps instead,
# ordered so that no half-registered bot is ever visible and a crash leaves nothing for good:
#
# 1. the name is reserved first: its look-alike key (``botlook:<key>``), then its case-folded
#    name (``botname:<casefold>``), each set to ``~<bot id>|<ms>`` unless held (RESERVE_NAME). Of
#    two racing look-alikes exactly one holds the key they share. A reservation whose
#    registration never finished (the process died) is looked at once STALE_RESERVATION_MS old:
#    finished for its bot if that was made (step 3), else taken over;
# 2. the token's record, which nobody can use before the token is answered;
# 3. the bot's own keys in one transaction (its hash, its tokens): the bot exists from here;
# 4. the reservations become the bot's (FINISH_NAME: ``<bot id>``), each only if still its own.
#    Should one have been taken over meanwhile (a registration stalled past
#    STALE_RESERVATION_MS), the bot is taken back out and the name answered as taken.
#
# A reservation (``~…``) names no bot: the readers of these keys skip it.

# Reserve a name key (KEYS[1]) for ARGV[1] (``~<bot id>|<ms>``): 1, or 0 when it is held (by a
# bot, or a reservation younger than ARGV[2] ms); a reservation older than that is answered
# as it stands (its registration died or stalled: the caller sees how far it got).
RESERVE_NAME = """
local held = redis.call('GET', KEYS[1])
if held then
  if string.sub(held, 1, 1) ~= '~' then return 0 end
  local now = redis.call('TIME')
  local at = tonumber(string.match(held, '|(%d+)$')) or 0
  if tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - at < tonumber(ARGV[2]) then return 0 end
  return held
end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""

# Turn a reservation (KEYS[1] holds ARGV[1]) into ARGV[2] (the bot's id, or another
# reservation), or with ARGV[2] '' let it go: 1, or 0 when the key no longer holds that
# reservation (1 too when it holds ARGV[2] already: someone else finished it).
FINISH_NAME = """
local held = redis.call('GET', KEYS[1])
if ARGV[2] ~= '' and held == ARGV[2] then return 1 end
if held ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2]) end
return 1
"""

#: how old a name's reservation must be before another registration takes it over (a
#: registration takes milliseconds; one that took this long died or stalled)
STALE_RESERVATION_MS = 60_000


# A bot's tokens live in two slots: its entry among the bot's tokens (``{b:<id>}:tokens``,
# beside the bot: what lists, counts and revokes it) and what its hash names (``{t:<hash>}:bot``,
# what authenticates it). No script spans both, so each change goes in single-slot steps, and
# an entry says which step its token is at (its JSON's ``state``):
# - ``making``: written first, before the token's hash names the bot; not listed, not counted
#   as a working token, not revocable. Then the hash is written, then the entry is made plain
#   (in use), and only then is the token handed out: nobody can use it before both sides are
#   written (its hash authenticates from the second step, but nobody holds it). A making entry left by a
#   process that died between the steps is swept by the next listing after MAKING_LAPSE_MS
#   (:meth:`BotStore.tokens`), with the hash it may have written.
# - absent: in use.
# - ``revoking``: marked first (the last-token check counts it gone), then the hash is deleted
#   (the token stops working there, at once) and the revocation published, then the entry goes.
#   Once marked, the revocation is decided: whoever finds the mark finishes it (each step is
#   idempotent), so one a process left halfway as it died is finished by the next listing.

# Begin adding a token to a bot: its entry, ``making``, unless the bot has ARGV[3] tokens
# already (0) or is retired (-1); 1: written. KEYS: the bot's tokens, the bot. ARGV: token id,
# the making entry (JSON), most tokens.
BEGIN_TOKEN = """
if redis.call('HEXISTS', KEYS[2], 'retired') == 1 then return -1 end
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


# Replace a token's entry with ARGV[3] if it is still ARGV[2] (1), else change nothing (0): a
# making entry made plain once its hash is written; a making entry swept (ARGV[3] empty: deleted).
# KEYS: the bot's tokens. ARGV: token id, the entry expected, the entry to write ('' deletes it).
REPLACE_TOKEN_ENTRY = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
if ARGV[3] == '' then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) end
return 1
"""


# Mark a token in use ``revoking`` (the first step of revoking it), if its entry is still
# ARGV[2] (else 0, changed meanwhile: read it again) and it is not the bot's last token in use
# (-1: kept, or the bot could never be reached again); 1: marked. KEYS: the bot's tokens.
# ARGV: token id, the entry expected, the revoking entry.
MARK_REVOKING = """
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
local in_use = 0
for _, entry in ipairs(redis.call('HVALS', KEYS[1])) do
  if cjson.decode(entry)['state'] == nil then in_use = in_use + 1 end
end
if in_use <= 1 then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
"""


#: a ``making`` token entry older than this (ms) was left by a process that died making it (as
#: with a name's reservation: the steps take milliseconds)
MAKING_LAPSE_MS = STALE_RESERVATION_MS


class TokenAdded(Enum):
    ADDED = 1
    TOO_MANY = 0
    RETIRED = -1


class TokenRevoked(Enum):
    REVOKED = 1
    NOT_FOUND = 0
    LAST = -1


#: the fields of a bot's hash a ``Bot`` shows
PROFILE_FIELDS = ("name", "created", "description", "homepage", "retired")


class Registration(Enum):
    REGISTERED = 1
    TAKEN = 0
    INDEX_NOT_BUILT = -1


# Drop a token's hash, its last use and its bucket (one slot: the token's). KEYS: the three.
DROP_TOKEN = "return redis.call('DEL', unpack(KEYS))"


class BotStore:
    """Registered bots, their token hashes, their open matches and the request buckets."""

    def __init__(self, redis: Redis, scripts: ScriptLine) -> None:
        self.redis = redis
        #: the hot path's scripts (authentication) go down the process's pipelined connection
        self.scripts = scripts
        self._authenticate = redis.register_script(AUTHENTICATE)
        self._take_registration = redis.register_script(TAKE_REGISTRATION)
        self._reserve_name = redis.register_script(RESERVE_NAME)
        self._finish_name = redis.register_script(FINISH_NAME)
        self._begin_token = redis.register_script(BEGIN_TOKEN)
        self._replace_token_entry = redis.register_script(REPLACE_TOKEN_ENTRY)
        self._mark_revoking = redis.register_script(MARK_REVOKING)
        self._drop_token = redis.register_script(DROP_TOKEN)

    async def take_registration(self, address: str, per_hour: int) -> int:
        """One registration from the address's hourly allowance: 0, or the ms to wait."""
        return int(await self._take_registration(keys=[registrations_key(address)], args=[per_hour, 3_600_000]))

    async def give_back_registration(self, address: str) -> None:
        """A registration that did not happen (its name was taken) costs the address nothing."""
        await self.redis.decr(registrations_key(address))

    async def register(
        self, bot_id: str, name: str, token_hash: str, lookalike: str, key_version: str, token_id: str, token_name: str
    ) -> Registration:
        """Register the bot unless its name (case-insensitive) or its look-alike key is taken,
        or the look-alike index is not built for ``key_version`` (:meth:`index_lookalikes`);
        its token is its first (``token_id``, named ``token_name``). In single-slot steps (see
        RESERVE_NAME above): the name reserved first, the bot made visible last."""
        if await self.lookalike_index_version() != key_version:
            return Registration.INDEX_NOT_BUILT
        created = now_ms()
        reservation = f"~{bot_id}|{created}"
        name_keys = [lookalike_key_name(lookalike), f"botname:{name.casefold()}"]
        reserved: list[str] = []
        for key in name_keys:
            if not await self._reserve(key, reservation):
                await self._let_go(reserved, reservation)
                return Registration.TAKEN
            reserved.append(key)
        # (a failure from here on leaves the reservations to go stale: the bot may be visible)
        token_json, entry = _token_records(bot_id, name, token_hash, token_id, token_name, created)
        await self.redis.set(token_key(token_hash), token_json)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(bot_key(bot_id), mapping={"name": name, "created": created})
            pipe.hset(bot_tokens_key(bot_id), token_id, entry)
            await pipe.execute()
        for done, key in enumerate(name_keys):
            if not await self._finish_name(keys=[key], args=[reservation, bot_id]):
                # taken over while this registration stalled: the bot is taken back out
                await self.redis.delete(bot_key(bot_id))
                await self.redis.delete(bot_tokens_key(bot_id))
                await self.redis.delete(token_key(token_hash))
                await self._let_go(name_keys[:done], bot_id)
                await self._let_go(name_keys[done + 1:], reservation)
                return Registration.TAKEN
        return Registration.REGISTERED

    async def _reserve(self, key: str, reservation: str) -> bool:
        """Reserve a name key; a stale reservation is finished for its bot when its registration
        got as far as making the bot (the name is the bot's: taken), else taken over."""
        answer = await self._reserve_name(keys=[key], args=[reservation, STALE_RESERVATION_MS])
        if not isinstance(answer, bytes):
            return bool(answer)
        stale = answer.decode()
        holder = stale[1:].partition("|")[0]
        if await self.redis.hexists(bot_key(holder), "name"):  # made, not finished: roll forward
            await self._finish_name(keys=[key], args=[stale, holder])
            return False
        return bool(await self._finish_name(keys=[key], args=[stale, reservation]))

    async def _let_go(self, name_keys: list[str], holder: str) -> None:
        """Free the name keys that ``holder`` (a reservation, or a bot id) still holds."""
        for key in name_keys:
            await self._finish_name(keys=[key], args=[holder, ""])

    async def add_token(
        self, bot_id: str, name: str, token_hash: str, token_id: str, token_name: str, most: int
    ) -> tuple[TokenAdded, int]:
        """Give the bot another token (unless it has ``most`` or is retired); and when it was made.
        In three steps (see "A bot's tokens live in two slots"): its entry ``making``, its hash, its entry
        in use; the token works once the call returns."""
        created = now_ms()
        token_json, entry = _token_records(bot_id, name, token_hash, token_id, token_name, created)
        making = _with_state(entry, MAKING)
        began = await self._begin_token(keys=[bot_tokens_key(bot_id), bot_key(bot_id)], args=[token_id, making, most])
        if int(began) != TokenAdded.ADDED.value:
            return TokenAdded(int(began)), created
        await self.redis.set(token_key(token_hash), token_json)
        if not await self._replace_token_entry(keys=[bot_tokens_key(bot_id)], args=[token_id, making, entry]):
            # swept as left by a dead process: this one stalled over MAKING_LAPSE_MS between the steps
            await self._drop_hash(token_hash)
            raise RuntimeError(f"making token {token_id} of bot {bot_id} took too long: it was given up")
        return TokenAdded.ADDED, created

    async def adopt_token(self, bot_id: str, token_hash: str, token_name: str) -> str:
        """List a token made before bots had named tokens among its bot's tokens (on its first
        use since) and give it an id: one drawn from its hash, so that processes adopting it at
        once agree. Its entry first, then the id beside its hash (each step idempotent: a use
        after a crash between them adopts it again). Returns its id."""
        found = await self.redis.get(token_key(token_hash))
        if found is None:
            return ""
        record = json.loads(found)
        if record.get("tid"):
            return str(record["tid"])
        token_id = hashlib.sha256(f"token-id:{token_hash}".encode()).hexdigest()[:16]
        created = (await self.redis.hget(bot_key(bot_id), "created") or b"0").decode()
        _, entry = _token_records(bot_id, record["name"], token_hash, token_id, token_name, int(created))
        await self.redis.hsetnx(bot_tokens_key(bot_id), token_id, entry)
        await self.redis.set(token_key(token_hash), json.dumps({**record, "tid": token_id}), xx=True)
        return token_id

    async def tokens(self, bot_id: str) -> list[dict[str, object]]:
        """The bot's tokens, oldest first: id, name, created and last used (ms; None: never).
        A token being made is not listed yet, nor one being revoked. Finishes what a dead process
        left halfway: sweeps the tokens it left half-made, and its revocations."""
        entries: list[tuple[str, dict[str, object]]] = []
        for tid, raw in (await self.redis.hgetall(bot_tokens_key(bot_id))).items():
            entry = json.loads(raw)
            state = entry.get("state")
            if state is None:
                entries.append((tid.decode(), entry))
            elif state == REVOKING:
                await self._finish_revoking(bot_id, tid.decode(), str(entry["hash"]))
            elif int(entry["created"]) < now_ms() - MAKING_LAPSE_MS:
                await self._sweep_making(bot_id, tid.decode(), raw.decode(), str(entry["hash"]))
        entries.sort(key=lambda e: (e[1]["created"], e[0]))
        async with self.redis.pipeline(transaction=False) as pipe:  # (the hashes' keys are in slots of their own)
            for _, entry in entries:
                pipe.get(token_used_key(str(entry["hash"])))
            used = await pipe.execute()
        return [
            {"id": tid, "name": e["name"], "created": e["created"], "used": None if u is None else int(u)}
            for (tid, e), u in zip(entries, used, strict=True)
        ]

    async def _sweep_making(self, bot_id: str, token_id: str, making: str, token_hash: str) -> None:
        """Remove a token a dead process left ``making``: its entry, then its hash (a process
        that is only late finds its entry gone and drops its hash itself)."""
        if await self._replace_token_entry(keys=[bot_tokens_key(bot_id)], args=[token_id, making, ""]):
            await self._drop_hash(token_hash)

    async def revoke_token(self, bot_id: str, token_id: str) -> TokenRevoked:
        """Revoke one of the bot's tokens, in three steps: its entry marked ``revoking`` (the
        check that it is not the bot's last token in use, against other revocations), its hash
        dropped and published (it stops working, at once), its entry removed. A revocation a
        dead process left halfway is finished by revoking the token again, or by a listing."""
        while True:
            raw = await self.redis.hget(bot_tokens_key(bot_id), token_id)
            if raw is None:
                return TokenRevoked.NOT_FOUND
            entry = raw.decode()
            state = json.loads(entry).get("state")
            if state == MAKING:
                return TokenRevoked.NOT_FOUND
            if state == REVOKING:
                break
            marked = int(await self._mark_revoking(
                keys=[bot_tokens_key(bot_id)], args=[token_id, entry, _with_state(entry, REVOKING)]
            ))
            if marked == TokenRevoked.LAST.value:
                return TokenRevoked.LAST
            if marked == TokenRevoked.REVOKED.value:
                break
        await self._finish_revoking(bot_id, token_id, json.loads(entry)["hash"])
        return TokenRevoked.REVOKED

    async def _finish_revoking(self, bot_id: str, token_id: str, token_hash: str) -> None:
        """The steps of a revocation after its mark: the hash dropped, then the entry."""
        await self._drop_hash(token_hash)
        await self.redis.hdel(bot_tokens_key(bot_id), token_id)

    async def _drop_hash(self, token_hash: str) -> None:
        """The token's hash names its bot no more (with its bucket and last use: one slot), and
        every API process is told (:meth:`_publish_revocation`). Dropped as a commit is made,
        down the commit line and replicated (``ARENA_COMMIT_REPLICAS``): a failover right after
        a revocation was answered does not bring the token back."""
        await self.scripts.run(
            self._drop_token, [token_key(token_hash), token_used_key(token_hash), token_rate_key(token_hash)], [],
            replicated=True,
        )
        await self._publish_revocation(token_hash)

    async def _publish_revocation(self, token_hash: str) -> None:
        """Publish a revoked token's hash, so that no API process spends a lease of it once this
        returns. One server writes it to every subscriber before it answers. A cluster node
        does that only for its own subscribers (it passes the message on to the other nodes
        later, over the cluster bus), and each process's feed listens on one node drawn at
        random: so the hash is published on every node. A node that cannot be reached (or does
        not answer in time) has no subscriber to tell: theirs lost their connection, or will
        once their feed's ping goes unanswered, and a process drops every lease it kept until
        its feed has subscribed again (``service.domain.bots``)."""
        if not clustered(self.redis):
            await self.redis.publish(REVOKED_TOKENS, token_hash)
            return
        cluster = cast(RedisCluster, self.redis)
        nodes = cluster.get_nodes()
        answers = await asyncio.gather(
            *(cluster.execute_command("PUBLISH", REVOKED_TOKENS, token_hash, target_nodes=node) for node in nodes),
            return_exceptions=True,
        )
        for node, answer in zip(nodes, answers, strict=True):
            if isinstance(answer, (RedisConnectionError, RedisTimeoutError)):
                log.warning("could not publish a token's revocation on %s (%r): its subscribers resync", node.name, answer)
            elif isinstance(answer, BaseException):
                raise answer

    async def update_profile(self, bot_id: str, fields: dict[str, str]) -> None:
        """Set profile fields (description, homepage); an empty value removes the field."""
        async with self.redis.pipeline(transaction=True) as pipe:
            for name, value in fields.items():
                if value:
                    pipe.hset(bot_key(bot_id), name, value)
                else:
                    pipe.hdel(bot_key(bot_id), name)
            await pipe.execute()

    async def retire(self, bot_id: str) -> int:
        """Mark the bot retired (once: a second call keeps the first time); when it retired (ms)."""
        await self.redis.hsetnx(bot_key(bot_id), "retired", now_ms())
        return int(await self.redis.hget(bot_key(bot_id), "retired") or 0)

    async def retired_among(self, bot_ids: Iterable[str]) -> list[str]:
        """Which of these bots are retired."""
        ids = list(bot_ids)
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id in ids:
                pipe.hexists(bot_key(bot_id), "retired")
            found = await pipe.execute()
        return [b for b, retired in zip(ids, found, strict=True) if retired]

    async def profiles(self, bot_ids: Iterable[str]) -> list[dict[str, str] | None]:
        """Each bot's profile (the fields of :data:`PROFILE_FIELDS` it has), or None: no such bot."""
        ids = list(bot_ids)
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id in ids:
                pipe.hmget(bot_key(bot_id), PROFILE_FIELDS)
            rows = await pipe.execute()
        return [
            None if row[0] is None else {k: v.decode() for k, v in zip(PROFILE_FIELDS, row, strict=True) if v is not None}
            for row in rows
        ]

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
            async with self.redis.pipeline(transaction=False) as pipe:  # (one GET each: any slots)
                for key in name_keys:
                    pipe.get(key)
                held = await pipe.execute()
            bot_ids = [b.decode() for b in held if b is not None and not b.startswith(b"~")]  # (not reservations)
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
    ) -> tuple[dict[str, str] | None, int, int, int]:
        """The bot holding this token hash (or None), the requests granted from its bucket (up
        to ``wanted``: one for the request at hand, the rest to spend within ``lease_ms``),
        when none is granted, the ms to wait before the next, and the requests the bucket
        holds after the grant."""
        keys = [token_key(token_hash), token_rate_key(token_hash), token_used_key(token_hash)]
        found, granted, wait_ms, left = await self.scripts.run(self._authenticate, keys, [rate_per_ms, burst, wanted, lease_ms])
        return (json.loads(found) if found else None), int(granted), int(wait_ms), int(left)

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

    async def _field_of_each(self, bot_ids: Iterable[str], name: str) -> dict[str, str | None]:
        """One field of each bot's hash (None: not set)."""
        ids = list(bot_ids)
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id in ids:
                pipe.hget(bot_key(bot_id), name)
            stored = await pipe.execute()
        return {b: None if v is None else v.decode() for b, v in zip(ids, stored, strict=True)}

    async def invitation_policies(self, bot_ids: Iterable[str]) -> dict[str, InvitationPolicy]:
        """Each bot's standing answer to invitations (ASK unless it set one)."""
        stored = await self._field_of_each(bot_ids, "invitations")
        return {b: InvitationPolicy(p) if p else InvitationPolicy.ASK for b, p in stored.items()}

    async def set_invitation_policy(self, bot_id: str, policy: InvitationPolicy) -> None:
        await self.redis.hset(bot_key(bot_id), "invitations", policy.value)

    async def challenge_policies(self, bot_ids: Iterable[str]) -> dict[str, ChallengePolicy]:
        """Each bot's standing rule for the challenges made to it (ACCEPT_ANY unless it set one)."""
        stored = await self._field_of_each(bot_ids, "challenges")
        return {b: ChallengePolicy(p) if p else ChallengePolicy.ACCEPT_ANY for b, p in stored.items()}

    async def set_challenge_policy(self, bot_id: str, policy: ChallengePolicy) -> None:
        await self.redis.hset(bot_key(bot_id), "challenges", policy.value)

    async def open_matches(self, bot_id: str) -> list[str]:
        """The matches noted among the bot's open matches (``service.store.keys``: a match may
        be noted where the bot holds no seat, or that ended; MatchService.open_matches checks)."""
        return sorted(m.decode() for m in await self.redis.smembers(bot_matches_key(bot_id)))

    async def count_open_matches(self, bot_id: str) -> int:
        """How many matches are noted among the bot's open matches (see :meth:`open_matches`)."""
        return int(await self.redis.scard(bot_matches_key(bot_id)))

    async def forget_open_matches(self, bot_id: str, match_ids: Iterable[str]) -> None:
        """Drop matches found stale (ended, or not the bot's) from the bot's open matches."""
        await self.redis.srem(bot_matches_key(bot_id), *match_ids)


class RevocationFeed:
    """Follows the revocation channel through the process's event feed (its one pub/sub
    connection, :mod:`service.store.feed`): ``on_revoked(hash)`` for each token revoked
    anywhere, ``on_live(True)`` once subscribed, ``on_live(False)`` when the feed lost its
    connection (revocations may have gone by unheard) until it has subscribed again."""

    #: the watch's owner in the feed
    OWNER = "token-revocations"

    def __init__(self, feed: EventFeed, on_revoked: Callable[[str], None], on_live: Callable[[bool], None]) -> None:
        self._feed = feed
        self._on_revoked = on_revoked
        self._on_live = on_live
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _run(self) -> None:
        backoff = Backoff()
        outage = Outage("Redis, for following token revocations,", log, Backoff.FIRST, Backoff.MOST)
        while True:
            try:
                with self._feed.watch(self.OWNER, counted=False) as watch:
                    await watch.follow(REVOKED_TOKENS)
                    backoff.reset()
                    outage.recovered()
                    self._on_live(True)
                    while True:
                        for item in await watch.next(60.0):
                            if item is RESYNC:
                                self._on_live(False)
                                await watch.ready()
                                self._on_live(True)
                            elif isinstance(item, Notice) and item.payload:
                                self._on_revoked(item.payload)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - the feed could not subscribe (Redis away): again
                self._on_live(False)
                outage.after(error, functools.partial(log.warning, "could not follow token revocations (%r); trying again", error))
            await backoff.wait()

