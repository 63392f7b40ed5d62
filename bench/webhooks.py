"""``wizard-arena bench webhooks``: how fast one worker's webhook dispatcher drives webhook bots.

Starts an embedded Redis and a fast local bot (``wizard-arena serve-bot --bot random``, its own
process), registers bots whose webhooks all point at it (one shared secret), and creates
matches with every seat taken by them (as a tournament does: they start at once). Then it runs
the worker's :class:`worker.webhooks.Dispatcher` in this process, on one asyncio loop, as a
worker's clock thread runs it, until the requested number of webhook moves is made. Reported:

- ``moves_per_second``: webhook moves applied (the call made, the answer parsed, the move
  committed, which makes the next turn due), over the whole run;
- ``due_to_sent_ms``: per turn call, from the commit that made it due to its request going out.
  The start is the stream entry's id, Redis's own clock at the commit (whole ms, so a figure
  is up to 1 ms more than the truth, never less); the end is the dispatcher's clock as it hands
  the request to the connection.

``--cluster`` runs the same on an embedded Redis Cluster of 3 masters (with a replica each).

``--reads`` measures the dispatcher's reading alone (:func:`bench_webhook_reads`): calls queued
on homes drawn at random at a steady rate, the time from each XADD to the dispatcher's reader
handing the call on (``queued_to_read_ms``, on this process's clock), and what its reads cost
Redis while idle. ``--poll-ms N`` reads instead by a pipelined non-blocking XREADGROUP of every
stream each N ms (the alternative to blocked readers that ``worker.webhooks`` measured against).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.deadlines import machine
from bench.service import percentile
from service.store.embedded_redis import stop_processes

TARGET_P99_MS = 5.0
TARGET_MOVES_PER_SECOND = 500.0


def _redis(folder: Path, cluster: bool) -> Any:
    """An embedded Redis server, or a Redis Cluster of 3 masters and 3 replicas (not started)."""
    from service.store.embedded_cluster import EmbeddedCluster
    from service.store.embedded_redis import EmbeddedRedis

    return EmbeddedCluster(folder / "cluster", masters=3, replicas=1) if cluster else EmbeddedRedis(
        folder / "redis", appendonly=False)


def bench_webhooks(moves: int = 5_000, matches: int = 32, players: int = 4, concurrency: int = 256,
                   cluster: bool = False) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="wza-bench-webhooks-"))
    redis = _redis(folder, cluster)
    url = redis.start()
    secret = "whsec_" + secrets.token_urlsafe(24)
    port = _free_port()
    bot = subprocess.Popen(
        [sys.executable, "-m", "wizard_arena", "serve-bot", "--bot", "random", "--port", str(port), "--secret", secret,
         "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        return {"redis": "cluster of 3 masters" if cluster else "one server",
                **asyncio.run(_run(url, port, secret, moves, matches, players, concurrency))}
    finally:
        stop_processes([bot], 10)
        redis.stop()


async def _run(redis_url: str, port: int, secret: str, moves: int, matches: int, players: int,
               concurrency: int) -> dict[str, Any]:
    from service.domain.services import Services
    from service.model.homes import new_match_id
    from service.model.live_match import MatchSettings, SeatHolder
    from service.settings import Settings
    from service.store.clock import now_ms
    from wizard import MatchConfig
    from worker.webhooks import Dispatcher

    settings = Settings.model_validate({"REDIS_URL": redis_url}).model_copy(update={
        "webhook_allow_private": True, "webhook_concurrency": concurrency,
        "registrations_per_address_per_hour": 1_000_000,
    })
    services = Services.open(settings, role="worker")
    hook = f"http://127.0.0.1:{port}/"
    await _wait_listening(port)
    holders = []
    for n in range(matches * players):
        _, registered = await services.bots.register(f"hooked-{n}-{os.urandom(3).hex()}", address="bench")
        await services.webhooks.store.set(registered["id"], hook, secret)
        holders.append(SeatHolder(registered["id"], registered["name"]))
    delays: list[float] = []
    dispatcher = Dispatcher(services, consumer="bench", on_sent=lambda call, seconds: delays.append(seconds * 1000))
    stop = asyncio.Event()
    running = asyncio.create_task(dispatcher.run(stop))
    await dispatcher.listening.wait()  # (not timing a worker's start)
    config = MatchConfig.create("WIZARD", players)
    started = time.perf_counter()
    for m in range(matches):
        match_settings = MatchSettings(config, 30_000, False, False, holders[0].id, now_ms())
        await services.matches.create_seated(
            new_match_id(), config, secrets.token_urlsafe(12), match_settings,
            holders[m * players:(m + 1) * players],
        )
    made, last_move = 0, started
    while dispatcher.moves < moves:
        await asyncio.sleep(0.05)  # the dispatcher counts; nothing to wait on
        if dispatcher.moves != made:
            made, last_move = dispatcher.moves, time.perf_counter()
        elif time.perf_counter() - last_move > 2:  # every match has ended (or the run stalls)
            break
    else:
        last_move = time.perf_counter()
    elapsed = last_move - started
    made = dispatcher.moves
    stop.set()
    await running
    await services.close()
    p99 = percentile(delays, 0.99)
    rate = made / elapsed
    return {
        "machine": machine(),
        "matches": matches, "players": players, "webhook_concurrency": concurrency,
        "moves": made, "failures": dispatcher.failures, "last_failures": dispatcher.last_failures, "seconds": round(elapsed, 2),
        "moves_per_second": round(rate, 1),
        "due_to_sent_ms": {"p50": round(percentile(delays, 0.5), 2), "p90": round(percentile(delays, 0.9), 2),
                           "p99": round(p99, 2), "max": round(max(delays, default=float("nan")), 2), "calls": len(delays)},
        "targets": {"p99_ms": TARGET_P99_MS, "moves_per_second": TARGET_MOVES_PER_SECOND,
                    "p99_reached": p99 <= TARGET_P99_MS, "rate_reached": rate >= TARGET_MOVES_PER_SECOND},
    }


def bench_webhook_reads(calls: int = 2_000, rate: float = 400.0, cluster: bool = False,
                        poll_ms: float | None = None) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="wza-bench-webhook-reads-"))
    redis = _redis(folder, cluster)
    url = redis.start()
    try:
        return {"machine": machine(), "redis": "cluster of 3 masters" if cluster else "one server",
                "reading": f"pipelined poll every {poll_ms:g} ms" if poll_ms else "blocked readers (the dispatcher's)",
                **asyncio.run(_reads(url, calls, rate, poll_ms))}
    finally:
        redis.stop()


async def _reads(redis_url: str, calls: int, rate: float, poll_ms: float | None) -> dict[str, Any]:
    import random

    from service.domain.services import Services
    from service.model.homes import HOMES, home_of_match, new_match_id
    from service.settings import Settings
    from service.store.keys import WEBHOOK_DISPATCHERS, home_key
    from service.store.webhooks import CALL_STREAMS, WebhookCall, calls_read
    from worker.webhooks import Dispatcher

    services = Services.open(Settings.model_validate({"REDIS_URL": redis_url}), role="worker")
    queuing = Services.open(Settings.model_validate({"REDIS_URL": redis_url}), role="api")
    in_home: dict[int, str] = {}
    while len(in_home) < HOMES:  # a match id of each home (the calls' ids: its own and a count)
        match_id = new_match_id()
        in_home.setdefault(home_of_match(match_id) or 0, match_id)
    queued: dict[str, float] = {}
    delays: list[float] = []

    class Reading(Dispatcher):
        """The dispatcher, its reads as written, each call only timed and acknowledged."""

        def _start(self, call: WebhookCall) -> None:
            delays.append((time.perf_counter() - queued[call.match_id]) * 1000)
            self._done.append(call)

    dispatcher = Reading(services, consumer="reads")
    store = dispatcher.store
    stop = asyncio.Event()

    async def poll(every: float) -> None:  # the alternative: no blocked reads
        while not stop.is_set():
            async with services.redis.pipeline(transaction=False) as pipe:
                for stream in CALL_STREAMS:
                    pipe.xreadgroup(WEBHOOK_DISPATCHERS, "reads", {stream: ">"}, count=256)
                answers = await pipe.execute()
            for answer in answers:
                for call in calls_read(answer):
                    dispatcher._start(call)
            await dispatcher._acknowledge()
            await asyncio.sleep(every)

    await store.join_dispatchers()
    if poll_ms:
        running = asyncio.create_task(poll(poll_ms / 1000))
    else:
        running = asyncio.create_task(dispatcher.run(stop))
        await dispatcher.listening.wait()
    idle_before = await _read_commands(redis_url)
    await asyncio.sleep(5.0)  # idle: what waiting costs Redis
    idle_after = await _read_commands(redis_url)
    started = time.perf_counter()
    for n in range(calls):
        home = random.randrange(HOMES)
        call_id = f"{in_home[home]}-{n}"
        queued[call_id] = time.perf_counter()
        await queuing.redis.xadd(home_key(home, "webhook-calls"), {"c": f"{call_id}|1|0|turn|bench"})
        await asyncio.sleep(max(0.0, started + (n + 1) / rate - time.perf_counter()))
    async with asyncio.timeout(30):
        while len(delays) < calls:
            await asyncio.sleep(0.01)  # (the count of calls read: nothing to await)
    stop.set()
    if poll_ms:
        running.cancel()
    else:
        await running
    await services.close()
    await queuing.close()
    return {
        "calls": calls, "calls_per_second": rate,
        "queued_to_read_ms": {"p50": round(percentile(delays, 0.5), 2), "p90": round(percentile(delays, 0.9), 2),
                              "p99": round(percentile(delays, 0.99), 2), "max": round(max(delays), 2)},
        "idle_reads_per_second": round((idle_after[0] - idle_before[0]) / 5.0),
        "idle_redis_cpu_ms_per_second": round((idle_after[1] - idle_before[1]) / 5.0 / 1000, 3),
    }


async def _read_commands(redis_url: str) -> tuple[int, int]:
    """XREADGROUP calls and their Redis CPU (µs) so far, over every master."""
    import redis

    from service.store.redis_client import clustered, open_sync

    client = open_sync(redis_url)
    try:
        if clustered(client):
            per_node = list(client.info("commandstats", target_nodes=redis.RedisCluster.PRIMARIES).values())
        else:
            per_node = [client.info("commandstats")]
        read = [node.get("cmdstat_xreadgroup", {"calls": 0, "usec": 0}) for node in per_node]
        return sum(int(r["calls"]) for r in read), sum(int(r["usec"]) for r in read)
    finally:
        client.close()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _wait_listening(port: int, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while True:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            if time.monotonic() > end:
                raise
            await asyncio.sleep(0.05)  # the bot process is starting
