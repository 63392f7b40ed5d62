"""The worker's clock: one asyncio loop per worker process that keeps everything moving.

- every ~10 ms: the deadline sweep (``worker.deadlines``);
- every 0.2 s: ended matches waiting in the settlement queue get an RQ job each
  (``settle-<match>``); a job that a dead worker left unfinished is queued again once its
  claim (``SETTLE_CLAIM_SECONDS``) lapses;
- every 2 s: each tournament that is due or running is advanced, a safety net under the
  jobs (RQ starts it at its time; each settled match moves it on).
Any number of workers may run it; what it triggers is idempotent.
"""

from __future__ import annotations

import asyncio
import logging
import time

from service.domain.services import Services
from service.store.clock import now_ms
from service.store.keys import UNSETTLED
from worker.deadlines import POLL_SECONDS, sweep_once

log = logging.getLogger("wizard_arena.clock")

SETTLE_EVERY = 0.2
TOURNAMENTS_EVERY = 2.0
SETTLE_CLAIM_SECONDS = 30


async def queue_settlements(services: Services) -> int:
    redis = services.redis
    ended = [m.decode() for m in await redis.zrange(UNSETTLED, 0, 199)]
    queued = 0
    for match_id in ended:
        if await redis.set(f"settle-claim:{match_id}", "1", nx=True, ex=SETTLE_CLAIM_SECONDS):
            await services.enqueue("worker.jobs.settle_match", match_id, job_id=f"settle-{match_id}")
            queued += 1
    return queued


async def advance_tournaments(services: Services) -> None:
    for tid in await services.tournaments.store.due(now_ms()):
        try:
            await services.tournaments.advance(tid)
        except Exception:
            log.exception("advancing tournament %s", tid)


async def run_clock(services: Services, stop: asyncio.Event) -> None:
    store = services.matches.matches
    next_settle = next_tournaments = 0.0
    while not stop.is_set():
        try:
            await sweep_once(services)
            now = time.monotonic()
            if now >= next_settle:
                next_settle = now + SETTLE_EVERY
                await queue_settlements(services)
            if now >= next_tournaments:
                next_tournaments = now + TOURNAMENTS_EVERY
                await advance_tournaments(services)
            upcoming = await store.next_deadline()
        except Exception:  # Redis away for a moment: keep the clock running
            log.exception("clock tick failed; retrying")
            upcoming = None
            await asyncio.sleep(0.5)
        wait = POLL_SECONDS if upcoming is None else min(POLL_SECONDS, max(0.0, (upcoming - now_ms()) / 1000))
        try:
            await asyncio.wait_for(stop.wait(), timeout=wait)
        except TimeoutError:
            pass
