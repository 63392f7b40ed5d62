"""Bad input from outside the engine (the API passes user data through) gets a typed
error and changes nothing; found by review, kept here so it stays fixed."""

import random

import pytest

from wizard import (
    ConfigError,
    InvalidMoveError,
    MatchConfig,
    MatchRecord,
    Move,
    RecordError,
    new_match,
)
from wizard.playout import playout
from wizard.record import record_of, state_from_bytes, state_to_bytes


@pytest.mark.parametrize("seat", [-1, 4, 7, True, 1.0, "1", None])
def test_a_seat_outside_the_table_is_refused_everywhere(seat) -> None:
    state = new_match(MatchConfig.create("WIZARD", 4, ["SECRET_BIDS"]), seed="seat")
    before = state_to_bytes(state)
    calls = [
        lambda: state.apply_action(seat, 64),
        lambda: state.apply(seat, Move(bid=0)),
        lambda: state.legal_actions(seat),
        lambda: state.legal_moves(seat),
    ]
    if seat is not None:  # view(None) is the spectator's view
        calls.append(lambda: state.view(seat))
    for call in calls:
        with pytest.raises(InvalidMoveError, match="seat"):
            call()
    assert state_to_bytes(state) == before


@pytest.mark.parametrize("action", [64.0, "64", True, None])
def test_an_action_that_is_not_a_whole_number_is_refused(action) -> None:
    state = new_match(MatchConfig.create("WIZARD", 4, ["HIDDEN_BIDS"]), seed="action")
    before = state_to_bytes(state)
    with pytest.raises(InvalidMoveError, match="whole number"):
        state.apply_action(0, action)
    assert state_to_bytes(state) == before


@pytest.mark.parametrize(
    "fields",
    [{"card": ["R7"]}, {"card": 7}, {"trump": True}, {"trump": 1.0}, {"trump": "PURPLE"}, {"bid": "2"}, {"bid": 1.5}],
)
def test_malformed_move_fields_raise_invalid_move(fields) -> None:
    with pytest.raises(InvalidMoveError):
        Move.from_dict(fields)


def test_trump_accepts_a_suit_its_name_or_its_number() -> None:
    assert Move(trump="RED") == Move(trump=2) == Move.from_dict({"trump": "RED"})


@pytest.mark.parametrize("seed", ["\ud800", "x" * 257, ""])
def test_a_seed_that_cannot_be_stored_is_refused(seed) -> None:
    with pytest.raises(ConfigError, match="seed"):
        new_match(MatchConfig.create("WIZARD", 3), seed=seed)


@pytest.mark.parametrize("deals", [5, [5], "B1", [["B1", 5]]])
def test_deals_of_the_wrong_shape_are_refused(deals) -> None:
    with pytest.raises(ConfigError, match="deals"):
        MatchConfig.create("WIZARD", 3, deals=deals)


def test_unhashable_variants_are_refused() -> None:
    with pytest.raises(ConfigError, match="variants"):
        MatchConfig.create("WIZARD", 3, variants=[["HIDDEN_BIDS"]])


def test_a_fully_stacked_six_player_state_stays_under_two_kilobytes() -> None:
    deck = [c for s in "BGRY" for c in (f"{s}{r}" for r in range(1, 14))] + ["W"] * 4 + ["J"] * 4
    deals = [random.Random(r).sample(deck, len(deck)) for r in range(10)]
    state = new_match(MatchConfig.create("WIZARD", 6, deals=deals, first_dealer=0), seed="s" * 256)
    rng = random.Random(3)
    largest = 0
    while not state.is_finished:
        seat = state.awaiting()[0]
        state.apply_action(seat, rng.choice(state.legal_actions(seat)))
        largest = max(largest, len(state_to_bytes(state)))
    assert largest <= 2048
    assert state_to_bytes(state_from_bytes(state_to_bytes(state))) == state_to_bytes(state)
    assert state.config.deals == tuple(tuple(r) for r in deals)


def test_a_record_from_another_deal_algorithm_is_refused() -> None:
    state = new_match(MatchConfig.create("WIZARD_JUNIOR", 3), seed="algo")
    playout(state, random.Random(1))
    data = record_of(state).to_dict()
    assert data["dealAlgorithm"] == 1
    data["dealAlgorithm"] = 2
    with pytest.raises(RecordError, match="deal algorithm"):
        MatchRecord.from_dict(data)
