"""Challenges in Redis: made by one script (which counts them among the challenger's waiting
matches, the limit ``createMatch`` counts against), and changed by one compare-and-set script
on the challenge's version, so that of racing answers one applies and the others are decided
again on what it left (the answer that takes the last seat is the one that sees it free).

A challenge's hash lies in its challenger's slot (``service.store.keys.challenge_key``), and
both scripts touch that slot only: the challenge, the challenger's waiting matches and its own
list of challenges. What lies elsewhere (the other bots' lists and channels, the open
challenges, the challenges due) is written after, by commands of its own
(:meth:`ChallengeStore.publish`), the challenges due last. Before a step that leaves such
writes to do, the challenge is made due soon: should this process die in between, the
workers' clock finds it and publishes it as it stands (``service.domain.challenges``)."""

from __future__ import annotations

from collections.abc import Sequence

import orjson
from redis.asyncio import Redis

from service.model.challenge import Challenge, ChallengeStatus
from service.store.keys import (
    CHALLENGES_DUE,
    OPEN_CHALLENGES,
    bot_challenges_key,
    bot_invited_channel,
    bot_waiting_key,
    challenge_key,
    challenge_notice,
)

#: how many of its latest challenges each bot's list keeps
LISTED_PER_BOT = 100
#: how long a challenge stays in Redis after it expires (its answers, its match's id)
KEPT_AFTER_EXPIRY_MS = 7 * 86_400_000

# Make a challenge, unless its challenger has as many waiting matches and open challenges as
# the limit: {-1, the earliest of them to end}. It counts among the waiting until its expiry
# and is listed for its challenger. Waiting entries past their time are dropped first, as
# MatchStore does before it counts them: by then the match is aborted, the challenge expired.
# KEYS: challenge, the challenger's waiting, the challenger's list (all in its slot).
# ARGV: id, data, seed, limit, expires (ms), created (ms), kept (ms), listed per bot.
CREATE_CHALLENGE = """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[6])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  return {-1, redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]}
end
redis.call('HSET', KEYS[1], 'version', 1, 'data', ARGV[2], 'seed', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[6], ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -tonumber(ARGV[8]) - 1)
return {1, 0}
"""

# Replace the challenge if its version is the one read; one that leaves OPEN leaves the
# challenger's waiting. Returns the new version, 0 when it changed meanwhile (-1: no such
# challenge).
# KEYS: challenge, the challenger's waiting. ARGV: version read, data, id, '1' if it leaves OPEN.
COMMIT_CHALLENGE = """
local version = redis.call('HGET', KEYS[1], 'version')
if not version then return -1 end
if tonumber(version) ~= tonumber(ARGV[1]) then return 0 end
version = tonumber(version) + 1
redis.call('HSET', KEYS[1], 'version', version, 'data', ARGV[2])
if ARGV[4] == '1' then redis.call('ZREM', KEYS[2], ARGV[3]) end
return version
"""


class TooManyWaiting(Exception):
    """The challenger has as many waiting matches and open challenges as allowed; the earliest
    of them ends at ``until_ms``."""

    def __init__(self, until_ms: int) -> None:
        super().__init__(until_ms)
        self.until_ms = until_ms


class ChallengeStore:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._create = redis.register_script(CREATE_CHALLENGE)
        self._commit = redis.register_script(COMMIT_CHALLENGE)

    async def create(
        self, challenge: Challenge, seed: str, waiting_limit: int, tell: Sequence[str], repair_at_ms: int
    ) -> None:
        """Store a new challenge (:class:`TooManyWaiting` beyond the challenger's limit), then
        publish it (due at its expiry) and tell the bots ``tell``; due at ``repair_at_ms``
        meanwhile, for the clock to publish it should this process die before."""
        await self.redis.zadd(CHALLENGES_DUE, {challenge.id: repair_at_ms})
        made, earliest = await self._create(
            keys=[challenge_key(challenge.id), bot_waiting_key(challenge.challenger_id),
                  bot_challenges_key(challenge.challenger_id)],
            args=[challenge.id, orjson.dumps(challenge.to_dict()), seed, waiting_limit, challenge.expires_ms,
                  challenge.created_ms, challenge.expires_ms - challenge.created_ms + KEPT_AFTER_EXPIRY_MS,
                  LISTED_PER_BOT],
        )
        if made == -1:
            await self.not_due(challenge.id)
            raise TooManyWaiting(int(float(earliest)))
        await self.publish(challenge, tell)
        await self.due_at(challenge.id, challenge.expires_ms)

    async def commit(
        self, before: Challenge, after: Challenge, due_ms: int | None, tell: Sequence[str], repair_at_ms: int | None
    ) -> bool:
        """Store ``after`` if the challenge is still at ``before``'s version, then publish it
        and tell the bots ``tell``; False: it changed meanwhile (or is gone), decide again. A
        change of status (``repair_at_ms`` given) is due then meanwhile (not later than it
        was), for the clock to publish it should this process die before, and at ``due_ms``
        after (None: no longer due); any other change leaves when it is due alone."""
        if repair_at_ms is not None:
            await self.due_by(before.id, repair_at_ms)
        leaves_open = before.status is ChallengeStatus.OPEN and after.status is not ChallengeStatus.OPEN
        version = await self._commit(
            keys=[challenge_key(before.id), bot_waiting_key(before.challenger_id)],
            args=[before.version, orjson.dumps(after.to_dict()), before.id, "1" if leaves_open else ""],
        )
        if int(version) <= 0:
            return False
        await self.publish(after, tell)
        if repair_at_ms is not None:
            await self.due_at(before.id, due_ms)
        return True

    async def publish(self, challenge: Challenge, tell: Sequence[str]) -> None:
        """What lies outside the challenge's slot, as the challenge stands: listed for every bot
        it involves, among the open challenges while it is OPEN and names nobody; then the bots
        ``tell`` told. Idempotent. (When it is due is written after, by :meth:`due_at`: last,
        so that the clock's early look stands until all of it is written.)"""
        c = challenge
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id in c.involves():
                pipe.zadd(bot_challenges_key(bot_id), {c.id: c.created_ms})
                pipe.zremrangebyrank(bot_challenges_key(bot_id), 0, -LISTED_PER_BOT - 1)
            if c.status is ChallengeStatus.OPEN and not c.named:
                pipe.zadd(OPEN_CHALLENGES, {c.id: c.expires_ms})
            else:
                pipe.zrem(OPEN_CHALLENGES, c.id)
            await pipe.execute()
        for bot_id in tell:  # (a Cluster's pipelines refuse PUBLISH)
            await self.redis.publish(bot_invited_channel(bot_id), challenge_notice(c.id))

    async def due_at(self, challenge_id: str, due_ms: int | None) -> None:
        """The clock looks at the challenge at ``due_ms`` (None: never again)."""
        if due_ms is None:
            await self.not_due(challenge_id)
        else:
            await self.redis.zadd(CHALLENGES_DUE, {challenge_id: due_ms})

    async def load(self, challenge_id: str) -> Challenge | None:
        return (await self.load_many([challenge_id]))[0]

    async def load_many(self, challenge_ids: Sequence[str]) -> list[Challenge | None]:
        async with self.redis.pipeline(transaction=False) as pipe:
            for challenge_id in challenge_ids:
                pipe.hmget(challenge_key(challenge_id), ("version", "data"))
            rows = await pipe.execute()
        return [
            None if data is None else Challenge.from_dict(cid, orjson.loads(data), int(version))
            for cid, (version, data) in zip(challenge_ids, rows, strict=True)
        ]

    async def seed(self, challenge_id: str) -> str | None:
        seed = await self.redis.hget(challenge_key(challenge_id), "seed")
        return None if seed is None else seed.decode()

    async def of_bot(self, bot_id: str, count: int) -> list[str]:
        """The challenges the bot made or is named in, newest first."""
        return [c.decode() for c in await self.redis.zrevrange(bot_challenges_key(bot_id), 0, count - 1)]

    async def forget(self, bot_id: str, challenge_ids: Sequence[str]) -> None:
        """Drop challenges gone from Redis from the bot's list."""
        if challenge_ids:
            await self.redis.zrem(bot_challenges_key(bot_id), *challenge_ids)

    async def open_to_anyone(self, now_ms: int, count: int) -> list[str]:
        """OPEN challenges naming nobody that have not expired, the soonest to expire first."""
        return [c.decode() for c in await self.redis.zrangebyscore(OPEN_CHALLENGES, now_ms, "+inf", 0, count)]

    async def due(self, now_ms: int, count: int) -> list[str]:
        return [c.decode() for c in await self.redis.zrangebyscore(CHALLENGES_DUE, "-inf", now_ms, 0, count)]

    async def due_again(self, challenge_id: str, at_ms: int) -> None:
        """The challenge, if still due, is looked at again at ``at_ms`` (not before)."""
        await self.redis.zadd(CHALLENGES_DUE, {challenge_id: at_ms}, xx=True)

    async def due_by(self, challenge_id: str, at_ms: int) -> None:
        """The challenge, if still due, is looked at by ``at_ms`` (sooner if it was due sooner)."""
        await self.redis.zadd(CHALLENGES_DUE, {challenge_id: at_ms}, xx=True, lt=True)

    async def not_due(self, challenge_id: str) -> None:
        await self.redis.zrem(CHALLENGES_DUE, challenge_id)
