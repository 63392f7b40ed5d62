"""Scoring at the end of each round and the end of the match (RULES.md, "Scoring" and
"End of the match"), with the worked examples of seeds 002 and 004."""

from __future__ import annotations

import random

import pytest

from tests.engine.conftest import bid_all, match_at_round, new_test_match, play, stacked
from wizard import MatchConfig, Phase, Scoring, SeatResult, new_match
from wizard.playout import playout

THOMAS, UTE, KEVIN = 0, 1, 2


def seat_results(state, round_number):
    (result,) = [r for r in state.view(None).round_results if r.round == round_number]
    return result.seats


# ---------------------------------------------------------------- seed 002's example
def thomas_ute_kevin():
    """Seed 002's example, played: Kevin deals round 1, Thomas round 2."""
    round_1 = stacked([["R3"], ["R5"], ["R9"]], "G1", dealer=KEVIN)
    round_2 = stacked([["W", "B2"], ["J", "B3"], ["R13", "B9"]], "G2", dealer=THOMAS)
    return new_test_match(3, dealer=KEVIN, deals=[round_1, round_2])


def test_seed_002_round_1_thomas_ute_kevin():
    state = thomas_ute_kevin()
    bid_all(state, {THOMAS: 0, UTE: 1, KEVIN: 1})
    play(state, "R3", "R5", "R9")  # Kevin's R9 takes the one trick
    assert seat_results(state, 1) == (
        SeatResult(THOMAS, bid=0, tricks=0, points=20),
        SeatResult(UTE, bid=1, tricks=0, points=-10),
        SeatResult(KEVIN, bid=1, tricks=1, points=30),
    )
    assert state.scores == (20, -10, 30)
    assert [s.score for s in state.view(UTE).seats] == [20, -10, 30]


def test_seed_002_round_2_thomas_ute_kevin():
    state = thomas_ute_kevin()
    bid_all(state, {THOMAS: 0, UTE: 1, KEVIN: 1})
    play(state, "R3", "R5", "R9")
    assert state.round == 2 and state.to_act == UTE
    bid_all(state, {UTE: 0, KEVIN: 0, THOMAS: 2})
    play(state, "J", "R13", "B2")  # Ute leads a Jester; Kevin's R13 sets red and wins
    play(state, "B9", "W", "B3")  # Kevin leads; Thomas's Wizard wins
    assert seat_results(state, 2) == (
        SeatResult(THOMAS, bid=2, tricks=1, points=-10),
        SeatResult(UTE, bid=0, tricks=0, points=20),
        SeatResult(KEVIN, bid=0, tricks=1, points=-10),
    )
    assert state.scores[THOMAS] == 10  # 20 - 10, as seed 002 says
    assert state.scores == (10, 10, 20)
    assert [r.round for r in state.view(None).round_results] == [1, 2]


# ---------------------------------------------------------------- seed 004's bid-3 examples
# Round 4 of WIZARD_JUNIOR_CLASSIC (standard scoring), 3 players, seat 0 leads and bids 3.
BID_THREE = {
    4: (
        [["W", "W", "R8", "R7"], ["B1", "B2", "B3", "B4"], ["G1", "G2", "G3", "G4"]],
        [("W", "B1", "G1"), ("W", "B2", "G2"), ("R8", "B3", "G3"), ("R7", "B4", "G4")],
    ),
    3: (
        [["W", "W", "R8", "G1"], ["B1", "B2", "B3", "B4"], ["G5", "G2", "G3", "G4"]],
        [("W", "B1", "G2"), ("W", "B2", "G3"), ("R8", "B3", "G4"), ("G1", "B4", "G5")],
    ),
    2: (
        [["W", "W", "G1", "G2"], ["B1", "B2", "B3", "B4"], ["G5", "G6", "G3", "G4"]],
        # the last trick is led by seat 2, who won the third
        [("W", "B1", "G3"), ("W", "B2", "G4"), ("G1", "B3", "G5"), ("G6", "G2", "B4")],
    ),
}


@pytest.mark.parametrize(("won", "points"), [(3, 50), (4, -10), (2, -10)])
def test_seed_004_bid_three_played(won, points):
    hands, tricks = BID_THREE[won]
    state = match_at_round(4, hands, "R1", dealer=2, ruleset="WIZARD_JUNIOR_CLASSIC")
    before = state.scores
    bid_all(state, [3, 0, 4 - won])
    for trick in tricks:
        play(state, *trick)
    assert state.round == 5
    assert seat_results(state, 4) == (
        SeatResult(0, bid=3, tricks=won, points=points),
        SeatResult(1, bid=0, tricks=0, points=20),
        SeatResult(2, bid=4 - won, tricks=4 - won, points=20 + 10 * (4 - won)),
    )
    assert state.scores[0] - before[0] == points


# ---------------------------------------------------------------- the standard formula
@pytest.mark.parametrize(
    ("bid", "tricks", "points"),
    [
        (3, 3, 50), (3, 4, -10), (3, 2, -10), (0, 0, 20), (0, 1, -10), (1, 0, -10),
        (1, 1, 30), (2, 1, -10), (0, 3, -30), (5, 1, -40), (20, 20, 220), (0, 20, -200),
    ],
)
def test_standard_points(bid, tricks, points):
    assert Scoring.STANDARD.points(bid, tricks) == points


def test_standard_points_formula_over_all_bids():
    for bid in range(21):
        for tricks in range(21):
            expected = 20 + 10 * tricks if bid == tricks else -10 * abs(tricks - bid)
            assert Scoring.STANDARD.points(bid, tricks) == expected


# ---------------------------------------------------------------- chips (WIZARD_JUNIOR)
@pytest.mark.parametrize(
    ("bid", "tricks", "points"),
    [(0, 0, 1), (1, 1, 1), (2, 2, 2), (8, 8, 8), (0, 1, 0), (1, 0, 0), (3, 5, 0), (5, 3, 0)],
)
def test_chips_points(bid, tricks, points):
    assert Scoring.CHIPS.points(bid, tricks) == points


def test_chips_points_are_never_negative():
    for bid in range(9):
        for tricks in range(9):
            expected = (bid or 1) if bid == tricks else 0
            assert Scoring.CHIPS.points(bid, tricks) == expected


def test_chips_scoring_in_played_rounds():
    round_1 = stacked([["R8"], ["R2"], ["J"]], "B1", dealer=2, deck="JUNIOR")
    round_2 = stacked([["B7", "B8"], ["B1", "B2"], ["G1", "G2"]], "J", dealer=0, deck="JUNIOR")
    state = new_test_match(3, dealer=2, ruleset="WIZARD_JUNIOR", deals=[round_1, round_2])
    bid_all(state, [1, 0, 1])
    play(state, "R8", "R2", "J")  # seat 0 wins
    assert [s.points for s in seat_results(state, 1)] == [1, 1, 0]
    bid_all(state, [2, 1, 2])
    play(state, "B1", "G1", "B7")  # seat 1 leads; seat 0 wins both tricks
    play(state, "B8", "B2", "G2")
    assert [s.points for s in seat_results(state, 2)] == [2, 0, 0]
    assert state.scores == (3, 1, 0)


@pytest.mark.parametrize(
    ("ruleset", "scoring"),
    [("WIZARD", Scoring.STANDARD), ("WIZARD_JUNIOR", Scoring.CHIPS), ("WIZARD_JUNIOR_CLASSIC", Scoring.STANDARD)],
)
def test_scoring_of_each_ruleset(ruleset, scoring):
    assert MatchConfig.create(ruleset, 4).scoring is scoring


# ---------------------------------------------------------------- end of the match
def test_scores_are_the_sum_of_round_points():
    state = new_test_match(5, dealer=1)
    playout(state, random.Random(11))
    view = state.view(None)
    totals = [sum(r.seats[s].points for r in view.round_results) for s in range(5)]
    assert list(state.scores) == totals == [s.score for s in view.seats]


def test_highest_total_wins_and_ties_all_win():
    ties = 0
    for i in range(30):
        state = new_match(MatchConfig.create("WIZARD_JUNIOR", 3), seed=f"end-{i}")
        assert state.outcome is None and state.view(0).winners is None
        outcome = playout(state, random.Random(i))
        best = max(state.scores)
        expected = tuple(s for s in range(3) if state.scores[s] == best)
        assert state.phase is Phase.FINISHED
        assert outcome.winners == state.outcome.winners == state.view(None).winners == expected
        ties += len(expected) > 1
    assert ties, "these seeds include a tie on the highest total"

