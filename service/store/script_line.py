"""A pipelined Redis connection for the scripts on the move path.

Every request that commits a move runs one Lua script (and a token whose lease ran out,
another). Through redis-py's client each call takes a connection from the pool, packs the
command in Python, sends it under a timeout task, reads the answer under a timer, records its
metrics and gives the connection back: on this machine ~55 us of CPU for a call whose Redis
side takes ~15 us. :class:`ScriptLine` sends the scripts of all concurrent requests down one
dedicated connection instead: the commands queued in one event-loop turn go out in one write
(packed by hiredis, as redis-py's synchronous client packs them), and one reader hands out
the answers in the order Redis sends them, which is the order they were written (~15 us).

It is still redis-py underneath: its ``Connection`` (from the client's own pool settings, so
TLS, unix sockets, passwords and databases behave alike) and its hiredis parser. What it keeps
of the client's guarantees:
- a script the server does not know (a restarted or failed-over Redis) is sent again whole
  (EVAL, down the same connection): the refused call ran nothing, so nothing applies twice;
- an error answer (also LOADING, which redis-py counts as a connection error) fails that
  call only;
- a lost connection fails every call in flight with ``ConnectionError``, as redis-py would,
  and the next call connects afresh; a connection the server closes while idle is noticed
  by the reader, which always reads, and replaced before the next call;
- calls that wait ``timeout`` s with no answer coming fail with ``TimeoutError`` (a watchdog
  checks every ``timeout`` s, so reads carry no timer each), and so does a connection whose
  handshake takes longer; the calls that arrive while one connects share its attempt.
Whether a failed call ran is unknown, as with any client: the commits it carries are
compare-and-sets on the match's version and latest event, so a move sent again cannot apply
twice.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from typing import Any

import hiredis
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.commands.core import AsyncScript
from redis.exceptions import BusyLoadingError, NoScriptError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.store.connections import dedicated_connection
from service.store.redis_client import clustered

#: answers that fail their own call only (redis-py raises LOADING as a connection error)
_CALL_ERRORS = (ResponseError, BusyLoadingError)
#: why a call fails once the line is closed
_CLOSED = "the Redis connection is closed (the service is shutting down)"


class _Line:
    """One connection, the commands not yet written, and the calls waiting for their
    answers, oldest first."""

    __slots__ = ("answered", "broken", "connection", "has_output", "outbox", "queued", "tasks", "waiting", "watchdog")

    def __init__(self, connection: AbstractConnection) -> None:
        self.connection = connection
        self.outbox: list[bytes] = []
        self.waiting: deque[asyncio.Future[Any]] = deque()
        #: calls queued and answers read so far: the watchdog's measure of progress
        self.queued = 0
        self.answered = 0
        self.broken: BaseException | None = None
        #: set while the writer has nothing to write
        self.has_output: asyncio.Future[None] | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.watchdog: asyncio.TimerHandle | None = None


class ScriptLine:
    """Runs registered scripts (``redis.register_script``) over one pipelined connection.

    A call queues its command and waits for its answer. A writer task sends what the
    requests of one event-loop turn queued in one write; a reader task hands out the answers
    in order. Reads carry no timer of their own (one per answer costs a timer each): a
    watchdog breaks the line when a call has waited ``timeout`` s with no answer coming."""

    def __init__(self, redis: Redis, timeout: float = 10.0) -> None:
        self._redis = redis
        self._timeout = timeout
        self._direct = clustered(redis)
        #: the line in use; a line that breaks is dropped from here at once
        self._line: _Line | None = None
        #: the connection being opened, shared by every call that needs it meanwhile
        self._opening: asyncio.Task[_Line] | None = None
        self._closed = False

    async def run(self, script: AsyncScript, keys: list[Any], args: list[Any]) -> Any:
        """``EVALSHA`` of ``script``: its answer, or the error Redis answered. On a Redis
        Cluster the script goes through the cluster client, to the node of its keys' slot."""
        if self._direct:
            return await script(keys=keys, args=args)
        try:
            return await self._call(hiredis.pack_command(("EVALSHA", script.sha, len(keys), *keys, *args)))
        except NoScriptError:
            # the server lost its script cache (a restart, a failover), so the call ran
            # nothing: send the script itself, down the same connection (which caches it)
            return await self._call(hiredis.pack_command(("EVAL", script.script, len(keys), *keys, *args)))

    async def _call(self, packed: bytes) -> Any:
        line = self._line
        if line is None:
            line = await self._connect()
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        line.outbox.append(packed)
        line.waiting.append(answer)
        line.queued += 1
        has_output = line.has_output
        if has_output is not None:
            line.has_output = None
            if not has_output.done():
                has_output.set_result(None)
        return await answer

    async def _connect(self) -> _Line:
        if self._closed:
            raise RedisConnectionError(_CLOSED)
        opening = self._opening
        if opening is None or opening.done():
            # a task of the line's own: a caller that goes away does not cut the handshake
            # short, and the calls that arrive meanwhile share this attempt (and its failure)
            opening = self._opening = asyncio.ensure_future(self._open())
            opening.add_done_callback(lambda done: done.cancelled() or done.exception())
        try:
            line = await asyncio.shield(opening)
        except asyncio.CancelledError:
            caller = asyncio.current_task()
            if opening.cancelled() and (caller is None or not caller.cancelling()):  # closed meanwhile
                raise RedisConnectionError(_CLOSED) from None
            raise
        if line.broken is not None:  # it broke before this caller resumed: nothing would answer
            raise line.broken
        return line

    async def _open(self) -> _Line:
        connection = dedicated_connection(self._redis)  # the watchdog times the answers
        try:
            async with asyncio.timeout(self._timeout):  # the handshake's reads too
                await connection.connect()
            if self._closed:
                raise RedisConnectionError(_CLOSED)
        except BaseException:
            await connection.disconnect(nowait=True)
            raise
        line = _Line(connection)
        line.tasks = [asyncio.create_task(self._write(line)), asyncio.create_task(self._read(line))]
        self._watch(line, 0, 0)
        self._line = line
        return line

    async def _write(self, line: _Line) -> None:
        loop = asyncio.get_running_loop()
        connection = line.connection
        try:
            while True:
                if not line.outbox:
                    line.has_output = loop.create_future()
                    await line.has_output
                    continue
                if not connection.is_connected:  # never let redis-py reconnect it under us
                    raise RedisConnectionError("the line's connection was closed")
                batch, line.outbox = line.outbox, []
                await connection.send_packed_command(batch, check_health=False)
        except (Exception, asyncio.CancelledError) as error:  # noqa: BLE001 - any end of the writer ends the line
            self._break(line, error)

    async def _read(self, line: _Line) -> None:
        # Reads all the time, idle or not, so that a connection the server closes is noticed
        # (and replaced) before a call is written to it.
        read = line.connection.read_response
        waiting = line.waiting
        try:
            while True:
                try:
                    answer = await read(timeout=math.inf, disconnect_on_error=False)
                except _CALL_ERRORS as error:  # an error answer: this call's alone
                    answer = error
                if not waiting:
                    raise RedisConnectionError("Redis sent an answer nobody asked for")
                line.answered += 1
                waiter = waiting.popleft()
                if waiter.done():  # a caller that went away is simply not answered
                    continue
                if isinstance(answer, _CALL_ERRORS):
                    waiter.set_exception(answer)
                else:
                    waiter.set_result(answer)
        except (Exception, asyncio.CancelledError) as error:  # noqa: BLE001 - any end of the reader ends the line
            self._break(line, error)

    def _watch(self, line: _Line, answered_before: int, queued_before: int) -> None:
        """Every ``timeout`` s: break the line if a call that was already waiting at the last
        look is still waiting, and no answer has come since."""
        if line.broken is not None:
            return
        if line.answered == answered_before and line.answered < queued_before:
            self._break(line, RedisTimeoutError(f"Redis did not answer within {self._timeout} s"))
            return
        line.watchdog = asyncio.get_running_loop().call_later(
            self._timeout, self._watch, line, line.answered, line.queued
        )

    def _break(self, line: _Line, error: BaseException) -> asyncio.Task[None] | None:
        """End ``line``: fail every call on it and close its connection (the task doing so)."""
        if line.broken is not None:
            return None
        if isinstance(error, asyncio.CancelledError):
            error = RedisConnectionError(_CLOSED)
        elif not isinstance(error, (RedisConnectionError, RedisTimeoutError)):
            error = RedisConnectionError(f"lost the Redis connection: {error!r}")
        line.broken = error
        if self._line is line:
            self._line = None
        line.outbox.clear()
        while line.waiting:
            waiter = line.waiting.popleft()
            if not waiter.done():
                waiter.set_exception(error)
        if line.watchdog is not None:
            line.watchdog.cancel()
        current = asyncio.current_task()
        for task in line.tasks:
            if task is not current:
                task.cancel()
        return asyncio.get_running_loop().create_task(line.connection.disconnect(nowait=True))

    async def close(self) -> None:
        self._closed = True
        if self._opening is not None:
            self._opening.cancel()  # a handshake under way ends here (it closes its socket)
            await asyncio.gather(self._opening, return_exceptions=True)
        line, self._line = self._line, None
        if line is None:
            return
        closing = self._break(line, RedisConnectionError(_CLOSED))
        await asyncio.gather(*line.tasks, *([closing] if closing else []), return_exceptions=True)
