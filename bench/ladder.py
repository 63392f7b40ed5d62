"""``wizard-arena bench ladder``: how soon a continuous ladder, paired by
:func:`ranking.ladder.pair_ladder`, finds the true order of bots that really play.

- **The field:** 20 bots of known order, each a mixture of the house bots: bot ``k`` makes
  HEURISTIC's move with probability ``p_k = w + (1 - w) k / 19`` and RANDOM's otherwise
  (``w``, the weakest bot's share, 0 unless ``--weakest`` says; 0.5 makes a field of
  closer strengths, harder to order), decided afresh
  at every move. Order by ``p`` is the known order (checked in BENCHMARKS.md by a long run).
- **The ladder:** synchronous passes: every pass, every bot is free (cap 1 match at a time,
  or ``TABLE`` for duplicate sets), ``pair_ladder`` seats them, every table's match is
  played through the engine (4 players, WIZARD) and the leaderboard is refitted
  (``ranking.ratings.fit_scores``) after every match, as the service refits after every
  rated match; the pairing sees the fit of the pass's start (ratings and deviations).
- **Against:** the same field and deals (a match's deal depends only on the seed and its
  number) on random tables (every pass a random split into tables), on tables of close
  ratings (the bots in order of a rating drawn from each one's rating and deviation, cut
  into tables), and with pair_ladder dealing every table as a duplicate set.
- **Figures:** matches until the leaderboard's Kendall tau against the known order reaches
  0.9 and stays there to the end of the run; a new bot joining the settled ladder (after
  the run, at a random ``p`` between two of the field's) within one place of its true rank
  after 30 of its matches; one ``pair_ladder`` pass over 1,000 ladder bots, in ms.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from ranking.ladder import LadderBot, LadderTable, pair_ladder
from ranking.pairing import rotation
from ranking.ratings import INITIAL_DEVIATION, INITIAL_RATING, Fit, fit_scores, kendall_tau
from wizard import HeuristicBot, MatchConfig, RandomBot
from wizard.bots import HouseBot, play_match
from wizard.moves import Move
from wizard.views import MatchView

BOTS = 20
TABLE = 4
TARGET_TAU = 0.9
NEW_BOT_MATCHES = 30


class MixtureBot(HouseBot):
    """HEURISTIC's move with probability ``p``, RANDOM's otherwise."""

    kind = "MIXTURE"

    def __init__(self, p: float) -> None:
        self.p = p
        self._heuristic = HeuristicBot()
        self._random = RandomBot()

    def act(self, view: MatchView, rng: random.Random) -> Move:
        return (self._heuristic if rng.random() < self.p else self._random).act(view, rng)


Pairing = Callable[[Sequence[LadderBot], dict[frozenset[str], int], random.Random], list[LadderTable]]


def ladder_pairing(duplicate: bool) -> Pairing:
    cap = TABLE if duplicate else 1

    def pair(bots: Sequence[LadderBot], meetings: dict[frozenset[str], int], rng: random.Random) -> list[LadderTable]:
        return pair_ladder(bots, TABLE, meetings, cap, rng)

    return pair


def random_pairing(bots: Sequence[LadderBot], meetings: dict[frozenset[str], int], rng: random.Random) -> list[LadderTable]:
    order = [b.id for b in bots]
    rng.shuffle(order)
    return [LadderTable(tuple(order[i:i + TABLE]), False) for i in range(0, len(order) - TABLE + 1, TABLE)]


def rating_pairing(bots: Sequence[LadderBot], meetings: dict[frozenset[str], int], rng: random.Random) -> list[LadderTable]:
    """The alternative pair_ladder was measured against: tables of close ratings (the bots
    in order of a rating drawn from each one's rating and deviation, cut into tables)."""
    order = sorted(bots, key=lambda b: b.rating + rng.gauss(0.0, b.deviation))
    return [
        LadderTable(tuple(b.id for b in order[i:i + TABLE]), False) for i in range(0, len(order) - TABLE + 1, TABLE)
    ]


PAIRINGS: dict[str, Pairing] = {
    "ladder": ladder_pairing(False),
    "ladder_duplicate": ladder_pairing(True),
    "random_tables": random_pairing,
    "close_ratings": rating_pairing,
}


class Ladder:
    """One simulated ladder: the field, its history and its leaderboard."""

    def __init__(self, strengths: dict[str, float], seed: int, pairing: Pairing) -> None:
        self.strengths = dict(strengths)  # bot id -> p
        self.seed = seed
        self.pairing = pairing
        self.rng = random.Random(f"ladder-pairing-{seed}")
        self.play_rng = random.Random(f"ladder-play-{seed}")
        self.config = MatchConfig.create("WIZARD", TABLE)
        self.history: list[tuple[list[str], list[float]]] = []
        self.meetings: dict[frozenset[str], int] = {}
        self.fit = Fit({}, {}, {}, 1.0, {})
        self.deals = 0

    def ladder_bots(self) -> list[LadderBot]:
        return [
            LadderBot(b, self.fit.ratings.get(b, INITIAL_RATING), self.fit.deviations.get(b, INITIAL_DEVIATION), 0)
            for b in self.strengths
        ]

    def tau(self) -> float:
        bots = list(self.strengths)
        return kendall_tau([self.strengths[b] for b in bots], [self.fit.ratings.get(b, INITIAL_RATING) for b in bots])

    def rank(self, bot: str) -> int:
        """0 for the top of the leaderboard."""
        return sorted(self.strengths, key=lambda b: -self.fit.ratings.get(b, INITIAL_RATING)).index(bot)

    def passes(self) -> Iterator[LadderTable]:
        """Play pass after pass, yielding after every match."""
        while True:
            tables = self.pairing(self.ladder_bots(), self.meetings, self.rng)
            for table in tables:
                for i, a in enumerate(table.bots):
                    for b in table.bots[i + 1:]:
                        key = frozenset((a, b))
                        self.meetings[key] = self.meetings.get(key, 0) + (TABLE if table.duplicate else 1)
                deal = f"ladder-{self.seed}-{self.deals}"
                self.deals += 1
                for turn in range(TABLE if table.duplicate else 1):
                    seats = [table.bots[i] for i in rotation(range(TABLE), turn) if i is not None]
                    state = play_match(self.config, deal, [MixtureBot(self.strengths[b]) for b in seats], self.play_rng)
                    self.history.append((seats, [float(s) for s in state.scores]))
                    self.fit = fit_scores(self.history, start=self.fit.strengths)
                    yield table


def field(count: int, weakest: float) -> dict[str, float]:
    return {f"p{k:02d}": weakest + (1.0 - weakest) * k / (count - 1) for k in range(count)}


def matches_to_order(seed: int, pairing: Pairing, limit: int, weakest: float = 0.0) -> tuple[int | None, Ladder]:
    """Matches until tau >= TARGET_TAU for good (None: not within ``limit``)."""
    ladder = Ladder(field(BOTS, weakest), seed, pairing)
    reached: int | None = None
    for _ in ladder.passes():
        played = len(ladder.history)
        if ladder.tau() >= TARGET_TAU:
            reached = reached or played
        else:
            reached = None
        if played >= limit:
            break
    return reached, ladder


def new_bot_rank_error(ladder: Ladder, rng: random.Random) -> dict[str, Any]:
    """A new bot joins the settled ``ladder``: its place after NEW_BOT_MATCHES matches
    against its true place (among all the ladder's bots)."""
    k = rng.randrange(BOTS - 1)
    p = (k + 0.5) / (BOTS - 1)
    ladder.strengths["new"] = p
    true_rank = sorted(ladder.strengths, key=lambda b: -ladder.strengths[b]).index("new")
    for _ in ladder.passes():
        if ladder.fit.games.get("new", 0) >= NEW_BOT_MATCHES:
            break
    rank = ladder.rank("new")
    return {"p": round(p, 3), "true_rank": true_rank + 1, "rank": rank + 1, "within_one": abs(rank - true_rank) <= 1}


def pairing_pass_ms(bots: int, passes: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    ladder = [
        LadderBot(f"bot-{i}", rng.gauss(INITIAL_RATING, 200), rng.uniform(40, 350), rng.randrange(0, 3))
        for i in range(bots)
    ] + [LadderBot(h, INITIAL_RATING, 30.0, 0, house=True) for h in ("house-random", "house-heuristic")]
    ids = [b.id for b in ladder if not b.house]
    meetings = {frozenset(rng.sample(ids, 2)): rng.randrange(1, 20) for _ in range(bots * 20)}
    times = []
    for p in range(passes):
        started = time.perf_counter()
        tables = pair_ladder(ladder, TABLE, meetings, 3, random.Random(p))
        times.append((time.perf_counter() - started) * 1000)
    return {
        "bots": bots,
        "pairs_met": len(meetings),
        "tables": len(tables),
        "median_ms": round(statistics.median(times), 2),
        "max_ms": round(max(times), 2),
    }


def _summary(values: Sequence[int | None], limit: int) -> dict[str, Any]:
    return {
        "per_seed": list(values),
        "mean_matches": round(statistics.fmean(v if v is not None else limit for v in values), 1),
        "stdev": round(statistics.pstdev(v if v is not None else limit for v in values), 1),
        "median_matches": statistics.median(v if v is not None else limit for v in values),
        "seeds_not_reaching": sum(v is None for v in values),
    }


def bench_ladder(
    seeds: int, limit: int, first_seed: int = 1, passes: int = 50, weakest: float = 0.0, methods: Sequence[str] = ()
) -> dict[str, Any]:
    started = time.perf_counter()
    chosen = {name: PAIRINGS[name] for name in methods or PAIRINGS}
    reached: dict[str, list[int | None]] = {m: [] for m in chosen}
    newcomers = []
    for s in range(first_seed, first_seed + seeds):
        for name, pairing in chosen.items():
            matches, ladder = matches_to_order(s, pairing, limit, weakest)
            reached[name].append(matches)
            if name == "ladder":
                newcomers.append(new_bot_rank_error(ladder, random.Random(f"new-bot-{s}")))
    out: dict[str, Any] = {
        "bots": BOTS,
        "weakest_heuristic_share": weakest,
        "table": TABLE,
        "target_tau": TARGET_TAU,
        "seeds": seeds,
        "match_limit": limit,
    }
    for name in chosen:
        out[name] = _summary(reached[name], limit)
    if newcomers:
        out["new_bot"] = {
            "matches": NEW_BOT_MATCHES,
            "within_one_place": f"{sum(n['within_one'] for n in newcomers)}/{len(newcomers)}",
            "per_seed": [f"{n['rank']} for {n['true_rank']}" for n in newcomers],
        }
    out["pairing_pass_1000_bots"] = pairing_pass_ms(1000, passes, first_seed)
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out
