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
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time

from service.domain import bot_names
from service.domain.matches import Caller
from service.errors import BadInput, Forbidden, RateLimited, Unauthenticated
from service.settings import Settings
from service.store.bots import BotStore, Registration

TOKEN_PREFIX = "wza_"


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

    __slots__ = ("caller", "left", "served", "token_hash", "until")

    def __init__(self, caller: Caller, token_hash: str, left: int, until: float) -> None:
        self.caller = caller
        self.token_hash = token_hash
        self.left = left
        self.until = until
        self.served = 0


class BotService:
    #: leases kept at most (a lease is small; lapsed ones are dropped first)
    MAX_LEASES = 20_000

    def __init__(self, bots: BotStore, settings: Settings) -> None:
        self.bots = bots
        self.settings = settings
        self._leases: dict[str, Lease] = {}
        #: the lookup under way for a token (by its hash), which its other requests wait for
        self._lookups: dict[str, asyncio.Future[Exception | None]] = {}
        #: one build of the look-alike index at a time in this process
        self._indexing = asyncio.Lock()

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
            outcome = await self.bots.register(bot_id, name, hash_token(token), lookalike, bot_names.KEY_VERSION)
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

    async def authenticate(self, token: str | None) -> Caller | None:
        """The bot a token belongs to (None without a token); takes one request from its bucket.

        The requests of one token share one lookup at a time in this process: those that
        arrive while it is under way wait for it and spend the lease it brings, so a burst of
        concurrent requests costs a few round trips and takes from the bucket no more than
        this process will spend."""
        if token is None:
            return None
        if len(token) > 256:
            raise Unauthenticated("the token is not valid: use the token registerBot gave you")
        digest = hash_token(token)
        if self.settings.rate_limit_lease_max == 1:  # ask Redis on every request
            return (await self._lookup(digest, 1, time.monotonic())).caller
        while True:
            caller = self._spend(digest)
            if caller is not None:
                return caller
            lookup = self._lookups.get(digest)
            if lookup is None:  # (a lookup leaves the map before it is done: see _renew)
                lookup = self._lookups[digest] = asyncio.ensure_future(self._renew(digest))
            # shielded: a request that goes away does not cut short the lookup others wait on
            error = await asyncio.shield(lookup)
            if error is not None:
                raise error.with_traceback(None)  # the same answer for every request that waited

    def _spend(self, digest: str) -> Caller | None:
        """One request from the token's lease in this process, if any is left in time."""
        lease = self._leases.get(digest)
        if lease is None or lease.left <= 0 or time.monotonic() >= lease.until:
            return None
        if not hmac.compare_digest(lease.token_hash, digest):
            return None
        lease.left -= 1
        lease.served += 1
        return lease.caller

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
        found, granted, wait_ms = await self.bots.by_token(
            digest, s.rate_limit_per_second / 1000, s.rate_limit_burst, wanted, s.rate_limit_lease_ms
        )
        if found is None or not hmac.compare_digest(found["hash"], digest):
            raise Unauthenticated("the token is not valid: use the token registerBot gave you")
        if granted <= 0:
            raise RateLimited(wait_ms / 1000)
        return Lease(Caller(found["id"], found["name"]), found["hash"], granted, now + s.rate_limit_lease_ms / 1000)

    def _keep(self, digest: str, lease: Lease) -> None:
        self._leases.pop(digest, None)  # re-inserted last: the oldest are dropped first
        self._leases[digest] = lease
        if len(self._leases) > self.MAX_LEASES:
            now = time.monotonic()
            for key in [k for k, v in self._leases.items() if v.until <= now]:
                del self._leases[key]
            while len(self._leases) > self.MAX_LEASES:
                del self._leases[next(iter(self._leases))]
