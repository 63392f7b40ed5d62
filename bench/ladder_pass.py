"""``wizard-arena bench ladder-pass``: the workers' pairing pass of one ladder
(``service.domain.ladders.LadderService.pair``) over many members, through a real Redis.

Starts an embedded Redis, registers ``bots`` bots, gives them spread FITTED ratings (one
refit's worth, stored as a refit stores them), makes them all members of ``WIZARD:<players>``
and times, in this process:

- *a pass that starts tables*: every member is free, so the pass reads them all (names,
  pauses, ratings, matches in play), pairs them (``ranking.ladder.pair_ladder``), and stores
  and starts every table (each a rated seated match, created as tournaments create theirs);
- *a pass with nothing to start*: every member sits at the cap, so the pass reads and pairs
  but starts nothing: the cost the ladder adds to the workers' clock on every tick once it
  is full.

Each is run ``passes`` times (a fresh ladder for each pass that starts tables) and reported
as the median and the slowest, with the tables started. No worker runs: nobody moves, so
the matches stay in play and the members at the cap.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.deadlines import machine
from service.domain.matches import Caller
from service.domain.services import Services
from service.settings import Settings
from service.store.embedded_redis import EmbeddedRedis


async def _ladder_of(services: Services, ruleset: str, players: int, bots: int, prefix: str) -> list[str]:
    """``bots`` new members of the ladder, with FITTED ratings spread as a real ladder's are."""
    rng = random.Random(prefix)
    members = []
    for n in range(bots):
        _, bot = await services.bots.register(f"{prefix}-{n}", address=f"bench-{prefix}")
        await services.ladders.join(Caller(bot["id"], bot["name"]), ruleset, players)
        members.append(bot["id"])
    ratings = {b: rng.gauss(1500, 200) for b in members}
    games = {b: rng.randrange(0, 60) for b in members}
    await services.ratings.ratings.store_fit(ruleset, ratings, games, {b: 400 / (1 + games[b]) ** 0.5 for b in members})
    return members


async def _timed_pass(services: Services, ladder: str) -> tuple[float, int]:
    start = time.perf_counter()
    started = await services.ladders.pair(ladder)
    return (time.perf_counter() - start) * 1000, started


async def _bench(redis_url: str, bots: int, players: int, passes: int) -> dict[str, Any]:
    ruleset = "WIZARD"
    settings = Settings(  # type: ignore[call-arg]
        REDIS_URL=redis_url, registrations_per_address_per_hour=10**6, ladder_max_matches=1,
    )
    services = await Services.start(settings, role="bench")
    try:
        starting: list[tuple[float, int]] = []
        idle: list[tuple[float, int]] = []
        for run in range(passes):
            await services.redis.flushdb()  # a ladder of new members for each run
            await _ladder_of(services, ruleset, players, bots, f"b{run}")
            ladder = services.ladders.ladder_of(ruleset, players)
            starting.append(await _timed_pass(services, ladder))
            idle.append(await _timed_pass(services, ladder))
        await services.matches.drain()
    finally:
        await services.close()

    def summary(rows: list[tuple[float, int]]) -> dict[str, Any]:
        ms = [r[0] for r in rows]
        return {"median_ms": round(statistics.median(ms), 1), "max_ms": round(max(ms), 1), "tables": rows[0][1]}

    return {
        "bots": bots, "players": players, "passes": passes,
        "pass_starting_tables": summary(starting), "pass_at_cap": summary(idle), "machine": machine(),
    }


def bench_ladder_pass(bots: int = 1000, players: int = 4, passes: int = 5) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ladder-bench-") as folder:
        server = EmbeddedRedis(Path(folder), appendonly=False)
        url = server.start()
        try:
            return asyncio.run(_bench(url, bots, players, passes))
        finally:
            server.stop()
