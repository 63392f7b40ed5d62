"""The service's log lines: plain text, or one JSON object a line (``ARENA_LOG_FORMAT=json``)
with ``time``, ``level``, ``logger``, ``message``, and, where there is one, the request's id
(``request_id``: the ``X-Request-Id`` the API sends back) and the match's (``match_id``),
which the code in between never passes along: they live in context variables, set by the
API's middleware for a request and by the domain for a match."""

from __future__ import annotations

import logging
import logging.config
import re
import secrets
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import orjson

request_id: ContextVar[str | None] = ContextVar("request_id", default=None)
match_id: ContextVar[str | None] = ContextVar("match_id", default=None)

#: an incoming X-Request-Id the API adopts: short, and only characters safe in a log and a header
REQUEST_ID = re.compile(rb"[A-Za-z0-9._:\-]{1,128}")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def request_id_from(header: bytes | None) -> str:
    """The incoming id when it is well-formed, else a new one (16 hex digits)."""
    if header is not None and REQUEST_ID.fullmatch(header):
        return header.decode()
    return secrets.token_hex(8)


class JsonLines(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request = request_id.get()
        if request is not None:
            line["request_id"] = request
        match = match_id.get()
        if match is not None:
            line["match_id"] = match
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line).decode()


def logging_config(level: str, fmt: str) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` for this process, uvicorn's loggers included (uvicorn
    applies it in each of its ``--workers`` processes too): every line through the root's
    handler, in ``fmt`` (``text`` or ``json``)."""
    formatter: dict[str, Any] = {"()": JsonLines} if fmt == "json" else {"format": TEXT_FORMAT}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"line": formatter},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "line", "stream": "ext://sys.stderr"}},
        "root": {"level": level.upper(), "handlers": ["stderr"]},
        "loggers": {name: {"handlers": [], "propagate": True} for name in ("uvicorn", "uvicorn.error", "uvicorn.access")},
    }


def configure(level: str, fmt: str) -> None:
    logging.config.dictConfig(logging_config(level, fmt))
