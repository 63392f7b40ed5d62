"""Who plays whom, and from which seat: tables for tournament rounds. Pure (no I/O).

Entrants are numbered 0..n-1; a table is a list of entrants in seat order, where ``None``
is a seat filled by a house bot (when the entrants do not divide into full tables, the last
tables are completed with HEURISTIC house bots, which score nothing in the standings).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence

Table = list[int | None]

#: random orders tried per round robin round: the one repeating the fewest pairings wins
ROUND_ROBIN_TRIES = 300


def table_count(entrants: int, per_table: int) -> int:
    return max(1, math.ceil(entrants / per_table))


def _split(order: Sequence[int], per_table: int) -> list[list[int | None]]:
    tables = table_count(len(order), per_table)
    # spread the house seats over the tables (a table never has more than one more than another)
    sizes = [len(order) // tables + (1 if t < len(order) % tables else 0) for t in range(tables)]
    out: list[list[int | None]] = []
    start = 0
    for size in sizes:
        table: list[int | None] = list(order[start:start + size])
        table += [None] * (per_table - size)
        out.append(table)
        start += size
    return out


def seat_tables(tables: list[list[int | None]], seat_counts: dict[int, list[int]]) -> list[Table]:
    """Order each table's seats so that everyone sits where it has sat least (over all
    rounds, seats spread evenly, chosen greedily round by round: counts stay close, not
    always equal)."""
    seated = []
    for table in tables:
        best: tuple[int | None, ...] | None = None
        best_cost = math.inf
        for order in itertools.permutations(table):
            cost = sum(seat_counts[e][s] ** 2 for s, e in enumerate(order) if e is not None)
            if cost < best_cost:
                best, best_cost = order, cost
        assert best is not None
        seated.append(list(best))
        for s, e in enumerate(best):
            if e is not None:
                seat_counts[e][s] += 1
    return seated


def round_robin_round(
    entrants: int, per_table: int, history: Sequence[Sequence[Table]], rng: random.Random
) -> list[Table]:
    """The next round: of many random splits, the one whose tables repeat past pairings
    least (squared meeting counts), then seats balanced over the rounds."""
    meetings = [[0] * entrants for _ in range(entrants)]
    seat_counts = {e: [0] * per_table for e in range(entrants)}
    for past_round in history:
        for table in past_round:
            for s, e in enumerate(table):
                if e is not None:
                    seat_counts[e][s] += 1
            for a, b in itertools.combinations([e for e in table if e is not None], 2):
                meetings[a][b] += 1
                meetings[b][a] += 1
    best: list[list[int | None]] | None = None
    best_cost = math.inf
    order = list(range(entrants))
    for _ in range(ROUND_ROBIN_TRIES):
        rng.shuffle(order)
        tables = _split(order, per_table)
        cost = 0
        for table in tables:
            members = [e for e in table if e is not None]
            for a, b in itertools.combinations(members, 2):
                cost += (meetings[a][b] + 1) ** 2
        if cost < best_cost:
            best, best_cost = tables, cost
    assert best is not None
    return seat_tables(best, seat_counts)


def swiss_round(
    standing_order: Sequence[int], per_table: int, history: Sequence[Sequence[Table]]
) -> list[Table]:
    """Tables by current standing: the leaders together, and so on down."""
    seat_counts = {e: [0] * per_table for e in standing_order}
    for past_round in history:
        for table in past_round:
            for s, e in enumerate(table):
                if e is not None and e in seat_counts:
                    seat_counts[e][s] += 1
    return seat_tables(_split(list(standing_order), per_table), seat_counts)


def placement_points(scores: Sequence[float]) -> list[float]:
    """Points from final placement: at a table of n, first gets n-1, last 0; bots tied on
    score share the places they cover (two tied for first of four: 2.5 each)."""
    n = len(scores)
    return [
        sum(1.0 if scores[i] > scores[j] else 0.5 if scores[i] == scores[j] else 0.0 for j in range(n) if j != i)
        for i in range(n)
    ]


def rotation(table: Sequence[int | None], turn: int) -> list[int | None]:
    """The seats of a duplicate set's ``turn``-th match: everyone moves ``turn`` seats on,
    so over the set each entrant plays every seat's cards."""
    n = len(table)
    return [table[(seat + turn) % n] for seat in range(n)]
