"""Per-request context: the services and the caller, authenticated on first use."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from service.api.graphql.loaders import Loaders
from service.api.rate_limit_headers import request_allowance
from service.domain.bots import bearer_token
from service.domain.matches import Caller
from service.domain.services import Services
from service.errors import Unauthenticated

_UNSET: Any = object()


class RequestContext:
    def __init__(self, services: Services, token: str | None, request: Any = None, response: Any = None) -> None:
        self.services = services
        self.request = request
        self.response = response
        self.token = token
        self.connection_params: dict[str, Any] | None = None
        self._caller: Caller | None = _UNSET

    @classmethod
    def for_http(cls, services: Services, request: Any, response: Any) -> RequestContext:
        return cls(services, bearer_token(request.headers.get("authorization")), request, response)

    @cached_property
    def loaders(self) -> Loaders:
        """Batched reads, made when a request first needs them."""
        return Loaders(self.services.ratings, self.services.bots)

    async def optional_caller(self) -> Caller | None:
        """The authenticated bot, or None for a request without a token. Over HTTP once per
        request; over a WebSocket (one context for the whole connection) on every call, so
        that each operation takes its request from the token's rate bucket."""
        if self._caller is _UNSET or self.connection_params is not None:
            token = self.token
            if token is None and self.connection_params is not None:
                given = self.connection_params.get("token")
                if given is not None and not isinstance(given, str):
                    raise Unauthenticated("connection_init's token must be a string")
                token = given
            allowance = None if self.connection_params is not None else request_allowance(self.request)
            self._caller = await self.services.bots.authenticate(token, allowance)
        return self._caller

    @property
    def address(self) -> str:
        """The client's address (a proxy's, unless uvicorn is told to trust its headers)."""
        client = getattr(self.request, "client", None)
        return client.host if client is not None else "unknown"

    def waiter(self, caller: Caller | None) -> str:
        """Whom an open wait counts against (``Settings.max_waits_per_client``): the bot, or
        for a request without a token, the client's address."""
        return caller.bot_id if caller is not None else f"address:{self.address}"

    async def caller(self) -> Caller:
        caller = await self.optional_caller()
        if caller is None:
            raise Unauthenticated("this needs a bot's token: send `Authorization: Bearer <token>` (registerBot gives one)")
        return caller
