"""Exports from the archive for bot authors who learn from their games: a bot's finished
matches as records (``GET /api/bots/{id}/records``), streamed from a server-side cursor so
that any number of them takes the same memory.

A record is the archive's ``record`` column as it is, the document ``GET
/api/matches/{id}/record`` answers and ``wizard-arena replay`` reads: PostgreSQL writes it as
JSON text (``record::text``, one line: JSON text never holds a raw newline) and nothing here
parses it. The rows come newest first (by the match's creation time, then its id: the order
of the ``match_seats_bot_newest`` index, so the database reads the index in order and never
sorts), ``yield_per`` rows at a time from the cursor.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Select, Text, select

from service.model.live_match import put_debug
from service.store.archive import Archive, match_seats, matches

#: rows fetched from the cursor at a time (and sent as one chunk of the response)
BATCH = 200


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """Which of a bot's matches: created at ``since_ms`` or later, before ``until_ms``, of
    ``ruleset`` (each None: any)."""

    since_ms: int | None = None
    until_ms: int | None = None
    ruleset: str | None = None


def bot_records_query(bot_id: str, where: RecordFilter, with_debug: bool = False) -> Select[Any]:
    """The ids and records (as JSON text) of the finished matches ``bot_id`` sat in, newest first;
    ``with_debug``: with the bot's seat and the match's live part (JSON text, which holds its
    debug texts; read as text: a debug text may hold a NUL, which Postgres's jsonb refuses)."""
    seats = match_seats.c
    columns: list[Any] = [seats.match_id, matches.c.record.cast(Text).label("record")]
    if with_debug:
        columns += [seats.seat, matches.c.live]
    query = (
        select(*columns)
        .select_from(match_seats.join(matches, matches.c.id == seats.match_id))
        .where(seats.bot_id == bot_id, matches.c.record.is_not(None), matches.c.status == "FINISHED")
        .order_by(seats.created_ms.desc(), seats.match_id.desc())
    )
    if where.since_ms is not None:
        query = query.where(seats.created_ms >= where.since_ms)
    if where.until_ms is not None:
        query = query.where(seats.created_ms < where.until_ms)
    if where.ruleset is not None:
        query = query.where(seats.ruleset == where.ruleset)
    return query


async def bot_records(
    archive: Archive, bot_id: str, where: RecordFilter, batch: int = BATCH, with_debug: bool = False
) -> AsyncGenerator[bytes, None]:
    """NDJSON chunks: each a few records, one a line, of the finished matches ``bot_id`` sat
    in, newest first; ``batch`` rows held at a time, however many there are. ``with_debug``
    (the bot itself asks): each record with the debug text of the bot's own moves, as
    ``GET /api/matches/{id}/record`` answers the bot (a record with none is passed on as stored).

    A bot that held two seats of one match (a house bot can) gets the match once: its rows
    are next to each other in this order, so skipping a repeat of the previous id is enough
    (a registered bot, the only one with debug text, holds one seat of a match)."""
    query = bot_records_query(bot_id, where, with_debug).execution_options(yield_per=batch)
    previous: str | None = None
    async with archive.engine.connect() as connection:
        result = await connection.stream(query)
        try:
            async for rows in result.partitions():
                lines = []
                for match_id, record, *own in rows:
                    if match_id != previous:
                        lines.append(_with_debug(record, *own) if own else record.encode())
                        previous = match_id
                if lines:
                    lines.append(b"")
                    yield b"\n".join(lines)
        finally:
            await result.close()


def _with_debug(record: str, seat: int, live: str) -> bytes:
    """The record (JSON text) with the debug texts (in the live part, JSON text) of ``seat``'s moves."""
    debug = orjson.loads(live).get("debug")
    if not debug:
        return record.encode()
    parsed = orjson.loads(record)
    notes = parsed.get("moveNotes")
    if notes is None:
        return record.encode()
    put_debug(notes, debug, {seat})
    return orjson.dumps(parsed)
