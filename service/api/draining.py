"""An API process stopping without dropping anything: it stops accepting connections, answers
the long polls at once (``awaitTurn`` gives null, as at its timeout: the bot asks again,
elsewhere), closes every WebSocket with 1001 "going away" (clients reconnect, to another
process behind the load balancer), lets the requests in flight (moves) finish, and only then
closes its Redis pool. Past DRAIN_SECONDS, what is left is cancelled.

uvicorn's own graceful shutdown does the first and the last; the rest is :class:`GoingAway`
(the WebSockets) and the event feed's drain (the long polls), which :class:`DrainingServer`
starts before uvicorn's shutdown."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from types import FrameType

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: the longest an API process drains before it cancels what is still running
DRAIN_SECONDS = 20
#: RFC 6455's "going away": a server going down; the client may reconnect at once
GOING_AWAY = 1001


class GoingAway:
    """Closes every open WebSocket with 1001 when the process drains (:meth:`drain`)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._open: dict[int, Send] = {}
        self.draining = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            return await self.app(scope, receive, send)
        closed = False

        async def tracked(message: Message) -> None:
            nonlocal closed
            if closed:  # closed by the drain: what the handler still sends goes nowhere
                return
            if message["type"] == "websocket.close":
                closed = True
                self._open.pop(key, None)
            await send(message)
            if message["type"] == "websocket.accept" and not closed:
                self._open[key] = tracked

        key = id(tracked)
        try:
            await self.app(scope, receive, tracked)
        finally:
            self._open.pop(key, None)

    async def drain(self) -> None:
        self.draining = True
        for send in list(self._open.values()):
            try:
                await send({"type": "websocket.close", "code": GOING_AWAY, "reason": "the server is restarting: reconnect"})
            except Exception:  # noqa: BLE001 - a connection that went meanwhile: nothing to close
                continue


class DrainingServer(uvicorn.Server):
    """uvicorn's server, which drains the app (``drain``) once it has stopped accepting; told
    to stop while its start-up still waits (for Redis), it stops that wait (``stop_starting``)."""

    def __init__(self, config: uvicorn.Config, drain: Callable[[], Awaitable[None]],
                 stop_starting: Callable[[], None]) -> None:
        super().__init__(config)
        self._drain = drain
        self._stop_starting = stop_starting

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if not self.started:
            self._stop_starting()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:  # no new connection from here on (uvicorn closes them again)
            server.close()
        for sock in sockets or []:
            sock.close()
        try:
            async with asyncio.timeout(2):
                await self._drain()
        except TimeoutError:
            pass
        await super().shutdown(sockets=None)
