"""The service's errors: one hierarchy, each with the API's ``extensions.code``, mapped in
one place (:func:`service_error`) from the engine's typed errors.

The GraphQL layer (``service.api.graphql.errors``) and the REST mirror (``service.rest``) both
turn a :class:`ServiceError` into their wire form from ``code``, ``message`` and
``http_status``; nothing else decides what a client sees.
"""

from __future__ import annotations

import math
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import redis.exceptions
import sqlalchemy.exc

from service.store.archive import ArchiveUnavailable
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


class MethodNotAllowed(ServiceError):
    """A REST route asked with a method it does not take (the answer's ``Allow`` says which)."""

    code = "METHOD_NOT_ALLOWED"
    http_status = 405


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


class TournamentNotOpen(ServiceError):
    """Joining a tournament, or answering its invitation, once it has started or ended."""

    code = "TOURNAMENT_NOT_OPEN"
    http_status = 409


class TournamentOver(ServiceError):
    """Cancelling a tournament that has already finished or been cancelled."""

    code = "TOURNAMENT_OVER"
    http_status = 409


class TournamentCannotRun(ServiceError):
    """A tournament refused at creation: it could never have the entrants it needs."""

    code = "TOURNAMENT_CANNOT_RUN"
    http_status = 422


class TournamentBusy(ServiceError):
    """Too many entrants changing at once for an answer to go through: try again."""

    code = "TOURNAMENT_BUSY"
    http_status = 409


class InvitationAnswered(ServiceError):
    """The opposite answer to an invitation already answered (accepting one declined, ...)."""

    code = "INVITATION_ANSWERED"
    http_status = 409


class ChallengeNotOpen(ServiceError):
    """An answer to, or a withdrawal of, a challenge no longer OPEN (accepted, declined,
    expired, cancelled)."""

    code = "CHALLENGE_NOT_OPEN"
    http_status = 409


class ChallengeAnswered(ServiceError):
    """A bot answering a challenge it has answered otherwise already (an answer is final)."""

    code = "CHALLENGE_ANSWERED"
    http_status = 409


class ChallengeRefused(ServiceError):
    """A challenge naming a bot whose challenge policy refuses it (REFUSE_ALL, or REFUSE_RATED
    for a rated one)."""

    code = "CHALLENGE_REFUSED"
    http_status = 403


class RateLimited(ServiceError):
    code = "RATE_LIMITED"
    http_status = 429

    def __init__(self, retry_after_seconds: float, what: str = "too many requests for this token") -> None:
        wait = max(0.001, round(retry_after_seconds, 3))
        super().__init__(f"{what}: wait {wait} s before the next one", retryAfterSeconds=wait)
        self.retry_after_seconds = wait


class Unavailable(ServiceError):
    """Redis or the archive's database is away (a restart, an outage): nothing was done, or
    nothing that a retry with the same ``expectedVersion`` would do twice. Try again after
    ``retryAfterSeconds``."""

    code = "UNAVAILABLE"
    http_status = 503

    def __init__(self, what: str, retry_after_seconds: float = 1.0) -> None:
        wait = max(0.001, round(retry_after_seconds, 3))
        super().__init__(f"{what} is unavailable for a moment: try again in {wait} s", retryAfterSeconds=wait)
        self.retry_after_seconds = wait


#: what a dependency that is away raises: Redis's client (BusyLoadingError, a Redis still
#: reading its append-only file, is a ConnectionError; on a cluster, a failover or a slot's
#: migration that outlasted the client's attempts ends in a ClusterError, a TRYAGAIN answer
#: too), the archive's (SQLAlchemy wraps asyncpg's), and the socket's own (a refused or reset
#: connection, a timed-out one)
REDIS_AWAY = (
    redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, redis.exceptions.ClusterError,
    redis.exceptions.TryAgainError,
)
ARCHIVE_AWAY = (
    ArchiveUnavailable, sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError, asyncpg.InterfaceError,
    asyncpg.CannotConnectNowError, asyncpg.ConnectionDoesNotExistError, ConnectionError, TimeoutError,
)


def unavailable_dependency(error: BaseException) -> str | None:
    """Which dependency ``error`` says is away ("Redis", "the archive"), or None."""
    if isinstance(error, REDIS_AWAY):
        return "Redis"
    if isinstance(error, ARCHIVE_AWAY):
        return "the archive"
    return None


def retry_after_header(seconds: float) -> str:
    """HTTP's ``Retry-After`` for a wait of ``seconds`` (an error's ``retryAfterSeconds``): the
    same wait rounded up to whole seconds, as the header allows no fraction, and at least 1."""
    return str(max(1, math.ceil(seconds)))


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
        # shaped as Match.legalMoves (GraphQL's Move): every field, the unset ones null
        legal = [
            {"bid": m.bid, "card": m.card, "trump": None if m.trump is None else m.trump.name} for m in error.legal
        ]
        return IllegalMove(str(error), legalMoves=legal)
    if isinstance(error, MatchFinishedError):
        return MatchNotActive(f"{error}; the match is over")
    if isinstance(error, NotYourTurnError):
        return NotYourTurn(str(error))
    if isinstance(error, InvalidMoveError | ConfigError | WizardError):
        return BadInput(str(error))
    away = unavailable_dependency(error)
    if away is not None:
        return Unavailable(f"the server's {'database' if away == 'the archive' else away}")
    return None


def status_of(code: str) -> int:
    """The HTTP status of an error code (any code not of this hierarchy is the server's: 500)."""
    statuses: dict[str, int] = {}
    pending: list[type[ServiceError]] = [ServiceError]
    while pending:
        kind = pending.pop()
        statuses.setdefault(kind.code, kind.http_status)
        pending += kind.__subclasses__()
    return statuses.get(code, 500)


def coded_error(code: str, message: str, extensions: dict[str, Any] | None = None) -> ServiceError:
    """The error a GraphQL result reports by its code, message and extensions, to be answered
    in another form (REST's)."""
    error = ServiceError(message, **(extensions or {}))
    error.code, error.http_status = code, status_of(code)
    return error
