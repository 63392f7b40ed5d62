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

TARGET_P99_MS = 5.0
TARGET_MOVES_PER_SECOND = 500.0


def bench_webhooks(moves: int = 5_000, matches: int = 32, players: int = 4, concurrency: int = 256) -> dict[str, Any]:
    from service.store.embedded_redis import EmbeddedRedis

    folder = Path(tempfile.mkdtemp(prefix="wza-bench-webhooks-"))
    redis = EmbeddedRedis(folder / "redis", appendonly=False)
    url = redis.start()
    secret = "whsec_" + secrets.token_urlsafe(24)
    port = _free_port()
    bot = subprocess.Popen(
        [sys.executable, "-m", "wizard_arena", "serve-bot", "--bot", "random", "--port", str(port), "--secret", secret,
         "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        return asyncio.run(_run(url, port, secret, moves, matches, players, concurrency))
    finally:
        bot.terminate()
        bot.wait(10)
        redis.stop()


async def _run(redis_url: str, port: int, secret: str, moves: int, matches: int, players: int,
               concurrency: int) -> dict[str, Any]:
    from service.domain.services import Services
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
    await services.webhooks.store.join_dispatchers()
    running = asyncio.create_task(dispatcher.run(stop))
    config = MatchConfig.create("WIZARD", players)
    started = time.perf_counter()
    for m in range(matches):
        match_settings = MatchSettings(config, 30_000, False, False, holders[0].id, now_ms())
        await services.matches.create_seated(
            secrets.token_hex(8), config, secrets.token_urlsafe(12), match_settings,
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
