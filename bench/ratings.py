"""How fast each rating method finds the true order of simulated bots of known skill.

20 bots with skills drawn from N(0, 1); each match seats 4 of them at random; a bot's score
is its skill plus Gaussian noise, scaled (per seed) so that the best bot finishes first in
about 70% of its matches. After every match each method's ratings are compared with the
true order (Kendall's tau); the figure is the number of matches until tau first reaches 0.9,
averaged over the seeds.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from typing import Any

from ranking.ratings import INITIAL_DEVIATION, INITIAL_RATING, elo_deviations, elo_update, fit_scores, kendall_tau

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


#: matches each bot has played (on average) when the deviations are checked
CALIBRATION_CHECKPOINTS = (10, 30, 100)


def _true_elo(skills: list[float], noise: float) -> list[float]:
    """The bots' skills on the Elo scale the ratings use: a gap of d skill points makes the
    stronger bot finish ahead with probability Phi(d / (noise sqrt 2)), which Elo's logistic
    matches at d * 400 * 1.702 / (ln 10 * noise * sqrt 2); centred on 1500 like the ratings."""
    scale = 400.0 * 1.702 / (math.log(10.0) * noise * math.sqrt(2.0))
    centre = statistics.fmean(skills)
    return [INITIAL_RATING + (s - centre) * scale for s in skills]


def calibration_run(seed: int) -> dict[str, dict[int, tuple[float, float]]]:
    """One simulated field: per method and checkpoint, (the share of bots whose true Elo-scale
    strength lies within 1.96 deviations of their rating, the mean deviation)."""
    rng = random.Random(seed)
    skills = [rng.gauss(0, 1) for _ in range(BOTS)]
    noise = calibrate_noise(skills, random.Random(seed + 10_000))
    truth = _true_elo(skills, noise)
    elo = [INITIAL_RATING] * BOTS
    glicko = [INITIAL_DEVIATION] * BOTS
    history: list[tuple[list[int], list[float]]] = []
    out: dict[str, dict[int, tuple[float, float]]] = {}

    def check(method: str, checkpoint: int, ratings: list[float], deviations: list[float]) -> None:
        inside = sum(abs(r - t) <= 1.96 * d for r, t, d in zip(ratings, truth, deviations, strict=True))
        out.setdefault(method, {})[checkpoint] = (inside / BOTS, statistics.fmean(deviations))

    for checkpoint in CALIBRATION_CHECKPOINTS:
        while len(history) < checkpoint * BOTS // TABLE:
            table = rng.sample(range(BOTS), TABLE)
            scores = [skills[b] + rng.gauss(0, noise) for b in table]
            before = [elo[b] for b in table]
            deviations = elo_deviations(table, before, [glicko[b] for b in table])
            for b, rating in zip(table, elo_update(before, scores), strict=True):
                elo[b] = rating
                glicko[b] = deviations[b]
            history.append((table, scores))
        fit = fit_scores(history)
        fitted = [fit.ratings.get(b, INITIAL_RATING) for b in range(BOTS)]
        fit_deviations = [fit.deviations.get(b, INITIAL_DEVIATION) for b in range(BOTS)]
        check("elo_glicko2", checkpoint, elo, glicko)
        check("elo_fit_interval", checkpoint, elo, fit_deviations)
        check("fitted", checkpoint, fitted, fit_deviations)
    return out


def bench_calibration(seeds: int, first_seed: int = 1) -> dict[str, Any]:
    """Calibration of each rating's deviation over ``seeds`` simulated fields: per method and
    checkpoint (matches per bot), the share of bots within 1.96 deviations of the truth
    (0.95 is right) and the mean deviation (Elo points)."""
    started = time.perf_counter()
    runs = [calibration_run(first_seed + s) for s in range(seeds)]
    methods: dict[str, Any] = {}
    for method in runs[0]:
        methods[method] = {
            f"after_{c}": {
                "within_1.96_deviations": round(statistics.fmean(r[method][c][0] for r in runs), 3),
                "mean_deviation": round(statistics.fmean(r[method][c][1] for r in runs), 1),
            }
            for c in CALIBRATION_CHECKPOINTS
        }
    return {"bots": BOTS, "table": TABLE, "seeds": seeds, **methods, "seconds": round(time.perf_counter() - started, 1)}
