"""Ratings: each rated match's Elo change, applied exactly once however often its settlement
runs (a Redis script marks the match as it applies the change), the refits of the FITTED
leaderboards from the whole history, and what the API reads of them (leaderboards, a bot's
ratings and history)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any

from ranking.ratings import (
    INITIAL_DEVIATION,
    INITIAL_RATING,
    elo_deviation_after,
    elo_deviations,
    elo_update,
    fit_scores,
)
from service.errors import BadInput
from service.model.live_match import HouseBotKind, LiveMatch, MatchStatus, SeatHolder
from service.store.ratings import LeaderRow, RatingChange, RatingStore, StoredRating
from wizard import Ruleset

#: how often a rating change is computed again when another match's change got in first
APPLY_ATTEMPTS = 20
#: the deepest a leaderboard is read (its ``offset``)
MAX_LEADERBOARD_OFFSET = 1_000_000
#: the deepest a leaderboard without its provisional bots is read: those are found by reading
#: the board from the top, so one request may read at most this far (plus a page)
MAX_ESTABLISHED_OFFSET = 10_000


class RatingMethod(str, Enum):
    """Which rating a leaderboard shows."""

    #: moved by every rated match as it ends
    ELO = "ELO"
    #: a fit of the whole history of final scores (refitted after each tournament and on demand)
    FITTED = "FITTED"


def rated_as(holder: SeatHolder) -> str:
    """Whose rating a seat moves: a house bot's kind shares one rating however it was seated."""
    return f"house-{holder.house.lower()}" if holder.house else holder.id


def house_kind_of(identity: str) -> str | None:
    """The house bot kind a rating's identity stands for (``rated_as``), or None: a registered bot."""
    for kind in HouseBotKind:
        if identity == f"house-{kind.value.lower()}":
            return kind.value
    return None


def kept_deviation(games: int, deviation: float | None) -> float:
    """A stored rating's deviation; one kept before deviations were (None) gets the one its
    games give: the ELO deviation after that many matches at even tables (for a FITTED rating,
    until the next refit stores its own, a wider one than the fit's)."""
    return elo_deviation_after(games) if deviation is None else deviation


class RatingService:
    """Ratings with their doubt: every rating read carries its ``deviation`` (Elo points, one
    standard deviation) and ``provisional`` (fewer than ``provisional_games`` rated games)."""

    def __init__(self, ratings: RatingStore, provisional_games: int) -> None:
        self.ratings = ratings
        self.provisional_games = provisional_games

    def _doubt(self, games: int, deviation: float | None) -> dict[str, Any]:
        """A rating's deviation and provisional mark."""
        return {"deviation": kept_deviation(games, deviation), "provisional": games < self.provisional_games}

    async def leaderboard(
        self, ruleset: str, method: RatingMethod, first: int, offset: int, provisional: bool = True
    ) -> list[dict[str, Any]]:
        """``first`` bots by rating from ``offset`` (0: the top), each with its rank, id,
        name, rating, games, deviation and provisional mark; ``provisional`` False leaves
        provisional bots out (ranks counted among those shown; then ``offset`` is at most
        ``MAX_ESTABLISHED_OFFSET``, and the board is read from the top at most
        ``service.store.ratings.MAX_ESTABLISHED_SCAN`` places deep). BAD_INPUT for an offset out of range."""
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_LEADERBOARD_OFFSET:
            raise BadInput(f"offset must be from 0 to {MAX_LEADERBOARD_OFFSET}, not {offset!r}")
        if not provisional and offset > MAX_ESTABLISHED_OFFSET:
            raise BadInput(
                f"with provisional: false, offset goes to {MAX_ESTABLISHED_OFFSET} at most, not {offset}: "
                "read deeper with provisional: true"
            )
        min_games = 0 if provisional else self.provisional_games
        rows: list[LeaderRow] = await self.ratings.leaderboard(ruleset, method.value, first, offset, min_games)
        return [
            {"rank": r.rank, "id": r.id, "name": r.name, "rating": r.rating, "games": r.games,
             **self._doubt(r.games, r.deviation)}
            for r in rows
        ]

    async def current(self, bot_ids: Sequence[str]) -> list[list[dict[str, Any]]]:
        """Each bot's Elo rating per ruleset (``ruleset``, ``rating``, ``games``,
        ``deviation``, ``provisional``), for many bots in one round trip."""
        return [[self._with_doubt(r) for r in rows] for rows in await self.ratings.current(bot_ids)]

    async def fitted(self, bot_ids: Sequence[str]) -> list[list[dict[str, Any]]]:
        """Each bot's FITTED rating per ruleset (as ``current``): those rulesets whose latest
        refit rated it, for many bots in one round trip."""
        rulesets = [r.value for r in Ruleset]
        return [[self._with_doubt(r) for r in rows] for rows in await self.ratings.fitted(bot_ids, rulesets)]

    def _with_doubt(self, row: dict[str, Any]) -> dict[str, Any]:
        return {**row, **self._doubt(row["games"], row["deviation"])}

    async def histories(self, wanted: Sequence[tuple[str, str, int]]) -> list[list[dict[str, Any]]]:
        """For each (bot, ruleset, last): its latest ``last`` rating points, oldest first."""
        return await self.ratings.histories(wanted)

    async def settle(self, match: LiveMatch) -> None:
        """An ended match's rating change, at most once (a rated match that finished)."""
        if match.status is MatchStatus.FINISHED and match.settings.rated and not match.settings.stacked:
            await self.apply_elo(match)

    async def apply_elo(self, match: LiveMatch) -> None:
        ruleset = match.ruleset.value
        holders = [h for h in match.seats if h is not None]
        identities = [rated_as(h) for h in holders]
        names = {rated_as(h): (f"House {h.house.title()}" if h.house else h.name) for h in holders}
        unique = list(dict.fromkeys(identities))
        scores = list(match.state.scores)
        unknown = StoredRating(INITIAL_RATING, 0, INITIAL_DEVIATION)
        for _ in range(APPLY_ATTEMPTS):
            if await self.ratings.is_applied(match.id, ruleset):
                return
            current = {i: r or unknown for i, r in zip(unique, await self.ratings.elo(unique, ruleset), strict=True)}
            before = [current[i].rating for i in identities]
            deviations = elo_deviations(
                identities, before, [kept_deviation(current[i].games, current[i].deviation) for i in identities]
            )
            after = elo_update(before, scores)
            delta: dict[str, float] = {}
            for identity, old, new in zip(identities, before, after, strict=True):
                delta[identity] = delta.get(identity, 0.0) + new - old
            changes = [
                RatingChange(
                    i, names[i], current[i].games, current[i].rating, current[i].rating + delta[i], deviations[i]
                )
                for i in unique
            ]
            result = {"matchId": match.id, "bots": identities, "scores": scores}
            if await self.ratings.apply(match.id, ruleset, changes, result) >= 0:
                return
        raise RuntimeError(f"ratings for match {match.id} kept changing; the settlement will be retried")

    async def standings(self, ruleset: str, identities: Sequence[str]) -> list[tuple[StoredRating | None, StoredRating | None]]:
        """Each identity's (FITTED, Elo) rating under ``ruleset`` (None: none yet), for a
        ladder's pairing (``service.domain.ladders.ladder_standing``)."""
        return await self.ratings.standings(ruleset, identities)

    async def changes(self, matches: Sequence[LiveMatch]) -> list[list[dict[str, Any]] | None]:
        """Settled matches' rating changes (bot, name, before, after); None: one moved none."""
        return await self.ratings.changes([(m.id, m.ruleset.value) for m in matches])

    async def request_fit(self, ruleset: str) -> None:
        """Ask the workers to refit a ruleset's FITTED ratings (after a rated tournament, or on
        demand). While one refit waits in the queue, asking again adds nothing: it will read
        the history as it is when it runs."""
        await self.ratings.request_fit(ruleset)

    async def claim_fit_requests(self) -> list[str]:
        """The rulesets whose refit is to be queued now (a refit already waiting absorbs asks)."""
        return await self.ratings.claim_fit_requests()

    async def fit(self, ruleset: str) -> int:
        """Refit the whole history of ``ruleset`` (the FITTED leaderboard); the matches used."""
        await self.ratings.release_fit_claim(ruleset)  # asks from now on queue a new refit
        results = await self.ratings.results(ruleset)
        fit = fit_scores([(r["bots"], r["scores"]) for r in results])
        await self.ratings.store_fit(
            ruleset, {str(b): v for b, v in fit.ratings.items()}, {str(b): g for b, g in fit.games.items()},
            {str(b): d for b, d in fit.deviations.items()},
        )
        return len(results)
