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
- a script the server does not know (a restarted or failed-over Redis) is loaded and the call
  sent again (it did not run, so nothing applies twice);
- an error answer fails that call only;
- a lost connection fails every call in flight with ``ConnectionError``, as redis-py would,
  and the next call connects afresh; a connection the server closes while idle is noticed
  by the reader, which always reads, and replaced before the next call;
- calls that wait ``timeout`` s with no answer coming fail with ``TimeoutError`` (a watchdog
  checks every ``timeout`` s, so reads carry no timer each).
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
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError


class _Line:
    """One connection, the commands not yet written, and the calls waiting for their
    answers, oldest first."""

    __slots__ = ("connection", "outbox", "waiting", "answered", "broken", "has_output", "tasks", "watchdog")

    def __init__(self, connection: AbstractConnection) -> None:
        self.connection = connection
        self.outbox: list[bytes] = []
        self.waiting: deque[asyncio.Future[Any]] = deque()
        #: answers read so far: the watchdog's measure of progress
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
    in order. Reads carry no timeout of their own (one per answer costs a timer each): a
    watchdog breaks the line when calls wait and no answer has come for ``timeout`` s."""

    def __init__(self, redis: Redis, timeout: float = 10.0) -> None:
        self._redis = redis
        self._timeout = timeout
        self._line: _Line | None = None
        self._connecting: asyncio.Lock | None = None
        self._closed = False

    async def run(self, script: AsyncScript, keys: list[Any], args: list[Any]) -> Any:
        """``EVALSHA`` of ``script``: its answer, or the error Redis answered."""
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)
        try:
            return await self._call(hiredis.pack_command(command))
        except NoScriptError:
            # the server lost its script cache (a restart, a failover): it ran nothing
            await self._redis.script_load(script.script)
            return await self._call(hiredis.pack_command(command))

    async def _call(self, packed: bytes) -> Any:
        line = self._line
        if line is None or line.broken is not None:
            line = await self._connect()
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        line.outbox.append(packed)
        line.waiting.append(answer)
        has_output = line.has_output
        if has_output is not None:
            line.has_output = None
            has_output.set_result(None)
        return await answer

    async def _connect(self) -> _Line:
        if self._closed:
            raise RedisConnectionError("the Redis connection is closed (the service is shutting down)")
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            line = self._line
            if line is not None and line.broken is None:
                return line
            pool = self._redis.connection_pool
            # no socket timeout: it would run every write in a task of its own
            settings = {**pool.connection_kwargs, "socket_timeout": None, "health_check_interval": 0}
            connection = pool.connection_class(**settings)
            await connection.connect()
            line = _Line(connection)
            line.tasks = [asyncio.create_task(self._write(line)), asyncio.create_task(self._read(line))]
            self._watch(line, -1)
            self._line = line
            return line

    async def _write(self, line: _Line) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                if not line.outbox:
                    line.has_output = loop.create_future()
                    await line.has_output
                    continue
                batch, line.outbox = line.outbox, []
                await line.connection.send_packed_command(batch, check_health=False)
        except BaseException as error:  # noqa: BLE001 - every failure ends this line
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
                except ResponseError as error:  # an error answer: this call's alone
                    answer = error
                if not waiting:
                    raise RedisConnectionError("Redis sent an answer nobody asked for")
                line.answered += 1
                waiter = waiting.popleft()
                if waiter.done():  # a caller that went away is simply not answered
                    continue
                if isinstance(answer, ResponseError):
                    waiter.set_exception(answer)
                else:
                    waiter.set_result(answer)
        except BaseException as error:  # noqa: BLE001 - every failure ends this line
            self._break(line, error)

    def _watch(self, line: _Line, answered_before: int) -> None:
        """Every ``timeout`` s: break the line if calls wait and none was answered since."""
        if line.broken is not None:
            return
        if line.waiting and line.answered == answered_before:
            self._break(line, RedisTimeoutError(f"Redis did not answer within {self._timeout} s"))
            return
        line.watchdog = asyncio.get_running_loop().call_later(self._timeout, self._watch, line, line.answered)

    def _break(self, line: _Line, error: BaseException) -> None:
        if line.broken is not None:
            return
        if isinstance(error, asyncio.CancelledError):
            error = RedisConnectionError("the Redis connection was closed")
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
        asyncio.get_running_loop().create_task(line.connection.disconnect(nowait=True))

    async def close(self) -> None:
        self._closed = True
        line, self._line = self._line, None
        if line is None:
            return
        self._break(line, RedisConnectionError("the Redis connection was closed"))
        await asyncio.gather(*line.tasks, return_exceptions=True)
        await line.connection.disconnect()

