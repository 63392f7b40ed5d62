"""``wizard-arena bench bots``: how the house bots score in 4-player WIZARD.

Two settings: one HEURISTIC against three RANDOM (the heuristic takes every seat in turn),
and four HEURISTICs in self-play. Reports mean score per match and bid accuracy (the share
of rounds where a seat took exactly the tricks it bid).
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from wizard import HeuristicBot, MatchConfig, RandomBot
from wizard.bots import HouseBot, play_match


def _accuracy(state, seat: int) -> float:  # type: ignore[no-untyped-def]
    results = state.view(None).round_results
    return sum(r.seats[seat].bid == r.seats[seat].tricks for r in results) / len(results)


def bench_bots(matches: int, players: int = 4, ruleset: str = "WIZARD", seed: int = 1) -> dict[str, Any]:
    config = MatchConfig.create(ruleset, players)
    rng = random.Random(seed)
    start = time.perf_counter()
    heuristic, random_seats, h_acc, r_acc = [], [], [], []
    for m in range(matches):
        seat_h = m % players
        bots: list[HouseBot] = [RandomBot() for _ in range(players)]
        bots[seat_h] = HeuristicBot()
        state = play_match(config, f"bots-vs-random-{seed}-{m}", bots, rng)
        heuristic.append(state.scores[seat_h])
        h_acc.append(_accuracy(state, seat_h))
        for s in range(players):
            if s != seat_h:
                random_seats.append(state.scores[s])
                r_acc.append(_accuracy(state, s))
    self_scores: list[int] = []
    self_acc: list[float] = []
    for m in range(matches):
        state = play_match(config, f"bots-self-play-{seed}-{m}", [HeuristicBot() for _ in range(players)], rng)
        self_scores += state.scores
        self_acc += [_accuracy(state, s) for s in range(players)]
    return {
        "benchmark": "bots",
        "ruleset": config.ruleset.value,
        "players": players,
        "matches_per_setting": matches,
        "heuristic_vs_random": {
            "heuristic_mean_score": round(statistics.fmean(heuristic), 1),
            "heuristic_bid_accuracy": round(statistics.fmean(h_acc), 3),
            "random_mean_score": round(statistics.fmean(random_seats), 1),
            "random_bid_accuracy": round(statistics.fmean(r_acc), 3),
        },
        "heuristic_self_play": {
            "mean_score": round(statistics.fmean(self_scores), 1),
            "bid_accuracy": round(statistics.fmean(self_acc), 3),
        },
        "seconds": round(time.perf_counter() - start, 1),
    }
