"""The archive: finished and aborted matches, their rating changes, and finished tournaments,
in a relational database (PostgreSQL through SQLAlchemy 2's asyncio engine and asyncpg).

Redis holds what is live; once settlement has archived a match (:meth:`Archive.put_match`, an
upsert keyed by the match id, so a settlement that runs again writes the same rows), its keys
in Redis expire after a grace period and every read of it comes from here. An archived
match keeps the same six fields Redis held (``MatchStore.FIELDS``), so it is rebuilt by the
same code and answers exactly as it did live; next to them, the columns the listings query
(status, ruleset, rated, tournament, times; per seat its bot, score and place; per round each
seat's bid, tricks and points) and the full record as replay reads it.

The schema is Alembic's (``service/store/migrations``): :func:`migrate` brings a database to
the newest revision; `wizard-arena up` runs it on its embedded PostgreSQL, operators run
`wizard-arena migrate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    Table,
    Text,
    and_,
    case,
    func,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.sql import Select

#: what a database that is away (stopped, restarting, unreachable, out of connections) raises
#: through SQLAlchemy and asyncpg: the connection's OSError, asyncpg's own errors when it
#: connects, SQLAlchemy's wrapped ones after
UNAVAILABLE: tuple[type[BaseException], ...] = (
    OSError, TimeoutError, SQLAlchemyError, asyncpg.PostgresError, asyncpg.InterfaceError,
)


class ArchiveUnavailable(RuntimeError):
    """The archive's database did not take a write: what waits for it stays queued, to retry."""


metadata = MetaData()

#: ids are compared byte by byte (collation "C"), as Redis orders the members of equal score:
#: the live and archived halves of a listing page sort alike, and the indexes serve both
Id = Text(collation="C")

#: one row per archived match: the fields Redis held (to rebuild it), and what listings query
matches = Table(
    "matches",
    metadata,
    Column("id", Id, primary_key=True),
    Column("status", Text, nullable=False),
    Column("ruleset", Text, nullable=False),
    Column("players", SmallInteger, nullable=False),
    Column("rated", Boolean, nullable=False),
    Column("tournament_id", Text),
    #: milliseconds since the epoch, as everywhere in the service
    Column("created_ms", BigInteger, nullable=False),
    Column("ended_ms", BigInteger, nullable=False),
    Column("seed", Text),
    Column("scores", JSONB, nullable=False),
    Column("winners", JSONB),
    #: the record as `GET /api/matches/{id}/record` answers it (None: an aborted match)
    Column("record", JSONB),
    #: each rated bot's rating before and after (None: not rated)
    Column("rating_changes", JSONB),
    # the fields of the match's Redis hash, as MatchStore reads them
    Column("version", Integer, nullable=False),
    Column("settings", Text, nullable=False),
    Column("state", LargeBinary, nullable=False),
    Column("live", Text, nullable=False),
    Column("event_id", Text, nullable=False),
    Column("sealed", Boolean, nullable=False),
    Column("archived_ms", BigInteger, nullable=False),
)
Index("matches_newest", matches.c.created_ms.desc(), matches.c.id.desc())
Index("matches_tournament", matches.c.tournament_id, matches.c.created_ms.desc())

#: one row per seat of an archived match, with the match's time and ruleset for a bot's listings
match_seats = Table(
    "match_seats",
    metadata,
    Column("match_id", Id, ForeignKey("matches.id", ondelete="CASCADE"), primary_key=True),
    Column("seat", SmallInteger, primary_key=True),
    Column("bot_id", Text),
    Column("bot_name", Text),
    Column("house", Text),
    Column("score", Integer, nullable=False),
    #: 1 for the winners, ties sharing a place (None: an aborted match)
    Column("place", SmallInteger),
    Column("timeouts", Integer, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("ruleset", Text, nullable=False),
)
Index("match_seats_bot_newest", match_seats.c.bot_id, match_seats.c.created_ms.desc(), match_seats.c.match_id.desc())

#: each seat's bid, tricks and points in each round played
match_rounds = Table(
    "match_rounds",
    metadata,
    Column("match_id", Id, ForeignKey("matches.id", ondelete="CASCADE"), primary_key=True),
    Column("round", SmallInteger, primary_key=True),
    Column("seat", SmallInteger, primary_key=True),
    Column("bid", SmallInteger, nullable=False),
    Column("tricks", SmallInteger, nullable=False),
    Column("points", Integer, nullable=False),
)

#: finished and cancelled tournaments: the tournament as the API shows it, and its standings
tournaments = Table(
    "tournaments",
    metadata,
    Column("id", Id, primary_key=True),
    Column("status", Text, nullable=False),
    Column("ruleset", Text, nullable=False),
    Column("created_ms", BigInteger, nullable=False),
    Column("ended_ms", BigInteger, nullable=False),
    Column("document", JSONB, nullable=False),
    Column("standings", JSONB, nullable=False),
    #: the tournament's Redis fields (its hash, tables and results, as text), so that it is
    #: read back by the same code once its keys have left Redis (None: archived before them)
    Column("stored", JSONB),
)
Index("tournaments_newest", tournaments.c.created_ms.desc(), tournaments.c.id.desc())


@dataclass(frozen=True, slots=True)
class SeatRow:
    seat: int
    bot_id: str | None
    bot_name: str | None
    house: str | None
    score: int
    place: int | None
    timeouts: int


@dataclass(frozen=True, slots=True)
class RoundRow:
    round: int
    seat: int
    bid: int
    tricks: int
    points: int


@dataclass(slots=True)
class ArchivedMatch:
    """A match as the archive keeps it."""

    id: str
    status: str
    ruleset: str
    players: int
    rated: bool
    tournament_id: str | None
    created_ms: int
    ended_ms: int
    seed: str | None
    scores: list[int]
    winners: list[int] | None
    record: dict[str, Any] | None
    rating_changes: list[dict[str, Any]] | None
    version: int
    settings: str
    state: bytes
    live: str
    event_id: str
    sealed: bool
    seats: list[SeatRow] = field(default_factory=list)
    rounds: list[RoundRow] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        values = {c.name: getattr(self, c.name) for c in matches.columns if c.name != "archived_ms"}
        values["archived_ms"] = int(datetime.now(UTC).timestamp() * 1000)
        return values


def _upsert(table: Table) -> Any:
    """INSERT of a whole row, replacing the row of the same key."""
    statement = insert(table)
    keys = [c.name for c in table.primary_key]
    return statement.on_conflict_do_update(
        index_elements=keys, set_={c.name: statement.excluded[c.name] for c in table.columns if c.name not in keys}
    )


_PUT_MATCH = _upsert(matches)
_PUT_SEATS = insert(match_seats).on_conflict_do_nothing()
_PUT_ROUNDS = insert(match_rounds).on_conflict_do_nothing()
_PUT_TOURNAMENT = _upsert(tournaments)


def async_url(url: str) -> str:
    """A PostgreSQL URL for SQLAlchemy's asyncio engine (asyncpg), from the usual forms
    (``postgres://``, ``postgresql://``, ``postgresql+asyncpg://``)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("postgres", "postgresql", "postgresql+asyncpg"):
        raise ValueError(f"DATABASE_URL must be a postgresql:// URL, not {scheme or url!r}://…")
    return f"postgresql+asyncpg://{rest}"


class Archive:
    """The archive's reads and writes; one engine (a small pool) per process."""

    def __init__(self, url: str, pool_size: int = 5) -> None:
        self.engine: AsyncEngine = create_async_engine(
            async_url(url), pool_size=pool_size, max_overflow=0, pool_pre_ping=True, pool_timeout=10,
            connect_args={"timeout": 10},  # a database away answers in seconds, not asyncpg's minute
        )

    async def close(self) -> None:
        await self.engine.dispose()

    async def ping(self) -> None:
        async with self.engine.connect() as connection:
            await connection.execute(text("SELECT 1"))

    # ------------------------------------------------------------------ matches
    async def put_match(self, match: ArchivedMatch) -> None:
        await self.put_matches([match])

    async def put_matches(self, archived: Sequence[ArchivedMatch]) -> None:
        """Write matches, their seats and their rounds in one transaction: once, however often
        they are written (a match's row is replaced; its seats and rounds, fixed once it has
        ended, are kept as they are). The statements are fixed, so SQLAlchemy compiles each
        once per process; the rows go as parameters (asyncpg's executemany)."""
        rows = [match.row() for match in archived]
        seats = [
            {
                "match_id": match.id, "seat": s.seat, "bot_id": s.bot_id, "bot_name": s.bot_name, "house": s.house,
                "score": s.score, "place": s.place, "timeouts": s.timeouts, "created_ms": match.created_ms,
                "ruleset": match.ruleset,
            }
            for match in archived for s in match.seats
        ]
        rounds = [
            {"match_id": match.id, "round": r.round, "seat": r.seat, "bid": r.bid, "tricks": r.tricks, "points": r.points}
            for match in archived for r in match.rounds
        ]
        if not rows:
            return
        async with self.engine.begin() as connection:
            await connection.execute(_PUT_MATCH, rows)
            if seats:
                await connection.execute(_PUT_SEATS, seats)
            if rounds:
                await connection.execute(_PUT_ROUNDS, rounds)

    async def stored_fields(self, match_ids: Sequence[str]) -> dict[str, list[Any]]:
        """The Redis fields (``MatchStore.FIELDS``) of the archived ones among ``match_ids``."""
        if not match_ids:
            return {}
        columns = [matches.c.id, matches.c.version, matches.c.settings, matches.c.state, matches.c.live,
                   matches.c.event_id, matches.c.sealed]
        async with self.engine.connect() as connection:
            rows = (await connection.execute(select(*columns).where(matches.c.id.in_(list(match_ids))))).all()
        return {
            r.id: [str(r.version).encode(), r.settings.encode(), bytes(r.state), r.live.encode(), r.event_id.encode(),
                   b"1" if r.sealed else None]
            for r in rows
        }

    async def unseal(self, match_ids: Sequence[str]) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(update(matches).where(matches.c.id.in_(list(match_ids))).values(sealed=False))

    async def record(self, match_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as connection:
            found = (await connection.execute(select(matches.c.record).where(matches.c.id == match_id))).first()
        return None if found is None else found.record

    async def has_match(self, match_id: str) -> bool:
        async with self.engine.connect() as connection:
            found = (await connection.execute(select(matches.c.id).where(matches.c.id == match_id))).first()
        return found is not None

    # ------------------------------------------------------------------ listings

    async def list_matches(
        self, *, before: tuple[int, str] | None, limit: int, status: str | None = None, bot_id: str | None = None,
        tournament_id: str | None = None, ruleset: str | None = None, rated: bool | None = None,
    ) -> list[tuple[int, str]]:
        """(created_ms, id) of up to ``limit`` archived matches that pass the filter, newest first."""
        query = select(matches.c.created_ms, matches.c.id)
        if status is not None:
            query = query.where(matches.c.status == status)
        if tournament_id is not None:
            query = query.where(matches.c.tournament_id == tournament_id)
        if ruleset is not None:
            query = query.where(matches.c.ruleset == ruleset)
        if rated is not None:
            query = query.where(matches.c.rated == rated)
        if bot_id is not None:
            query = query.where(matches.c.id.in_(select(match_seats.c.match_id).where(match_seats.c.bot_id == bot_id)))
        return await self._newest_first(matches, query, before, limit)

    async def list_tournaments(
        self, *, before: tuple[int, str] | None, limit: int, status: str | None = None
    ) -> list[tuple[int, str]]:
        """(created_ms, id) of up to ``limit`` archived tournaments, newest first."""
        query = select(tournaments.c.created_ms, tournaments.c.id)
        if status is not None:
            query = query.where(tournaments.c.status == status)
        return await self._newest_first(tournaments, query, before, limit)

    async def _newest_first(
        self, table: Table, query: Select[Any], before: tuple[int, str] | None, limit: int
    ) -> list[tuple[int, str]]:
        """A keyset page of ``query`` over ``table``: (created_ms, id) descending, strictly
        after the cursor ``before``."""
        created, key = table.c.created_ms, table.c.id
        if before is not None:
            ms, last = before
            query = query.where(or_(created < ms, and_(created == ms, key < last)))
        query = query.order_by(created.desc(), key.desc()).limit(limit)
        async with self.engine.connect() as connection:
            rows = (await connection.execute(query)).all()
        return [(int(r.created_ms), r.id) for r in rows]

    async def tournament_fields(self, tournament_id: str) -> dict[str, Any] | None:
        """An archived tournament's Redis fields (TournamentStore reads them), or None."""
        async with self.engine.connect() as connection:
            found = (await connection.execute(
                select(tournaments.c.stored).where(tournaments.c.id == tournament_id)
            )).first()
        return None if found is None else found.stored

    async def bot_stats(self, bot_id: str, ruleset: str) -> dict[str, Any]:
        """A bot's figures over its archived FINISHED matches under ``ruleset``: matches, the
        sums of its scores, places and timeouts, its rounds and the rounds it bid exactly."""
        seats = (
            select(match_seats.c.match_id, match_seats.c.seat, match_seats.c.score, match_seats.c.place,
                   match_seats.c.timeouts)
            .join(matches, matches.c.id == match_seats.c.match_id)
            .where(match_seats.c.bot_id == bot_id, match_seats.c.ruleset == ruleset, matches.c.status == "FINISHED")
            .subquery()
        )
        totals = select(
            func.count(), func.coalesce(func.sum(seats.c.score), 0), func.coalesce(func.sum(seats.c.place), 0),
            func.coalesce(func.sum(seats.c.timeouts), 0),
        )
        exact = case((match_rounds.c.bid == match_rounds.c.tricks, 1), else_=0)
        rounds = select(func.count(), func.coalesce(func.sum(exact), 0)).select_from(
            match_rounds.join(
                seats, and_(match_rounds.c.match_id == seats.c.match_id, match_rounds.c.seat == seats.c.seat)
            )
        )
        async with self.engine.connect() as connection:
            played, score, place, timeouts = (await connection.execute(totals)).one()
            round_count, exact_count = (await connection.execute(rounds)).one()
        return {"matches": int(played), "score": int(score), "place": int(place), "timeouts": int(timeouts),
                "rounds": int(round_count), "exact": int(exact_count)}

    # ------------------------------------------------------------------ tournaments
    async def put_tournament(
        self, tournament_id: str, status: str, ruleset: str, created_ms: int, ended_ms: int,
        document: dict[str, Any], standings: list[dict[str, Any]], stored: dict[str, Any] | None = None,
    ) -> None:
        row = {"id": tournament_id, "status": status, "ruleset": ruleset, "created_ms": created_ms,
               "ended_ms": ended_ms, "document": document, "standings": standings, "stored": stored}
        async with self.engine.begin() as connection:
            await connection.execute(_PUT_TOURNAMENT, row)


MIGRATIONS = Path(__file__).parent / "migrations"


def migrate(url: str, revision: str = "head") -> None:
    """Bring the database at ``url`` to ``revision`` (Alembic's upgrade), from any process
    that is not inside an event loop."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", async_url(url).replace("%", "%%"))
    command.upgrade(config, revision)
