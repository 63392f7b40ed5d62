"""The webhook dispatcher: each worker process calls the bots that have a webhook when they
must act (and when their matches start and end), beside its clock, on the clock's loop.

How it learns of a turn: the commit script that makes a change queues the calls it makes due
(``service.model.live_match.LiveMatch.calls_due``: a seat that must act on something it has
not seen) on the match's home's stream (``service.store.webhooks.CALL_STREAMS``: one per home,
in the match's slot, and the old ``webhooks:calls``), atomically with the change, for the bots
the match marks as hooked. The dispatchers read every stream, each as one consumer group,
blocked in XREADGROUP: a call reaches a dispatcher as soon as it is committed, and only one
dispatcher. Each stream has a reader of its own, blocked on a connection of its own (65 per
dispatcher; idle, they cost Redis about 190 reads a second, 0.6 ms of its CPU a second).
One XREADGROUP may read several streams only when they share a slot, so on a cluster no fewer
will do; on one server a single read of all 65 (as commit 118a8b5 read them) was slower to
hand a call on at the tail (``wizard-arena bench webhooks --reads``, 400 calls/s on homes at
random, 2 cores under load: p90 1.8-4.6 ms and p99 5.5-9.5 ms, against 1.0-1.5 and 3.1-5.2 ms
with a reader per stream; p50 0.3 ms for both but one run; on a 3-master cluster a reader per
stream gave p50 0.35 ms, p99 3.6-9 ms). A pipelined non-blocking read of every stream every
2 ms (``--poll-ms 2``) handed calls on after p50 5.5-8 ms on one server, 10-80 ms on the
cluster: its 65 commands a round cost the loop more than the waiting they save. Saturated, a
read brings a call or two rather than a batch, and idle the readers come back (empty) about
190 times a second, each read's block drawn apart so that they do not all come back at once:
at one match's pace that costs the tail about 1 ms (BENCHMARKS.md).

Before it sends, the dispatcher claims the call's ``webhook-sent`` key (SET NX), in the same
round trip as it reads the match and the webhook; a call that a dispatcher took but did not
finish (it died) is taken over by another after ``TAKE_OVER_AFTER_MS`` (XAUTOCLAIM) and sent
unless it was sent already or its turn has passed. So each (match, version, seat) is called
at most once, and once unless a worker dies with it in hand. A seat's start call goes before
its first turn, whichever dispatchers the two reach: the start claims the seat's
``webhook-started`` key, and a turn that finds it unclaimed makes the start itself, first, or
waits while another dispatcher is making it.

A bot's answer is applied as its own move with ``expectedVersion``. Whatever goes wrong with a
call (no connection, not JSON, an illegal move, a 500, a redirect, too slow, too big) refuses
that move, is recorded as the webhook's ``lastError``, and leaves the seat to its deadline
(the sweeper's fallback move). Failures in a row pause the webhook, with back-off; the first
call after the pause tries it again, and one that goes well ends the failing.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import random
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import orjson
from redis.asyncio import Redis

from sdk.webhook import SIGNATURE_HEADER, sign
from service.api.rest import match_json
from service.domain.matches import Caller
from service.domain.services import Services
from service.domain.webhooks import WebhookInfo, WebhookStatus, refused_address
from service.errors import service_error
from service.health import host_name
from service.model.live_match import LiveMatch
from service.outage import Outage, unless_stopped
from service.store.clock import now_ms
from service.store.keys import bot_key, match_key
from service.store.matches import MatchStore
from service.store.redis_client import open_async
from service.store.webhooks import CALL_STREAMS, FIELDS, WebhookCall, decode
from wizard import Move
from worker.http_client import AnswerError, ConnectFailed, HttpPool

log = logging.getLogger("wizard_arena.webhooks")

#: calls read from the stream at once
BATCH = 256
#: shortest block on a stream (a reader looks at its stop event between; each read blocks
#: BLOCK_MS to twice that)
BLOCK_MS = 200
#: a read with no answer this long (its block is far shorter) is taken as lost, and made again
READ_TIMEOUT = 10.0
#: a call a dispatcher has held this long unfinished is taken over (its dispatcher is gone)
TAKE_OVER_AFTER_MS = 15_000
TAKE_OVER_EVERY = 5.0
#: how often the calls finished are acknowledged (XACK), together
ACKNOWLEDGE_EVERY = 0.05
#: a start or end call queued this long ago is not made any more (a dispatcher was away)
NOTICE_STALE_MS = 60_000
#: how long a name's checked address is kept (connections go to the checked address only)
RESOLVED_SECONDS = 10.0
SENT_KEY_MS = 3_600_000
#: a seat's start key: as long as a match may last (a start key gone mid-match: the start again)
STARTED_KEY_MS = 86_400_000
SENDING, STARTED = b"sending", b"done"
#: how often a turn held back by a start another dispatcher is making looks again
START_POLL_SECONDS = 0.005


class CallFailed(Exception):
    """A webhook call that went wrong; the message is what the bot's owner sees (lastError)."""


class WebhookClient:
    """HTTP POSTs to webhooks: no redirects followed, answers capped in size and time, and
    only to addresses that pass :func:`refused_address`: a name is resolved once, its address
    checked, and the connection made to that address (the name in the Host header and in TLS's
    SNI and certificate check), so that DNS answering differently the second time gains nothing."""

    def __init__(self, max_answer_bytes: int, allow_private: bool) -> None:
        self.http = HttpPool(max_answer_bytes)
        self.allow_private = allow_private
        self._resolved: dict[tuple[str, int], tuple[str, float]] = {}

    async def close(self) -> None:
        await self.http.close()

    async def address(self, host: str, port: int) -> str:
        """The checked address to connect to for ``host`` (CallFailed: refused or unresolvable)."""
        now = time.monotonic()
        known = self._resolved.get((host, port))
        if known is not None and known[1] > now:
            return known[0]
        address = host if _is_address(host) else await _resolve(host, port)
        why = refused_address(address, self.allow_private)
        if why is not None:
            raise CallFailed(f"refused: {host} resolves to {why}")
        if len(self._resolved) > 10_000:
            self._resolved.clear()
        self._resolved[(host, port)] = (address, now + RESOLVED_SECONDS)
        return address

    async def post(self, url: str, body: bytes, headers: dict[str, str], seconds: float,
                   sent: Callable[[], None] | None = None) -> tuple[int, bytes]:
        """POST ``body``; the status and the answer (at most ``max_answer_bytes``). A connection
        that fails is tried once more while time remains; all of it within ``seconds``."""
        end = time.monotonic() + seconds
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        try:
            async with asyncio.timeout(seconds):
                address = await self.address(host, port)
                origin = (parts.scheme, address, port, host, parts.netloc.rpartition("@")[2])
                for attempt in (1, 2):
                    try:
                        if sent is not None:
                            sent()
                        return await self.http.post(origin, path, headers, body)
                    except ConnectFailed as error:
                        if attempt == 2 or time.monotonic() >= end:
                            raise CallFailed(f"could not connect to the webhook: {error}") from None
        except TimeoutError:
            raise CallFailed(f"the webhook did not answer within {seconds * 1000:.0f} ms (its deadline)") from None
        except AnswerError as error:
            raise CallFailed(str(error)) from None
        except (OSError, asyncio.IncompleteReadError) as error:
            raise CallFailed(f"the connection failed: {error or type(error).__name__}") from None
        raise AssertionError("unreachable")  # pragma: no cover


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


async def _resolve(host: str, port: int) -> str:
    """The first address ``host`` resolves to (the one connected to)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as error:
        raise CallFailed(f"the webhook's host {host!r} does not resolve: {error}") from None
    if not infos:
        raise CallFailed(f"the webhook's host {host!r} does not resolve")
    return str(infos[0][4][0])


def _iso(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat().replace("+00:00", "Z")


def parse_move(status: int, content: bytes) -> Move:
    """The move a turn's answer gives, or CallFailed saying what was wrong with it."""
    if 300 <= status < 400:
        raise CallFailed(f"the webhook answered {status} (a redirect): redirects are not followed")
    if status != 200:
        raise CallFailed(f"the webhook answered {status}, not 200 with a move")
    try:
        data = orjson.loads(content)
    except orjson.JSONDecodeError:
        raise CallFailed(f"the answer is not JSON: {content[:80]!r}") from None
    if not isinstance(data, dict):
        raise CallFailed('the answer must be a JSON object: {"bid": n}, {"card": "..."} or {"trump": "..."}')
    try:
        return Move.from_dict({k: v for k, v in data.items() if k in ("bid", "card", "trump")})
    except (ValueError, TypeError, KeyError) as error:
        raise CallFailed(f"the answer holds no move: {error}") from None


class Dispatcher:
    """Reads the calls due and makes them, bounded in all and per bot; never stops for a call
    that failed. ``on_sent`` (for the benchmark) hears each turn call's delay, in seconds, from
    its commit to its request going out."""

    def __init__(self, services: Services, consumer: str | None = None,
                 on_sent: Callable[[WebhookCall, float], None] | None = None,
                 take_over_after_ms: int = TAKE_OVER_AFTER_MS) -> None:
        self.services = services
        self.take_over_after_ms = take_over_after_ms
        settings = services.settings
        self.settings = settings
        self.store = services.webhooks.store
        self.consumer = consumer or f"{host_name()}-{os.getpid()}"
        self.client = WebhookClient(settings.webhook_max_answer_bytes, settings.webhook_allow_private)
        self.on_sent = on_sent
        self._all = asyncio.Semaphore(settings.webhook_concurrency)
        self._per_bot: dict[str, asyncio.Semaphore] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: each (bot, match)'s latest call: the next one to that bot about that match waits for it
        self._in_order: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._done: list[WebhookCall] = []
        #: moves applied, calls that failed (for the benchmark and the log)
        self.moves = 0
        self.failures = 0
        #: the latest failures' reasons (the benchmark reports them)
        self.last_failures: list[str] = []
        #: set once every stream's reader has made a first read (each has its connection and
        #: group): from then on a call queued reaches the dispatcher at once
        self.listening = asyncio.Event()
        self._readers_started = 0

    async def run(self, stop: asyncio.Event) -> None:
        # the blocking reads hold connections of their own, one per stream, not the pool's
        reading = open_async(self.services.settings.redis_url or "", max_connections=len(CALL_STREAMS),
                             timeout=READ_TIMEOUT, client_name=f"wizard-arena-dispatcher-{os.getpid()}")
        readers: list[asyncio.Task[None]] = []
        take_over_every = min(TAKE_OVER_EVERY, self.take_over_after_ms / 3000)
        next_take_over = time.monotonic() + take_over_every
        # an outage of Redis only waits here, quietly: the worker's clock says it in the log, once
        outage = Outage("Redis", None)
        try:
            while not stop.is_set():
                try:
                    if not readers:
                        # one command before the readers' many at once: redis-py's cluster client
                        # (8.1) fails some of the first commands it is given together while it
                        # learns the cluster's nodes ('NoneType' object has no attribute 'writelines')
                        await reading.ping()
                        await self.store.join_dispatchers()
                        readers = [asyncio.create_task(self._read(stream, reading, stop)) for stream in CALL_STREAMS]
                    if time.monotonic() >= next_take_over:
                        next_take_over = time.monotonic() + take_over_every
                        for call in await self.store.take_over(self.consumer, self.take_over_after_ms):
                            self._start(call)
                    await self._acknowledge()  # by the batch: no round trip beside each read
                    outage.recovered()
                    await unless_stopped(stop, ACKNOWLEDGE_EVERY)
                except Exception as error:  # noqa: BLE001 - keep going: the calls wait in the streams
                    await unless_stopped(stop, outage.after(error, lambda: log.warning(
                        "webhook dispatcher: starting its readers, taking over or acknowledging calls failed; retrying",
                        exc_info=True,
                    )))
        finally:
            for reader in readers:
                if not stop.is_set():  # (cancelled: the readers too)
                    reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            try:
                await self._acknowledge()
            except Exception:  # taken over later by another dispatcher
                log.warning("webhook dispatcher: acknowledging at the stop failed", exc_info=True)
            await self.client.close()
            await reading.aclose()

    async def _read(self, stream: str, reading: Redis, stop: asyncio.Event) -> None:
        """Read the calls of ``stream`` as they come, blocked on a connection of ``reading``,
        until ``stop``."""
        joined, started = True, False  # (run joined every stream's group before starting the readers)
        outage = Outage("Redis", None)
        while not stop.is_set():
            try:
                if not joined:
                    await self.store.join_dispatchers([stream])
                    joined = True
                # each read's block drawn apart: 65 readers started together would otherwise all
                # come back at once, idle, every BLOCK_MS, holding a turn's call up behind them
                block_ms = BLOCK_MS + random.randrange(BLOCK_MS)
                for call in await self.store.next_calls(self.consumer, stream, BATCH, block_ms, reading):
                    self._start(call)
                if not started:
                    started = True
                    self._readers_started += 1
                    if self._readers_started == len(CALL_STREAMS):
                        self.listening.set()
                outage.recovered()
            except Exception as error:  # noqa: BLE001 - keep going: the calls wait in the stream (reported below)
                joined = False  # (a Redis that came back without the group: join it again)
                await unless_stopped(stop, outage.after(error, lambda: log.warning(
                    "webhook dispatcher: reading the calls failed; retrying", exc_info=True,
                )))

    async def _acknowledge(self) -> None:
        done, self._done = self._done, []
        try:
            await self.store.done(done)
        except Exception:
            self._done.extend(done)
            raise

    def _start(self, call: WebhookCall) -> None:
        """Make ``call`` once this dispatcher's previous call to the same bot about the same
        match is over: a bot hears of its last turn before the end. (Its start before its first
        turn holds across dispatchers too: see :meth:`_call`.)"""
        in_order = (call.bot_id, call.match_id)
        previous = self._in_order.get(in_order)
        task = asyncio.create_task(self._handle(call, previous))
        self._in_order[in_order] = task
        self._tasks.add(task)

        def finished(task: asyncio.Task[None]) -> None:
            self._tasks.discard(task)
            if self._in_order.get(in_order) is task:
                del self._in_order[in_order]

        task.add_done_callback(finished)

    async def _handle(self, call: WebhookCall, previous: asyncio.Task[None] | None) -> None:
        try:
            if previous is not None:
                await asyncio.wait([previous])
            await self._call(call)
        except Exception:  # a bug here costs this call only
            log.exception("webhook call %s of match %s", call.kind, call.match_id)
        finally:
            self._done.append(call)

    async def _call(self, call: WebhookCall) -> None:
        redis = self.services.redis
        # A start claims its seat's start key, a turn or an end its own sent key. A turn also
        # claims the start key when nobody has (it then makes the start itself, first), and reads
        # it: a start that another dispatcher is making holds the turn back until it is done.
        is_turn = call.kind == "turn"
        async with redis.pipeline(transaction=False) as pipe:
            pipe.set(call.started_key if call.kind == "start" else call.sent_key, SENDING, nx=True, px=SENT_KEY_MS)
            if is_turn:
                pipe.set(call.started_key, SENDING, nx=True, px=STARTED_KEY_MS)
                pipe.get(call.started_key)
            pipe.hmget(match_key(call.match_id), MatchStore.FIELDS)
            pipe.hmget(bot_key(call.bot_id), (*FIELDS, "name"))
            answers = await pipe.execute()
        claimed, match_row, bot_row = answers[0], answers[-2], answers[-1]
        if not claimed:
            return  # sent already (by a dispatcher that was slow to finish, or by a turn: a start)
        starting = call.kind == "start" or (is_turn and bool(answers[1]))
        try:
            stored = MatchStore._stored(call.match_id, match_row)
            hook = decode(bot_row[:-1])
            if stored is None or hook is None:
                return  # the match left Redis, or the bot removed its webhook
            match, info = stored.match, WebhookInfo.of(hook)
            if info.status is WebhookStatus.PAUSED:
                return  # its seats get the fallback move at their deadlines
            caller = Caller(call.bot_id, (bot_row[-1] or b"").decode())
            if is_turn:
                if starting:  # nobody made the seat's start yet: it goes first
                    await self._notice(replace(call, kind="start"), match, caller, hook, info)
                elif answers[2] == SENDING:
                    await self._started(call, match.deadline_ms)
                await self._turn(call, match, caller, hook, info)
            elif now_ms() - int(call.entry_id.split(b"-")[0]) < NOTICE_STALE_MS:
                await self._notice(call, match, caller, hook, info)
        finally:
            if starting:
                await redis.set(call.started_key, STARTED, px=STARTED_KEY_MS)

    async def _started(self, call: WebhookCall, deadline_ms: int | None) -> None:
        """Wait while another dispatcher makes the seat's start call (as long as that call may
        take, and no later than the turn's deadline); one that takes longer (its dispatcher died
        with it) is taken as made."""
        seconds = self.settings.webhook_notice_timeout_seconds
        if deadline_ms is not None:
            seconds = min(seconds, (deadline_ms - now_ms()) / 1000)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await asyncio.sleep(START_POLL_SECONDS)
            if await self.services.redis.get(call.started_key) != SENDING:
                return
        await self.services.redis.set(call.started_key, STARTED, xx=True, px=STARTED_KEY_MS)

    def _bot_limit(self, bot_id: str) -> asyncio.Semaphore:
        limit = self._per_bot.get(bot_id)
        if limit is None:
            if len(self._per_bot) > 10_000:  # drop the idle ones
                self._per_bot = {b: s for b, s in self._per_bot.items() if s.locked()}
            limit = self._per_bot[bot_id] = asyncio.Semaphore(self.settings.webhook_concurrency_per_bot)
        return limit

    async def _post(self, call: WebhookCall, hook: dict[str, str], payload: dict[str, Any], seconds: float) -> tuple[int, bytes]:
        body = orjson.dumps(payload)
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(hook["webhook_secret"], body),
                   "User-Agent": "wizard-arena-webhooks"}
        sent = None
        if self.on_sent is not None and call.kind == "turn":
            queued_ms = int(call.entry_id.split(b"-")[0])
            on_sent = self.on_sent
            sent = lambda: on_sent(call, time.time() - queued_ms / 1000)  # noqa: E731
        end = time.monotonic() + seconds
        async with asyncio.timeout(seconds):
            async with self._bot_limit(call.bot_id), self._all:
                return await self.client.post(hook["webhook"], body, headers, max(0.001, end - time.monotonic()), sent)

    async def _turn(self, call: WebhookCall, match: LiveMatch, caller: Caller, hook: dict[str, str],
                    info: WebhookInfo) -> None:
        if call.seat not in match.awaiting() or match.stale_for(call.seat, call.version) or match.deadline_ms is None:
            return  # the turn has passed (the seat moved by itself, or timed out)
        seconds = (match.deadline_ms - now_ms()) / 1000
        if seconds <= 0:
            return
        payload = {"type": "turn", "match": match_json(match, caller), "version": match.version,
                   "deadline": _iso(match.deadline_ms)}
        try:
            try:
                status, content = await self._post(call, hook, payload, seconds)
            except TimeoutError:
                raise CallFailed(f"the webhook did not answer by the deadline ({seconds * 1000:.0f} ms)") from None
            move = parse_move(status, content)
            try:
                await self.services.matches.submit_move(caller, call.match_id, move, expected_version=match.version)
            except Exception as error:
                refused = service_error(error)
                if refused is None:
                    raise
                raise CallFailed(f"the move {move.to_dict()} was refused: {refused.code}: {refused.message}") from None
        except CallFailed as failed:
            await self._failed(call, hook, str(failed))
            return
        self.moves += 1
        if info.status is not WebhookStatus.ACTIVE:
            await self.store.succeeded(call.bot_id)

    async def _notice(self, call: WebhookCall, match: LiveMatch, caller: Caller, hook: dict[str, str],
                      info: WebhookInfo) -> None:
        """A start or an end: the bot's view then; any 2xx answer will do."""
        payload = {"type": call.kind, "match": match_json(match, caller), "version": match.version}
        seconds = self.settings.webhook_notice_timeout_seconds
        try:
            try:
                status, _ = await self._post(call, hook, payload, seconds)
            except TimeoutError:
                raise CallFailed(f"the webhook did not answer the {call.kind} call within {seconds:g} s") from None
            if 300 <= status < 400:
                raise CallFailed(f"the webhook answered {status} (a redirect) to the {call.kind} call: redirects are "
                                 "not followed")
            if not 200 <= status < 300:
                raise CallFailed(f"the webhook answered {status} to the {call.kind} call, not 2xx")
        except CallFailed as failed:
            await self._failed(call, hook, str(failed))
            return
        if info.status is not WebhookStatus.ACTIVE:
            await self.store.succeeded(call.bot_id)

    async def _failed(self, call: WebhookCall, hook: dict[str, str], why: str) -> None:
        self.failures += 1
        self.last_failures = [*self.last_failures[-4:], why]
        s = self.settings
        reason = f"{call.kind} of match {call.match_id} (version {call.version}): {why}"
        log.info("webhook of bot %s: %s", call.bot_id, reason)
        await self.store.failed(call.bot_id, hook["webhook"], reason, now_ms(), s.webhook_pause_after_failures,
                                int(s.webhook_pause_seconds * 1000), int(s.webhook_pause_max_seconds * 1000))
