"""The process's one feed of what happens in Redis, shared by everything that waits in it.

Waiting (``awaitTurn``, ``GET /api/turns``, ``myTurns``, ``matchUpdates``) used to block on
the match's event stream with a Redis connection of its own per waiter: a few hundred waiters
exhausted the pool, and every woken waiter read and decoded the match again. Now the script
that commits an event also publishes it (``service.store.COMMIT_EVENT``): on the match's
channel, ``<version>|<event id>|<event JSON>``, and when a bot takes a seat, the match's id on
the bot's channel. Each API process subscribes, over one connection of its own, to the
channels its waiters follow, and hands each message to exactly the waiters that follow that
channel, decoded once; a waiter applies the event to its copy of the match. A waiter costs no
connection and no task, only its place in a few sets.

Pub/sub forgets what nobody heard, so waiters keep to two rules, and then miss nothing:
- **follow, then read.** :meth:`Watch.follow` returns once Redis has confirmed the
  subscription; whatever a waiter reads after that, every later change reaches it. (A change
  it has already read may reach it too: events carry their version, and a waiter skips what
  it has.)
- **after a gap, read again.** When the connection is lost, every watch is told
  (:data:`RESYNC`); the feed reconnects and subscribes again, and a waiter that was told waits
  for that (:meth:`Watch.follow` again) and reads what it follows anew. A Redis restart that
  lost writes is covered the same way.

A channel nobody follows any more stays subscribed for ``linger`` seconds (a bot long-polling
``awaitTurn`` leaves and comes back on every move), then is unsubscribed.

The connection is redis-py's own ``Connection`` (TLS, unix sockets, passwords alike); once
it is connected, its socket is read in the event loop's I/O callback (:class:`_FeedProtocol`),
so a message reaches its waiters without a task of its own in between. A PING every
``ping_interval`` seconds, answered within ``timeout``, proves it alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any

from hiredis import Reader, pack_command
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection

from service.errors import LimitExceeded
from service.model.live_match import LiveMatch
from service.outage import Outage
from service.store.connections import Backoff, dedicated_connection, node_name, refresh_nodes
from service.store.keys import match_channel
from service.store.matches import MatchEvent, MatchStore, Notice, Seated, after_event, decode_published

log = logging.getLogger("wizard_arena.feed")

#: told to a watch that may have missed messages: follow again, then read anew
RESYNC = ("resync",)


class FeedUnavailable(ConnectionError):
    """The feed could not subscribe in time (Redis unreachable)."""


class _Channel:
    __slots__ = (
        "committing", "confirmed", "idle_since", "leaving", "loading", "name", "snapshot", "subscribed", "watches",
    )

    def __init__(self, name: bytes) -> None:
        self.name = name
        self.watches: set[Watch] = set()
        #: whether Redis has confirmed the subscription on the current connection
        self.subscribed = False
        #: resolved when it is (a new future for every subscription asked for)
        self.confirmed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.idle_since = time.monotonic()
        #: an UNSUBSCRIBE was sent and not yet confirmed
        self.leaving = False
        #: a match channel's match as of its latest event, kept by applying each event to a copy
        #: (one per process, shared by the waiters, never changed once out); None: to be read
        self.snapshot: LiveMatch | None = None
        #: while it is being read: the read's result, and the events that arrive meanwhile
        self.loading: tuple[asyncio.Future[LiveMatch | None], list[MatchEvent]] | None = None
        #: a change this process is committing to the snapshot's match: the match after it
        #: (never changed after) and the event's JSON as sent (see :meth:`EventFeed.committing`)
        self.committing: tuple[LiveMatch, bytes] | None = None

    def forget(self) -> None:
        """Events may be missed from now on (the subscription ends, or the connection did)."""
        self.snapshot = None
        self.loading = None
        self.committing = None

    def after(self, item: MatchEvent, data: bytes) -> LiveMatch | None:
        """The snapshot after ``item`` (published as ``data``): the match this process is
        committing, when ``item`` is that commit's own event, or else a changed copy."""
        snapshot, committing = self.snapshot, self.committing
        assert snapshot is not None
        if committing is not None and item.version >= committing[0].version:
            self.committing = None
            match, event_json = committing
            # published as {"ct":<when>,<the event's JSON after its "{">: the same event at the
            # next version gives the same match (an equal one by another process included)
            if item.version == match.version == snapshot.version + 1 and data.endswith(event_json[1:]):
                match.event_id = item.event_id
                return match
        return after_event(snapshot, item)


class Watch:
    """One waiter's view of the feed: the channels it follows and what arrived on them."""

    __slots__ = ("_channels", "_closed", "_feed", "_inbox", "_wake", "counted", "owner", "wakes_for")

    def __init__(self, feed: EventFeed, owner: str, counted: bool = True) -> None:
        self._feed = feed
        self.owner = owner
        #: a client's wait (counted against its owner's limit, and in ``watches``)
        self.counted = counted
        self._channels: set[bytes] = set()
        # a list, not a deque: an empty deque is 760 bytes, and most waiters' inboxes are empty
        self._inbox: list[MatchEvent | Seated | Notice | tuple[str]] = []
        self._wake: asyncio.Future[None] | None = None
        self._closed = False
        #: for a waiter that follows its matches as of their latest events (a wait for turns):
        #: what is worth waking it for; the rest waits in its inbox, the latest event of each
        #: match only, until something is. Such a waiter is not woken by its matches' every move
        #: (three in four of a four-player match's give it nothing to do): each wake is a step
        #: of its task that the loop runs before the frames of the waiters that have a turn.
        #: None: woken by anything, every event kept (matchUpdates yields each version).
        self.wakes_for: Callable[[MatchEvent | Seated | Notice | tuple[str]], bool] | None = None

    async def follow(self, *channels: bytes) -> None:
        """Follow ``channels`` (besides those followed already): returns once Redis has
        confirmed every one, so that what is read after it misses no later change."""
        new = [c for c in channels if c not in self._channels]
        self._channels.update(new)
        await self._feed._follow(self, new)

    async def ready(self) -> None:
        """Wait until every channel followed is subscribed (again, after a lost connection)."""
        await self._feed._follow(self, list(self._channels))

    def unfollow(self, channel: bytes, linger: bool = True) -> None:
        """Stop following ``channel``; without ``linger`` (a channel followed by mistake: an
        unknown match), it is unsubscribed at once if nobody else follows it."""
        if channel in self._channels:
            self._channels.discard(channel)
            self._feed._unfollow(self, channel, linger)

    async def next(self, timeout: float) -> list[MatchEvent | Seated | Notice | tuple[str]]:
        """What arrived since the last call, waiting up to ``timeout`` s for something (an
        empty list when nothing came)."""
        _honour_cancel()
        if not self._inbox and timeout > 0:
            loop = asyncio.get_running_loop()
            wake = self._wake = loop.create_future()
            timer = loop.call_later(timeout, _settle, wake)
            waiting = self._feed._waiting
            waiting.add(wake)
            try:
                await wake
            finally:
                timer.cancel()
                waiting.discard(wake)
                self._wake = None
        items, self._inbox = self._inbox, []
        return items

    def _push(self, item: MatchEvent | Seated | Notice | tuple[str]) -> None:
        if self._closed:
            return
        if item is RESYNC:  # what was queued is superseded by reading anew
            self._inbox.clear()
        if not self._supersede(item):
            self._inbox.append(item)
        wake = self._wake
        if wake is not None and not wake.done() and (self.wakes_for is None or self.wakes_for(item)):
            wake.set_result(None)

    def _supersede(self, item: MatchEvent | Seated | Notice | tuple[str]) -> bool:
        """For a waiter that follows its matches as of their latest events (``wakes_for``): put
        ``item`` in the place of an earlier event of its match still in the inbox, if any."""
        if self.wakes_for is None or not isinstance(item, MatchEvent) or item.match is None:
            return False
        for i, queued in enumerate(self._inbox):
            if isinstance(queued, MatchEvent) and queued.match_id == item.match_id and queued.match is not None:
                self._inbox[i] = item
                return True
        return False

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._feed._close_watch(self)

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventFeed:
    """Subscribes, over one connection, to the channels this process's watches follow."""

    def __init__(
        self,
        redis: Redis,
        matches: MatchStore,
        max_watches_per_owner: int,
        *,
        linger: float = 30.0,
        timeout: float = 10.0,
        ping_interval: float = 15.0,
    ) -> None:
        self._redis = redis
        self._matches = matches
        self.max_watches_per_owner = max_watches_per_owner
        self.linger = linger
        self.timeout = timeout
        self.ping_interval = ping_interval
        self._channels: dict[bytes, _Channel] = {}
        self._watches_by_owner: dict[str, int] = {}
        self._connection: AbstractConnection | None = None
        #: the node the connection goes to, or went to last (``host:port``): for the tests
        self.node: str | None = None
        self._runner: asyncio.Task[None] | None = None
        #: channels to (un)subscribe in the next write, gathered over one loop turn
        self._to_subscribe: set[bytes] = set()
        self._to_unsubscribe: set[bytes] = set()
        self._flush_scheduled = False
        self._connected: asyncio.Event | None = None
        self._pinged_at: float | None = None
        self._closed = False
        #: the background writes and closes under way
        self._tasks: set[asyncio.Future[None]] = set()
        #: messages handed out, for the metrics and the tests
        self.delivered = 0
        #: the process is stopping: waits end at once (see :meth:`drain`)
        self.draining = False
        self._waiting: set[asyncio.Future[None]] = set()

    # ------------------------------------------------------------------ watches
    def watch(self, owner: str, counted: bool = True) -> Watch:
        """A new watch for ``owner`` (a bot, or an anonymous client's address), refused with
        LIMIT_EXCEEDED when the owner has ``max_watches_per_owner`` open in this process; one
        not ``counted`` is the process's own (the token revocations it follows), outside both."""
        if not counted:
            return Watch(self, owner, counted=False)
        open_now = self._watches_by_owner.get(owner, 0)
        if open_now >= self.max_watches_per_owner:
            raise LimitExceeded(
                f"{self.max_watches_per_owner} waits and subscriptions are open for you on this server: end some "
                "(close subscriptions you no longer read, wait on all your matches at once with awaitTurn "
                "without matchId or myTurns)"
            )
        self._watches_by_owner[owner] = open_now + 1
        return Watch(self, owner)

    def drain(self) -> None:
        """The process is stopping: every wait ends now (a long poll, which looks at
        ``draining`` before it waits again, answers as at its timeout, and its client asks
        again, of another process; a subscription just waits again, until its WebSocket closes)."""
        self.draining = True
        for wake in list(self._waiting):
            _settle(wake)

    @property
    def watches(self) -> int:
        return sum(self._watches_by_owner.values())

    @property
    def channels(self) -> int:
        return len(self._channels)

    async def _follow(self, watch: Watch, names: Iterable[bytes]) -> None:
        _honour_cancel()
        if self._closed:
            raise FeedUnavailable("the server is shutting down")
        waiting = []
        for name in names:
            channel = self._channels.get(name)
            if channel is None:
                channel = self._channels[name] = _Channel(name)
                self._subscribe(channel)
            elif channel.leaving and channel.confirmed.done():
                # an UNSUBSCRIBE is on its way: subscribe again once it is confirmed
                channel.confirmed = asyncio.get_running_loop().create_future()
            channel.watches.add(watch)
            if not channel.confirmed.done():
                waiting.append(channel.confirmed)
        if not waiting:
            return
        self._ensure_running()
        try:
            async with asyncio.timeout(self.timeout):
                await asyncio.gather(*(asyncio.shield(f) for f in waiting))
        except TimeoutError:
            raise FeedUnavailable(f"Redis did not confirm a subscription within {self.timeout} s") from None

    def _unfollow(self, watch: Watch, name: bytes, linger: bool = True) -> None:
        channel = self._channels.get(name)
        if channel is None:
            return
        channel.watches.discard(watch)
        if not channel.watches:
            channel.idle_since = time.monotonic()
            if not linger and channel.subscribed and not channel.leaving:
                channel.leaving = True
                channel.forget()
                self._to_unsubscribe.add(name)
                self._schedule_flush()

    def _close_watch(self, watch: Watch) -> None:
        for name in list(watch._channels):
            self._unfollow(watch, name)
        watch._channels.clear()
        if not watch.counted:
            return
        left = self._watches_by_owner.get(watch.owner, 1) - 1
        if left > 0:
            self._watches_by_owner[watch.owner] = left
        else:
            self._watches_by_owner.pop(watch.owner, None)

    # ------------------------------------------------------------------ the followed matches
    async def current(self, match_ids: Sequence[str]) -> dict[str, LiveMatch]:
        """The matches as of the latest events this process heard (those that exist), read
        from Redis only when not kept already: shared by every waiter, so never to be changed
        (copy one first). Only a caller that follows a match's channel (confirmed) may rely on
        it to be current; for the others it is read, and not kept."""
        found: dict[str, LiveMatch] = {}
        missing: list[str] = []
        pending: list[tuple[str, asyncio.Future[LiveMatch | None]]] = []
        for match_id in match_ids:
            channel = self._channels.get(match_channel(match_id))
            if channel is not None and channel.snapshot is not None:
                found[match_id] = channel.snapshot
            elif channel is not None and channel.loading is not None:
                pending.append((match_id, channel.loading[0]))
            else:
                missing.append(match_id)
        if missing:
            found.update(await self._load(missing))
        for match_id, loaded in pending:
            match = await asyncio.shield(loaded)
            if match is not None:
                found[match_id] = match
        return found

    async def _load(self, match_ids: list[str]) -> dict[str, LiveMatch]:
        """Read matches; keep those whose channel is subscribed, with the events that arrived
        during the read applied."""
        keeping: dict[str, _Channel] = {}
        for match_id in match_ids:
            channel = self._channels.get(match_channel(match_id))
            if channel is not None and channel.subscribed and not channel.leaving:
                channel.loading = (asyncio.get_running_loop().create_future(), [])
                keeping[match_id] = channel
        try:
            stored = await self._matches.load_many(match_ids)
        except BaseException as error:
            for channel in keeping.values():
                if channel.loading is not None:
                    channel.loading[0].set_exception(error)
                    channel.loading[0].exception()  # (retrieved: the caller gets it from here)
                    channel.loading = None
            raise
        found: dict[str, LiveMatch] = {}
        for match_id, read in zip(match_ids, stored, strict=True):
            match = None if read is None else read.match
            channel = keeping.get(match_id)
            if channel is not None and channel.loading is not None:
                loaded, arrived = channel.loading
                channel.loading = None
                for item in sorted(arrived, key=lambda i: i.version):
                    match = after_event(match, item) if match is not None else None
                channel.snapshot = match
                loaded.set_result(match)
            if match is not None:
                found[match_id] = match
        return found

    # ------------------------------------------------------------------ subscribing
    def _subscribe(self, channel: _Channel) -> None:
        self._to_unsubscribe.discard(channel.name)
        self._to_subscribe.add(channel.name)
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled and self._connection is not None:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(lambda: self._spawn(self._flush()))

    async def _flush(self) -> None:
        """Send the (un)subscriptions gathered since the last flush, one command each kind."""
        self._flush_scheduled = False
        connection = self._connection
        if connection is None:
            return  # the connection being made subscribes everything anew
        commands = []
        if self._to_subscribe:
            commands.append(pack_command(("SUBSCRIBE", *self._to_subscribe)))  # type: ignore[arg-type]  # hiredis's stub: a 1-tuple
            self._to_subscribe.clear()
        if self._to_unsubscribe:
            commands.append(pack_command(("UNSUBSCRIBE", *self._to_unsubscribe)))  # type: ignore[arg-type]
            self._to_unsubscribe.clear()
        if commands:
            try:
                await connection.send_packed_command(commands, check_health=False)
            except Exception as error:  # noqa: BLE001 - the reader notices and reconnects
                log.debug("feed write failed: %r", error)
                await connection.disconnect(nowait=True)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in the background, holding on to it until it is done."""
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _ensure_running(self) -> None:
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run())

    # ------------------------------------------------------------------ the connection
    async def _run(self) -> None:
        """Connect, subscribe to every followed channel, read; again after a loss, with
        back-off, for as long as any channel is followed.

        On a Redis Cluster the connection goes to any node (PUBLISH reaches them all). After a
        loss it goes to another one: the node that failed is avoided while another is known,
        and the cluster client is asked for the nodes again (its own view changes only when
        its commands meet errors, so a node killed would otherwise stay on its list)."""
        backoff = Backoff()
        outage = Outage("Redis, for the event feed,", log, Backoff.FIRST, Backoff.MOST)  # said once, when it ends
        #: the nodes that failed since the feed was last connected (``host:port``)
        failed: set[str] = set()
        while not self._closed and self._channels:
            connection = None
            try:
                connection = await self._open(failed)
                failed.clear()
                backoff.reset()
                outage.recovered()
                await self._read(connection)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - any failure: say so (an outage once), reconnect
                if connection is not None:
                    failed.add(node_name(connection))
                outage.after(error, functools.partial(log.warning, "the event feed lost Redis (%r); reconnecting", error))
            finally:
                self._lost(connection)
            if self._closed:
                return
            await backoff.wait()
            if failed:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.timeout):
                        await refresh_nodes(self._redis, next(iter(failed)))

    async def _open(self, failed: set[str]) -> AbstractConnection:
        """A connection, subscribed to every followed channel; its node (``host:port``) is
        added to ``failed`` if the feed loses it, here or later while reading."""
        connection = dedicated_connection(self._redis, avoid=failed)  # the watchdog's PINGs prove it alive
        self.node = node_name(connection)
        try:
            async with asyncio.timeout(self.timeout):
                await connection.connect()
                self._connection = connection
                self._to_subscribe = set(self._channels)
                self._to_unsubscribe.clear()
                for channel in self._channels.values():
                    channel.leaving = False
                await self._flush()
        except BaseException:
            failed.add(self.node)
            self._connection = None
            await connection.disconnect(nowait=True)
            raise
        self._pinged_at = None
        return connection

    async def _read(self, connection: AbstractConnection) -> None:
        """Read the connection until it is lost: in the loop's I/O callback (_FeedProtocol),
        which takes the socket over from redis-py's stream once connected (writes still go
        through redis-py's connection)."""
        reader: asyncio.StreamReader = getattr(connection, "_reader")  # noqa: B009 - redis-py's streams
        writer: asyncio.StreamWriter = getattr(connection, "_writer")  # noqa: B009
        protocol = _FeedProtocol(writer.transport, self._reply)
        writer.transport.set_protocol(protocol)
        buffered: bytearray = getattr(reader, "_buffer")  # noqa: B009 - what arrived before the protocol took over
        if writer.transport.is_closing() or reader.at_eof() or reader.exception() is not None:
            raise ConnectionError("the event feed's connection closed as it was opened")
        watchdog = asyncio.get_running_loop().call_later(self.ping_interval, self._ping, connection)
        try:
            if buffered:
                protocol.data_received(bytes(buffered))
                buffered.clear()
            await protocol.lost
        finally:
            watchdog.cancel()

    def _reply(self, reply: Any) -> None:
        self._pinged_at = None
        if not isinstance(reply, list) or not reply:
            return
        kind = reply[0]
        if kind == b"message":
            self._deliver(reply[1], reply[2])
        elif kind == b"subscribe":
            self._confirmed(reply[1])
        elif kind == b"unsubscribe":
            self._left(reply[1])

    def _ping(self, connection: AbstractConnection) -> None:
        """Every ``ping_interval`` s: a PING, and a connection that left the last one
        unanswered for ``timeout`` s is closed (the reader then reconnects)."""
        if connection is not self._connection or connection is None:
            return
        now = time.monotonic()
        if self._pinged_at is not None and now - self._pinged_at > self.timeout:
            log.warning("the event feed's Redis connection did not answer a PING in %s s", self.timeout)
            self._spawn(connection.disconnect(nowait=True))
            return
        if self._pinged_at is None:
            self._pinged_at = now
            self._spawn(self._send(connection, pack_command(("PING",))))
        self._unsubscribe_idle(now)
        asyncio.get_running_loop().call_later(min(self.ping_interval, self.timeout), self._ping, connection)

    async def _send(self, connection: AbstractConnection, packed: bytes) -> None:
        try:
            await connection.send_packed_command(packed, check_health=False)
        except Exception:  # noqa: BLE001 - the reader notices and reconnects
            await connection.disconnect(nowait=True)

    def _unsubscribe_idle(self, now: float) -> None:
        for channel in self._channels.values():
            if not channel.watches and channel.subscribed and not channel.leaving and now - channel.idle_since > self.linger:
                channel.leaving = True
                channel.forget()
                self._to_unsubscribe.add(channel.name)
        if self._to_unsubscribe:
            self._schedule_flush()

    def _lost(self, connection: AbstractConnection | None) -> None:
        """The connection is gone: every subscription with it, and every watch may have
        missed messages."""
        if connection is not None:
            self._spawn(connection.disconnect(nowait=True))
        if self._connection is connection:
            self._connection = None
        told: set[Watch] = set()
        for name, channel in list(self._channels.items()):
            if not channel.watches:
                del self._channels[name]
                if not channel.confirmed.done():
                    channel.confirmed.cancel()
                continue
            if channel.subscribed:
                channel.subscribed = False
                channel.confirmed = asyncio.get_running_loop().create_future()
                told.update(channel.watches)
            channel.leaving = False
            channel.forget()
        for watch in told:
            watch._push(RESYNC)

    # ------------------------------------------------------------------ replies
    def _confirmed(self, name: bytes) -> None:
        channel = self._channels.get(name)
        if channel is None:
            return
        channel.subscribed = True
        if not channel.confirmed.done():
            channel.confirmed.set_result(None)

    def _left(self, name: bytes) -> None:
        channel = self._channels.get(name)
        if channel is None:
            return
        channel.subscribed = False
        channel.leaving = False
        channel.forget()
        if channel.watches:  # followed again meanwhile: subscribe again
            if channel.confirmed.done():
                channel.confirmed = asyncio.get_running_loop().create_future()
            self._subscribe(channel)
        else:
            del self._channels[name]

    def _deliver(self, name: bytes, data: bytes) -> None:
        channel = self._channels.get(name)
        if channel is None:
            return
        item = decode_published(name, data)
        if item is None:
            log.warning("the event feed could not read a message on %r", name)
            return
        if isinstance(item, MatchEvent):
            if channel.loading is not None:  # a read is under way: it applies what came meanwhile
                channel.loading[1].append(item)
            elif channel.snapshot is not None:
                channel.snapshot = channel.after(item, data)
                item.match = channel.snapshot
        if not channel.watches:
            return
        for watch in channel.watches:
            watch._push(item)
        self.delivered += 1

    def committing(self, match: LiveMatch, event_json: bytes) -> None:
        """A change this process is about to commit, as ``match`` (never changed after) and its
        event's JSON as it goes to Redis. Redis writes the event's message before the commit's
        answer, so the message usually arrives first: recognised as this change, it moves the
        snapshot to ``match`` itself rather than to a copy of the snapshot with the event
        applied again (a copy and an event applied by the engine, per move)."""
        channel = self._channels.get(match_channel(match.id))
        if channel is not None and channel.loading is None and channel.snapshot is not None:
            channel.committing = (match, event_json)

    def committed(self, match: LiveMatch) -> None:
        """A change this process has just committed, as ``match`` (never changed after): the
        snapshot moves to it at once. The caller that made it may ask for its next turn before
        the change's own message arrives here; answered from the version before, it would be
        handed the turn it has just played. The message, when it comes, finds it applied."""
        channel = self._channels.get(match_channel(match.id))
        if channel is None or channel.loading is not None or channel.snapshot is None:
            return
        if match.version == channel.snapshot.version + 1:
            channel.snapshot = match

    async def close(self) -> None:
        self._closed = True
        if self._runner is not None:
            self._runner.cancel()
            await asyncio.gather(self._runner, return_exceptions=True)
        for channel in self._channels.values():
            if not channel.confirmed.done():
                channel.confirmed.cancel()
        self._channels.clear()


class _FeedProtocol(asyncio.Protocol):
    """The feed's connection read in the event loop's I/O callback itself: each message reaches
    its waiters as its bytes arrive, and their tasks run in the loop's next turn. Read by a
    task (redis-py's ``read_response``), the bytes only woke that task, which woke the waiters
    a turn later still; under load a turn of the loop takes milliseconds (BENCHMARKS.md,
    "From a commit to the turn frame written")."""

    def __init__(self, transport: asyncio.BaseTransport, on_reply: Callable[[Any], None]) -> None:
        self._transport = transport
        self._on_reply = on_reply
        self._parser = Reader()
        #: resolved (with a ConnectionError) when the connection is lost
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed(data)
            while (reply := self._parser.gets()) is not False:
                self._on_reply(reply)
        except Exception as error:  # a reply this code cannot read, or a fault of its own: start afresh
            log.exception("the event feed could not handle what Redis sent; reconnecting")
            self._lose(ConnectionError(f"the event feed could not handle a reply: {error!r}"))
            self._transport.abort()  # type: ignore[attr-defined]

    def eof_received(self) -> bool:
        self._lose(ConnectionError("Redis closed the event feed's connection"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._lose(ConnectionError(f"the event feed's connection was lost ({exc!r})"))

    def _lose(self, error: ConnectionError) -> None:
        if not self.lost.done():
            self.lost.set_exception(error)
            self.lost.exception()  # (retrieved: a feed closing has stopped awaiting it)


def _honour_cancel() -> None:
    """Raise the cancel of the current task if an earlier await swallowed it.

    redis-py sends each command through ``asyncio.wait_for``, which on Python 3.11 swallows a
    cancel that lands just as the command completes: a waiter whose client went away would
    then wait on in the feed (holding the server's shutdown) for as long as its match stays
    quiet."""
    current = asyncio.current_task()
    if current is not None and current.cancelling():
        raise asyncio.CancelledError


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
