"""Bot registration and authentication.

A token is 256 random bits, shown once; the server keeps only its SHA-256. A request's token
is hashed, looked up, and the stored hash compared in constant time. The same lookup takes
one request from the token's bucket, so the rate limit holds across every API process.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import unicodedata

from service.errors import BadInput, Forbidden, RateLimited, Unauthenticated
from service.matches import Caller
from service.settings import Settings
from service.store import BotStore

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


class BotService:
    def __init__(self, bots: BotStore, settings: Settings) -> None:
        self.bots = bots
        self.settings = settings

    async def register(self, name: str, secret: str | None = None) -> tuple[str, dict[str, str]]:
        """A new bot and its token: ``(token, {"id", "name"})``."""
        required = self.settings.registration_secret
        if required is not None and not (
            isinstance(secret, str) and hmac.compare_digest(secret.encode(), required.encode())
        ):
            raise Forbidden("registration is closed: pass the server's registration secret as `secret`")
        name = self._valid_name(name)
        bot_id = secrets.token_hex(8)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        if not await self.bots.register(bot_id, name, hash_token(token)):
            raise BadInput(f"the name {name!r} is taken (names are case-insensitive): choose another")
        return token, {"id": bot_id, "name": name}

    def _valid_name(self, name: object) -> str:
        limit = self.settings.bot_name_max_length
        if not isinstance(name, str):
            raise BadInput("name must be a string")
        name = unicodedata.normalize("NFC", name).strip()
        if not name:
            raise BadInput("name must not be empty")
        if len(name) > limit:
            raise BadInput(f"name is {len(name)} characters long; at most {limit} are allowed")
        if not all(ch.isprintable() for ch in name):
            raise BadInput("name may hold only printable characters")
        return name

    async def authenticate(self, token: str | None) -> Caller | None:
        """The bot a token belongs to (None without a token); takes one request from its bucket."""
        if token is None:
            return None
        if len(token) > 256:
            raise Unauthenticated("the token is not valid: use the token registerBot gave you")
        digest = hash_token(token)
        s = self.settings
        found, wait_ms = await self.bots.by_token(digest, s.rate_limit_per_second / 1000, s.rate_limit_burst)
        if found is None or not hmac.compare_digest(found["hash"], digest):
            raise Unauthenticated("the token is not valid: use the token registerBot gave you")
        if wait_ms > 0:
            raise RateLimited(wait_ms / 1000)
        return Caller(found["id"], found["name"])
