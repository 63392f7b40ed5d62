"""House-only matches (a tournament's table of house bots) whose moves a worker is to make:
the process that starts one hands it over here instead of playing it itself, and each
worker's clock takes one a round while it has room and plays it, so that the matches are
played wherever a worker is free (``worker.clock.HousePlayer``).

One list, written and read by single-key commands (a cluster puts it on one master; it
sees one push and one pop per match, not per move). Nothing here needs to be exactly once:
every house move is committed against the version it was decided on, so a match handed out
twice is still played once; one lost between the push and its play (a process killed) is
played by the deadline sweeper when its seats' deadline passes."""

from __future__ import annotations

from redis.asyncio import Redis

from service.store.keys import HOUSE_PLAY


class HousePlayQueue:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    async def request(self, match_id: str) -> None:
        """Have a worker make ``match_id``'s house moves."""
        await self.redis.rpush(HOUSE_PLAY, match_id)

    async def take(self, limit: int) -> list[str]:
        """Up to ``limit`` matches waiting to be played, the oldest first; each is taken once."""
        taken = await self.redis.lpop(HOUSE_PLAY, limit)
        return [m.decode() for m in taken or ()]
