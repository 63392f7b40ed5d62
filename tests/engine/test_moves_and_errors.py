"""Moves and the typed errors for refused moves; a refused move never changes the state."""

from __future__ import annotations

import random

import pytest

from tests.engine.conftest import (
    bid_all,
    finish_round,
    full_deck,
    match_at_round,
    new_test_match,
    play,
    refused,
    stacked,
)
from wizard import (
    IllegalMoveError,
    InvalidMoveError,
    MatchFinishedError,
    Move,
    NotYourTurnError,
    Phase,
    Suit,
    WizardError,
)
from wizard.playout import playout
from wizard.record import state_to_bytes


def round_three():
    """Round 3, 3 players, dealer 2: seat 0 leads; seat 1 holds red, seat 2 does not."""
    hands = [["R5", "B2", "G2"], ["R9", "B7", "W"], ["G8", "B10", "J"]]
    return match_at_round(3, hands, "Y1", dealer=2)


def playing_round_three():
    state = round_three()
    bid_all(state, [1, 1, 1])
    return state


# ---------------------------------------------------------------- malformed moves
@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"bid": 1, "card": "W"},
        {"bid": 1, "trump": Suit.RED},
        {"card": "R7", "trump": Suit.RED},
        {"bid": 0, "card": "J", "trump": Suit.BLUE},
    ],
)
def test_move_must_set_exactly_one_field(fields):
    with pytest.raises(InvalidMoveError, match="exactly one"):
        Move(**fields)


@pytest.mark.parametrize("code", ["X1", "B14", "B0", "R", "w", "j", "", "10", "G 5", "Wizard"])
def test_unknown_card_code_is_malformed(code):
    with pytest.raises(InvalidMoveError):
        Move(card=code)


@pytest.mark.parametrize("bid", ["1", 1.0, 1.5, True, False, [1]])
def test_non_int_bid_is_malformed(bid):
    with pytest.raises(InvalidMoveError):
        Move(bid=bid)


@pytest.mark.parametrize("trump", ["PURPLE", 7, -1, "W"])
def test_unknown_trump_is_malformed(trump):
    with pytest.raises(InvalidMoveError):
        Move(trump=trump)


@pytest.mark.parametrize(
    "data",
    [{}, {"bid": 1, "card": "W"}, {"colour": "RED"}, {"card": "Z9"}, {"bid": "two"}, "bid 1", None],
)
def test_malformed_wire_moves(data):
    with pytest.raises(InvalidMoveError):
        Move.from_dict(data)


def test_wire_moves_round_trip():
    for move in (Move(bid=0), Move(bid=3), Move(card="R7"), Move(card="W"), Move(trump=Suit.YELLOW)):
        assert Move.from_dict(move.to_dict()) == move
    assert Move.from_dict({"trump": "BLUE"}) == Move(trump=Suit.BLUE)


@pytest.mark.parametrize("move", [{"bid": 1}, "bid 1", 1, None])
def test_apply_something_that_is_not_a_move_is_malformed(move):
    state = round_three()
    refused(state, 0, move, InvalidMoveError)


@pytest.mark.parametrize("seat", [-1, 3, 10, "0", None, True])
def test_apply_for_a_seat_that_does_not_exist_is_malformed(seat):
    state = round_three()
    refused(state, seat, Move(bid=0), InvalidMoveError)


# ---------------------------------------------------------------- illegal moves
def assert_lists_legal(error: IllegalMoveError, state, seat):
    legal = tuple(state.legal_moves(seat))
    assert legal, "an illegal move is refused for a seat that has moves"
    assert error.legal == legal
    for move in legal:
        assert str(move) in str(error)


def test_card_not_held_is_illegal():
    state = playing_round_three()
    error = refused(state, 0, Move(card="R13"), IllegalMoveError)
    assert "R13" in str(error)
    assert_lists_legal(error, state, 0)
    assert set(error.legal) == {Move(card=c) for c in ("R5", "B2", "G2")}


def test_jester_not_held_is_illegal():
    state = playing_round_three()
    error = refused(state, 0, Move(card="J"), IllegalMoveError)
    assert_lists_legal(error, state, 0)


def test_not_following_suit_is_illegal():
    state = playing_round_three()
    play(state, "R5")
    error = refused(state, 1, Move(card="B7"), IllegalMoveError)
    assert_lists_legal(error, state, 1)
    assert error.legal == (Move(card="R9"), Move(card="W"))
    assert "card R9" in str(error) and "card W" in str(error)


@pytest.mark.parametrize("bid", [-1, 4, 21, 300])
def test_bid_out_of_range_is_illegal(bid):
    state = round_three()
    error = refused(state, 0, Move(bid=bid), IllegalMoveError)
    assert_lists_legal(error, state, 0)
    assert error.legal == tuple(Move(bid=b) for b in range(4))
    assert "bid 0, bid 1, bid 2, bid 3" in str(error)


def test_card_while_bidding_is_illegal():
    state = round_three()
    error = refused(state, 0, Move(card="R5"), IllegalMoveError)
    assert_lists_legal(error, state, 0)


def test_trump_while_bidding_is_illegal():
    state = round_three()
    error = refused(state, 0, Move(trump=Suit.RED), IllegalMoveError)
    assert_lists_legal(error, state, 0)


def test_bid_while_playing_is_illegal():
    state = playing_round_three()
    error = refused(state, 0, Move(bid=1), IllegalMoveError)
    assert_lists_legal(error, state, 0)


def test_card_outside_the_junior_deck_is_illegal():
    deck = stacked([["B1"], ["B2"], ["B3"]], "G1", dealer=2, deck="JUNIOR")
    state = new_test_match(3, dealer=2, ruleset="WIZARD_JUNIOR", deals=[deck])
    bid_all(state, [0, 0, 0])
    error = refused(state, 0, Move(card="B12"), IllegalMoveError)
    assert error.legal == (Move(card="B1"),)


# ---------------------------------------------------------------- out of turn
def test_bid_out_of_turn():
    state = round_three()
    refused(state, 1, Move(bid=1), NotYourTurnError)
    refused(state, 2, Move(bid=0), NotYourTurnError)


def test_card_out_of_turn():
    state = playing_round_three()
    refused(state, 1, Move(card="R9"), NotYourTurnError)
    refused(state, 2, Move(card="G8"), NotYourTurnError)


def test_card_out_of_turn_mid_trick():
    state = playing_round_three()
    play(state, "R5")
    refused(state, 0, Move(card="B2"), NotYourTurnError)
    refused(state, 2, Move(card="J"), NotYourTurnError)


# ---------------------------------------------------------------- after the end
def finished_match():
    state = new_test_match(3, dealer=0, ruleset="WIZARD_JUNIOR")
    playout(state, random.Random(5))
    assert state.phase is Phase.FINISHED
    return state


@pytest.mark.parametrize("move", [Move(bid=0), Move(card="W"), Move(card="B1"), Move(trump=Suit.RED)])
@pytest.mark.parametrize("seat", [0, 1, 2])
def test_moving_after_the_end_is_refused(move, seat):
    state = finished_match()
    assert state.awaiting() == () and state.legal_moves(seat) == []
    refused(state, seat, move, MatchFinishedError)


def test_error_hierarchy():
    for error in (IllegalMoveError, InvalidMoveError, NotYourTurnError, MatchFinishedError):
        assert issubclass(error, WizardError) and issubclass(error, ValueError)
    assert issubclass(MatchFinishedError, NotYourTurnError)


# ---------------------------------------------------------------- every refused move, everywhere
def every_move(state):
    size = state.view(None).hand_size
    cards = dict.fromkeys(full_deck())
    return (
        [Move(bid=b) for b in range(-1, size + 2)]
        + [Move(card=c) for c in cards]
        + [Move(trump=s) for s in Suit]
    )


def check_every_move(state):
    """Every legal move is accepted (on a copy); every other one raises the right error and
    leaves the state unchanged."""
    waiting = state.awaiting()
    views = [state.view(s) for s in [None, *range(state.players)]]
    data = state_to_bytes(state)
    for seat in range(state.players):
        legal = state.legal_moves(seat)
        assert bool(legal) == (seat in waiting)
        for move in every_move(state):
            if move in legal:
                state.copy().apply(seat, move)
                continue
            if state.phase is Phase.FINISHED:
                expected = MatchFinishedError
            elif seat in waiting:
                expected = IllegalMoveError
            else:
                expected = NotYourTurnError
            with pytest.raises(expected) as caught:
                state.apply(seat, move)
            assert state_to_bytes(state) == data, f"refused {move} for seat {seat} changed the state"
            if expected is IllegalMoveError:
                assert caught.value.legal == tuple(legal)
    assert [state.view(s) for s in [None, *range(state.players)]] == views


def test_every_refused_move_leaves_the_state_unchanged_in_every_phase():
    # round 2 turns up a Wizard, so the dealer chooses trump
    round_2 = stacked([["R5", "B2"], ["R9", "W"], ["G8", "J"], ["B10", "R1"]], "W", dealer=1)
    state = new_test_match(4, dealer=0, deals=[[], round_2])
    rng = random.Random(2)
    phases = set()
    while state.round <= 3:
        phases.add(state.phase)
        check_every_move(state)
        seat = state.awaiting()[0]
        state.apply(seat, rng.choice(state.legal_moves(seat)))
    assert {Phase.CHOOSE_TRUMP, Phase.BID, Phase.PLAY} <= phases
    while state.phase is not Phase.FINISHED:
        finish_round(state)
    check_every_move(state)


def test_every_refused_move_leaves_state_unchanged_with_simultaneous_bids():
    state = new_test_match(3, dealer=1, variants=["HIDDEN_BIDS"])
    state.apply(0, Move(bid=1))
    check_every_move(state)
