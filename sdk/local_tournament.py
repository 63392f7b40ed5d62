"""``wizard-arena tournament run``: bots against each other in this process, no server.

:func:`run_local_tournament` plays the matches and returns a :class:`TournamentResult`;
:func:`tournament_run_command` only shows it. Every number follows from the seed: the
tables, the deals (match ``i`` of seed ``s`` is dealt from ``"local-s-i"``), the house bots'
choices and the bootstrap behind the rating intervals.

>>> result = run_local_tournament(["heuristic", "random"], matches=2, players=3, ruleset="WIZARD_JUNIOR")
>>> [s.bot for s in result.standings], [m.seats for m in result.matches]
(['heuristic', 'random'], [(0, 1, 0), (1, 0, 1)])
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from random import Random
from typing import Any

from rich.markup import escape

from ranking.pairing import seat_tables
from ranking.ratings import INITIAL_RATING, Fit, fit_scores
from sdk.bot import Bot, BotSpecError, load_bot
from wizard import MatchConfig, MatchState, Variant, WizardError, fallback_move, new_match

#: bootstrap resamples of the matches behind each rating's interval
RATING_RESAMPLES = 200
#: candidate tables weighed per match when more entrants wait than there are seats
TABLE_CANDIDATES = 200
Z95 = 1.96


@dataclass(frozen=True, slots=True)
class PlayedMatch:
    seed: str
    seats: tuple[int, ...]  # the entrant in each seat
    scores: tuple[int, ...]
    errors: tuple[int, ...]  # per seat: moves the fallback made instead of the bot


@dataclass(frozen=True, slots=True)
class Standing:
    rank: int
    bot: str
    matches: int
    mean_score: float  # per match (an entrant in several seats: the mean of its seats)
    mean_score_ci95: float | None  # half-width; None after a single match
    win_rate: float  # a match's win is shared between the seats tied on the best score
    errors: int
    rating: float  # fit_scores, Elo scale
    rating_ci95: float | None  # half-width of the bootstrap's 95% interval
    first_error: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank, "bot": self.bot, "matches": self.matches,
            "mean_score": round(self.mean_score, 2),
            "mean_score_ci95": None if self.mean_score_ci95 is None else round(self.mean_score_ci95, 2),
            "win_rate": round(self.win_rate, 4), "errors": self.errors,
            "rating": round(self.rating, 1),
            "rating_ci95": None if self.rating_ci95 is None else round(self.rating_ci95, 1),
        }


@dataclass(frozen=True, slots=True)
class TournamentResult:
    entrants: tuple[str, ...]
    players: int
    ruleset: str
    variants: tuple[str, ...]
    seed: int
    matches: tuple[PlayedMatch, ...]
    standings: tuple[Standing, ...]  # best first
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "matches": len(self.matches), "players": self.players, "ruleset": self.ruleset,
            "variants": list(self.variants), "seed": self.seed,
            "leaderboard": [s.to_dict() for s in self.standings], "seconds": round(self.seconds, 2),
        }


def entrant_labels(specs: Sequence[str]) -> list[str]:
    """One label per spec, a file spec without its folders (``search_bot.py:SearchBot``);
    a label given again is another entrant: ``heuristic#2``.

    >>> entrant_labels(["examples/random_bot.py:RandomBot", "heuristic", "heuristic"])
    ['random_bot.py:RandomBot', 'heuristic', 'heuristic#2']
    """
    seen: dict[str, int] = {}
    labels = []
    for spec in specs:
        where, sep, name = spec.rpartition(":")
        label = f"{Path(where).name}:{name}" if sep and where.endswith(".py") else spec
        seen[label] = seen.get(label, 0) + 1
        labels.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return labels


def _derived_seed(seed: int, *parts: object) -> int:
    return Random(":".join(map(str, (seed, *parts)))).getrandbits(63)


def seatings(entrants: int, players: int, matches: int, seed: int) -> list[tuple[int, ...]]:
    """The entrant in each seat of each match. Every entrant takes ``players // entrants``
    seats of every match; the other seats go to distinct entrants, those with the fewest so
    far (so seat counts never differ by more than one), of them the ones that met least;
    then each entrant sits where it has sat least."""
    rng = Random(f"{seed}:tables")
    base, spare = divmod(players, entrants)
    extra = [0] * entrants
    meetings = [[0] * entrants for _ in range(entrants)]
    seat_counts = {e: [0] * players for e in range(entrants)}
    tables = []
    for _ in range(matches):
        order = sorted(rng.sample(range(entrants), entrants), key=lambda e: extra[e])
        if spare:
            cut = extra[order[spare - 1]]
            sure = [e for e in order if extra[e] < cut]
            tied = [e for e in order if extra[e] == cut]
            chosen = sure + min(_some_combinations(tied, spare - len(sure), rng),
                                key=lambda c: sum(meetings[a][b] for a, b in itertools.combinations(sure + c, 2)))
        else:
            chosen = []
        for e in chosen:
            extra[e] += 1
        for a, b in itertools.combinations(chosen, 2):
            meetings[a][b] += 1
            meetings[b][a] += 1
        table: list[int | None] = [*chosen, *(e for e in range(entrants) for _ in range(base))]
        rng.shuffle(table)  # which of equally balanced seatings: the seed's choice
        tables.append(tuple(e for e in seat_tables([table], seat_counts)[0] if e is not None))
    return tables


def _some_combinations(pool: list[int], size: int, rng: Random) -> list[list[int]]:
    if math.comb(len(pool), size) <= TABLE_CANDIDATES:
        return [list(c) for c in itertools.combinations(pool, size)]
    return [rng.sample(pool, size) for _ in range(TABLE_CANDIDATES)]


def play_match(
    state: MatchState, bots: Sequence[Bot], match_id: str, fallback_rng: Random, first_errors: list[str | None]
) -> list[int]:
    """Play ``state`` to its end, each seat asking its bot; a bot that raises or answers an
    illegal move gets the server's timeout move instead. Returns the errors per seat and
    sets ``first_errors[seat]`` to a seat's first error message."""
    errors = [0] * len(bots)
    while not state.is_finished:
        for seat in state.awaiting():  # several while bids are simultaneous: ask each
            view = state.view(seat)
            try:
                state.apply(seat, bots[seat].act(view, match_id))
            except Exception as e:  # noqa: BLE001 (a bot's bug must not end the tournament)
                errors[seat] += 1
                if first_errors[seat] is None:
                    what = "illegal move" if isinstance(e, WizardError) else "raised"
                    first_errors[seat] = f"{what} in round {view.round} ({view.phase.value}): {type(e).__name__}: {e}"
                state.apply(seat, fallback_move(view, fallback_rng))
            if state.is_finished:
                break
    return errors


def run_local_tournament(
    specs: Sequence[str],
    matches: int,
    players: int = 4,
    ruleset: str = "WIZARD",
    variants: Sequence[Variant | str] = (),
    seed: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> TournamentResult:
    """Play ``matches`` matches between the bots ``specs`` name; ``progress(done, total)``
    is called once every bot has loaded (``done`` 0) and after each match."""
    if matches < 1:
        raise ValueError(f"--matches must be at least 1, not {matches}")
    if len(specs) < 2:
        raise ValueError(f"a tournament needs at least 2 bots, got {len(specs)}: list them comma-separated in --bots")
    start = time.perf_counter()
    config = MatchConfig.create(ruleset, players, variants)
    labels = entrant_labels(specs)
    tables = seatings(len(specs), players, matches, seed)
    slots = max(t.count(e) for t in tables for e in t)
    # one instance per seat an entrant can take in one match; each serves all its matches
    bots = [[load_bot(spec, seed=_derived_seed(seed, "bot", e, k)) for k in range(slots)] for e, spec in enumerate(specs)]
    played = []
    first_errors: list[str | None] = [None] * len(specs)
    if progress is not None:
        progress(0, matches)  # every bot loaded: the matches start
    for i, table in enumerate(tables):
        match_seed = f"local-{seed}-{i}"
        slot_of = [table[:s].count(e) for s, e in enumerate(table)]
        seat_errors: list[str | None] = [None] * players
        state = new_match(config, match_seed)
        errors = play_match(
            state, [bots[e][k] for e, k in zip(table, slot_of, strict=True)],
            match_seed, Random(f"{match_seed}:fallback"), seat_errors,
        )
        for e, message in zip(table, seat_errors, strict=True):
            first_errors[e] = first_errors[e] or message
        played.append(PlayedMatch(match_seed, table, state.scores, tuple(errors)))
        if progress is not None:
            progress(i + 1, matches)
    leaderboard = standings(labels, played, seed, first_errors)
    return TournamentResult(
        tuple(labels), players, config.ruleset.value, tuple(sorted(v.value for v in config.variants)), seed,
        tuple(played), leaderboard, time.perf_counter() - start,
    )


def standings(
    labels: Sequence[str], played: Sequence[PlayedMatch], seed: int, first_errors: Sequence[str | None] | None = None
) -> tuple[Standing, ...]:
    """The leaderboard, best rating first (equal ratings: best mean score first)."""
    per_match: list[list[float]] = [[] for _ in labels]  # an entrant's mean over its seats, match by match
    wins = [0.0] * len(labels)
    errors = [0] * len(labels)
    for match in played:
        best = max(match.scores)
        winners = [e for e, score in zip(match.seats, match.scores, strict=True) if score == best]
        for e in set(match.seats):
            mine = [score for e2, score in zip(match.seats, match.scores, strict=True) if e2 == e]
            per_match[e].append(sum(mine) / len(mine))
            wins[e] += winners.count(e) / len(winners)
        for e, n in zip(match.seats, match.errors, strict=True):
            errors[e] += n
    fit_input = [(m.seats, m.scores) for m in played]
    fit = fit_scores(fit_input)
    intervals = rating_intervals(fit_input, seed, fit)
    rating = [fit.ratings.get(e, INITIAL_RATING) for e in range(len(labels))]
    mean = [statistics.fmean(values) if values else 0.0 for values in per_match]
    order = sorted(range(len(labels)), key=lambda e: (-rating[e], -mean[e]))
    return tuple(
        Standing(
            rank, labels[e], len(per_match[e]), mean[e], _mean_ci95(per_match[e]),
            wins[e] / len(per_match[e]) if per_match[e] else 0.0, errors[e], rating[e], intervals.get(e),
            first_errors[e] if first_errors else None,
        )
        for rank, e in enumerate(order, start=1)
    )


def _mean_ci95(values: Sequence[float]) -> float | None:
    return Z95 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None


def rating_intervals(
    fit_input: Sequence[tuple[Sequence[int], Sequence[float]]], seed: int, fit: Fit | None = None,
    resamples: int = RATING_RESAMPLES,
) -> dict[int, float]:
    """Half the width of each entrant's 95% interval of its fitted rating: the 2.5th to the
    97.5th percentile over refits of the matches drawn again with replacement (so the
    interval covers everything the fit estimates: strengths, table effects, the noise that
    sets the Elo scale)."""
    n = len(fit_input)
    if n < 2:
        return {}
    rng = Random(f"{seed}:bootstrap")
    fit = fit or fit_scores(fit_input)
    samples: dict[int, list[float]] = {}
    for _ in range(resamples):
        refit = fit_scores([fit_input[rng.randrange(n)] for _ in range(n)], start=fit.strengths)
        for e, rating in refit.ratings.items():
            samples.setdefault(e, []).append(rating)  # type: ignore[arg-type]
    intervals = {}
    for e, values in samples.items():
        if len(values) >= resamples // 2:  # an entrant missing from most resamples has none
            cuts = statistics.quantiles(values, n=40, method="inclusive")
            intervals[e] = (cuts[-1] - cuts[0]) / 2
    return intervals


def leaderboard_table(result: TournamentResult) -> Any:
    """The leaderboard as a ``rich.table.Table``."""
    from rich import box
    from rich.table import Table

    variants = f" + {', '.join(result.variants)}" if result.variants else ""
    table = Table(
        title=f"{len(result.matches)} matches, {result.players} players, {result.ruleset}{variants}",
        box=box.SIMPLE_HEAD,
    )
    for header in ("#", "bot", "matches", "mean score\n± 95%", "win\nrate", "errors", "rating\n± 95%"):
        if header == "bot":  # a long path folds onto a second line rather than losing its end
            table.add_column(header, overflow="fold")
        else:
            table.add_column(header, justify="right", no_wrap=True)
    for s in result.standings:
        table.add_row(
            str(s.rank), escape(s.bot), str(s.matches), f"{s.mean_score:.1f} {_plus_minus(s.mean_score_ci95, '.1f')}",
            f"{s.win_rate:.1%}", str(s.errors) if s.errors else "[dim]0[/]",
            f"{s.rating:.0f} {_plus_minus(s.rating_ci95, '.0f')}",
        )
    return table


def _plus_minus(half_width: float | None, fmt: str) -> str:
    return "± –" if half_width is None else f"± {half_width:{fmt}}"


def tournament_run_command(args: argparse.Namespace) -> None:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    specs = [spec.strip() for spec in args.bots.split(",")]
    if not all(specs):
        raise BotSpecError(f"--bots {args.bots!r} has an empty entry: write bots separated by single commas")
    progress = Progress(
        TextColumn("matches"), BarColumn(), MofNCompleteColumn(), TextColumn("elapsed"), TimeElapsedColumn(),
        TextColumn("left"), TimeRemainingColumn(), console=Console(stderr=True),
    )
    task = progress.add_task("matches", total=args.matches)

    def advance(done: int, total: int) -> None:
        if done == 0:  # not before: a bot that fails to load leaves just its message
            progress.start()
        progress.update(task, completed=done)

    try:
        result = run_local_tournament(
            specs, args.matches, args.players, args.ruleset, args.variant or (), args.seed, advance
        )
    finally:
        if progress.live.is_started:
            progress.stop()
    if args.json:
        print(json.dumps(result.to_dict(), separators=(",", ":")))
        return
    console = Console()
    console.print(leaderboard_table(result))
    console.print(
        f"± is a 95% interval: of the mean score by the normal approximation, of the rating over "
        f"{RATING_RESAMPLES} refits to matches drawn again. Ratings are fitted to every final score (as "
        "the server's fitted rating) on the Elo scale, field average 1500: 400 apart, the higher finishes "
        f"ahead 10 times in 11. Seed {result.seed}; {result.seconds:.1f} s.",
        highlight=False,
    )
    for s in result.standings:
        if s.first_error:
            console.print(f"[bold]{escape(s.bot)}[/]: {s.errors} errors, the first {escape(s.first_error)}", highlight=False)
