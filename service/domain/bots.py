"""Bot registration and authentication.

A token is 256 random bits, shown once; the server keeps only its SHA-256. A request's token
is hashed, looked up, and the stored hash compared in constant time. The same lookup takes
requests from the token's bucket in Redis, so the rate limit holds across every API process.

A busy token does not cost a Redis round trip per request: the lookup leases a few requests
from the bucket at once (``Settings.rate_limit_lease_max``), and this process spends them on
the token's next requests within ``Settings.rate_limit_lease_ms``; the bucket counts them as
taken until the lease has surely lapsed (see ``store.AUTHENTICATE``), so leasing can only make
the shared limit stricter, never looser. The bot a token hash names never changes once
registered, so keeping it with the lease is safe. A lease's size follows the token's demand:
twice what the last lease served when that was used up, what it served when it lapsed.

A bot has several named tokens (``create_token``, ``revoke_token``; registration gives the
first, named "registration"). A revoked token stops working at once in every API process:
revoking deletes its hash in Redis and publishes it on a channel every API process follows
(``store.bots.RevocationFeed``; on a Redis Cluster, on every node, so that it has reached every
process's feed before revokeToken answers), and each process drops its lease on hearing it. A process
spends leases only while it follows that channel: while the connection is down (and until it
is first up) it asks Redis on every request, as with ``rate_limit_lease_max = 1``, and when it
comes back it drops every lease it had, since it may have missed a revocation meanwhile.

Each request's share of the limit is reported in an :class:`Allowance` for the HTTP answer's
``RateLimit-*`` headers: what this process knows of the token's bucket (see ``remaining``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
import secrets
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from service.domain import bot_names
from service.domain.matches import Caller
from service.errors import BadInput, Forbidden, LimitExceeded, NotFound, RateLimited, Unauthenticated
from service.model.live_match import HouseBotKind
from service.settings import Settings
from service.store.bots import BotStore, Registration, RevocationFeed, TokenAdded, TokenRevoked
from service.store.feed import EventFeed

TOKEN_PREFIX = "wza_"
#: the name of the token registerBot gives
REGISTRATION_TOKEN_NAME = "registration"
#: longest token name, bot description and homepage
TOKEN_NAME_MAX = 40
DESCRIPTION_MAX = 500
HOMEPAGE_MAX = 300
#: the most tokens a bot may have, whatever ``Settings.tokens_per_bot`` says (a listing's bound)
MAX_TOKENS_PER_BOT = 1000
#: how long a process remembers a revoked token's hash, for lookups under way as it is revoked
REVOKED_MEMORY_SECONDS = 60.0


@dataclass(slots=True)
class Allowance:
    """A request's place in its token's rate limit, for the answer's headers.

    ``remaining`` is what this API process knows: the requests it leased and has not spent,
    plus what the token's shared bucket held when it last asked Redis. Requests made through
    other API processes since then are not counted, so it is an upper bound of what may be
    sent at once; ``reset_seconds`` is when the bucket would be full again at that count."""

    limit: int = 0
    remaining: int = 0
    reset_seconds: int = 0
    #: set when the request was refused: the seconds to wait (the error's retryAfterSeconds)
    retry_after_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """One of a bot's tokens, without its secret (times in ms since the epoch)."""

    id: str
    name: str
    created_ms: int
    last_used_ms: int | None


@dataclass(frozen=True, slots=True)
class BotProfile:
    """What a ``Bot`` shows besides its id and name. House bots have a profile too: ``house``
    names their kind."""

    id: str
    name: str
    created_ms: int | None = None
    description: str | None = None
    homepage: str | None = None
    retired_ms: int | None = None
    house: str | None = None


def house_kind_of_id(bot_id: str) -> str | None:
    """The kind of a house bot by its id (``house-heuristic``, or a tournament's entrant
    ``house-heuristic-3``), or None: a registered bot (whose ids are hex, never ``house-``)."""
    if not bot_id.startswith("house-"):
        return None
    for kind in HouseBotKind:
        base = f"house-{kind.value.lower()}"
        if bot_id == base or (bot_id.startswith(base + "-") and bot_id[len(base) + 1 :].isdigit()):
            return kind.value
    return None


def house_bot_profile(bot_id: str) -> BotProfile | None:
    """The profile of a house bot by its id (``house-heuristic``: what it is rated as), or None."""
    for kind in HouseBotKind:
        if bot_id == f"house-{kind.value.lower()}":
            return BotProfile(bot_id, f"House {kind.value.title()}", house=kind.value)
    return None


def to_datetime(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (None when absent)."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("the Authorization header must be `Bearer <token>`")
    return token.strip()


class Lease:
    """Requests leased from a token's bucket, left to spend in this process until ``until``."""

    __slots__ = ("bucket_left", "caller", "left", "served", "token_hash", "until")

    def __init__(self, caller: Caller, token_hash: str, left: int, until: float, bucket_left: int = 0) -> None:
        self.caller = caller
        self.token_hash = token_hash
        self.left = left
        self.until = until
        self.served = 0
        #: what the shared bucket held just after this lease was taken from it
        self.bucket_left = bucket_left


class BotService:
    #: leases kept at most (a lease is small; lapsed ones are dropped first)
    MAX_LEASES = 20_000

    def __init__(self, bots: BotStore, settings: Settings, feed: EventFeed) -> None:
        self.bots = bots
        self.settings = settings
        self._leases: dict[str, Lease] = {}
        #: the lookup under way for a token (by its hash), which its other requests wait for
        self._lookups: dict[str, asyncio.Future[Exception | None]] = {}
        #: one build of the look-alike index at a time in this process
        self._indexing = asyncio.Lock()
        #: whether this process follows the revocation channel now (leases are spent only then)
        self._following_revocations = False
        #: hashes of tokens revoked lately, by when this process heard of it (monotonic)
        self._revoked: dict[str, float] = {}
        self._revocations = RevocationFeed(feed, self._on_revoked, self._on_following)

    # ------------------------------------------------------------------ revocation
    def _on_revoked(self, digest: str) -> None:
        self._leases.pop(digest, None)
        now = time.monotonic()
        self._revoked[digest] = now
        if len(self._revoked) > 1000:
            for key in [k for k, at in self._revoked.items() if now - at > REVOKED_MEMORY_SECONDS]:
                del self._revoked[key]

    def _on_following(self, following: bool) -> None:
        if following and not self._following_revocations:
            self._leases.clear()  # a revocation may have gone by unheard while not following
        self._following_revocations = following

    async def close(self) -> None:
        await self._revocations.close()

    async def register(self, name: str, secret: str | None = None, address: str = "unknown") -> tuple[str, dict[str, str]]:
        """A new bot and its token: ``(token, {"id", "name"})``. The name is kept in NFKC and
        refused when it, or a name that looks like it, is taken (:mod:`service.bot_names`). A
        client address may register ``Settings.registrations_per_address_per_hour`` bots an hour."""
        required = self.settings.registration_secret
        if required is not None and not (
            isinstance(secret, str) and hmac.compare_digest(secret.encode(), required.encode())
        ):
            raise Forbidden("registration is closed: pass the server's registration secret as `secret`")
        name, lookalike = self._valid_name(name)
        per_hour = self.settings.registrations_per_address_per_hour
        wait_ms = await self.bots.take_registration(address, per_hour)
        if wait_ms:
            raise RateLimited(wait_ms / 1000, f"{per_hour} bots were registered from your address in the last hour")
        bot_id = secrets.token_hex(8)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        for _ in range(3):  # (the index is missing only until one build has finished)
            outcome = await self.bots.register(
                bot_id, name, hash_token(token), lookalike, bot_names.KEY_VERSION, secrets.token_hex(8),
                REGISTRATION_TOKEN_NAME,
            )
            if outcome is not Registration.INDEX_NOT_BUILT:
                break
            async with self._indexing:  # (a registration that waited here finds it built)
                if await self.bots.lookalike_index_version() != bot_names.KEY_VERSION:
                    await self.bots.index_lookalikes(bot_names.lookalike_key, bot_names.KEY_VERSION)
        if outcome is not Registration.REGISTERED:
            await self.bots.give_back_registration(address)
        if outcome is Registration.TAKEN:
            raise BadInput(
                f"the name {name!r} is taken, or too similar to an existing bot's name (names are compared "
                "case-insensitively, and letters that look alike, as Cyrillic а and Latin a or 1 and l, count as the "
                "same): choose another"
            )
        if outcome is not Registration.REGISTERED:
            raise RuntimeError(f"the bot name index was not built for {bot_names.KEY_VERSION}")
        return token, {"id": bot_id, "name": name}

    def _valid_name(self, name: object) -> tuple[str, str]:
        """The name as registered (NFKC, trimmed) and its look-alike key, or BadInput."""
        limit = self.settings.bot_name_max_length
        if not isinstance(name, str):
            raise BadInput("name must be a string")
        name = bot_names.normalized(name)
        if not name:
            raise BadInput("name must not be empty")
        if len(name) > limit:
            raise BadInput(f"name is {len(name)} characters long (in NFKC); at most {limit} are allowed")
        if not all(ch.isprintable() for ch in name):
            raise BadInput("name may hold only printable characters")
        lookalike = bot_names.lookalike_key(name)
        if not lookalike:
            raise BadInput("name must show at least one visible character")
        if bot_names.imitates_house_bot(lookalike):
            raise BadInput(
                f"names that start with 'House' (in any spelling that looks like it) are kept for the server's house "
                f"bots, such as 'House Random #1': choose another than {name!r}"
            )
        return name, lookalike

    async def get(self, bot_id: str) -> dict[str, str] | None:
        """A registered bot (``{"id", "name", "created"}``), or None."""
        return await self.bots.get(bot_id) if isinstance(bot_id, str) and 0 < len(bot_id) <= 64 else None

    async def authenticate(self, token: str | None, allowance: Allowance | None = None) -> Caller | None:
        """The bot a token belongs to (None without a token); takes one request from its bucket,
        and reports the token's standing in ``allowance`` (when given, and a token was).

        The requests of one token share one lookup at a time in this process: those that
        arrive while it is under way wait for it and spend the lease it brings, so a burst of
        concurrent requests costs a few round trips and takes from the bucket no more than
        this process will spend."""
        if token is None:
            return None
        if len(token) > 256:
            raise Unauthenticated("the token is not valid: use the token registerBot gave you")
        digest = hash_token(token)
        try:
            return self._admitted(await self._admit(digest), allowance)
        except RateLimited as refused:
            if allowance is not None:
                allowance.limit = self.settings.rate_limit_burst
                allowance.remaining = 0
                allowance.retry_after_seconds = refused.retry_after_seconds
                allowance.reset_seconds = math.ceil(self.settings.rate_limit_burst / self.settings.rate_limit_per_second)
            raise

    def _admitted(self, lease: Lease, allowance: Allowance | None) -> Caller:
        if allowance is not None:
            s = self.settings
            allowance.limit = s.rate_limit_burst
            allowance.remaining = min(s.rate_limit_burst, lease.left + lease.bucket_left)
            allowance.reset_seconds = math.ceil((s.rate_limit_burst - allowance.remaining) / s.rate_limit_per_second)
        return lease.caller

    async def _admit(self, digest: str) -> Lease:
        """The lease this request was served from (spent by one for it)."""
        self._revocations.start()
        if self.settings.rate_limit_lease_max == 1 or not self._following_revocations:  # ask Redis for this request
            lease = await self._lookup(digest, 1, time.monotonic())
            lease.left = 0  # (spent on this request)
            return lease
        while True:
            spent = self._spend(digest)
            if spent is not None:
                return spent
            lookup = self._lookups.get(digest)
            if lookup is None:  # (a lookup leaves the map before it is done: see _renew)
                lookup = self._lookups[digest] = asyncio.ensure_future(self._renew(digest))
            # shielded: a request that goes away does not cut short the lookup others wait on
            error = await asyncio.shield(lookup)
            if error is not None:
                raise error.with_traceback(None)  # the same answer for every request that waited

    def _spend(self, digest: str) -> Lease | None:
        """One request from the token's lease in this process, if any is left in time."""
        lease = self._leases.get(digest)
        if lease is None or lease.left <= 0 or time.monotonic() >= lease.until:
            return None
        if not hmac.compare_digest(lease.token_hash, digest):
            return None
        lease.left -= 1
        lease.served += 1
        return lease

    async def _renew(self, digest: str) -> Exception | None:
        """Lease the token's next requests (None, or the lookup's error): twice what the last
        lease served when that was used up, what it served when it lapsed."""
        now = time.monotonic()
        lease = self._leases.get(digest)
        most = self.settings.rate_limit_lease_max
        wanted = 1 if lease is None else min(most, max(1, lease.served * 2 if lease.left <= 0 else lease.served))
        try:
            self._keep(digest, await self._lookup(digest, wanted, now))
        except Exception as error:  # noqa: BLE001 - the answer to every request that waited
            return error
        finally:
            # Here, not in a done callback: a request that finds the lease spent must find no
            # finished lookup to wait on, or its loop would never yield to the event loop.
            self._lookups.pop(digest, None)
        return None

    async def _lookup(self, digest: str, wanted: int, now: float) -> Lease:
        """Up to ``wanted`` requests from the token's bucket in Redis, as a lease that lapses
        ``rate_limit_lease_ms`` after ``now`` (taken before the lookup was sent, so that it
        lapses here before Redis stops counting it)."""
        s = self.settings
        found, granted, wait_ms, bucket_left = await self.bots.by_token(
            digest, s.rate_limit_per_second / 1000, s.rate_limit_burst, wanted, s.rate_limit_lease_ms
        )
        if found is None or not hmac.compare_digest(found["hash"], digest) or digest in self._revoked:
            raise Unauthenticated("the token is not valid (never given, or revoked): use one of your bot's tokens")
        if granted <= 0:
            raise RateLimited(wait_ms / 1000)
        if not found.get("tid"):  # a token from before named tokens: listed with its bot from now on
            await self.bots.adopt_token(found["id"], digest, REGISTRATION_TOKEN_NAME)
        return Lease(Caller(found["id"], found["name"]), found["hash"], granted, now + s.rate_limit_lease_ms / 1000, bucket_left)

    def _keep(self, digest: str, lease: Lease) -> None:
        if digest in self._revoked:  # revoked while its lookup was under way
            return
        self._leases.pop(digest, None)  # re-inserted last: the oldest are dropped first
        self._leases[digest] = lease
        if len(self._leases) > self.MAX_LEASES:
            now = time.monotonic()
            for key in [k for k, v in self._leases.items() if v.until <= now]:
                del self._leases[key]
            while len(self._leases) > self.MAX_LEASES:
                del self._leases[next(iter(self._leases))]

    # ------------------------------------------------------------------ tokens and profiles
    async def create_token(self, caller: Caller, name: str) -> tuple[str, TokenInfo]:
        """Another token for the caller's bot, named ``name``: ``(token, info)``; the token is
        shown this once (only its hash is kept). Up to ``Settings.tokens_per_bot`` per bot."""
        name = _token_name(name)
        if any(t.name == name for t in await self.tokens(caller)):
            raise BadInput(f"you already have a token named {name!r}: choose another name, or revoke that one first")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token_id = secrets.token_hex(8)
        most = min(self.settings.tokens_per_bot, MAX_TOKENS_PER_BOT)
        outcome, created = await self.bots.add_token(caller.bot_id, caller.name, hash_token(token), token_id, name, most)
        if outcome is TokenAdded.TOO_MANY:
            raise LimitExceeded(f"a bot may have {most} tokens at once: revoke one you no longer use (revokeToken)")
        if outcome is TokenAdded.RETIRED:
            raise Forbidden("a retired bot gets no new tokens")
        return token, TokenInfo(token_id, name, created, None)

    async def tokens(self, caller: Caller) -> list[TokenInfo]:
        """The caller's bot's tokens, oldest first (never their secrets)."""
        return [
            TokenInfo(str(t["id"]), str(t["name"]), int(t["created"]), t["used"])  # type: ignore[call-overload, arg-type]
            for t in await self.bots.tokens(caller.bot_id)
        ]

    async def revoke_token(self, caller: Caller, token_id: str) -> None:
        """Revoke one of the caller's bot's tokens (any but its last): it stops working at once,
        in every API process."""
        outcome = await self.bots.revoke_token(caller.bot_id, str(token_id)[:64])
        if outcome is TokenRevoked.NOT_FOUND:
            raise NotFound(f"your bot has no token with id {token_id!r} (me {{ tokens {{ id name }} }} lists them)")
        if outcome is TokenRevoked.LAST:
            raise BadInput(
                "this is your bot's last token: it cannot be revoked, or the bot could never be reached again. Create "
                "another (createToken) first"
            )

    async def profile(self, bot_id: str) -> BotProfile | None:
        """A bot's profile, a house bot's (``house-heuristic``) included, or None."""
        return (await self.profiles([bot_id]))[0]

    async def profiles(self, bot_ids: list[str]) -> list[BotProfile | None]:
        """Profiles of many bots in one round trip (house bots need none)."""
        houses = [house_bot_profile(b) for b in bot_ids]
        asked = [b for b, h in zip(bot_ids, houses, strict=True) if h is None and 0 < len(b) <= 64]
        found = dict(zip(asked, await self.bots.profiles(asked), strict=True)) if asked else {}
        out: list[BotProfile | None] = []
        for bot_id, house in zip(bot_ids, houses, strict=True):
            row = found.get(bot_id)
            out.append(house if house is not None else None if row is None else BotProfile(
                bot_id, row["name"], int(row["created"]) if "created" in row else None, row.get("description"),
                row.get("homepage"), int(row["retired"]) if "retired" in row else None,
            ))
        return out

    async def update(self, caller: Caller, description: str | None, homepage: str | None) -> BotProfile:
        """Set the caller's bot's description and homepage (a field left None stays as it is;
        an empty string clears it)."""
        fields: dict[str, str] = {}
        if description is not None:
            description = description.strip()
            if len(description) > DESCRIPTION_MAX:
                raise BadInput(f"description is {len(description)} characters long; at most {DESCRIPTION_MAX} are allowed")
            if not all(ch.isprintable() or ch in "\n\t" for ch in description):
                raise BadInput("description may hold only printable characters, new lines and tabs")
            fields["description"] = description
        if homepage is not None:
            fields["homepage"] = _homepage(homepage)
        if fields:
            await self.bots.update_profile(caller.bot_id, fields)
        found = await self.profile(caller.bot_id)
        if found is None:
            raise NotFound("your bot is gone")
        return found

    async def retire(self, caller: Caller) -> BotProfile:
        """Retire the caller's bot, for good: it can no longer create or join matches or
        tournaments, nor be entered in one, nor get new tokens. Its tokens still read (``me``,
        its matches) and move in the matches it already sits in, so they end as played; its
        name, history and ratings stay, marked retired. Retiring again changes nothing."""
        await self.bots.retire(caller.bot_id)
        found = await self.profile(caller.bot_id)
        if found is None:
            raise NotFound("your bot is gone")
        return found


def _token_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise BadInput("a token's name must not be empty: name it after where it is used (\"laptop\", \"ci\")")
    name = name.strip()
    if len(name) > TOKEN_NAME_MAX or not all(ch.isprintable() for ch in name):
        raise BadInput(f"a token's name is 1 to {TOKEN_NAME_MAX} printable characters")
    return name


def _homepage(url: str) -> str:
    """A homepage as given (trimmed; empty clears it) once it is an http(s) URL with a host."""
    url = url.strip()
    if not url:
        return ""
    if len(url) > HOMEPAGE_MAX:
        raise BadInput(f"homepage is {len(url)} characters long; at most {HOMEPAGE_MAX} are allowed")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises for a port out of range
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or any(ch.isspace() for ch in url):
        raise BadInput(f"homepage must be an http:// or https:// URL, such as https://example.org/my-bot, not {url!r}")
    return url
