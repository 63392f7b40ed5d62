"""The rate limit's headers on every HTTP answer to a request that carries a token, GraphQL
and REST alike, as draft-ietf-httpapi-ratelimit-headers-07 names them:

- ``RateLimit-Limit``: the token's burst (``Settings.rate_limit_burst``), the most requests
  it may send at once; it refills at ``rate_limit_per_second``;
- ``RateLimit-Remaining``: requests left now, as this API process knows them (see
  :class:`service.domain.bots.Allowance`: other processes' use since it last asked Redis is
  not in it);
- ``RateLimit-Reset``: seconds until the bucket would be full again;
- ``Retry-After`` on a refusal (``RATE_LIMITED``): the error's ``retryAfterSeconds`` rounded
  up to whole seconds (:func:`service.errors.retry_after_header`).

A request without a token is not limited by a token's bucket and carries none of them. The
authentication fills the request's :class:`Allowance`; this middleware writes it out."""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.domain.bots import Allowance
from service.errors import retry_after_header

#: the headers a browser's script may read from a cross-origin answer (CORS)
EXPOSED = ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After"]


def request_allowance(request_or_scope: Any) -> Allowance | None:
    """The Allowance the middleware gave this HTTP request (None: not an HTTP request)."""
    scope = request_or_scope if isinstance(request_or_scope, dict) else getattr(request_or_scope, "scope", None)
    state = scope.get("state") if isinstance(scope, dict) else None
    found = state.get("allowance") if isinstance(state, dict) else None
    return found if isinstance(found, Allowance) else None


class RateLimitHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        allowance = Allowance()
        scope.setdefault("state", {})["allowance"] = allowance

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start" and allowance.limit:
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"retry-after"]
                headers += [
                    (b"ratelimit-limit", str(allowance.limit).encode()),
                    (b"ratelimit-remaining", str(allowance.remaining).encode()),
                    (b"ratelimit-reset", str(allowance.reset_seconds).encode()),
                ]
                if allowance.retry_after_seconds is not None:
                    headers.append((b"retry-after", retry_after_header(allowance.retry_after_seconds).encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)
