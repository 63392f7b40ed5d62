"""Ratings in Redis: each rated match's Elo change applied once, the history, the
leaderboards (Elo and fitted) and the results the fit reads.

Every key of a ruleset's ratings shares one hash tag (``{r:<ruleset>}``, ``service.store.keys``),
so the script that applies a match's change touches one slot on a cluster; a ruleset's rated
matches are all applied by the master that holds it (one script of tens of microseconds per
rated match's end, far below what a master runs)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from redis.asyncio import Redis

from service.store.clock import now_ms
from service.store.keys import (
    FIT_CLAIMS,
    FIT_REQUESTS,
    elo_ratings_key,
    fitted_ratings_key,
    history_key,
    leaderboard_key,
    rating_changes_key,
    rating_names_key,
    rating_results_key,
    ratings_applied_key,
)
from wizard import Ruleset

# Apply one match's rating changes exactly once: skipped when the match is marked applied;
# refused (-1) when a bot's rating moved since it was read (the caller recomputes); else
# every bot's rating (with its deviation), history and leaderboard place, the result for the
# fit, the match's changes (for the archive) and the mark, all at once. Every key is the
# ruleset's (one slot). KEYS: applied, leaderboard, results, names, changes, Elo ratings,
# then each bot's history. ARGV: match id, result JSON, time ms, then (bot, name, games read,
# rating, deviation) per bot, then the changes JSON.
APPLY_RATINGS = """
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 1 then return 0 end
local bots = #KEYS - 6
for i = 1, bots do
  local base = 3 + 5 * (i - 1)
  local current = redis.call('HGET', KEYS[6], ARGV[base + 1])
  local games = 0
  if current then games = cjson.decode(current)['games'] end
  if games ~= tonumber(ARGV[base + 3]) then return -1 end
end
for i = 1, bots do
  local base = 3 + 5 * (i - 1)
  local bot = ARGV[base + 1]
  local rating = tonumber(ARGV[base + 4])
  local games = tonumber(ARGV[base + 3]) + 1
  local deviation = tonumber(ARGV[base + 5])
  redis.call('HSET', KEYS[6], bot, cjson.encode({rating = rating, games = games, deviation = deviation}))
  redis.call('RPUSH', KEYS[6 + i], cjson.encode({rating = rating, matchId = ARGV[1], at = tonumber(ARGV[3])}))
  redis.call('ZADD', KEYS[2], rating, bot)
  redis.call('HSET', KEYS[4], bot, ARGV[base + 2])
end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[3], ARGV[2])
redis.call('HSET', KEYS[5], ARGV[1], ARGV[#ARGV])
return 1
"""

# The refits asked for: each ruleset asked for is answered unless a refit of it waits in the
# queue already (claimed until a time in KEYS[2]; it will read the history as it is when it
# runs); an answered one is claimed for ARGV[2] ms. A request stays until its job starts
# (START_FIT), so a job lost with the queue's Redis is asked again once its claim lapses.
# KEYS: the requests, the claims (one slot). ARGV: the time (ms), the claim's life (ms).
CLAIM_FIT_REQUESTS = """
local claimed = {}
local now = tonumber(ARGV[1])
for _, ruleset in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local until_ms = tonumber(redis.call('HGET', KEYS[2], ruleset))
  if not until_ms or until_ms <= now then
    redis.call('HSET', KEYS[2], ruleset, now + tonumber(ARGV[2]))
    table.insert(claimed, ruleset)
  end
end
return claimed
"""

# A refit of ARGV[1] starts: its request and its claim go (asking again from now on queues a
# new one). KEYS: the requests, the claims.
START_FIT = """
redis.call('SREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
"""

#: how long a queued refit holds its ruleset's claim before another is queued (its job lost)
FIT_CLAIM_MS = 600_000


# A refit's board and fitted hash, written aside, made the ones read at once; nothing when
# another refit published them first (its staged keys are gone). KEYS: staged board, board,
# staged fitted, fitted.
PUBLISH_FIT = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('RENAME', KEYS[1], KEYS[2])
redis.call('RENAME', KEYS[3], KEYS[4])
return 1
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
    """Ratings per ruleset, each ruleset's under one hash tag: Elo moved by each rated match,
    and the fit of the whole history."""

    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._apply = redis.register_script(APPLY_RATINGS)
        self._claim_fit_requests = redis.register_script(CLAIM_FIT_REQUESTS)
        self._start_fit = redis.register_script(START_FIT)
        self._publish_fit = redis.register_script(PUBLISH_FIT)

    async def request_fit(self, ruleset: str) -> None:
        """Ask for a refit of the ruleset's FITTED ratings (the workers' clock queues it)."""
        await self.redis.sadd(FIT_REQUESTS, ruleset)

    async def claim_fit_requests(self) -> list[str]:
        """The rulesets whose refit is to be queued now (see CLAIM_FIT_REQUESTS)."""
        claimed = await self._claim_fit_requests(keys=[FIT_REQUESTS, FIT_CLAIMS], args=[now_ms(), FIT_CLAIM_MS])
        return [r.decode() for r in claimed]

    async def release_fit_claim(self, ruleset: str) -> None:
        """A refit starts: asking again from now on queues a new one."""
        await self._start_fit(keys=[FIT_REQUESTS, FIT_CLAIMS], args=[ruleset])

    async def elo(self, bot_ids: Sequence[str], ruleset: str) -> list[StoredRating | None]:
        """Each bot's Elo rating under ``ruleset``, None for a bot without one."""
        rows = await self.redis.hmget(elo_ratings_key(ruleset), list(bot_ids)) if bot_ids else []
        return [StoredRating.of_elo(row) if row else None for row in rows]

    async def standings(self, ruleset: str, bot_ids: Sequence[str]) -> list[tuple[StoredRating | None, StoredRating | None]]:
        """Each bot's (FITTED, Elo) rating under ``ruleset`` (None: none), in one round trip
        to the ruleset's slot (what a ladder's pairing pass reads)."""
        if not bot_ids:
            return []
        ids = list(bot_ids)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zmscore(leaderboard_key(ruleset, "FITTED"), ids)
            pipe.hmget(fitted_ratings_key(ruleset), ids)
            pipe.hmget(elo_ratings_key(ruleset), ids)
            scores, fits, elos = await pipe.execute()
        return [
            (None if score is None else StoredRating.of_fit(float(score), fit), None if elo is None else StoredRating.of_elo(elo))
            for score, fit, elo in zip(scores, fits, elos, strict=True)
        ]

    async def is_applied(self, match_id: str, ruleset: str) -> bool:
        return bool(await self.redis.sismember(ratings_applied_key(ruleset), match_id))

    async def apply(
        self, match_id: str, ruleset: str, changes: Sequence[RatingChange], result: dict[str, Any]
    ) -> int:
        """Each bot's change, with ``games`` as read. 1 applied, 0 already applied, -1 stale."""
        keys = [ratings_applied_key(ruleset), leaderboard_key(ruleset, "ELO"), rating_results_key(ruleset),
                rating_names_key(ruleset), rating_changes_key(ruleset), elo_ratings_key(ruleset)]
        args: list[Any] = [match_id, json.dumps(result, separators=(",", ":")), now_ms()]
        for c in changes:
            keys.append(history_key(c.bot, ruleset))
            args += [c.bot, c.name, c.games, repr(float(c.after)), repr(float(c.deviation))]
        args.append(json.dumps([{"bot": c.bot, "name": c.name, "before": c.before, "after": c.after} for c in changes]))
        return int(await self._apply(keys=keys, args=args))

    async def changes(self, matches: Sequence[tuple[str, str]]) -> list[list[dict[str, Any]] | None]:
        """The rating changes applied for each (match, ruleset): (bot, name, before, after)
        each; None where none were."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for match_id, ruleset in matches:
                pipe.hget(rating_changes_key(ruleset), match_id)
            found = await pipe.execute()
        return [None if changes is None else json.loads(changes) for changes in found]

    async def results(self, ruleset: str) -> list[dict[str, Any]]:
        return [json.loads(r) for r in await self.redis.lrange(rating_results_key(ruleset), 0, -1)]

    async def store_fit(
        self, ruleset: str, ratings: dict[str, float], games: dict[str, int], deviations: dict[str, float]
    ) -> None:
        """Replace the fitted leaderboard at once, so readers never see half of it: written
        aside (one transaction), then renamed into place (one script: a cluster's pipelines
        refuse RENAME; both keys are in the ruleset's slot); beside each rating, its games and
        deviation (JSON)."""
        if not ratings:
            return
        board, fitted = leaderboard_key(ruleset, "FITTED"), fitted_ratings_key(ruleset)
        staged = [f"{board}:staging", f"{fitted}:staging"]
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(*staged)
            pipe.zadd(staged[0], ratings)
            pipe.hset(staged[1], mapping={b: json.dumps({"games": games[b], "deviation": deviations[b]}) for b in ratings})
            await pipe.execute()
        await self._publish_fit(keys=[staged[0], board, staged[1], fitted])

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
            pipe.hmget(rating_names_key(ruleset), ids)
            pipe.hmget(fitted_ratings_key(ruleset) if method == "FITTED" else elo_ratings_key(ruleset), ids)
            names, kept = await pipe.execute()
        stored = [
            (StoredRating.of_fit(score, k) if method == "FITTED" else StoredRating.of_elo(k) if k else StoredRating(score, 0, None))
            for (_, score), k in zip(rows, kept, strict=True)
        ]
        return [
            LeaderRow(0, bot_id, (names[i] or b"?").decode(), score, s.games, s.deviation)
            for i, (bot_id, (_, score), s) in enumerate(zip(ids, rows, stored, strict=True))
        ]

    async def current(self, bot_ids: Sequence[str]) -> list[list[dict[str, Any]]]:
        """Each bot's current Elo rating per ruleset (one round trip for all of them: one read
        of each ruleset's ratings)."""
        if not bot_ids:
            return []
        rulesets = [r.value for r in Ruleset]
        async with self.redis.pipeline(transaction=False) as pipe:
            for ruleset in rulesets:
                pipe.hmget(elo_ratings_key(ruleset), list(bot_ids))
            answers = await pipe.execute()
        out = []
        for i in range(len(bot_ids)):
            ratings = []
            for ruleset, values in sorted(zip(rulesets, answers, strict=True)):
                if values[i] is not None:
                    stored = StoredRating.of_elo(values[i])
                    ratings.append(
                        {"ruleset": ruleset, "rating": stored.rating, "games": stored.games, "deviation": stored.deviation}
                    )
            out.append(ratings)
        return out

    async def fitted(self, bot_ids: Sequence[str], rulesets: Sequence[str]) -> list[list[dict[str, Any]]]:
        """Each bot's rating, games and deviation in each ruleset's fitted leaderboard that
        holds it (one round trip for all of them)."""
        if not bot_ids:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for ruleset in rulesets:
                pipe.zmscore(leaderboard_key(ruleset, "FITTED"), list(bot_ids))
                pipe.hmget(fitted_ratings_key(ruleset), list(bot_ids))
            answers = await pipe.execute()
        out = []
        for i in range(len(bot_ids)):
            ratings = []
            for r, ruleset in enumerate(rulesets):
                rating, extra = answers[2 * r][i], answers[2 * r + 1][i]
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
