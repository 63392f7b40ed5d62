"""``wizard-arena bench search``: how much the SEARCH house bot outscores its opponents.

Duplicate deals cut the luck of the cards: every deal (seed) is played once per rotation
of the seats, so each bot holds each seat's cards once. Per deal, the figure is SEARCH's
mean score per match minus the opponents' mean over the rotations; the interval is 1.96
standard errors over the deals (which are independent).

Settings (``--setting``, repeat for several):

- ``heuristic``: one SEARCH seat against HEURISTIC seats, 4-player WIZARD;
- ``example``: two SEARCH seats against two of ``examples/search_bot.py``'s SearchBot,
  seated alternately, both with the same time per decision (``--example-seconds``);
- ``junior``, ``hidden``: as ``heuristic`` in WIZARD_JUNIOR and in WIZARD with HIDDEN_BIDS.

``--iterations`` measures speed instead of strength: the CPU time of an iteration of the
search, with a node budget, on the same views of bids and plays in every run
(:func:`bench_iterations`); run it with and without ``PYTHONPATH=build/compiled`` (or
``WIZARD_PURE_PYTHON=1``) to compare the builds.
"""

from __future__ import annotations

import math
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wizard import HeuristicBot, MatchConfig, MatchView, Move, SearchBot, new_match

Policy = Callable[[MatchView], Move]
SETTINGS = ("heuristic", "example", "junior", "hidden")
Z95 = 1.96


def _house(bot: HeuristicBot | SearchBot, rng: random.Random) -> Policy:
    return lambda view: bot.act(view, rng)


def _example(seconds: float, seed: int) -> Policy:
    from sdk.bot import load_bot

    path = Path(__file__).resolve().parent.parent / "examples" / "search_bot.py"
    bot = load_bot(f"{path}:SearchBot")
    bot.budget_seconds = seconds  # type: ignore[attr-defined]
    bot.rng = random.Random(seed)  # type: ignore[attr-defined]
    return bot.act


def _play(config: MatchConfig, seed: str, policies: list[Policy]) -> tuple[int, ...]:
    state = new_match(config, seed)
    while not state.is_finished:
        seat = state.awaiting()[0]
        state.apply(seat, policies[seat](state.view(seat)))
    return state.scores


def _setting(name: str, deals: int, seconds: float, nodes: int | None, example_seconds: float, seed: int) -> dict[str, Any]:
    ruleset, variants = {"junior": ("WIZARD_JUNIOR", []), "hidden": ("WIZARD", ["HIDDEN_BIDS"])}.get(name, ("WIZARD", []))
    config = MatchConfig.create(ruleset, 4, variants)
    rng = random.Random(seed)
    search = _house(SearchBot(seconds, nodes), rng)
    if name == "example":
        other = _example(example_seconds, seed)
        layouts = [[0, 2], [1, 3]]  # SEARCH's seats; the example holds the others
        rotations = [[(s + r) % 4 for s in layout] for layout in layouts for r in range(2)]
    else:
        other = _house(HeuristicBot(), rng)
        rotations = [[r] for r in range(4)]
    diffs, mine, theirs = [], [], []
    start = time.perf_counter()
    for d in range(deals):
        deal_diff = []
        for seats in rotations:
            policies = [search if s in seats else other for s in range(4)]
            scores = _play(config, f"bench-search-{seed}-{d}", policies)
            ours = statistics.fmean(scores[s] for s in seats)
            others = statistics.fmean(scores[s] for s in range(4) if s not in seats)
            mine.append(ours)
            theirs.append(others)
            deal_diff.append(ours - others)
        diffs.append(statistics.fmean(deal_diff))
    half = Z95 * statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else None
    mean = statistics.fmean(diffs)
    return {
        "ruleset": ruleset, "variants": variants, "deals": deals, "matches": deals * len(rotations),
        "opponent": "examples/search_bot.py" if name == "example" else "HEURISTIC",
        "search_mean_score": round(statistics.fmean(mine), 1),
        "opponent_mean_score": round(statistics.fmean(theirs), 1),
        "margin_per_match": round(mean, 1),
        "margin_ci95": None if half is None else [round(mean - half, 1), round(mean + half, 1)],
        "margin_per_deal": [round(d, 2) for d in diffs],  # (to pool runs of several seeds)
        "seconds": round(time.perf_counter() - start, 1),
    }


def bench_search(
    settings: list[str], deals: int, seconds: float = 0.05, nodes: int | None = None,
    example_seconds: float | None = None, seed: int = 1,
) -> dict[str, Any]:
    """Each setting's margin (see the module's text); ``nodes`` (iterations per decision)
    instead of ``seconds`` makes the SEARCH seats deterministic."""
    example = seconds if example_seconds is None else example_seconds
    return {
        "benchmark": "search",
        "search": {"seconds": None if nodes is not None else seconds, "nodes": nodes},
        "example_seconds": example,
        "machine": f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}",
        **{name: _setting(name, deals, seconds, nodes, example, seed) for name in settings},
    }


def decision_views(matches: int = 2, rounds: tuple[int, ...] = (3, 6, 9, 12, 15)) -> list[MatchView]:
    """Views of decisions with a choice (bids and cards) from HEURISTIC matches of 4-player
    WIZARD, in the given rounds: the same views for every build and every run."""
    config = MatchConfig.create("WIZARD", 4)
    views = []
    for m in range(matches):
        rng = random.Random(m)
        bot = HeuristicBot()
        state = new_match(config, f"bench-search-views-{m}")
        while not state.is_finished:
            seat = state.awaiting()[0]
            view = state.view(seat)
            if view.round in rounds and len(view.legal_moves) > 1 and view.trump_card != "W":
                views.append(view)
            state.apply(seat, bot.act(view, rng))
    return views


def bench_iterations(nodes: int = 200, runs: int = 3) -> dict[str, Any]:
    """CPU microseconds per search iteration (``nodes`` per decision, deterministic), median over
    the bids and over the card plays of :func:`decision_views`, each view searched ``runs``
    times: what a build's speed gives SEARCH in a fixed time."""
    from wizard import COMPILED
    from wizard.rules import Phase

    views = decision_views()
    per: dict[str, list[float]] = {"bids": [], "cards": []}
    for _ in range(runs):
        for k, view in enumerate(views):
            start = time.process_time()  # (CPU time: the machine's other load counts less)
            SearchBot(nodes=nodes).act(view, random.Random(k))
            per["bids" if view.phase is Phase.BID else "cards"].append((time.process_time() - start) / nodes * 1e6)
    return {
        "benchmark": "search-iterations", "compiled": COMPILED, "nodes": nodes, "runs": runs,
        "machine": f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}",
        **{f"{kind}_decisions": len(v) // runs for kind, v in per.items()},
        **{f"{kind}_us_per_iteration": round(statistics.median(v), 1) for kind, v in per.items()},
    }
