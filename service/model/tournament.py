"""A tournament as values: what was asked for (:class:`TournamentSpec`), who plays
(:class:`Entrant`), its tables (:class:`Table`: one match, or a duplicate set of one match per
seat dealt alike), each table's result (:class:`TableResult`) and the standings they add up
to. Pure: the store keeps them as JSON (``to_json`` / ``from_json``), the domain runs them."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

from ranking.pairing import rotation
from service.model.homes import homed_match_id
from service.model.live_match import SeatHolder

#: entrants of one tournament at most (bots and house bots)
MAX_ENTRANTS = 512
#: the kind of house bot that fills a table's empty seats (they score nothing)
FILL_KIND = "HEURISTIC"


class TournamentFormat(str, Enum):
    ROUND_ROBIN = "ROUND_ROBIN"
    SWISS = "SWISS"
    ARENA = "ARENA"


class TournamentStatus(str, Enum):
    SCHEDULED = "SCHEDULED"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELLED = "CANCELLED"

    @property
    def over(self) -> bool:
        return self in (TournamentStatus.FINISHED, TournamentStatus.CANCELLED)


@dataclass(frozen=True)
class TournamentSpec:
    """What the creator asked for; fixed at creation."""

    name: str
    ruleset: str
    variants: list[str]
    players_per_match: int
    format: TournamentFormat
    rounds: int | None
    duration_minutes: float | None
    starts_at_ms: int
    move_timeout_ms: int
    rated: bool
    duplicate: bool
    created_by: str

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "format": self.format.value}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TournamentSpec:
        return cls(**{**data, "format": TournamentFormat(data["format"])})


@dataclass(frozen=True)
class Entrant:
    """A bot entered into the tournament, or a house bot entered under a name of its own."""

    id: str
    name: str
    house: str | None = None

    def holder(self) -> SeatHolder:
        return SeatHolder(self.id, self.name, self.house)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Entrant:
        return cls(data["id"], data["name"], data.get("house"))


@dataclass
class Table:
    """One table of the tournament: its entrants by seat (None: a house bot fills the seat),
    the seed of its deals, its round (None in an ARENA), when it was created and ended."""

    entrants: list[int | None]
    seed: str
    round: int | None
    created_ms: int
    done: bool = False
    ended_ms: int | None = None
    #: whether its matches' ids are homed (:func:`homed_match_id`), as every table made now
    #: is; False for a table stored before matches had homes, whose matches keep their ids
    homed: bool = True

    def seated(self, turn: int) -> list[int | None]:
        """The entrants by seat in the table's ``turn``-th match (duplicate sets rotate them)."""
        return rotation(self.entrants, turn)

    def playing(self) -> set[int]:
        return {e for e in self.entrants if e is not None}

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"table": self.entrants, "seed": self.seed, "round": self.round,
                                "created": self.created_ms}
        if self.done:
            data["done"] = True
        if self.ended_ms is not None:
            data["ended"] = self.ended_ms
        if self.homed:  # (a table stored without it is older than homes)
            data["homed"] = True
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Table:
        return cls(data["table"], data["seed"], data.get("round"), data["created"], bool(data.get("done")),
                   data.get("ended"), bool(data.get("homed")))


@dataclass(frozen=True)
class TableResult:
    """How one match of a table ended for the standings: the entrants by seat with their
    final scores and placement points, or that it was aborted (it counts for nobody)."""

    entrants: list[int | None]
    scores: list[int] = field(default_factory=list)
    points: list[float] = field(default_factory=list)
    aborted: bool = False

    def to_dict(self) -> dict[str, Any]:
        if self.aborted:
            return {"entrants": self.entrants, "aborted": True}
        return {"entrants": self.entrants, "scores": self.scores, "points": self.points}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TableResult:
        if data.get("aborted"):
            return cls(data["entrants"], aborted=True)
        return cls(data["entrants"], data["scores"], data["points"])


@dataclass(frozen=True)
class Standing:
    rank: int
    entrant: int
    points: float
    matches: int
    score: int


@dataclass
class Tournament:
    id: str
    spec: TournamentSpec
    status: TournamentStatus
    entrants: list[Entrant] = field(default_factory=list)
    started_ms: int | None = None
    finished_ms: int | None = None
    #: the tables by id (``r<round>t<n>``, ``a<n>`` in an ARENA)
    tables: dict[str, Table] = field(default_factory=dict)
    #: the results by match id
    results: dict[str, TableResult] = field(default_factory=dict)
    #: when it was created (None: a tournament stored before this was kept)
    created_ms: int | None = None
    #: why it was cancelled (None unless CANCELLED; a tournament cancelled before reasons were kept)
    cancelled_reason: str | None = None

    @property
    def open_to_entrants(self) -> bool:
        """Bots may still enter (join, accept an invitation): it has not started or ended."""
        return self.status is TournamentStatus.SCHEDULED

    def holder(self, entrant: int | None) -> SeatHolder:
        if entrant is None:
            return SeatHolder(f"house-{FILL_KIND.lower()}", f"House {FILL_KIND.title()} (fill)", FILL_KIND)
        return self.entrants[entrant].holder()

    def match_ids(self, table_id: str) -> list[str]:
        """The ids of a table's matches, fixed by the tournament, the table and the turn, so
        that creating one twice (a worker retried) changes nothing."""
        turns = self.spec.players_per_match if self.spec.duplicate else 1
        bases = [f"{self.id}-{table_id}-{turn}" for turn in range(turns)]
        table = self.tables.get(table_id)
        return [homed_match_id(base) for base in bases] if table is None or table.homed else bases

    def all_match_ids(self) -> list[str]:
        """Every match of the tournament so far, oldest table first."""
        return [m for _, match_ids in self.rounds() for m in match_ids]

    def rounds(self) -> list[tuple[int | None, list[str]]]:
        """The tournament's matches so far by round, oldest table first: (the round, its
        matches' ids); an ARENA's tables, which have no rounds, are one run under None."""
        ordered = sorted(self.tables, key=lambda t: (self.tables[t].created_ms, t))
        grouped: list[tuple[int | None, list[str]]] = []
        for table_id in ordered:
            round_number = self.tables[table_id].round
            if not grouped or grouped[-1][0] != round_number:
                grouped.append((round_number, []))
            grouped[-1][1].extend(self.match_ids(table_id))
        return grouped

    def standings(self) -> list[Standing]:
        """Entrants by placement points, then total score; ties share a rank; house fill
        seats and aborted matches count for nobody."""
        points = [0.0] * len(self.entrants)
        matches = [0] * len(self.entrants)
        scores = [0] * len(self.entrants)
        for result in self.results.values():
            if result.aborted:
                continue
            for entrant, earned, score in zip(result.entrants, result.points, result.scores, strict=True):
                if entrant is not None:
                    points[entrant] += earned
                    matches[entrant] += 1
                    scores[entrant] += score
        order = sorted(range(len(self.entrants)), key=lambda e: (-points[e], -scores[e], e))
        standings: list[Standing] = []
        for position, entrant in enumerate(order, 1):
            tied = standings and (standings[-1].points, standings[-1].score) == (points[entrant], scores[entrant])
            rank = standings[-1].rank if tied else position
            standings.append(Standing(rank, entrant, points[entrant], matches[entrant], scores[entrant]))
        return standings
