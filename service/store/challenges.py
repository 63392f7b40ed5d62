"""Challenges in Redis: made by one script (which counts them among the challenger's waiting
matches, the limit ``createMatch`` counts against), and changed by one compare-and-set script
on the challenge's version, so that of racing answers one applies and the others are decided
again on what it left (the answer that takes the last seat is the one that sees it free)."""

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
# the limit: {-1, the earliest of them to end}. It is due at its expiry (the clock ends it),
# counts among the waiting until then, is listed for its challenger and each named bot, and an
# open one (naming nobody) among the open challenges; the named bots are told.
# KEYS: challenge, due, the challenger's waiting, open challenges, then each listed bot's list.
# ARGV: id, data, seed, limit, expires (ms), created (ms), '1' if open, kept (ms), listed per
# bot, notice, then the channels to tell.
CREATE_CHALLENGE = """
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[4]) then
  return {-1, redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')[2]}
end
redis.call('HSET', KEYS[1], 'version', 1, 'data', ARGV[2], 'seed', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[8])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1])
if ARGV[7] == '1' then redis.call('ZADD', KEYS[4], ARGV[5], ARGV[1]) end
for i = 5, #KEYS do
  redis.call('ZADD', KEYS[i], ARGV[6], ARGV[1])
  redis.call('ZREMRANGEBYRANK', KEYS[i], 0, -tonumber(ARGV[9]) - 1)
end
for i = 11, #ARGV do redis.call('PUBLISH', ARGV[i], ARGV[10]) end
return {1, 0}
"""

# Replace the challenge if its version is the one read; one that leaves OPEN leaves the
# challenger's waiting and the open challenges; its due time moves (or it is no longer due);
# a bot that answered an open challenge lists it (KEYS[5], when given); the bots are told.
# Returns the new version, 0 when it changed meanwhile (-1: no such challenge).
# KEYS: challenge, due, the challenger's waiting, open challenges[, the answering bot's list].
# ARGV: version read, data, id, '1' if it leaves OPEN, due (ms) or '', notice, when it was made
# (ms), listed per bot, then the channels.
COMMIT_CHALLENGE = """
local version = redis.call('HGET', KEYS[1], 'version')
if not version then return -1 end
if tonumber(version) ~= tonumber(ARGV[1]) then return 0 end
version = tonumber(version) + 1
redis.call('HSET', KEYS[1], 'version', version, 'data', ARGV[2])
if ARGV[4] == '1' then
  redis.call('ZREM', KEYS[3], ARGV[3])
  redis.call('ZREM', KEYS[4], ARGV[3])
end
if ARGV[5] == '' then redis.call('ZREM', KEYS[2], ARGV[3]) else redis.call('ZADD', KEYS[2], ARGV[5], ARGV[3]) end
if #KEYS > 4 then
  redis.call('ZADD', KEYS[5], ARGV[7], ARGV[3])
  redis.call('ZREMRANGEBYRANK', KEYS[5], 0, -tonumber(ARGV[8]) - 1)
end
for i = 9, #ARGV do redis.call('PUBLISH', ARGV[i], ARGV[6]) end
return version
"""


class TooManyWaiting(Exception):
    """The challenger has as many waiting matches and open challenges as allowed; the earliest
    of them ends at ``until_ms``."""

    def __init__(self, until_ms: int) -> None:
        super().__init__(until_ms)
        self.until_ms = until_ms


def _channels(bot_ids: Sequence[str]) -> list[bytes]:
    return [bot_invited_channel(b) for b in bot_ids]


class ChallengeStore:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._create = redis.register_script(CREATE_CHALLENGE)
        self._commit = redis.register_script(COMMIT_CHALLENGE)

    async def create(self, challenge: Challenge, seed: str, waiting_limit: int, tell: Sequence[str]) -> None:
        """Store a new challenge (:class:`TooManyWaiting` beyond the challenger's limit), listed
        for its challenger and named bots, and tell the bots ``tell``."""
        listed = [challenge.challenger_id, *(r.bot_id for r in challenge.replies)]
        keys = [challenge_key(challenge.id), CHALLENGES_DUE, bot_waiting_key(challenge.challenger_id), OPEN_CHALLENGES,
                *(bot_challenges_key(b) for b in listed)]
        made, earliest = await self._create(keys=keys, args=[
            challenge.id, orjson.dumps(challenge.to_dict()), seed, waiting_limit, challenge.expires_ms,
            challenge.created_ms, "" if challenge.named else "1", challenge.expires_ms - challenge.created_ms
            + KEPT_AFTER_EXPIRY_MS, LISTED_PER_BOT, challenge_notice(challenge.id), *_channels(tell),
        ])
        if made == -1:
            raise TooManyWaiting(int(float(earliest)))

    async def commit(
        self, before: Challenge, after: Challenge, due_ms: int | None, tell: Sequence[str], list_for: str | None = None
    ) -> bool:
        """Store ``after`` if the challenge is still at ``before``'s version, list it for the
        bot ``list_for`` (one that answered an open challenge) and tell the bots ``tell``;
        False: it changed meanwhile (or is gone), decide again."""
        leaves_open = before.status is ChallengeStatus.OPEN and after.status is not ChallengeStatus.OPEN
        keys = [challenge_key(before.id), CHALLENGES_DUE, bot_waiting_key(before.challenger_id), OPEN_CHALLENGES]
        if list_for is not None:
            keys.append(bot_challenges_key(list_for))
        version = await self._commit(
            keys=keys,
            args=[before.version, orjson.dumps(after.to_dict()), before.id, "1" if leaves_open else "",
                  "" if due_ms is None else due_ms, challenge_notice(before.id), before.created_ms, LISTED_PER_BOT,
                  *_channels(tell)],
        )
        return int(version) > 0

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

    async def not_due(self, challenge_id: str) -> None:
        await self.redis.zrem(CHALLENGES_DUE, challenge_id)
