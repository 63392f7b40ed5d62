"""``wizard-arena bench layout-upgrade``: the start-up step (``service.store.upgrade``) on one
Redis server that holds the old layout: ``bots`` bots' ratings kept under their own tag (two
rulesets each, and a history) among ``keys`` other keys. Reports, in this process:

- ``upgrade_s``: the first start's step, which moves them all;
- ``upgrade_stall_ms``: the longest a PING from another connection waited meanwhile: how long
  one command of the step held the server up;
- ``keys_stall_ms``: the same for one script running the two KEYS over the same key space that
  the step ran in one script before it found the keys by SCAN (that script also moved every
  key: it held the server up at least this long);
- ``idle_stall_ms``: the same over a second of nothing running (the machine's own noise: the
  stalls above count only past it);
- ``done_ms``: the step on a server moved already (the median of 200): what every later start of
  a process costs.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis as sync_redis

from bench.deadlines import machine
from service.store.embedded_redis import EmbeddedRedis
from service.store.redis_client import open_async
from service.store.upgrade import upgrade_layout

#: commands a pipeline sends at a time while the key space is filled
FILL_BATCH = 10_000

# The search the step once ran inside its one script (as a script: the server runs nothing else).
KEYS_SEARCH = "return #redis.call('KEYS', '{b:*}:ratings') + #redis.call('KEYS', '{b:*}:history:*')"


def _fill(client: sync_redis.Redis, bots: int, keys: int) -> None:
    rating = json.dumps({"rating": 1600.0, "games": 3, "deviation": 200.0})
    with client.pipeline(transaction=False) as pipe:
        for n in range(keys):
            pipe.set(f"{{m:{n:012x}}}:match", "x")
            if n % FILL_BATCH == FILL_BATCH - 1:
                pipe.execute()
        for n in range(bots):
            bot = f"{n:016x}"
            pipe.hset(f"{{b:{bot}}}:bot", "name", bot)
            pipe.hset(f"{{b:{bot}}}:ratings", mapping={"WIZARD": rating, "WIZARD_JUNIOR": rating})
            pipe.rpush(f"{{b:{bot}}}:history:WIZARD", json.dumps({"rating": 1600.0, "matchId": "m", "at": n}))
            if n % FILL_BATCH == FILL_BATCH - 1:
                pipe.execute()
        pipe.execute()


def _stall_ms(url: str, work: Callable[[], Any]) -> tuple[float, float]:
    """``work()``'s wall time (s), and the longest a PING on another connection waited meanwhile (ms)."""
    pinger = sync_redis.Redis.from_url(url)
    done = threading.Event()
    longest = [0.0]

    def ping() -> None:
        while not done.is_set():
            start = time.perf_counter()
            pinger.ping()
            longest[0] = max(longest[0], time.perf_counter() - start)

    thread = threading.Thread(target=ping)
    thread.start()
    try:
        start = time.perf_counter()
        work()
        took = time.perf_counter() - start
    finally:
        done.set()
        thread.join()
        pinger.close()
    return took, longest[0] * 1000


async def _done_ms(url: str, times: int) -> float:
    client = open_async(url, max_connections=2, timeout=10, client_name="bench")
    try:
        took = []
        for _ in range(times):
            start = time.perf_counter()
            await upgrade_layout(client)
            took.append(time.perf_counter() - start)
        return statistics.median(took) * 1000
    finally:
        await client.aclose()


def _upgrade(url: str) -> None:
    async def run() -> None:
        client = open_async(url, max_connections=2, timeout=60, client_name="bench")
        try:
            await upgrade_layout(client)
        finally:
            await client.aclose()

    asyncio.run(run())


def bench_layout_upgrade(bots: int = 20_000, keys: int = 500_000) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="layout-bench-") as folder:
        server = EmbeddedRedis(Path(folder), appendonly=False)
        url = server.start()
        client = sync_redis.Redis.from_url(url)
        try:
            _fill(client, bots, keys)
            _, keys_stall = _stall_ms(url, lambda: client.eval(KEYS_SEARCH, 0))
            upgrade, upgrade_stall = _stall_ms(url, lambda: _upgrade(url))
            _, idle_stall = _stall_ms(url, lambda: time.sleep(1))
            moved = client.hlen("{r:WIZARD}:elo")
            done = asyncio.run(_done_ms(url, 200))
        finally:
            client.close()
            server.stop()
    assert moved == bots, f"{moved} of {bots} bots' ratings moved"
    return {
        "bots": bots, "other_keys": keys, "upgrade_s": round(upgrade, 2), "upgrade_stall_ms": round(upgrade_stall, 1),
        "keys_stall_ms": round(keys_stall, 1), "idle_stall_ms": round(idle_stall, 1), "done_ms": round(done, 3), "machine": machine(),
    }
