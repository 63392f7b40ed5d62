"""The service's parts wired together for one process: a Redis pool and the domain
services on it. Made by the app's lifespan (and by the worker), never at import time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from service.bots import BotService
from service.matches import BLOCK_SLICE_MS, MatchService
from service.metrics import Metrics
from service.settings import Settings
from service.store import BotStore, MatchStore, read_ratings


@dataclass
class Services:
    settings: Settings
    redis: Redis
    bots: BotService
    matches: MatchService
    metrics: Metrics

    @classmethod
    def open(cls, settings: Settings, metrics: Metrics | None = None) -> Services:
        if not settings.redis_url:
            raise RuntimeError("REDIS_URL is not set (wizard-arena up starts an embedded Redis and sets it)")
        # redis-py's default read timeout (5 s) would cut short the blocking stream reads
        # (up to BLOCK_SLICE_MS) that awaitTurn and the subscriptions wait in.
        redis = Redis.from_url(
            settings.redis_url, decode_responses=False, health_check_interval=30,
            socket_timeout=BLOCK_SLICE_MS / 1000 + 10,
        )
        metrics = metrics or Metrics()
        bot_store = BotStore(redis)
        matches = MatchService(MatchStore(redis), bot_store, settings, on_change=metrics.on_change)
        return cls(settings, redis, BotService(bot_store, settings), matches, metrics)

    async def ratings_of(self, bot_id: str) -> list[dict[str, Any]]:
        return await read_ratings(self.redis, bot_id)

    async def close(self) -> None:
        await self.matches.close()
        await self.redis.aclose()
