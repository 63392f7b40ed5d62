"""The continuous ladder's pairing: which tables to start now. Pure (no I/O).

The ladder service calls :func:`pair_ladder` on every pass with the ladder's active bots
(their ratings, deviations and how many ladder matches each sits in now), how often each
pair has met, and the cap on concurrent matches per bot; it starts the tables returned.

House bots (the server plays them) have no cap and are used only to complete a table that
the waiting bots cannot fill by themselves: each table has at least one non-house bot, and
a house bot sits at most one seat of a table (it may sit at several tables of one pass).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LadderBot:
    id: str  # a bot id, or a house bot's rating identity such as "house-heuristic"
    rating: float  # Elo scale (INITIAL_RATING when unrated)
    deviation: float  # Elo scale, one standard deviation of the rating (large when unrated)
    playing: int  # ladder matches it sits in now
    house: bool = False  # a house bot: the server plays it, so no cap on its matches; at most one seat of a table


@dataclass(frozen=True, slots=True)
class LadderTable:
    bots: tuple[str, ...]  # seat order
    duplicate: bool  # deal as a duplicate set: len(bots) matches of one deal with the seats rotated (ranking.pairing.rotation)


def pair_ladder(
    bots: Sequence[LadderBot],
    players: int,
    meetings: Mapping[frozenset[str], int],
    max_playing: int,
    rng: random.Random,
) -> list[LadderTable]:
    """The tables to start now.

    Every non-house bot appears in at most one table, and only if its ``playing + (players
    if the table is a duplicate set else 1) <= max_playing``; tables are full (exactly
    ``players`` bots, all different); house bots fill tables only when the waiting
    non-house bots do not divide into full tables: the few left over then sit with house
    bots (each table keeps at least one non-house bot), and wait for the next pass when
    there are too few house bots. ``meetings``: how many ladder matches each pair of bots
    has sat at together. The same arguments (and ``rng`` state) give the same tables.
    """
    if players < 2:
        raise ValueError(f"a ladder table needs at least 2 players, not {players}")
    waiting = [b for b in bots if not b.house and b.playing + 1 <= max_playing]
    house = [b for b in bots if b.house]
    # sample each bot's strength from its rating's doubt and seat neighbours together:
    # close ratings meet, and uncertain bots meet a spread of opponents
    sampled = sorted(waiting, key=lambda b: (b.rating + rng.gauss(0.0, b.deviation), b.id))
    left_over = len(sampled) % players
    if left_over and len(house) >= players - left_over:
        kept = sampled
    elif left_over:
        dropped = set(rng.sample(range(len(sampled)), left_over))
        kept = [b for i, b in enumerate(sampled) if i not in dropped]
        left_over = 0
    else:
        kept = sampled
    full = len(kept) - left_over
    tables = [LadderTable(tuple(b.id for b in kept[i:i + players]), False) for i in range(0, full, players)]
    if left_over:
        few = kept[full:]
        mean = sum(b.rating for b in few) / len(few)
        fill = sorted(house, key=lambda b: (abs(b.rating - mean), b.id))[:players - left_over]
        tables.append(LadderTable(tuple(b.id for b in few + fill), False))
    return tables
