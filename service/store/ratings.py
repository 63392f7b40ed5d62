"""Ratings in Redis: each rated match's Elo change applied once, the history, the
leaderboards (Elo and fitted) and the results the fit reads."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from redis.asyncio import Redis

from service.store.clock import now_ms
from service.store.keys import (
    FIT_REQUESTS,
    fit_claim_key,
    fitted_ratings_key,
    history_key,
    leaderboard_key,
    rating_results_key,
    ratings_key,
)

# Apply one match's rating changes exactly once: skipped when the match is marked applied;
# refused (-1) when a bot's rating moved since it was read (the caller recomputes); else
# every bot's rating (with its deviation), history and leaderboard place, the result for the
# fit, the match's changes (for the archive) and the mark, all at once. KEYS: applied,
# leaderboard, results, names, changes, then (ratings, history) per bot. ARGV: match id,
# ruleset, result JSON, time ms, then (bot, name, games read, rating, deviation) per bot, then
# the changes JSON.
APPLY_RATINGS = """
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 0 end
local bots = (#KEYS - 5) / 2
for i = 1, bots do
  local current = redis.call('HGET', KEYS[4 + 2 * i], ARGV[2])
  local games = 0
  if current then games = cjson.decode(current)['games'] end
  if games ~= tonumber(ARGV[4 + 5 * (i - 1) + 3]) then return -1 end
end
for i = 1, bots do
  local base = 4 + 5 * (i - 1)
  local rating = tonumber(ARGV[base + 4])
  local games = tonumber(ARGV[base + 3]) + 1
  local deviation = tonumber(ARGV[base + 5])
  redis.call('HSET', KEYS[4 + 2 * i], ARGV[2], cjson.encode({rating = rating, games = games, deviation = deviation}))
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


#: how many leaderboard places are read at a time when provisional bots are left out
LEADERBOARD_SLICE = 500
#: how deep such a read goes at most (one request reads no more of a big board than this)
MAX_ESTABLISHED_SCAN = 50_000


@dataclass(frozen=True, slots=True)
class StoredRating:
    """A rating as kept: ``deviation`` None for one kept before deviations were (the domain
    gives it one from its games)."""

    rating: float
    games: int
    deviation: float | None

    @classmethod
    def of_elo(cls, value: bytes | str) -> StoredRating:
        """From a ``ratings`` hash value: JSON {rating, games, deviation?}."""
        data = json.loads(value)
        deviation = data.get("deviation")
        return cls(float(data["rating"]), int(data["games"]), None if deviation is None else float(deviation))

    @classmethod
    def of_fit(cls, rating: float, value: bytes | str | None) -> StoredRating:
        """From the fitted hash's value: JSON {games, deviation}, or (kept before deviations
        were) the games alone."""
        data = json.loads(value) if value is not None else 0
        if isinstance(data, dict):
            return cls(float(rating), int(data["games"]), float(data["deviation"]))
        return cls(float(rating), int(data), None)


@dataclass(frozen=True, slots=True)
class RatingChange:
    """One bot's Elo change by one match: ``games`` as read, the ratings before and after and
    the deviation after."""

    bot: str
    name: str
    games: int
    before: float
    after: float
    deviation: float


@dataclass(frozen=True, slots=True)
class LeaderRow:
    rank: int
    id: str
    name: str
    rating: float
    games: int
    deviation: float | None


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

    async def elo(self, bot_ids: Sequence[str], ruleset: str) -> list[StoredRating | None]:
        """Each bot's Elo rating under ``ruleset``, None for a bot without one."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id in bot_ids:
                pipe.hget(ratings_key(bot_id), ruleset)
            rows = await pipe.execute()
        return [StoredRating.of_elo(row) if row else None for row in rows]

    async def is_applied(self, match_id: str) -> bool:
        return bool(await self.redis.sismember(self.APPLIED, match_id))

    async def apply(
        self, match_id: str, ruleset: str, changes: Sequence[RatingChange], result: dict[str, Any]
    ) -> int:
        """Each bot's change, with ``games`` as read. 1 applied, 0 already applied, -1 stale."""
        keys = [self.APPLIED, leaderboard_key(ruleset, "ELO"), rating_results_key(ruleset), self.NAMES, self.CHANGES]
        args: list[Any] = [match_id, ruleset, json.dumps(result, separators=(",", ":")), now_ms()]
        for c in changes:
            keys += [ratings_key(c.bot), history_key(c.bot, ruleset)]
            args += [c.bot, c.name, c.games, repr(float(c.after)), repr(float(c.deviation))]
        args.append(json.dumps([{"bot": c.bot, "name": c.name, "before": c.before, "after": c.after} for c in changes]))
        return int(await self._apply(keys=keys, args=args))

    async def changes(self, match_ids: Sequence[str]) -> list[list[dict[str, Any]] | None]:
        """The rating changes applied for each match: (bot, name, before, after) each; None
        where none were."""
        found = await self.redis.hmget(self.CHANGES, list(match_ids))
        return [None if changes is None else json.loads(changes) for changes in found]

    async def results(self, ruleset: str) -> list[dict[str, Any]]:
        return [json.loads(r) for r in await self.redis.lrange(rating_results_key(ruleset), 0, -1)]

    async def store_fit(
        self, ruleset: str, ratings: dict[str, float], games: dict[str, int], deviations: dict[str, float]
    ) -> None:
        """Replace the fitted leaderboard at once (a rename), so readers never see half of it;
        beside each rating, its games and deviation (JSON)."""
        staging = f"{leaderboard_key(ruleset, 'FITTED')}:staging"
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(staging, f"{fitted_ratings_key(ruleset)}:staging")
            if ratings:
                pipe.zadd(staging, ratings)
                pipe.hset(
                    f"{fitted_ratings_key(ruleset)}:staging",
                    mapping={b: json.dumps({"games": games[b], "deviation": deviations[b]}) for b in ratings},
                )
                pipe.rename(staging, leaderboard_key(ruleset, "FITTED"))
                pipe.rename(f"{fitted_ratings_key(ruleset)}:staging", fitted_ratings_key(ruleset))
            await pipe.execute()

    async def leaderboard(self, ruleset: str, method: str, first: int, offset: int, min_games: int) -> list[LeaderRow]:
        """``first`` bots by rating from ``offset``, among those with ``min_games`` games or more
        (ranks counted among them: read a slice at a time from the top until enough are found,
        or ``MAX_ESTABLISHED_SCAN`` places are read)."""
        board = leaderboard_key(ruleset, method)
        if min_games <= 0:
            rows = await self.redis.zrevrange(board, offset, offset + first - 1, withscores=True)
            kept = await self._leader_rows(ruleset, method, rows)
        else:
            found: list[LeaderRow] = []
            start = 0
            while len(found) < offset + first and start < MAX_ESTABLISHED_SCAN:
                rows = await self.redis.zrevrange(board, start, start + LEADERBOARD_SLICE - 1, withscores=True)
                if not rows:
                    break
                found += [row for row in await self._leader_rows(ruleset, method, rows) if row.games >= min_games]
                start += LEADERBOARD_SLICE
            kept = found[offset:offset + first]
        return [replace(row, rank=offset + i + 1) for i, row in enumerate(kept)]

    async def _leader_rows(self, ruleset: str, method: str, rows: Sequence[tuple[bytes, float]]) -> list[LeaderRow]:
        if not rows:
            return []
        ids = [r[0].decode() for r in rows]
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hmget(self.NAMES, ids)
            if method == "FITTED":
                pipe.hmget(fitted_ratings_key(ruleset), ids)
            else:
                for bot_id in ids:
                    pipe.hget(ratings_key(bot_id), ruleset)
            answers = await pipe.execute()
        names = answers[0]
        stored = (
            [StoredRating.of_fit(score, g) for (_, score), g in zip(rows, answers[1], strict=True)]
            if method == "FITTED"
            else [
                StoredRating.of_elo(r) if r else StoredRating(score, 0, None)
                for (_, score), r in zip(rows, answers[1:], strict=True)
            ]
        )
        return [
            LeaderRow(0, bot_id, (names[i] or b"?").decode(), score, s.games, s.deviation)
            for i, (bot_id, (_, score), s) in enumerate(zip(ids, rows, stored, strict=True))
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
                stored = StoredRating.of_elo(value)
                ratings.append(
                    {"ruleset": ruleset.decode(), "rating": stored.rating, "games": stored.games, "deviation": stored.deviation}
                )
            out.append(ratings)
        return out

    async def fitted(self, bot_ids: Sequence[str], rulesets: Sequence[str]) -> list[list[dict[str, Any]]]:
        """Each bot's rating, games and deviation in each ruleset's fitted leaderboard that
        holds it (one round trip for all of them)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id in bot_ids:
                for ruleset in rulesets:
                    pipe.zscore(leaderboard_key(ruleset, "FITTED"), bot_id)
                    pipe.hget(fitted_ratings_key(ruleset), bot_id)
            answers = iter(await pipe.execute())
        out = []
        for _ in bot_ids:
            ratings = []
            for ruleset in rulesets:
                rating, extra = next(answers), next(answers)
                if rating is not None:
                    stored = StoredRating.of_fit(float(rating), extra)
                    ratings.append(
                        {"ruleset": ruleset, "rating": stored.rating, "games": stored.games, "deviation": stored.deviation}
                    )
            out.append(ratings)
        return out

    async def histories(self, wanted: Sequence[tuple[str, str, int]]) -> list[list[dict[str, Any]]]:
        """For each (bot, ruleset, last): the latest ``last`` points of the bot's rating
        history under the ruleset, oldest first (one round trip for all of them)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for bot_id, ruleset, last in wanted:
                pipe.lrange(history_key(bot_id, ruleset), -last, -1)
            answers = await pipe.execute()
        return [[json.loads(r) for r in rows] for rows in answers]
