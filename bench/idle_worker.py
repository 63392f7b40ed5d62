"""``wizard-arena bench idle-worker``: what a worker costs with nothing to do. One embedded
Redis (empty) and ``workers`` worker processes (``bench.deadlines.Arena``, whose serve
process idles beside them); after they have registered, the CPU each worker (with any job it
ran) and Redis used over ``seconds``, as a share of one core. A worker's clock goes round
every 10 ms (``worker.deadlines.POLL_SECONDS``) however idle it is: this is its floor."""

from __future__ import annotations

import time
from typing import Any

from bench.deadlines import Arena, machine


def bench_idle_worker(workers: int = 1, seconds: float = 10.0, settle_seconds: float = 3.0) -> dict[str, Any]:
    if workers < 1 or seconds <= 0:
        raise ValueError("1 or more workers, over more than 0 seconds")
    with Arena(workers=workers) as arena:
        time.sleep(settle_seconds)  # past the workers' start-up (imports, RQ's registration)
        before, started = arena.cpu_seconds(), time.perf_counter()
        time.sleep(seconds)  # the measurement: nothing happens meanwhile, by design
        after, elapsed = arena.cpu_seconds(), time.perf_counter() - started
    share = {
        name: None if after[name] is None or before[name] is None else round(100 * (after[name] - before[name]) / elapsed, 1)  # type: ignore[operator]
        for name in after
    }
    return {
        "benchmark": "idle-worker",
        "machine": machine(),
        "workers": workers,
        "seconds": round(elapsed, 1),
        "percent_of_a_core": {"per_worker": None if share["workers"] is None else round(share["workers"] / workers, 1),
                              "redis": share["redis"], "serve": share["serve"]},
    }


__all__ = ["bench_idle_worker"]
