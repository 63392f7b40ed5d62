"""Work queues in Redis: a sorted set of the items waiting (oldest first), each taken by a
claim key that lapses, so that an item a dead worker held is taken again: the archive's queue
of ended tournaments. (The settlement queue is one per home: ``service.store.matches``.)"""

from __future__ import annotations

from collections.abc import Callable

from redis.asyncio import Redis


async def claim_queued(
    redis: Redis, queue: str, limit: int, claim_seconds: int, claim_key: Callable[[str], str]
) -> list[str]:
    """One key a command (a queue and its claims lie in different slots of a Redis Cluster):
    of the ``limit`` oldest items waiting in ``queue``, those whose
    claim (``claim_key(item)``) nobody holds, now claimed for ``claim_seconds``. Each claim is
    its own ``SET NX``, so two workers never both take an item."""
    waiting = [item.decode() for item in await redis.zrange(queue, 0, limit - 1)]
    if not waiting:
        return []
    async with redis.pipeline(transaction=False) as pipe:
        for item in waiting:
            pipe.set(claim_key(item), "1", nx=True, ex=claim_seconds)
        taken = await pipe.execute()
    return [item for item, ok in zip(waiting, taken, strict=True) if ok]
