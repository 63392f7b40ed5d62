"""Bidding without variants (RULES.md, "Bidding"): order, range, publicity, free sums."""

from __future__ import annotations

import pytest

from tests.engine.conftest import bid_all, match_at_round, new_test_match, refused, stacked
from wizard import IllegalMoveError, Move, NotYourTurnError, Phase


def four_seat_round_three(dealer: int = 2):
    hands = [["B1", "B2", "B3"], ["G1", "G2", "G3"], ["R1", "R2", "R3"], ["Y1", "Y2", "Y3"]]
    return match_at_round(3, hands, "J", dealer=dealer)


@pytest.mark.parametrize("dealer", [0, 1, 2, 3])
def test_bidding_starts_left_of_dealer_and_dealer_bids_last(dealer):
    deal = stacked([["B1"], ["B2"], ["B3"], ["B4"]], "G1", dealer=dealer)
    state = new_test_match(4, dealer=dealer, deals=[deal])
    order = []
    while state.phase is Phase.BID:
        seat = state.to_act
        assert state.awaiting() == (seat,)
        assert state.view(None).to_act == seat
        order.append(seat)
        state.apply(seat, Move(bid=0))
    assert order == [(dealer + 1 + i) % 4 for i in range(4)]
    assert order[-1] == dealer


def test_only_the_seat_to_bid_has_legal_moves():
    state = four_seat_round_three(dealer=2)
    assert state.to_act == 3
    for seat in (0, 1, 2):
        assert state.legal_moves(seat) == []
        assert state.view(seat).legal_moves == ()
        refused(state, seat, Move(bid=1), NotYourTurnError)


def test_bids_range_from_zero_to_the_hand_size():
    state = four_seat_round_three()
    assert state.legal_moves(3) == [Move(bid=b) for b in range(4)]


@pytest.mark.parametrize("bid", [-1, 4, 5, 20])
def test_bid_outside_zero_to_hand_size_is_refused(bid):
    state = four_seat_round_three()
    error = refused(state, 3, Move(bid=bid), IllegalMoveError)
    assert error.legal == tuple(Move(bid=b) for b in range(4))


def test_a_seat_bids_once():
    state = four_seat_round_three()
    state.apply(3, Move(bid=1))
    refused(state, 3, Move(bid=1), NotYourTurnError)


def test_every_bid_is_public_as_soon_as_it_is_made():
    state = four_seat_round_three()
    state.apply(3, Move(bid=2))
    for viewer in (None, 0, 1, 2, 3):
        seats = state.view(viewer).seats
        assert seats[3].bid == 2
        assert seats[0].bid is None  # not made yet
    state.apply(0, Move(bid=0))
    assert [state.view(1).seats[s].bid for s in range(4)] == [0, None, None, 2]


@pytest.mark.parametrize("bids", [[0, 0, 0, 0], [1, 1, 0, 1], [3, 3, 3, 3], [0, 3, 0, 0]])
def test_sum_of_bids_may_be_anything(bids):
    state = four_seat_round_three()
    bid_all(state, bids)
    assert state.phase is Phase.PLAY
    assert [state.view(None).seats[s].bid for s in range(4)] == bids


def test_dealer_may_make_the_bids_add_up_to_the_hand_size():
    state = four_seat_round_three(dealer=2)
    for seat, bid in [(3, 1), (0, 1), (1, 0)]:
        state.apply(seat, Move(bid=bid))
    assert Move(bid=1) in state.legal_moves(2)
    state.apply(2, Move(bid=1))
    assert state.phase is Phase.PLAY


def test_after_the_last_bid_the_seat_left_of_dealer_plays():
    state = four_seat_round_three(dealer=2)
    bid_all(state, [0, 1, 2, 3])
    assert state.phase is Phase.PLAY
    assert state.to_act == 3
    assert state.legal_moves(3) == [Move(card=c) for c in ("Y1", "Y2", "Y3")]
