"""The continuous ladder's pairing: which tables to start now. Pure (no I/O).

The ladder service calls :func:`pair_ladder` on every pass with the ladder's active bots
(their ratings, deviations and how many ladder matches each sits in now), how often each
pair has met, and the cap on concurrent matches per bot; it starts the tables returned.

How it chooses, each choice measured in a simulated ladder of bots that really play
(``wizard-arena bench ladder``; BENCHMARKS.md, "The ladder"):

- **Who plays now:** every free bot, when they divide into full tables. When they do not,
  the few left over sit with house bots if there are enough, else wait: drawn at random
  with odds that grow with their deviations, so the bots whose ratings are least sure play
  first and nobody is starved.
- **Who meets whom:** the free bots in a random order; each table takes the first bot not
  yet seated and, from the next few, those it and its table-mates have met least. Not
  close ratings: the leaderboard's fit uses whole scores, and in the simulation tables of
  close ratings found the order no sooner than mixed ones (a table of like bots leaves
  their level and the table's level hard to tell apart).
- **Duplicate sets** whenever every bot of a table has room under the cap for all of the
  set's matches: a cap below the table size turns them off.

House bots (the server plays them) have no cap and are used only to complete a table that
the waiting bots cannot fill by themselves: each table has at least one non-house bot, and
a house bot sits at most one seat of a table (it may sit at several tables of one pass).
"""

from __future__ import annotations

import math
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
    free = free_bots(bots, max_playing)
    house = sorted((b for b in bots if b.house), key=lambda b: b.id)
    spare = len(free) % players
    if spare and len(house) < players - spare:
        free = _seated(free, len(free) - spare, rng)
        spare = 0
    # A random order, not one by rating: for the score fit, which the leaderboard is, tables
    # of close ratings taught no more than mixed ones in the simulated ladder (BENCHMARKS.md,
    # "The ladder"), and a table of like bots confounds their level with the table's.
    order = sorted(free, key=lambda b: b.id)
    rng.shuffle(order)
    tables: list[LadderTable] = []
    seated: set[str] = set()
    start = 0
    for _ in range(len(order) // players):
        while order[start].id in seated:
            start += 1
        first = order[start]
        seated.add(first.id)
        window: list[LadderBot] = []
        for b in order[start + 1:]:
            if b.id not in seated:
                window.append(b)
                if len(window) == WINDOW * players:
                    break
        costs = [float(_met(first.id, c.id, meetings)) for c in window]
        members = [first]
        for _ in range(players - 1):
            pick = min(range(len(window)), key=costs.__getitem__)
            chosen = window[pick]
            members.append(chosen)
            seated.add(chosen.id)
            costs[pick] = math.inf
            costs = [c + _met(chosen.id, w.id, meetings) for c, w in zip(costs, window, strict=True)]
        tables.append(_table(members, players, max_playing, rng))
    order = [b for b in order if b.id not in seated]
    if order:
        mean = sum(b.rating for b in order) / len(order)
        fill = sorted(house, key=lambda b: abs(b.rating - mean))[:players - len(order)]
        tables.append(_table(order + fill, players, max_playing, rng))
    return tables


#: how far down the order a table looks for its members, in tables
WINDOW = 3


def free_bots(bots: Sequence[LadderBot], max_playing: int) -> list[LadderBot]:
    """The non-house bots with room under the cap for one more match: the only ones whose
    ``meetings`` :func:`pair_ladder` reads (with each other), so a caller need not fetch more."""
    return [b for b in bots if not b.house and b.playing + 1 <= max_playing]


def _met(a: str, b: str, meetings: Mapping[frozenset[str], int]) -> int:
    return meetings.get(frozenset((a, b)), 0)


def _table(members: list[LadderBot], players: int, max_playing: int, rng: random.Random) -> LadderTable:
    rng.shuffle(members)
    duplicate = all(b.house or b.playing + players <= max_playing for b in members)
    return LadderTable(tuple(b.id for b in members), duplicate)


def _seated(free: list[LadderBot], count: int, rng: random.Random) -> list[LadderBot]:
    """``count`` of the free bots, drawn with odds that grow with their deviations: the bots
    whose ratings are least sure tend to play first, yet the surest has at least half the
    odds of the average bot, so nobody is starved (weighted sampling without replacement,
    Efraimidis and Spirakis)."""
    typical = max(sum(b.deviation for b in free) / len(free), 1e-9)
    weights = {b.id: 1.0 + b.deviation / typical for b in free}
    drawn = sorted(free, key=lambda b: (rng.random() ** (1.0 / weights[b.id]), b.id), reverse=True)
    return drawn[:count]
