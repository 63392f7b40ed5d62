"""The HTTP server's own limits on slow clients, and the open-file limit of its process.

uvicorn bounds only the idle time between requests (``timeout_keep_alive``): a client that
sends its headers, or its body, a byte every few seconds holds its connection forever.
:class:`SlowClientProtocol` is uvicorn's httptools protocol with two deadlines more:

- the headers of a request must be whole within ``header_timeout`` seconds of the first
  byte of the request (of the connection, for its first request: a connection that never
  sends anything is closed then too, without an answer);
- its body within ``body_timeout`` seconds of the end of its headers.

A request past either deadline is answered ``408`` with the API's error (code
``LIMIT_EXCEEDED``) and its connection closed. Time the server itself holds the reading
back (a pipelined request waiting for the one before it, a body the app has not read yet)
does not count. WebSockets are untouched once upgraded, and so is a request the app is
still answering (a long poll).

``serve`` and ``up`` pass it to uvicorn as ``http=slow_client_protocol(settings)``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import resource
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from service.errors import LimitExceeded
from service.settings import Settings

log = logging.getLogger("wizard_arena.http")


class RequestTooSlow(LimitExceeded):
    """A request whose headers or body did not arrive in time."""

    http_status = 408


class SlowClientProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools) with deadlines on reading each request."""

    def __init__(self, *args: Any, header_timeout: float, body_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        #: what the connection waits for from the client: "headers", "body", or "" (nothing:
        #: a response is being made, or the connection is idle under keep-alive)
        self._awaiting = "headers"
        self._started = False  # a byte of the awaited request has come
        self._deadline: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ the deadlines
    def _arm(self) -> None:
        seconds = self.header_timeout if self._awaiting == "headers" else self.body_timeout
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing() or not self._awaiting:
            return
        cycle = self.cycle  # in "body": the request's own; in "headers": the one before, if any
        if self.flow.read_paused or (self._awaiting == "body" and cycle.waiting_for_100_continue):
            self._arm()  # the server holds the reading back, not the client: not its time
            return
        if self._awaiting == "headers":
            if self._started and (cycle is None or cycle.response_complete):  # never into another answer
                self._answer_408()
        else:
            if not cycle.response_started:
                self._answer_408()
            cycle.disconnected = True  # the app, if it still waits for the body, hears of a disconnect
            cycle.message_event.set()
        self.transport.close()

    def _answer_408(self) -> None:
        if self._awaiting == "headers":
            what = f"its headers took longer than {self.header_timeout:g} s to arrive"
        else:
            what = f"its body took longer than {self.body_timeout:g} s to arrive after its headers"
        error = RequestTooSlow(f"request refused: {what}; send each request whole, without pauses")
        api = getattr(self, "url", b"").startswith(b"/api/")
        body = json.dumps(
            {"error": error.to_dict()} if api
            else {"errors": [{"message": error.message, "extensions": error.graphql_extensions()}]}
        ).encode()
        head = [STATUS_LINE[error.http_status]]
        head += [name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers]
        head += [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        log.debug("%s: %s", f"{self.client[0]}:{self.client[1]}" if self.client else "a client", error.message)

    # ------------------------------------------------------------- uvicorn's protocol
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # Most requests arrive whole in one read: a deadline is armed only for one that did not.
        if self._awaiting and self._deadline is None and not self.transport.is_closing():
            self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._awaiting != "headers":  # the next request on a kept-alive connection
            self._disarm()
            self._awaiting = "headers"
        self._started = True

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._disarm()
        self._awaiting = "body"

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()
        self._awaiting = ""
        self._started = False

    def handle_websocket_upgrade(self) -> None:
        self._disarm()
        self._awaiting = ""  # a WebSocket now: its own protocol, its own pings and limits
        super().handle_websocket_upgrade()


def slow_client_protocol(settings: Settings) -> functools.partial[SlowClientProtocol]:
    """The protocol for ``uvicorn.run(http=...)`` with the settings' deadlines (a partial of
    a module-level class: it pickles into ``serve --workers N``'s processes)."""
    return functools.partial(
        SlowClientProtocol,
        header_timeout=settings.http_header_timeout_seconds,
        body_timeout=settings.http_body_timeout_seconds,
    )


def raise_open_files_limit() -> tuple[int, int]:
    """Raise this process's soft limit on open files to its hard limit (every long poll and
    subscription holds a socket; the usual soft limit, 1024, is soon reached); the limits
    (soft, hard) now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):  # e.g. a hard limit over the kernel's nr_open
            log.warning("could not raise the open-file limit from %d to %d", soft, target)
    return resource.getrlimit(resource.RLIMIT_NOFILE)
