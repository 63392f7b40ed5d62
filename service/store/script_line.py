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

**Waiting for replicas** (``ARENA_COMMIT_REPLICAS``, ``ARENA_COMMIT_REPLICA_TIMEOUT_MS``): a
call made ``replicated`` (a commit) is answered only once ``replicas`` replicas have the writes
of its connection, or ``replica_timeout_ms`` has passed: Redis's ``WAIT``, which counts the
writes of the connection it is sent on, so it follows the script down the SAME connection. One
``WAIT`` follows each batch that carries replicated calls (it covers them all, and the calls
after it wait behind it, as they would behind any command).

When fewer replicas acknowledged in time, the call is **answered as made**, and the shortfall
logged and counted (``wizard_arena_commit_replica_shortfalls_total``). Why not an error: the
write is applied on the master whatever WAIT says (WAIT cannot undo it), and it will most
likely reach the replica a moment later; an error would tell a bot that its move failed when
it stands, and its retry with ``expectedVersion`` would be refused as stale. Worse, a master
whose only replica is down would then refuse every move: losing the copy would stop the game.
So the setting narrows the window in which a failover loses an answered move to the moments
when the replicas lag by more than the timeout, which the counter shows, and costs every
commit one round trip from master to replica.

A master without its replicas (its replica died, or it is a replica just promoted whose old
master is gone) would make every commit wait the whole timeout, and since WAIT holds its
connection, the commits behind it too: a match would crawl at one move per timeout. So after
a shortfall a line stops waiting for ``_REPLICAS_RETRY_SECONDS``: its replicated calls are
answered at once and counted short, and the first one after that waits again, to see whether
the replicas are back. A replica away thus costs one commit per line the timeout every few
seconds, and the counter counts every commit made meanwhile.

**On a Redis Cluster** there is one such line per master, made when a call first goes to
it: a script goes down the line of the master that serves its keys' slot, as the cluster
client says (and WAIT with it). Not through the cluster client's commands: they cost what
the pooled client costs on one server (what the line is for), and the client sends a command
again after a connection error, so a commit whose answer was lost would come back as a lost
race (its compare-and-set failing on its own write) instead of as the "may have run" that
:meth:`service.store.matches.MatchStore.commit` settles by reading the match.
A MOVED answer (a failover, seen before the client saw it), TRYAGAIN and CLUSTERDOWN ran
nothing: the call goes again where the layout, asked again, says. A lost line has the client
ask for the layout too (it would not by itself: it only asks when its own commands fail).
While a slot migrates (an operator resharding: ``redis-cli --cluster reshard|rebalance``), a
script whose keys have left its master is answered ASK: it goes to the node named, preceded
by ASKING in the same write down that node's line (ASKING holds for the next command of its
connection only). The node runs it if it holds every key the script names, else answers
TRYAGAIN, as the master does when it holds some of them only: the call waits (with back-off)
and goes again until the slot has moved, after which MOVED sends it to its new master. Each
of these answers ran nothing.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any, cast

import hiredis
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.commands.core import AsyncScript
from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterDownError,
    ClusterError,
    MovedError,
    NoScriptError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.store.connections import Backoff, dedicated_connection, refresh_nodes
from service.store.redis_client import clustered

log = logging.getLogger("wizard_arena.redis")

#: answers that fail their own call only (redis-py raises LOADING as a connection error)
_CALL_ERRORS = (ResponseError, BusyLoadingError)
#: why a call fails once the line is closed
_CLOSED = "the Redis connection is closed (the service is shutting down)"
#: how many times a call on a cluster follows a redirection or waits out a failover or a slot's
#: migration before failing (with back-off: about 13 s in all)
_CLUSTER_ATTEMPTS = 12
_ASKING = hiredis.pack_command(("ASKING",))
#: the least time between two logged replica shortfalls (they are all counted)
_SHORTFALL_LOG_SECONDS = 10.0
#: after a shortfall, how long a line's replicated calls wait for no replica (see the module)
_REPLICAS_RETRY_SECONDS = 5.0


class NotConnected(RedisConnectionError):
    """The line could not connect: the call was never sent (it ran nothing)."""


class _Line:
    """One connection, the commands not yet written, and the calls waiting for their
    answers, oldest first."""

    __slots__ = (
        "answered", "broken", "connection", "has_output", "outbox", "queued", "tasks", "unwaited", "waiting", "watchdog",
    )

    def __init__(self, connection: AbstractConnection) -> None:
        self.connection = connection
        self.outbox: list[bytes] = []
        self.waiting: deque[asyncio.Future[Any]] = deque()
        #: the replicated calls queued since the last WAIT was: each is told the WAIT's answer
        self.unwaited: list[asyncio.Future[int]] = []
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

    def __init__(
        self, redis: Redis, timeout: float = 10.0, replicas: int = 0, replica_timeout_ms: int = 100,
        on_replica_shortfall: Callable[[], None] | None = None, node: ClusterNode | None = None,
    ) -> None:
        if replicas and replica_timeout_ms >= timeout * 1000:
            raise ValueError(f"the replicas' timeout ({replica_timeout_ms} ms) must be shorter than the line's ({timeout} s)")
        self._redis = redis
        self._timeout = timeout
        #: the cluster node this line goes to (a line per master: see the module); None: the server
        self._node = node
        #: on a cluster: the line of each master called so far, by node name
        self._masters: dict[str, ScriptLine] | None = {} if clustered(redis) and node is None else None
        #: replicated calls wait for this many replicas (0: for none), up to ``replica_timeout_ms``
        self.replicas = replicas
        self.replica_timeout_ms = replica_timeout_ms
        self._wait_command = hiredis.pack_command(("WAIT", str(replicas), str(replica_timeout_ms)))  # type: ignore[arg-type]  # hiredis's stub: a 1-tuple
        self._on_replica_shortfall = on_replica_shortfall
        #: replicated calls answered with fewer replicas than asked (for the tests; metrics count them too)
        self.replica_shortfalls = 0
        self._shortfall_logged = -math.inf
        #: until when (monotonic s) this line's replicated calls wait for no replica, after a shortfall
        self._replicas_missing_until = -math.inf
        #: the line in use; a line that breaks is dropped from here at once
        self._line: _Line | None = None
        #: the connection being opened, shared by every call that needs it meanwhile
        self._opening: asyncio.Task[_Line] | None = None
        self._closed = False

    async def run(self, script: AsyncScript, keys: list[Any], args: list[Any], replicated: bool = False) -> Any:
        """``EVALSHA`` of ``script``: its answer, or the error Redis answered. On a Redis
        Cluster the script goes to the master of its keys' slot. ``replicated`` (a commit):
        answered once ``replicas`` replicas have it too, or the timeout passed (see the module)."""
        wait = self.replicas if replicated else 0
        if self._masters is not None:
            answer, acknowledged = await self._run_on_master(script, keys, args, wait)
        else:
            answer, acknowledged = await self._run_here(script, keys, args, wait)
        if wait and acknowledged < wait:
            self._shortfall(acknowledged)
        return answer

    async def _run_here(
        self, script: AsyncScript, keys: list[Any], args: list[Any], wait: int, asking: bool = False,
    ) -> tuple[Any, int]:
        """On this line: the answer, and how many replicas acknowledged it (0 unless ``wait``).
        ``asking``: preceded by ASKING (an ASK redirection: see the module)."""
        waits = wait > 0 and time.monotonic() >= self._replicas_missing_until
        try:
            answer, acknowledged = await self._call(
                hiredis.pack_command(("EVALSHA", script.sha, len(keys), *keys, *args)), waits, asking
            )
        except NoScriptError:
            # the server lost its script cache (a restart, a failover), so the call ran
            # nothing: send the script itself, down the same connection (which caches it)
            answer, acknowledged = await self._call(
                hiredis.pack_command(("EVAL", script.script, len(keys), *keys, *args)), waits, asking
            )
        if waits and acknowledged < wait:  # the replicas are away: wait for none for a while
            self._replicas_missing_until = time.monotonic() + _REPLICAS_RETRY_SECONDS
        return answer, acknowledged

    def _shortfall(self, acknowledged: int) -> None:
        """A replicated call made on the master and answered, with fewer replicas than asked."""
        self.replica_shortfalls += 1
        if self._on_replica_shortfall is not None:
            self._on_replica_shortfall()
        now = time.monotonic()
        if now - self._shortfall_logged >= _SHORTFALL_LOG_SECONDS:
            self._shortfall_logged = now
            log.warning(
                "a commit was answered with %s of the %d replicas asked for (ARENA_COMMIT_REPLICAS) within %d ms: "
                "a failover now could lose it (%d such commits so far; said at most every %.0f s)",
                acknowledged, self.replicas, self.replica_timeout_ms, self.replica_shortfalls, _SHORTFALL_LOG_SECONDS,
            )

    async def _call(self, packed: bytes, replicated: bool = False, asking: bool = False) -> tuple[Any, int]:
        """The answer to ``packed``, and when ``replicated``, how many replicas acknowledged
        the line's writes up to it (else 0). ``asking``: ASKING goes right before it (both are
        queued in this one step, so nothing comes between them on the connection)."""
        line = self._line
        if line is None:
            try:
                line = await self._connect()
            except (RedisConnectionError, OSError) as error:  # (a timeout stays one)
                if self._closed or isinstance(error, (NotConnected, TimeoutError)):
                    raise
                raise NotConnected(f"could not connect to Redis: {error!r}") from error
        if asking:  # its answer (OK) is nobody's
            asked: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            asked.add_done_callback(_drop)
            line.outbox.append(_ASKING)
            line.waiting.append(asked)
            line.queued += 1
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        line.outbox.append(packed)
        line.waiting.append(answer)
        line.queued += 1
        acknowledged: asyncio.Future[int] | None = None
        if replicated:
            acknowledged = asyncio.get_running_loop().create_future()
            line.unwaited.append(acknowledged)
        has_output = line.has_output
        if has_output is not None:
            line.has_output = None
            if not has_output.done():
                has_output.set_result(None)
        if acknowledged is None:
            return await answer, 0
        try:
            result = await answer
        except BaseException:
            _drop(acknowledged)
            raise
        try:
            return result, await acknowledged
        except ResponseError as error:  # WAIT refused (not a master any more): the script ran all the same
            log.debug("WAIT refused after a replicated call: %r", error)
            return result, 0  # counted short

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
        connection = dedicated_connection(self._redis, node=self._node)  # the watchdog times the answers
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
                if line.unwaited:  # one WAIT for the replicated calls in this batch, after them
                    wait: asyncio.Future[Any] = loop.create_future()
                    wait.add_done_callback(functools.partial(_hand_out, line.unwaited))
                    line.unwaited = []
                    batch.append(self._wait_command)
                    line.waiting.append(wait)
                    line.queued += 1
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
        for acknowledged in line.unwaited:  # their scripts were not written: their callers fail on those
            _drop(acknowledged)
        line.unwaited.clear()
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

    async def _run_on_master(self, script: AsyncScript, keys: list[Any], args: list[Any], wait: int) -> tuple[Any, int]:
        """On a Redis Cluster: down the line of the master of the keys' slot; again where the
        layout says after an answer that ran nothing (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, a
        master that could not be reached), up to ``_CLUSTER_ATTEMPTS`` times (with back-off:
        about 13 s, several failovers' time at the embedded cluster's node timeout of 2 s, or a
        slot of a few thousand keys migrated)."""
        cluster = cast(RedisCluster, self._redis)
        assert self._masters is not None
        backoff = Backoff()
        last: BaseException | None = None
        asked: ClusterNode | None = None  # the node an ASK named, for the next attempt only
        attempts = 0
        while attempts < _CLUSTER_ATTEMPTS:
            attempts += asked is None  # (an ASK is followed at once: its node's answer counts)
            if self._closed:
                raise RedisConnectionError(_CLOSED)
            if not cluster.get_nodes():
                await cluster.initialize()  # before the client's first command
            node = asked or cluster.nodes_manager.get_node_from_slot(cluster.keyslot(keys[0]))
            line = self._masters.get(node.name)
            if line is None:
                line = self._masters[node.name] = ScriptLine(
                    self._redis, self._timeout, self.replicas, self.replica_timeout_ms, node=node,
                )
            try:
                return await line._run_here(script, keys, args, wait, asking=asked is not None)
            except MovedError as error:  # a failover the client has not seen yet, a slot moved
                last, asked = error, None
                await cluster.nodes_manager.move_slot(error)
            except AskError as error:  # the slot is migrating and the keys have left: ask its new node
                last = error
                if asked is not None:  # sent on again by the node an ASK named: from the master, later
                    asked = None
                    await backoff.wait()
                    continue
                asked = cluster.get_node(error.host, error.port)
                if asked is None:  # a node the layout does not know yet
                    await refresh_nodes(self._redis, None)
                    asked = cluster.get_node(error.host, error.port)
                    if asked is None:
                        await backoff.wait()
            except (TryAgainError, ClusterDownError, NotConnected) as error:  # a failover or a migration under way; ran nothing
                asked = None
                last = error
                await backoff.wait()
                await refresh_nodes(self._redis, node.name if isinstance(error, NotConnected) else None)
            except (RedisConnectionError, RedisTimeoutError):
                # the call may have run: fail it (the caller finds out); the layout is asked
                # again, and a line to a node no longer known is dropped
                await refresh_nodes(self._redis, node.name)
                self._drop_lines_of_nodes_gone()
                raise
        raise ClusterError(f"the Redis Cluster kept redirecting a script ({last!r})")

    def _drop_lines_of_nodes_gone(self) -> None:
        assert self._masters is not None
        known = {node.name for node in cast(RedisCluster, self._redis).get_primaries()}
        for name in [name for name in self._masters if name not in known]:
            line = self._masters.pop(name)
            task = asyncio.get_running_loop().create_task(line.close())
            task.add_done_callback(lambda done: done.cancelled() or done.exception())

    async def close(self) -> None:
        self._closed = True
        if self._masters:
            lines, self._masters = list(self._masters.values()), {}
            await asyncio.gather(*(line.close() for line in lines), return_exceptions=True)
        if self._opening is not None:
            self._opening.cancel()  # a handshake under way ends here (it closes its socket)
            await asyncio.gather(self._opening, return_exceptions=True)
        line, self._line = self._line, None
        if line is None:
            return
        closing = self._break(line, RedisConnectionError(_CLOSED))
        await asyncio.gather(*line.tasks, *([closing] if closing else []), return_exceptions=True)


def _hand_out(calls: list[asyncio.Future[int]], wait: asyncio.Future[Any]) -> None:
    """A WAIT's answer (or failure) to each replicated call it followed."""
    for call in calls:
        if call.done():
            continue
        if wait.cancelled():
            call.cancel()
        elif wait.exception() is not None:
            call.set_exception(cast(BaseException, wait.exception()))
        else:
            call.set_result(wait.result())


def _drop(future: asyncio.Future[Any]) -> None:
    """Nobody will await ``future``: cancel it, or take its error, so that none is reported unread."""
    if not future.done():
        future.cancel()
    elif not future.cancelled():
        future.exception()
