"""A small synchronous GraphQL-over-WebSocket client speaking ``graphql-transport-ws``
(https://github.com/enisdenjo/graphql-ws/blob/master/PROTOCOL.md), for the service tests.

One :class:`GraphQLWS` is one connection: :meth:`init` sends ``connection_init`` (with the
token in its payload) and waits for ``connection_ack``; :meth:`subscribe` starts an operation;
:meth:`next` answers the operation's next message (``next``, ``error`` or ``complete``) within
a timeout. Messages of other operations are kept for them; the server's pings get pongs.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import defaultdict, deque
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

PROTOCOL = "graphql-transport-ws"


class Closed(Exception):
    """The server closed the connection; ``code`` and ``reason`` are its close frame's."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(f"connection closed: {code} {reason}")
        self.code = code
        self.reason = reason


class Completed(Exception):
    """The operation ended (``complete``) where a ``next`` was expected."""


class OperationError(Exception):
    """The operation ended with an ``error`` message; ``errors`` is its payload."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(json.dumps(errors))
        self.errors = errors

    @property
    def codes(self) -> list[str | None]:
        return [(e.get("extensions") or {}).get("code") for e in self.errors]


class GraphQLWS:
    def __init__(self, url: str, subprotocols: tuple[str, ...] = (PROTOCOL,), open_timeout: float = 10) -> None:
        self.ws: ClientConnection = connect(
            url, subprotocols=list(subprotocols), proxy=None, open_timeout=open_timeout, compression=None, legacy=True,  # type: ignore[arg-type]
        )
        self._ids = itertools.count(1)
        self._inbox: dict[str | None, deque[dict[str, Any]]] = defaultdict(deque)

    # --------------------------------------------------------------- protocol
    def send(self, message: dict[str, Any]) -> None:
        try:
            self.ws.send(json.dumps(message))
        except ConnectionClosed as error:
            frame = error.rcvd
            raise Closed(None if frame is None else frame.code, "" if frame is None else frame.reason) from None

    def init(self, token: str | None = None, payload: dict[str, Any] | None = None, timeout: float = 10) -> dict[str, Any]:
        """connection_init (``{"token": token}`` unless ``payload`` is given); the connection_ack."""
        if payload is None:
            payload = {} if token is None else {"token": token}
        self.send({"type": "connection_init", "payload": payload})
        return self._take(None, timeout, types=("connection_ack",))

    def subscribe(self, query: str, variables: dict[str, Any] | None = None) -> str:
        op_id = str(next(self._ids))
        self.send({"id": op_id, "type": "subscribe", "payload": {"query": query, "variables": variables or {}}})
        return op_id

    def complete(self, op_id: str) -> None:
        self.send({"id": op_id, "type": "complete"})

    def message(self, op_id: str, timeout: float = 10) -> dict[str, Any]:
        """The operation's next message of any type (next, error, complete)."""
        return self._take(op_id, timeout)

    def next(self, op_id: str, timeout: float = 10) -> dict[str, Any]:
        """The payload (``data``/``errors``) of the operation's next ``next`` message.

        Raises :class:`Completed` or :class:`OperationError` when the operation ends instead."""
        message = self._take(op_id, timeout)
        if message["type"] == "complete":
            raise Completed(op_id)
        if message["type"] == "error":
            raise OperationError(message["payload"])
        assert message["type"] == "next", message
        return message["payload"]  # type: ignore[no-any-return]

    def data(self, op_id: str, field: str, timeout: float = 10) -> dict[str, Any]:
        """``data[field]`` of the operation's next result, which must have no errors."""
        payload = self.next(op_id, timeout)
        assert not payload.get("errors"), payload
        return payload["data"][field]  # type: ignore[no-any-return]

    def wait_closed(self, timeout: float = 10) -> Closed:
        """Wait for the server to close the connection; the close code and reason."""
        end = time.monotonic() + timeout
        while True:
            try:
                self._receive(max(0.0, end - time.monotonic()))
            except Closed as closed:
                return closed

    def close(self) -> None:
        try:
            self.ws.close()
        except ConnectionClosed:  # the server closed it first
            pass

    def __enter__(self) -> GraphQLWS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --------------------------------------------------------------- internals
    def _take(self, op_id: str | None, timeout: float, types: tuple[str, ...] | None = None) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while True:
            queue = self._inbox[op_id]
            if queue:
                message = queue.popleft()
                if types is not None and message["type"] not in types:
                    raise AssertionError(f"expected {types}, got {message}")
                return message
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no message for operation {op_id!r} within {timeout}s")
            message = self._receive(remaining)
            if message["type"] == "ping":
                self.send({"type": "pong"})
                continue
            if message["type"] == "pong":
                continue
            self._inbox[message.get("id")].append(message)

    def _receive(self, timeout: float) -> dict[str, Any]:
        try:
            raw = self.ws.recv(timeout=timeout)
        except TimeoutError:
            raise TimeoutError(f"no message from the server within {timeout:.1f}s") from None
        except ConnectionClosed as error:
            frame = error.rcvd
            raise Closed(None if frame is None else frame.code, "" if frame is None else frame.reason) from None
        return json.loads(raw)  # type: ignore[no-any-return]


def play_along(ws: GraphQLWS, op: str, first: dict[str, Any], api: Any, token: str, match_id: str,
               seat: int) -> list[dict[str, Any]]:
    """Follow a matchUpdates subscription to its end, making ``seat``'s move (first legal,
    through ``api``) whenever a view says it is due; every view received, ``first`` first."""
    from tests.service.arena_client import first_legal

    views = [first]
    while True:
        try:
            view = ws.data(op, "matchUpdates")
        except Completed:
            return views
        views.append(view)
        if view["status"] == "ACTIVE" and seat in view["awaiting"]:
            body = api.submit(token, match_id, first_legal(view), view["version"])
            assert not body.get("errors"), body
