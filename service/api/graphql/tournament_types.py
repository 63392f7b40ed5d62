"""GraphQL types of tournaments, ratings and leaderboards."""

from __future__ import annotations

from datetime import datetime

import strawberry
from strawberry.types import Info

from service.api.graphql.context import RequestContext
from service.api.graphql.limits import ListBound
from service.api.graphql.types import EDGES, Bot, Match, PageInfo, _datetime, match_type
from service.domain.ratings import RatingMethod
from service.errors import BadInput
from service.model.live_match import HouseBotKind
from service.model.tournament import MAX_ENTRANTS, TournamentFormat, TournamentStatus
from service.model.tournament import Tournament as DomainTournament
from wizard import Ruleset, Variant

#: ``Tournament.matches(first:)``, and ``leaderboard(first:)``
TOURNAMENT_MATCHES = ListBound(1_000, argument="first", default=200)
LEADERBOARD = ListBound(500, argument="first", default=50)

strawberry.enum(TournamentFormat, name="TournamentFormat")
strawberry.enum(TournamentStatus, name="TournamentStatus")


@strawberry.type
class Standing:
    rank: int
    bot: Bot
    points: float = strawberry.field(description="Placement points: at a table of n, first n-1 … last 0; ties share.")
    matches: int
    score: int = strawberry.field(description="Total final score over its matches (the tie-break).")


@strawberry.type
class Tournament:
    id: strawberry.ID
    name: str
    ruleset: Ruleset
    variants: list[Variant]
    players_per_match: int
    format: TournamentFormat
    rounds: int | None
    duration_minutes: float | None
    starts_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    move_timeout_ms: int
    rated: bool
    duplicate: bool
    status: TournamentStatus
    created_by: strawberry.ID
    cancelled_reason: str | None = strawberry.field(
        description="Why it was cancelled: by its creator (with the reason given), or at the start for want of "
        "entrants (null unless CANCELLED)."
    )
    entrants: list[Bot] = strawberry.field(metadata=ListBound(MAX_ENTRANTS).metadata())
    standings: list[Standing] = strawberry.field(metadata=ListBound(MAX_ENTRANTS).metadata())
    domain: strawberry.Private[DomainTournament]

    @strawberry.field(
        description="The tournament's matches, oldest first, as the caller may see them: `first` of them "
        f"(default {TOURNAMENT_MATCHES.default}, at most {TOURNAMENT_MATCHES.size}) from `offset`.",
        metadata=TOURNAMENT_MATCHES.metadata(),
    )
    async def matches(
        self, info: Info[RequestContext, None], first: int = TOURNAMENT_MATCHES.default, offset: int = 0  # type: ignore[assignment]
    ) -> list[Match]:
        TOURNAMENT_MATCHES.check(first)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise BadInput(f"offset must be 0 or more, not {offset!r}")
        caller = await info.context.optional_caller()
        matches = await info.context.services.tournaments.matches_of(self.domain, first, offset)
        return [match_type(m, m.seat_of(caller.bot_id) if caller else None) for m in matches]


def tournament_type(t: DomainTournament) -> Tournament:
    spec = t.spec
    entrants = [Bot(id=strawberry.ID(e.id), name=e.name) for e in t.entrants]
    return Tournament(
        id=strawberry.ID(t.id),
        name=spec.name,
        ruleset=Ruleset(spec.ruleset),
        variants=list(spec.variants),  # type: ignore[arg-type]
        players_per_match=spec.players_per_match,
        format=spec.format,
        rounds=spec.rounds,
        duration_minutes=spec.duration_minutes,
        starts_at=_datetime(spec.starts_at_ms),  # type: ignore[arg-type]
        started_at=_datetime(t.started_ms),
        finished_at=_datetime(t.finished_ms),
        move_timeout_ms=spec.move_timeout_ms,
        rated=spec.rated,
        duplicate=spec.duplicate,
        status=t.status,
        created_by=strawberry.ID(spec.created_by),
        cancelled_reason=t.cancelled_reason,
        entrants=entrants,
        standings=[
            Standing(rank=r.rank, bot=entrants[r.entrant], points=r.points, matches=r.matches, score=r.score)
            for r in t.standings()
        ],
        domain=t,
    )


@strawberry.type
class LeaderboardEntry:
    rank: int
    bot: Bot
    rating: float
    games: int
    method: RatingMethod
    deviation: float = strawberry.field(description="As Rating.deviation: one standard deviation, Elo points.")
    provisional: bool = strawberry.field(
        description="As Rating.provisional: fewer rated matches than the provisional threshold."
    )


@strawberry.input
class CreateTournamentInput:
    name: str
    ruleset: Ruleset = Ruleset.WIZARD
    variants: list[Variant] = strawberry.field(default_factory=list)
    players_per_match: int = 4
    format: TournamentFormat = TournamentFormat.ROUND_ROBIN
    rounds: int | None = strawberry.field(default=None, description="ROUND_ROBIN and SWISS")
    duration_minutes: float | None = strawberry.field(default=None, description="ARENA (fractions allowed)")
    starts_at: datetime | None = strawberry.field(default=None, description="Default: now.")
    move_timeout_ms: int | None = None
    rated: bool = True
    duplicate: bool = strawberry.field(
        default=False, description="Replay each set of deals with the seats rotated (one match per seat)."
    )
    bots: list[strawberry.ID] = strawberry.field(default_factory=list, description="Bots invited to enter: each enters when it accepts (at once under its ACCEPT_ALL policy; "
        "the creator naming itself enters at once; a house bot named by its id, `house-heuristic`, enters at once as "
        "houseBots do). More may join until the start.")
    house_bots: list[HouseBotKind] = strawberry.field(
        default_factory=list, description="House bots entered as entrants of their own (kinds: RANDOM, HEURISTIC, SEARCH)."
    )


@strawberry.type
class TournamentEdge:
    cursor: str
    node: Tournament


@strawberry.type(description="A page of tournaments, newest first.")
class TournamentConnection:
    edges: list[TournamentEdge] = strawberry.field(metadata=EDGES.metadata())
    page_info: PageInfo
