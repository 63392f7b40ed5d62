"""The service's parts wired together for one process: a bounded Redis pool, the stores on
it, and the domain services on them. Made as a process starts (``Services.start``: the app's
lifespan, the worker's clock, each job), never at import time.

Neither the API nor the domain queues background jobs: what must happen later is written
into Redis with the change that calls for it (an ended match into the settlement queue, a
refit into the requests, a tournament among the active ones), and the workers' clock turns
it into work (``worker.clock``)."""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cached_property

from redis.asyncio import Redis

from service.domain.bots import BotService
from service.domain.challenges import ChallengeService
from service.domain.invitations import InvitationService
from service.domain.ladders import LadderService
from service.domain.listings import Listings
from service.domain.matches import MatchService
from service.domain.ratings import RatingService
from service.domain.settlement import Settlement
from service.domain.tournaments import TournamentService
from service.domain.webhooks import WebhookService
from service.errors import REDIS_AWAY
from service.metrics import Metrics
from service.outage import Outage, Outages
from service.settings import Settings
from service.store.archive import Archive
from service.store.bots import BotStore
from service.store.challenges import ChallengeStore
from service.store.feed import EventFeed
from service.store.house_play import HousePlayQueue
from service.store.ladders import LadderStore
from service.store.matches import MatchStore
from service.store.ratings import RatingStore
from service.store.redis_client import open_async, serving
from service.store.script_line import ScriptLine
from service.store.tournaments import TournamentStore
from service.store.upgrade import upgrade_layout
from service.store.webhooks import WebhookStore

log = logging.getLogger("wizard_arena.services")

#: the processes that hand the house-only matches they start to any worker (the workers' clocks
#: and jobs, which start tournaments' tables); the API plays those it starts itself
HOUSE_PLAY_ROLES = ("worker", "job")
#: longest a request waits for a free pooled Redis connection, and a Redis command may take to
#: answer (no command of the service blocks)
POOL_WAIT_SECONDS = 10.0


class StoppedWhileStarting(Exception):
    """The process was told to stop while its start-up waited for Redis: nothing was started."""


@dataclass
class Services:
    settings: Settings
    redis: Redis
    #: the pipelined connection for the move path's scripts (see service.store.script_line)
    scripts: ScriptLine
    bots: BotService
    matches: MatchService
    metrics: Metrics
    tournaments: TournamentService
    ratings: RatingService
    settlement: Settlement
    ladders: LadderService
    #: the archive of finished matches and tournaments (None: no DATABASE_URL)
    archive: Archive | None = None
    #: the outages of Redis and of the archive this process's requests met (logged once each)
    outages: Outages | None = None

    @classmethod
    async def start(cls, settings: Settings, metrics: Metrics | None = None, role: str = "api",
                    stopping: asyncio.Event | None = None) -> Services:
        """The services of a process starting (:meth:`open`), once Redis holds the key layout
        they read: the start-up step (``service.store.upgrade``) has run before anything else
        touches Redis. Redis away: waited for (said once in the log), tried with back-off,
        until ``stopping`` is set (:class:`StoppedWhileStarting`: a process told to stop
        meanwhile stops at once, rather than once Redis is back)."""
        services = cls.open(settings, metrics, role)
        outage = Outage("Redis", log)
        stopping = stopping or asyncio.Event()
        try:
            while True:
                try:
                    await upgrade_layout(services.redis)
                    break
                except REDIS_AWAY as error:
                    try:
                        async with asyncio.timeout(outage.failed(error)):
                            await stopping.wait()
                    except TimeoutError:
                        continue
                    raise StoppedWhileStarting(f"told to stop while {outage.what} was away") from error
        except BaseException:
            await services.close()
            raise
        outage.recovered()
        return services

    @classmethod
    def open(cls, settings: Settings, metrics: Metrics | None = None, role: str = "api") -> Services:
        """The services of one process, made without I/O (a process starts with :meth:`start`);
        its Redis connections are named after ``role`` and its pid (``wizard-arena-api-1234``),
        as CLIENT LIST shows them."""
        if not settings.redis_url:
            raise RuntimeError("REDIS_URL is not set (wizard-arena up starts an embedded Redis and sets it)")
        # A bounded pool: requests beyond it wait their turn for a connection (up to
        # POOL_WAIT_SECONDS) instead of failing with "Too many connections". Nothing holds a
        # pooled connection for long: waiting goes through the feed's connection.
        redis = open_async(settings.redis_url, max_connections=settings.redis_pool_size, timeout=POOL_WAIT_SECONDS,
                           client_name=f"wizard-arena-{role}-{os.getpid()}")
        metrics = metrics or Metrics()
        scripts = ScriptLine(redis, replicas=settings.commit_replicas,
                             replica_timeout_ms=settings.commit_replica_timeout_ms,
                             on_replica_shortfall=metrics.replica_shortfalls.inc)
        archive = Archive(settings.database_url) if settings.database_url else None
        bot_store = BotStore(redis, scripts)
        match_store = MatchStore(redis, scripts, archive, settings.archive_grace_seconds, settings.match_events_kept)
        feed = EventFeed(redis, match_store, settings.max_waits_per_client)
        metrics.follow(feed)
        matches = MatchService(match_store, bot_store, settings, feed, on_change=metrics.on_change)
        ratings = RatingService(RatingStore(redis), settings.provisional_games)
        tournaments = TournamentService(
            TournamentStore(redis, archive, settings.archive_grace_seconds), matches, ratings, settings
        )
        ladders = LadderService(LadderStore(redis), matches, ratings, settings)
        matches.on_waiting = ladders.resume  # a paused ladder bot waiting for a turn answers again
        if role in HOUSE_PLAY_ROLES:  # the house-only matches a worker starts: any worker's job plays them
            matches.house_play = HousePlayQueue(redis)
        settlement = Settlement(matches.matches, tournaments, ratings, ladders, archive)
        probes: dict[str, Callable[[], Awaitable[object]]] = {"Redis": functools.partial(serving, redis)}
        if archive is not None:
            probes["the archive"] = archive.ping
        return cls(settings, redis, scripts, BotService(bot_store, settings, feed), matches, metrics, tournaments,
                   ratings, settlement, ladders, archive, Outages(probes))

    @cached_property
    def listings(self) -> Listings:
        """Matches and tournaments, live and archived, in one list; bots' statistics."""
        return Listings(self.redis, self.matches.matches, self.tournaments.store, self.archive)

    @cached_property
    def webhooks(self) -> WebhookService:
        """Bots' webhooks: set, removed, their health (the calls are the workers')."""
        return WebhookService(WebhookStore(self.redis), self.settings, self.matches.matches, self.bots.bots)

    @cached_property
    def challenges(self) -> ChallengeService:
        """Challenges: made, answered, their matches made; expired by the workers' clock."""
        return ChallengeService(ChallengeStore(self.redis), self.matches, self.settings)

    @cached_property
    def invitations(self) -> InvitationService:
        """A bot's invitations to tournaments, and the challenges it is named in: listed,
        streamed beside its turns; its invitation policy."""
        return InvitationService(self.tournaments, self.matches, self.challenges)

    async def close(self) -> None:
        if self.outages is not None:
            await self.outages.close()
        await self.bots.close()
        await self.matches.close()
        await self.matches.feed.close()
        await self.scripts.close()
        await self.redis.aclose()
        if self.archive is not None:
            await self.archive.close()
