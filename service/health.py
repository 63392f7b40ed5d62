"""The clock's heartbeat, and what health checks make of it.

Each worker's clock (``worker.clock``) writes, about once a second, when it last went round
into the hash ``clock:heartbeats`` under its host name (a container's name in compose). A
clock that dies, or hangs, stops writing: ``/readyz`` fails once no clock has beaten for
``ARENA_CLOCK_STALE_SECONDS``, and ``wizard-arena worker --check`` once this host's has not.
Hosts gone for a day are dropped from the hash by the clocks that remain."""

from __future__ import annotations

import socket
import time

from redis.asyncio import Redis

from service.store.keys import CLOCK_HEARTBEATS

#: how often a clock writes its heartbeat
HEARTBEAT_SECONDS = 1.0
#: a host whose clock has not beaten for this long is forgotten
FORGET_AFTER_SECONDS = 86_400


def host_name() -> str:
    return socket.gethostname()


class Heartbeat:
    """A clock's heartbeat: ``beat()`` on every round writes to Redis at most once a second."""

    def __init__(self, redis: Redis, host: str | None = None) -> None:
        self.redis = redis
        self.host = host or host_name()
        self._next = 0.0
        self._next_prune = 0.0

    async def beat(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + HEARTBEAT_SECONDS
        now_ms = int(time.time() * 1000)
        await self.redis.hset(CLOCK_HEARTBEATS, self.host, now_ms)
        if now >= self._next_prune:
            self._next_prune = now + 3600
            beats = await self.redis.hgetall(CLOCK_HEARTBEATS)
            gone = [host for host, ms in beats.items() if now_ms - int(ms) > FORGET_AFTER_SECONDS * 1000]
            if gone:
                await self.redis.hdel(CLOCK_HEARTBEATS, *gone)


async def heartbeat_ages(redis: Redis) -> dict[str, float]:
    """Seconds since each host's clock last beat."""
    now_ms = time.time() * 1000
    beats = await redis.hgetall(CLOCK_HEARTBEATS)
    return {host.decode(): max(0.0, (now_ms - int(ms)) / 1000) for host, ms in beats.items()}
