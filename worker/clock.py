"""The worker's clock: one asyncio loop per worker process that keeps everything moving.

- every ~10 ms: the deadline sweep (``worker.deadlines``);
- every 0.2 s: ended matches waiting in the settlement queue get RQ jobs, by the batch
  (``worker.jobs.settle_matches``), and refits asked for a job each
  (``worker.jobs.fit_ratings``); a settlement that a dead worker left unfinished is queued
  again once its claim (``SETTLE_CLAIM_SECONDS``) lapses;
- every 0.05 s: the house-only matches workers started (tournament tables of house bots) and
  handed over are taken, each worker's clock one a round while it has room
  (``HOUSE_MATCHES_PER_WORKER``), and played in its loop: every worker takes a share;
- every 0.5 s: each tournament that is due or running is advanced (started at its time,
  its next tables created as its matches end), and each that ended gets a job that archives
  it (``worker.jobs.archive_tournament``); challenges past their expiry are written EXPIRED,
  and an accepted one whose match its accepting process did not make gets it
  (``service.domain.challenges``);
- every ``ARENA_LADDER_PAIR_SECONDS``: each ladder's pairing pass (``service.domain.ladders``),
  which starts its next rated tables (one pass of a ladder at a time, across all workers).
Each round it also writes its heartbeat (``service.health``), at most once a second.
The clock itself never waits on the archive's database: the jobs do, so a database away
holds up neither deadlines nor tournaments.
Any number of workers may run it; what it triggers is idempotent. The API and the domain
never queue jobs themselves: they write what must happen into Redis, and this turns it
into work.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from redis import Redis as SyncRedis
from rq import Queue

from service.domain.services import Services
from service.health import Heartbeat
from service.outage import Outage, unless_stopped
from service.store.clock import now_ms
from worker import jobs
from worker.deadlines import POLL_SECONDS, Sweeper

log = logging.getLogger("wizard_arena.clock")

#: the RQ queue the clocks put jobs on, and the workers run
JOB_QUEUE = "default"
SETTLE_EVERY = 0.2
TOURNAMENTS_EVERY = 0.5
HOUSE_PLAY_EVERY = 0.05
#: house-only matches one worker's clock plays at once at most: the rest wait for a worker with
#: room (the moves are the CPU's: more at once in one process only share its core)
HOUSE_MATCHES_PER_WORKER = 8
#: house-only matches a clock takes in one round (every HOUSE_PLAY_EVERY s): one, so that the
#: matches a round of a tournament hands over at once are shared out among the workers polling
HOUSE_MATCHES_PER_ROUND = 1
SETTLE_CLAIM_SECONDS = 30
#: ended matches settled by one job at most
SETTLE_BATCH = 200


class JobQueue:
    """The RQ queue, fed from the clock's loop (RQ speaks synchronous Redis: in a thread)."""

    def __init__(self, redis_url: str) -> None:
        self.queue = Queue(JOB_QUEUE, connection=SyncRedis.from_url(redis_url))

    async def put(self, job: Callable[..., Any], *args: Any, job_id: str) -> None:
        await asyncio.to_thread(self.queue.enqueue, job, *args, job_id=job_id)

    def close(self) -> None:
        self.queue.connection.close()


async def queue_settlements(services: Services, queue: JobQueue) -> int:
    """The ended matches nobody settles yet, claimed, in jobs of SETTLE_BATCH (a job is a
    process and its connections: one per match capped a worker at a few dozen a second)."""
    claimed = await services.settlement.claim(200, SETTLE_CLAIM_SECONDS)
    for start in range(0, len(claimed), SETTLE_BATCH):
        batch = claimed[start:start + SETTLE_BATCH]
        await queue.put(jobs.settle_matches, batch, job_id=f"settle-{batch[0]}-{len(batch)}")
    return len(claimed)


class HousePlayer:
    """This worker's share of the house-only matches handed over (``service.store.house_play``):
    one a round while it has room, each played to its end as a task of the clock's loop (where
    the worker that started a match used to play it: now whichever worker has room does)."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.playing: set[asyncio.Task[None]] = set()

    async def take_share(self) -> int:
        house_play = self.services.matches.house_play
        room = HOUSE_MATCHES_PER_WORKER - len(self.playing)
        if house_play is None or room <= 0:
            return 0
        taken = await house_play.take(min(room, HOUSE_MATCHES_PER_ROUND))
        for match_id in taken:
            task = asyncio.create_task(self.services.matches.play_house_turns(match_id))
            self.playing.add(task)
            task.add_done_callback(self.playing.discard)
        return len(taken)

    async def stop(self) -> None:
        """Stop playing: a match left unfinished is played by the deadline sweeper of any worker."""
        for task in self.playing:
            task.cancel()
        await asyncio.gather(*self.playing, return_exceptions=True)


async def queue_tournament_archives(services: Services, queue: JobQueue) -> int:
    claimed = await services.settlement.claim_tournaments(50, SETTLE_CLAIM_SECONDS)
    for tid in claimed:
        await queue.put(jobs.archive_tournament, tid, job_id=f"archive-tournament-{tid}")
    return len(claimed)


async def queue_fits(services: Services, queue: JobQueue) -> int:
    claimed = await services.ratings.claim_fit_requests()
    for ruleset in claimed:
        await queue.put(jobs.fit_ratings, ruleset, job_id=f"fit-{ruleset}-{now_ms()}")
    return len(claimed)


async def advance_tournaments(services: Services) -> None:
    for tid in await services.tournaments.due():
        try:
            await services.tournaments.advance(tid)
        except Exception:
            log.exception("advancing tournament %s", tid)


async def pair_ladders(services: Services) -> None:
    """One pass over every ladder. It runs beside the clock's loop, not in it: a pass that
    starts hundreds of tables (a big ladder opening) holds up no deadline."""
    try:
        ladders = await services.ladders.ladders()
    except Exception:  # noqa: BLE001 - Redis away: the clock's own tick says so; the next pass tries again
        return
    for ladder in ladders:
        try:
            await services.ladders.pair(ladder)
        except Exception:
            log.exception("pairing ladder %s", ladder)


async def run_clock(services: Services, queue: JobQueue, stop: asyncio.Event) -> None:
    next_settle = next_tournaments = next_ladders = next_house_play = 0.0
    ladder_pass: asyncio.Task[None] | None = None  # one pass at a time in this worker
    heartbeat = Heartbeat(services.redis)  # /readyz and `worker --check` see the clock go round
    sweeper = Sweeper(services)
    house_player = HousePlayer(services)
    outage = Outage("Redis", log)
    while not stop.is_set():
        try:
            await heartbeat.beat()
            upcoming = await sweeper.sweep()
            now = time.monotonic()
            if now >= next_settle:
                next_settle = now + SETTLE_EVERY
                await queue_settlements(services, queue)
                await queue_fits(services, queue)
            if now >= next_house_play:
                next_house_play = now + HOUSE_PLAY_EVERY
                await house_player.take_share()
            if now >= next_tournaments:
                next_tournaments = now + TOURNAMENTS_EVERY
                await advance_tournaments(services)
                await services.challenges.sweep()
                await queue_tournament_archives(services, queue)
            if now >= next_ladders and (ladder_pass is None or ladder_pass.done()):
                next_ladders = now + services.settings.ladder_pair_seconds
                ladder_pass = asyncio.create_task(pair_ladders(services))
            outage.recovered()
        except Exception as error:  # noqa: BLE001 - keep the clock running, whatever failed (outage.after reports it)
            # Redis away (restarting, say): said once, when it starts, and once when it ends
            await unless_stopped(stop, outage.after(error, lambda: log.exception("clock tick failed; retrying")))
            continue
        wait = min(POLL_SECONDS, max(0.0, (upcoming - now_ms()) / 1000))
        await unless_stopped(stop, wait)
    await house_player.stop()
    if ladder_pass is not None:
        await ladder_pass  # a pass ends by itself, each table stored and started whole
