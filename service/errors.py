"""The service's errors: one hierarchy, each with the API's ``extensions.code``, mapped in
one place (:func:`service_error`) from the engine's typed errors.

The GraphQL layer (``service.api.graphql.errors``) and the REST mirror (``service.rest``) both
turn a :class:`ServiceError` into their wire form from ``code``, ``message`` and
``http_status``; nothing else decides what a client sees.
"""

from __future__ import annotations

from typing import Any

from wizard import (
    ConfigError,
    IllegalMoveError,
    InvalidMoveError,
    MatchFinishedError,
    NotYourTurnError,
    WizardError,
)


class ServiceError(Exception):
    code = "BAD_INPUT"
    http_status = 400

    def __init__(self, message: str, **extensions: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extensions = extensions

    def to_dict(self) -> dict[str, Any]:
        """The REST form: ``{"code", "message", ...extras}``."""
        return {"code": self.code, "message": self.message, **self.extensions}

    def graphql_extensions(self) -> dict[str, Any]:
        return {"code": self.code, **self.extensions}


class Unauthenticated(ServiceError):
    code = "UNAUTHENTICATED"
    http_status = 401


class Forbidden(ServiceError):
    code = "FORBIDDEN"
    http_status = 403


class NotFound(ServiceError):
    code = "NOT_FOUND"
    http_status = 404


class BadInput(ServiceError):
    code = "BAD_INPUT"
    http_status = 400


class NotYourTurn(ServiceError):
    code = "NOT_YOUR_TURN"
    http_status = 409


class IllegalMove(ServiceError):
    code = "ILLEGAL_MOVE"
    http_status = 422


class StaleVersion(ServiceError):
    code = "STALE_VERSION"
    http_status = 409


class MatchNotActive(ServiceError):
    code = "MATCH_NOT_ACTIVE"
    http_status = 409


class RateLimited(ServiceError):
    code = "RATE_LIMITED"
    http_status = 429

    def __init__(self, retry_after_seconds: float, what: str = "too many requests for this token") -> None:
        wait = max(0.001, round(retry_after_seconds, 3))
        super().__init__(f"{what}: wait {wait} s before the next one", retryAfterSeconds=wait)
        self.retry_after_seconds = wait


class LimitExceeded(ServiceError):
    code = "LIMIT_EXCEEDED"
    http_status = 413


class BodyTooLarge(LimitExceeded):
    """A request body over the limit, found while it streams in. A ServiceError, so that a
    handler reading the body (the REST mirror) answers it like any other, with 413."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"the request body is over {max_bytes} bytes: send less")


def service_error(error: Exception) -> ServiceError | None:
    """The API error for ``error``, or None when it is not the client's doing (a bug: masked)."""
    if isinstance(error, ServiceError):
        return error
    if isinstance(error, IllegalMoveError):
        legal = [move.to_dict() for move in error.legal]
        return IllegalMove(str(error), legalMoves=legal)
    if isinstance(error, MatchFinishedError):
        return MatchNotActive(f"{error}; the match is over")
    if isinstance(error, NotYourTurnError):
        return NotYourTurn(str(error))
    if isinstance(error, InvalidMoveError | ConfigError | WizardError):
        return BadInput(str(error))
    return None
