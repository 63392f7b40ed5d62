"""The service's parts wired together for one process: a Redis pool and the domain
services on it. Made by the app's lifespan (and by the worker), never at import time."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from redis import Redis as SyncRedis
from redis.asyncio import BlockingConnectionPool, Redis
from rq import Queue

from service.domain.bots import BotService
from service.store.feed import EventFeed
from service.domain.matches import MatchService
from service.metrics import Metrics
from service.store.script_line import ScriptLine
from service.settings import Settings
from service.store.bots import BotStore
from service.store.clock import now_ms
from service.store.keys import fit_claim_key
from service.store.matches import MatchStore
from service.store.ratings import RatingStore
from service.domain.tournaments import TournamentService


#: the RQ queue the API and the workers' clocks put jobs on, and the workers run
JOB_QUEUE = "default"
#: longest a request waits for a free pooled Redis connection
POOL_WAIT_SECONDS = 10.0
#: longest a Redis command may take to answer (no command of the service blocks)
COMMAND_TIMEOUT_SECONDS = 10.0


@dataclass
class Services:
    settings: Settings
    redis: Redis
    #: the pipelined connection for the move path's scripts (see service.redis_line)
    scripts: ScriptLine
    bots: BotService
    matches: MatchService
    metrics: Metrics
    tournaments: TournamentService
    ratings: RatingStore
    _queue: Queue | None = None

    @classmethod
    def open(cls, settings: Settings, metrics: Metrics | None = None, role: str = "api") -> Services:
        """The services of one process; its Redis connections are named after ``role`` and its
        pid (``wizard-arena-api-1234``), as CLIENT LIST shows them."""
        if not settings.redis_url:
            raise RuntimeError("REDIS_URL is not set (wizard-arena up starts an embedded Redis and sets it)")
        # A bounded pool: requests beyond it wait their turn for a connection (up to
        # POOL_WAIT_SECONDS) instead of failing with "Too many connections". Nothing holds a
        # pooled connection for long: waiting goes through the feed's connection.
        pool = BlockingConnectionPool.from_url(
            settings.redis_url, max_connections=settings.redis_pool_size, timeout=POOL_WAIT_SECONDS,
            health_check_interval=30, socket_timeout=COMMAND_TIMEOUT_SECONDS,
            client_name=f"wizard-arena-{role}-{os.getpid()}",
        )
        redis = Redis(connection_pool=pool, decode_responses=False)
        metrics = metrics or Metrics()
        scripts = ScriptLine(redis)
        bot_store = BotStore(redis, scripts)
        feed = EventFeed(redis, settings.max_waits_per_client)
        metrics.follow(feed)
        matches = MatchService(MatchStore(redis, scripts), bot_store, settings, feed, on_change=metrics.on_change)
        services = cls(
            settings, redis, scripts, BotService(bot_store, settings), matches, metrics,
            TournamentService(redis, matches, settings), RatingStore(redis),
        )
        services.tournaments.enqueue_fit = services.enqueue_fit
        return services

    async def enqueue_fit(self, ruleset: str) -> None:
        """Refit a ruleset's whole history on a worker (after a tournament, or on demand).
        While one refit waits in the queue, asking again adds nothing: it will read the
        history as it is when it runs."""
        if await self.redis.set(fit_claim_key(ruleset), "1", nx=True, ex=600):
            await self.enqueue("worker.jobs.fit_ratings", ruleset, job_id=f"fit-{ruleset}-{now_ms()}")

    async def enqueue(self, function: str, *args: Any, job_id: str, at_ms: int | None = None) -> None:
        """Put a job on the RQ queue the workers run (at a time, with ``at_ms``). RQ speaks
        synchronous Redis, so this runs in a thread, on one connection pool kept for it."""
        queue = self._job_queue()

        def put() -> None:
            if at_ms is None:
                queue.enqueue(function, *args, job_id=job_id)
            else:
                queue.enqueue_at(datetime.fromtimestamp(at_ms / 1000, tz=UTC), function, *args, job_id=job_id)

        await asyncio.to_thread(put)

    def _job_queue(self) -> Queue:
        if self._queue is None:
            self._queue = Queue(JOB_QUEUE, connection=SyncRedis.from_url(self.settings.redis_url))  # type: ignore[arg-type]
        return self._queue

    async def close(self) -> None:
        await self.matches.close()
        await self.matches.feed.close()
        await self.scripts.close()
        await self.redis.aclose()
        if self._queue is not None:
            self._queue.connection.close()
