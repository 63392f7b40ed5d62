"""Ratings in Redis: each rated match's Elo change applied once, the history, the
leaderboards (Elo and fitted) and the results the fit reads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis

from service.store.clock import now_ms
from service.store.keys import FIT_REQUESTS, fit_claim_key, history_key, leaderboard_key, ratings_key

# Apply one match's rating changes exactly once: skipped when the match is marked applied;
# refused (-1) when a bot's rating moved since it was read (the caller recomputes); else
# every bot's rating, history and leaderboard place, the result for the fit, the match's
# changes (for the archive) and the mark, all at once. KEYS: applied, leaderboard, results,
# names, changes, then (ratings, history) per bot. ARGV: match id, ruleset, result JSON, time
# ms, then (bot, name, games read, rating) per bot, then the changes JSON.
APPLY_RATINGS = """
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 0 end
local bots = (#KEYS - 5) / 2
for i = 1, bots do
  local current = redis.call('HGET', KEYS[4 + 2 * i], ARGV[2])
  local games = 0
  if current then games = cjson.decode(current)['games'] end
  if games ~= tonumber(ARGV[4 + 4 * (i - 1) + 3]) then return -1 end
end
for i = 1, bots do
  local base = 4 + 4 * (i - 1)
  local rating = tonumber(ARGV[base + 4])
  local games = tonumber(ARGV[base + 3]) + 1
  redis.call('HSET', KEYS[4 + 2 * i], ARGV[2], cjson.encode({rating = rating, games = games}))
  redis.call('RPUSH', KEYS[5 + 2 * i], cjson.encode({rating = rating, matchId = ARGV[1], at = tonumber(ARGV[4])}))
  redis.call('ZADD', KEYS[2], rating, ARGV[base + 1])
  redis.call('HSET', KEYS[4], ARGV[base + 1], ARGV[base + 2])
end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[3], ARGV[3])
redis.call('HSET', KEYS[5], ARGV[1], ARGV[#ARGV])
return 1
"""


# The refits asked for: each ruleset asked for leaves the requests, and is answered unless a
# refit of it waits in the queue already (which will read the history as it is when it runs);
# an answered one is claimed for 600 s, until its job starts and lets go.
# KEYS: the requests. ARGV: the claim keys' prefix (fit_claim_key's).
CLAIM_FIT_REQUESTS = """
local claimed = {}
for _, ruleset in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  redis.call('SREM', KEYS[1], ruleset)
  if redis.call('SET', ARGV[1] .. ruleset, '1', 'NX', 'EX', 600) then
    table.insert(claimed, ruleset)
  end
end
return claimed
"""


class RatingStore:
    """Ratings per ruleset: Elo moved by each rated match, and the fit of the whole history."""

    APPLIED = "ratings:applied"
    NAMES = "ratings:names"
    CHANGES = "ratings:changes"

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._apply = redis.register_script(APPLY_RATINGS)
        self._claim_fit_requests = redis.register_script(CLAIM_FIT_REQUESTS)

    async def request_fit(self, ruleset: str) -> None:
        """Ask for a refit of the ruleset's FITTED ratings (the workers' clock queues it)."""
        await self.redis.sadd(FIT_REQUESTS, ruleset)

    async def claim_fit_requests(self) -> list[str]:
        """The rulesets whose refit is to be queued now (see CLAIM_FIT_REQUESTS)."""
        return [r.decode() for r in await self._claim_fit_requests(keys=[FIT_REQUESTS], args=[fit_claim_key("")])]

    async def release_fit_claim(self, ruleset: str) -> None:
        """A refit starts: asking again from now on queues a new one."""
        await self.redis.delete(fit_claim_key(ruleset))

    async def elo(self, bot_ids: Sequence[str], ruleset: str) -> list[tuple[float, int] | None]:
        """Each bot's (rating, games) under ``ruleset``, None for a bot without one."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id in bot_ids:
                pipe.hget(ratings_key(bot_id), ruleset)
            rows = await pipe.execute()
        out: list[tuple[float, int] | None] = []
        for row in rows:
            data = json.loads(row) if row else None
            out.append(None if data is None else (float(data["rating"]), int(data["games"])))
        return out

    async def is_applied(self, match_id: str) -> bool:
        return bool(await self.redis.sismember(self.APPLIED, match_id))

    async def apply(
        self, match_id: str, ruleset: str, changes: Sequence[tuple[str, str, int, float, float]], result: dict[str, Any]
    ) -> int:
        """``changes``: (bot, name, games read, rating read, new rating). 1 applied, 0 already
        applied, -1 stale."""
        keys = [self.APPLIED, leaderboard_key(ruleset, "ELO"), f"ratings:results:{ruleset}", self.NAMES, self.CHANGES]
        args: list[Any] = [match_id, ruleset, json.dumps(result, separators=(",", ":")), now_ms()]
        for bot_id, name, games, _, rating in changes:
            keys += [ratings_key(bot_id), history_key(bot_id, ruleset)]
            args += [bot_id, name, games, repr(float(rating))]
        args.append(json.dumps([{"bot": b, "name": n, "before": old, "after": new} for b, n, _, old, new in changes]))
        return int(await self._apply(keys=keys, args=args))

    async def changes(self, match_ids: Sequence[str]) -> list[list[dict[str, Any]] | None]:
        """The rating changes applied for each match: (bot, name, before, after) each; None
        where none were."""
        found = await self.redis.hmget(self.CHANGES, list(match_ids))
        return [None if changes is None else json.loads(changes) for changes in found]

    async def results(self, ruleset: str) -> list[dict[str, Any]]:
        return [json.loads(r) for r in await self.redis.lrange(f"ratings:results:{ruleset}", 0, -1)]

    async def store_fit(self, ruleset: str, ratings: dict[str, float], games: dict[str, int]) -> None:
        """Replace the fitted leaderboard at once (a rename), so readers never see half of it."""
        staging = f"{leaderboard_key(ruleset, 'FITTED')}:staging"
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(staging, f"ratings:fitted:{ruleset}:staging")
            if ratings:
                pipe.zadd(staging, ratings)
                pipe.hset(f"ratings:fitted:{ruleset}:staging", mapping={b: games[b] for b in ratings})
                pipe.rename(staging, leaderboard_key(ruleset, "FITTED"))
                pipe.rename(f"ratings:fitted:{ruleset}:staging", f"ratings:fitted:{ruleset}")
            await pipe.execute()

    async def leaderboard(self, ruleset: str, method: str, first: int, offset: int) -> list[dict[str, Any]]:
        rows = await self.redis.zrevrange(leaderboard_key(ruleset, method), offset, offset + first - 1, withscores=True)
        ids = [r[0].decode() for r in rows]
        if not ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hmget(self.NAMES, ids)
            if method == "FITTED":
                pipe.hmget(f"ratings:fitted:{ruleset}", ids)
            else:
                for bot_id in ids:
                    pipe.hget(ratings_key(bot_id), ruleset)
            answers = await pipe.execute()
        names = answers[0]
        if method == "FITTED":
            games = [int(g or 0) for g in answers[1]]
        else:
            games = [json.loads(r)["games"] if r else 0 for r in answers[1:]]
        return [
            {"rank": offset + i + 1, "id": bot_id, "name": (names[i] or b"?").decode(), "rating": score, "games": games[i]}
            for i, (bot_id, (_, score)) in enumerate(zip(ids, rows, strict=True))
        ]

    async def current(self, bot_ids: Sequence[str]) -> list[list[dict[str, Any]]]:
        """Each bot's current rating per ruleset (one round trip for all of them)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id in bot_ids:
                pipe.hgetall(ratings_key(bot_id))
            answers = await pipe.execute()
        out = []
        for rows in answers:
            ratings = []
            for ruleset, value in sorted(rows.items()):
                data = json.loads(value)
                ratings.append({"ruleset": ruleset.decode(), "rating": data["rating"], "games": data["games"]})
            out.append(ratings)
        return out

    async def fitted(self, bot_id: str, rulesets: Sequence[str]) -> list[dict[str, Any]]:
        """The bot's rating and games in each ruleset's fitted leaderboard that holds it."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for ruleset in rulesets:
                pipe.zscore(leaderboard_key(ruleset, "FITTED"), bot_id)
                pipe.hget(f"ratings:fitted:{ruleset}", bot_id)
            answers = await pipe.execute()
        return [
            {"ruleset": ruleset, "rating": float(rating), "games": int(games or 0)}
            for ruleset, rating, games in zip(rulesets, answers[::2], answers[1::2], strict=True)
            if rating is not None
        ]

    async def histories(self, wanted: Sequence[tuple[str, str, int]]) -> list[list[dict[str, Any]]]:
        """For each (bot, ruleset, last): the latest ``last`` points of the bot's rating
        history under the ruleset, oldest first (one round trip for all of them)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id, ruleset, last in wanted:
                pipe.lrange(history_key(bot_id, ruleset), -last, -1)
            answers = await pipe.execute()
        return [[json.loads(r) for r in rows] for rows in answers]
