"""How fast each rating method finds the true order of simulated bots of known skill.

20 bots with skills drawn from N(0, 1); each match seats 4 of them at random; a bot's score
is its skill plus Gaussian noise, scaled (per seed) so that the best bot finishes first in
about 70% of its matches. After every match each method's ratings are compared with the
true order (Kendall's tau); the figure is the number of matches until tau first reaches 0.9,
averaged over the seeds.
"""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from ranking.ratings import INITIAL_RATING, elo_update, fit_scores, kendall_tau

BOTS = 20
TABLE = 4
TARGET_TAU = 0.9
WIN_RATE = 0.70


def _best_bot_win_rate(skills: list[float], noise: float, rng: random.Random, trials: int = 4000) -> float:
    best = max(range(len(skills)), key=skills.__getitem__)
    others = [b for b in range(len(skills)) if b != best]
    wins = 0
    for _ in range(trials):
        table = [best, *rng.sample(others, TABLE - 1)]
        scores = [skills[b] + rng.gauss(0, noise) for b in table]
        wins += scores[0] == max(scores)
    return wins / trials


def calibrate_noise(skills: list[float], rng: random.Random) -> float:
    """The noise for which the best bot wins about WIN_RATE of its matches (bisection)."""
    low, high = 0.01, 20.0
    for _ in range(18):
        middle = (low + high) / 2
        if _best_bot_win_rate(skills, middle, rng) > WIN_RATE:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def matches_to_order(seed: int, limit: int) -> dict[str, Any]:
    rng = random.Random(seed)
    skills = [rng.gauss(0, 1) for _ in range(BOTS)]
    noise = calibrate_noise(skills, random.Random(seed + 10_000))
    elo = [INITIAL_RATING] * BOTS
    history: list[tuple[list[int], list[float]]] = []
    strengths: dict[Any, float] = {}
    reached: dict[str, int | None] = {"elo": None, "fitted": None}
    for played in range(1, limit + 1):
        table = rng.sample(range(BOTS), TABLE)
        scores = [skills[b] + rng.gauss(0, noise) for b in table]
        for b, rating in zip(table, elo_update([elo[b] for b in table], scores), strict=True):
            elo[b] = rating
        history.append((table, scores))
        if reached["elo"] is None and kendall_tau(skills, elo) >= TARGET_TAU:
            reached["elo"] = played
        if reached["fitted"] is None:
            fit = fit_scores(history, start=strengths)
            strengths = fit.strengths
            fitted = [fit.ratings.get(b, INITIAL_RATING) for b in range(BOTS)]
            if kendall_tau(skills, fitted) >= TARGET_TAU:
                reached["fitted"] = played
        if all(v is not None for v in reached.values()):
            break
    return {"seed": seed, "noise": round(noise, 3), **reached}


def bench_ratings(seeds: int, limit: int, first_seed: int = 1) -> dict[str, Any]:
    started = time.perf_counter()
    runs = [matches_to_order(first_seed + s, limit) for s in range(seeds)]

    def summary(method: str) -> dict[str, Any]:
        values = [r[method] for r in runs]
        reached = [v for v in values if v is not None]
        return {
            "mean_matches": round(statistics.fmean(v if v is not None else limit for v in values), 1),
            "median_matches": statistics.median(v if v is not None else limit for v in values),
            "seeds_not_reaching": len(values) - len(reached),
        }

    return {
        "bots": BOTS,
        "table": TABLE,
        "target_tau": TARGET_TAU,
        "best_bot_win_rate": WIN_RATE,
        "seeds": seeds,
        "match_limit": limit,
        "elo_k": 32,
        "elo": summary("elo"),
        "fitted": summary("fitted"),
        "seconds": round(time.perf_counter() - started, 1),
    }
