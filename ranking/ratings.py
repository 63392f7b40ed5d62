"""Rating methods, pure (no I/O): both shown on the Elo scale, new bots at 1500.

- :func:`elo_update`: multiplayer Elo, moved by every finished rated match. Every pair of
  seats is a game decided by final score (win 1, draw 0.5, loss 0); a seat's change is
  K/(n-1) times the sum of (result - expected) over its pairs, so one match moves a bot
  about as much as one two-player game would.
- :func:`fit_scores`: a fit of the whole history. Bots do not change the way people do,
  so every match may count as much as the latest one. A final score is modelled as the
  bot's strength plus how high the whole table scored plus noise, all Gaussian with
  variances estimated from the data; the strengths are their posterior means. Using the
  scores themselves, not just the order, is what makes it converge in fewer matches than
  Elo or TrueSkill (``wizard-arena bench ratings``). The strengths are put on the Elo
  scale so that a difference of 400 means the stronger bot finishes ahead 10 times in 11.
  Each rating's deviation is the posterior standard deviation of its strength, on the
  same scale: it falls as one over the square root of the seats the bot has taken.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

INITIAL_RATING = 1500.0
ELO_K = 32.0
#: a bot that has not played: Glicko's deviation for an unknown player
INITIAL_DEVIATION = 350.0
#: Glicko-2's default volatility, Elo points: how far a bot's strength may drift per match
GLICKO_VOLATILITY = 0.06 * 173.7178
_GLICKO_SCALE = 400.0 / math.log(10.0)

#: Φ(x) ≈ logistic(1.702 x): how a Gaussian margin model's strengths map onto Elo's logistic.
_PROBIT_TO_LOGIT = 1.702


def elo_expected(rating: float, opponent: float) -> float:
    return 1.0 / (1.0 + math.pow(10.0, (opponent - rating) / 400.0))


def elo_update(ratings: Sequence[float], scores: Sequence[float], k: float = ELO_K) -> list[float]:
    """The seats' ratings after one match with these final ``scores`` (same order)."""
    n = len(ratings)
    if n < 2:
        return list(ratings)
    weight = k / (n - 1)
    deltas = [0.0] * n
    for i in range(n):
        for j in range(i + 1, n):
            result = 1.0 if scores[i] > scores[j] else 0.5 if scores[i] == scores[j] else 0.0
            change = weight * (result - elo_expected(ratings[i], ratings[j]))
            deltas[i] += change
            deltas[j] -= change
    return [r + d for r, d in zip(ratings, deltas, strict=True)]


#: elo_deviation_after(n) for each n computed so far (each one step on from the one before)
_DEVIATIONS_AFTER = [INITIAL_DEVIATION]


def elo_deviation_after(games: int) -> float:
    """The Elo deviation of a bot after ``games`` matches at even tables of four bots alike
    (what :func:`elo_deviations` gives such a bot): for a rating kept without one.

    Every step is kept, so a page of old ratings with many different game counts costs one
    step a game count at most, once per process (not a thousand steps each, in the request)."""
    games = max(0, min(games, 1000))  # settled long before: the volatility's floor
    while len(_DEVIATIONS_AFTER) <= games:
        deviation = _DEVIATIONS_AFTER[-1]
        _DEVIATIONS_AFTER.append(elo_deviations(range(4), [INITIAL_RATING] * 4, [deviation] * 4)[0])
    return _DEVIATIONS_AFTER[games]


def elo_deviations(
    bots: Sequence[Hashable], ratings: Sequence[float], deviations: Sequence[float],
    volatility: float = GLICKO_VOLATILITY,
) -> dict[Hashable, float]:
    """Each bot's Elo deviation after one match (seats in the same order as ``bots``, which
    may hold a bot more than once): Glicko-2's rating-deviation step, tracked beside the Elo
    rating. Every pair of seats of different bots is a game weighted 1/(n-1), as Elo weighs
    it; a bot's deviation first widens by ``volatility`` (the drift Glicko-2 allows between
    games), then narrows by what the games tell: 1/RD'^2 = 1/(RD^2 + vol^2) + sum of
    w * g(RD_opp)^2 * E * (1 - E), on Glicko-2's scale (Elo points / 173.7178)."""
    n = len(bots)
    weight = 1.0 / (n - 1) if n > 1 else 0.0
    phi = [d / _GLICKO_SCALE for d in deviations]
    mu = [r / _GLICKO_SCALE for r in ratings]
    first: dict[Hashable, int] = {}
    information: dict[Hashable, float] = {}
    for i, bot in enumerate(bots):
        first.setdefault(bot, i)
        information.setdefault(bot, 0.0)
        for j, other in enumerate(bots):
            if other == bot:
                continue
            g = 1.0 / math.sqrt(1.0 + 3.0 * phi[j] ** 2 / math.pi**2)
            expected = 1.0 / (1.0 + math.exp(-g * (mu[i] - mu[j])))
            information[bot] += weight * g * g * expected * (1.0 - expected)
    out = {}
    for bot, i in first.items():
        widened = phi[i] ** 2 + (volatility / _GLICKO_SCALE) ** 2
        out[bot] = min(INITIAL_DEVIATION, _GLICKO_SCALE / math.sqrt(1.0 / widened + information[bot]))
    return out


@dataclass(frozen=True, slots=True)
class Fit:
    ratings: dict[Hashable, float]  # Elo scale
    strengths: dict[Hashable, float]  # score scale (a warm start for the next fit)
    games: dict[Hashable, int]
    noise: float  # the fitted spread of one score around its bot's strength
    #: Elo scale: each rating's standard deviation, the posterior spread of its bot's
    #: strength (noise_var / (seats + noise_var / strength_var)), scaled as the ratings are.
    deviations: dict[Hashable, float]


def fit_scores(
    matches: Sequence[tuple[Sequence[Hashable], Sequence[float]]],
    sweeps: int = 40,
    start: dict[Hashable, float] | None = None,
    tolerance: float = 1e-4,
) -> Fit:
    """Fit every bot's strength from whole matches: ``(bots, scores)`` per match.

    The model: ``score = mean + strength[bot] + table[match] + noise``, with the strengths,
    the table effects (how high a whole match scored) and the noise Gaussian. Their
    variances are estimated from the data, so a table effect that does not exist costs
    nothing and one that does is taken out; the strengths are their posterior means
    (shrunk toward the middle the less a bot has played). Fitted by alternating exact
    updates: every sweep updates each table's effect, each bot's strength and the mean,
    then estimates the variances again from the new strengths. It stops only after a sweep
    in which none of them, the variances included (as standard deviations), moved by
    ``tolerance`` or more, so what it returns is a fixed point: fitting again from its own
    strengths gives the same answer. ``sweeps`` caps the sweeps. ``start`` (strengths from
    an earlier fit) makes a refit after one more match quick."""
    strength: dict[Hashable, float] = {}
    games: dict[Hashable, int] = {}
    seen: dict[Hashable, list[tuple[int, int]]] = {}
    count = 0
    total = 0.0
    for m, (bots, scores) in enumerate(matches):
        for bot in set(bots):
            games[bot] = games.get(bot, 0) + 1
        for seat, bot in enumerate(bots):
            seen.setdefault(bot, []).append((m, seat))
            strength.setdefault(bot, (start or {}).get(bot, 0.0))
            total += scores[seat]
            count += 1
    if not strength:
        return Fit({}, {}, {}, 1.0, {})
    mean = total / count
    table = [0.0] * len(matches)
    stats = _table_stats(matches, strength)
    seat_counts = [len(places) for places in seen.values()]
    variances = _variances(stats, strength, mean, seat_counts, None)
    for _ in range(sweeps):
        noise_var, table_var, strength_var = variances
        largest = 0.0
        shrink_table = noise_var / table_var if table_var > 0 else math.inf
        for m, (rest, seats, _) in enumerate(stats):
            new = (rest - seats * mean) / (seats + shrink_table) if shrink_table != math.inf else 0.0
            largest = max(largest, abs(new - table[m]))
            table[m] = new
        shrink = noise_var / strength_var
        for bot, places in seen.items():
            residual = sum(matches[m][1][i] - mean - table[m] for m, i in places)
            new = residual / (len(places) + shrink)
            largest = max(largest, abs(new - strength[bot]))
            strength[bot] = new
        stats = _table_stats(matches, strength)
        new = sum(rest - seats * table[m] for m, (rest, seats, _) in enumerate(stats)) / count
        largest = max(largest, abs(new - mean))
        mean = new
        # The variances settle with everything else: stopping once the strengths stand
        # still under variances estimated from earlier strengths (on a cold start, from the
        # raw spread of the scores) would leave the noise too wide, the strengths too shrunk
        # and the Elo scale squeezed. So they are estimated again from every sweep's
        # strengths, and a sweep that moved them (as standard deviations) is not the last.
        variances = _variances(stats, strength, mean, seat_counts, strength_var)
        for now, before in zip(variances, (noise_var, table_var, strength_var), strict=True):
            largest = max(largest, abs(math.sqrt(now) - math.sqrt(before)))
        if largest < tolerance:
            break
    noise_var, _, strength_var = variances
    middle = sum(strength.values()) / len(strength)
    noise = math.sqrt(noise_var)
    # P(one bot finishes ahead of another at the same table) = Phi(difference / (noise * sqrt 2))
    scale = 400.0 * _PROBIT_TO_LOGIT / (math.log(10.0) * noise * math.sqrt(2.0))
    ratings = {bot: INITIAL_RATING + (v - middle) * scale for bot, v in strength.items()}
    # The posterior variance of a strength given the rest: one Gaussian prior (strength_var)
    # and one observation of noise_var per seat it has taken.
    shrink = noise_var / strength_var
    deviations = {bot: math.sqrt(noise_var / (len(places) + shrink)) * scale for bot, places in seen.items()}
    return Fit(ratings, dict(strength), games, noise, deviations)


def _table_stats(
    matches: Sequence[tuple[Sequence[Hashable], Sequence[float]]],
    strength: dict[Hashable, float],
) -> list[tuple[float, int, float]]:
    """Per match, of each seat's score less its bot's strength: the sum, the number of
    seats and the sum of squares about their own mean (one pass serves the table effects,
    the mean and the variances)."""
    stats = []
    for bots, scores in matches:
        rest = [scores[i] - strength[b] for i, b in enumerate(bots)]
        total = sum(rest)
        centre = total / len(rest)
        stats.append((total, len(rest), sum((r - centre) ** 2 for r in rest)))
    return stats


def _variances(
    stats: Sequence[tuple[float, int, float]],
    strength: dict[Hashable, float],
    mean: float,
    seat_counts: Sequence[int],
    prior_var: float | None,
) -> tuple[float, float, float]:
    """Moment estimates of the noise, table-effect and strength variances (``stats`` from
    :func:`_table_stats` with these strengths, ``seat_counts`` each bot's seats, ``prior_var`` the
    strength variance the strengths were fitted under, None before the first sweep)."""
    within = sum(ss for _, _, ss in stats)
    within_df = sum(seats - 1 for _, seats, _ in stats)
    noise_var = max(within / max(1, within_df - len(strength)), 1e-9)
    centres = [rest / seats - mean for rest, seats, _ in stats]  # each table's mean residual
    table_var = max(0.0, sum(c * c for c in centres) / len(stats)
                    - sum(noise_var / seats for _, seats, _ in stats) / len(stats))
    values = list(strength.values())
    centre = sum(values) / len(values)
    spread = sum((v - centre) ** 2 for v in values) / len(values)
    if prior_var is not None:
        # The estimates are shrunk, so their spread alone understates the strengths' (and
        # would shrink them more every sweep, leaving bots with few games over-confident):
        # add each one's posterior variance, as EM's update of a prior's variance does.
        spread += sum(noise_var / (n + noise_var / prior_var) for n in seat_counts) / len(seat_counts)
    # floored so that a fresh field is not frozen at 0
    strength_var = max(spread, noise_var / 50)
    return noise_var, table_var, strength_var


def kendall_tau(order_a: Sequence[float], order_b: Sequence[float]) -> float:
    """Kendall's tau-a between two scorings of the same items."""
    n = len(order_a)
    concordant = discordant = 0
    for i in range(n):
        for j in range(i + 1, n):
            product = (order_a[i] - order_a[j]) * (order_b[i] - order_b[j])
            if product > 0:
                concordant += 1
            elif product < 0:
                discordant += 1
    pairs = n * (n - 1) / 2
    return (concordant - discordant) / pairs if pairs else 1.0
