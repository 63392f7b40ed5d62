"""The variants of seed 002 (RULES.md, "Variants") and the combinations that are refused."""

from __future__ import annotations

import pytest

from tests.engine.conftest import (
    bid_all,
    dealing_order,
    finish_round,
    match_at_round,
    new_test_match,
    play,
    refused,
    stacked,
)
from wizard import (
    ConfigError,
    DealError,
    IllegalMoveError,
    MatchConfig,
    Move,
    NotYourTurnError,
    Phase,
    Suit,
)


# ================================================================ PLUS_MINUS_ONE
def plus_minus_one_round_three():
    hands = [["B1", "B2", "B3"], ["G1", "G2", "G3"], ["R1", "R2", "R3"], ["Y1", "Y2", "Y3"]]
    return match_at_round(3, hands, "J", dealer=2, variants=["PLUS_MINUS_ONE"])


def test_plus_minus_one_dealer_may_not_make_the_bids_add_up():
    state = plus_minus_one_round_three()
    for seat, bid in [(3, 1), (0, 1), (1, 0)]:
        state.apply(seat, Move(bid=bid))
    assert state.to_act == 2  # the dealer bids last
    assert state.legal_moves(2) == [Move(bid=0), Move(bid=2), Move(bid=3)]
    error = refused(state, 2, Move(bid=1), IllegalMoveError)
    assert error.legal == (Move(bid=0), Move(bid=2), Move(bid=3))
    assert "bid 0, bid 2, bid 3" in str(error)
    state.apply(2, Move(bid=2))
    assert state.phase is Phase.PLAY


def test_plus_minus_one_other_bidders_are_unrestricted():
    state = plus_minus_one_round_three()
    for seat, bid in [(3, 0), (0, 3), (1, 0)]:
        assert state.legal_moves(seat) == [Move(bid=b) for b in range(4)]
        state.apply(seat, Move(bid=bid))
    # 0 + 3 + 0 = 3 already: the dealer may not bid 0
    assert state.legal_moves(2) == [Move(bid=1), Move(bid=2), Move(bid=3)]


def test_plus_minus_one_dealer_unrestricted_when_the_sum_is_already_over():
    state = plus_minus_one_round_three()
    for seat in (3, 0, 1):
        state.apply(seat, Move(bid=2))
    assert state.legal_moves(2) == [Move(bid=b) for b in range(4)]


def test_plus_minus_one_in_round_one():
    deal = stacked([["B1"], ["B2"], ["B3"]], "G1", dealer=0)
    state = new_test_match(3, dealer=0, deals=[deal], variants=["PLUS_MINUS_ONE"])
    state.apply(1, Move(bid=0))
    state.apply(2, Move(bid=0))
    assert state.legal_moves(0) == [Move(bid=0)]
    refused(state, 0, Move(bid=1), IllegalMoveError)


def test_without_plus_minus_one_the_dealer_may_make_the_bids_add_up():
    deal = stacked([["B1"], ["B2"], ["B3"]], "G1", dealer=0)
    state = new_test_match(3, dealer=0, deals=[deal])
    state.apply(1, Move(bid=0))
    state.apply(2, Move(bid=0))
    assert state.legal_moves(0) == [Move(bid=0), Move(bid=1)]


# ================================================================ HIDDEN_BIDS
def hidden(variant="HIDDEN_BIDS", round_number=1):
    size = round_number
    hands = [[f"{s}{r}" for r in range(1, size + 1)] for s in "BGRY"]
    return match_at_round(round_number, hands, "J", dealer=0, variants=[variant])


@pytest.mark.parametrize("variant", ["HIDDEN_BIDS", "SECRET_BIDS"])
def test_simultaneous_bids_await_every_seat_with_nobody_to_act(variant):
    state = hidden(variant)
    assert state.phase is Phase.BID
    assert state.awaiting() == (0, 1, 2, 3)
    assert state.to_act is None
    view = state.view(2)
    assert view.to_act is None and view.awaiting == (0, 1, 2, 3)
    for seat in range(4):
        assert state.legal_moves(seat) == [Move(bid=0), Move(bid=1)]


@pytest.mark.parametrize("variant", ["HIDDEN_BIDS", "SECRET_BIDS"])
def test_simultaneous_bids_in_any_order(variant):
    state = hidden(variant)
    for seat, waiting in [(2, (0, 1, 3)), (0, (1, 3)), (3, (1,))]:
        state.apply(seat, Move(bid=1))
        assert state.awaiting() == waiting
        assert state.to_act is None
    state.apply(1, Move(bid=0))
    assert state.phase is Phase.PLAY
    assert state.to_act == 1  # the player left of the dealer leads


@pytest.mark.parametrize("variant", ["HIDDEN_BIDS", "SECRET_BIDS"])
def test_simultaneous_bids_a_seat_bids_once(variant):
    state = hidden(variant)
    state.apply(2, Move(bid=1))
    assert state.legal_moves(2) == []
    refused(state, 2, Move(bid=0), NotYourTurnError)


def test_hidden_bids_a_seat_sees_only_its_own_bid_until_all_are_in():
    state = hidden()
    state.apply(2, Move(bid=1))
    state.apply(0, Move(bid=0))
    assert [s.bid for s in state.view(2).seats] == [None, None, 1, None]
    assert [s.bid for s in state.view(0).seats] == [0, None, None, None]
    assert [s.bid for s in state.view(1).seats] == [None, None, None, None]
    assert [s.bid for s in state.view(None).seats] == [None, None, None, None]
    state.apply(3, Move(bid=1))
    assert [s.bid for s in state.view(1).seats] == [None, None, None, None]
    state.apply(1, Move(bid=0))
    for viewer in (None, 0, 1, 2, 3):
        assert [s.bid for s in state.view(viewer).seats] == [0, 0, 1, 1]


def test_hidden_bids_after_a_wizard_is_turned_the_dealer_chooses_then_all_bid():
    deal = stacked([["B1"], ["R2"], ["G3"], ["Y4"]], "W", dealer=1)
    state = new_test_match(4, dealer=1, deals=[deal], variants=["HIDDEN_BIDS"])
    assert state.phase is Phase.CHOOSE_TRUMP and state.awaiting() == (1,)
    refused(state, 0, Move(bid=0), NotYourTurnError)
    state.apply(1, Move(trump=Suit.RED))
    assert state.phase is Phase.BID
    assert state.awaiting() == (0, 1, 2, 3) and state.to_act is None


# ================================================================ SECRET_BIDS
def test_secret_bids_stay_hidden_during_the_whole_round():
    state = hidden("SECRET_BIDS", round_number=2)
    bids = [0, 2, 1, 0]
    for seat in (3, 1, 0, 2):
        state.apply(seat, Move(bid=bids[seat]))
    assert state.phase is Phase.PLAY
    for viewer in range(4):
        assert [s.bid for s in state.view(viewer).seats] == [
            bids[s] if s == viewer else None for s in range(4)
        ]
    assert all(s.bid is None for s in state.view(None).seats)
    play(state, "G1", "R1", "Y1", "B1")  # seat 1 leads (dealer 0); no trump: G1 wins
    assert state.round == 2 and len(state.view(None).completed_tricks) == 1
    assert [s.bid for s in state.view(3).seats] == [None, None, None, 0]
    assert all(s.bid is None for s in state.view(None).seats)


def test_secret_bids_are_visible_in_round_results_after_the_round():
    state = hidden("SECRET_BIDS", round_number=2)
    bids = [0, 2, 1, 0]
    for seat in (3, 1, 0, 2):
        state.apply(seat, Move(bid=bids[seat]))
    play(state, "G1", "R1", "Y1", "B1")
    play(state, "G2", "R2", "Y2", "B2")
    assert state.round == 3
    for viewer in (None, 0, 1, 2, 3):
        (result,) = [r for r in state.view(viewer).round_results if r.round == 2]
        assert [s.bid for s in result.seats] == bids
        assert [s.tricks for s in result.seats] == [0, 2, 0, 0]
    # the new round's bids start hidden again
    assert all(s.bid is None for s in state.view(None).seats)


# ================================================================ CLAIRVOYANCE
CLAIRVOYANT_HANDS = [["R5"], ["W"], ["B2"], ["G3"]]


def clairvoyant():
    deal = stacked(CLAIRVOYANT_HANDS, "B1", dealer=3)
    return new_test_match(4, dealer=3, deals=[deal], variants=["CLAIRVOYANCE"])


@pytest.mark.parametrize("viewer", [0, 1, 2, 3])
def test_clairvoyance_round_one_seat_sees_others_hands_not_its_own(viewer):
    view = clairvoyant().view(viewer)
    assert view.hand is None
    for seat in range(4):
        expected = None if seat == viewer else tuple(CLAIRVOYANT_HANDS[seat])
        assert view.seats[seat].hand == expected


def test_clairvoyance_spectator_sees_no_hand():
    view = clairvoyant().view(None)
    assert view.hand is None
    assert all(s.hand is None for s in view.seats)


def test_clairvoyance_bids_as_usual():
    state = clairvoyant()
    order = []
    while state.phase is Phase.BID and state.round == 1:
        seat = state.to_act
        assert state.awaiting() == (seat,)
        assert state.legal_moves(seat) == [Move(bid=0), Move(bid=1)]
        order.append(seat)
        bid = 1 if seat == 2 else 0
        state.apply(seat, Move(bid=bid))
        if state.round == 1:  # public at once, as usual
            assert state.view((seat + 1) % 4).seats[seat].bid == bid
    assert order == [0, 1, 2, 3]


def test_clairvoyance_server_plays_round_one_after_the_last_bid():
    state = clairvoyant()
    bid_all(state, [0, 1, 1, 0])
    view = state.view(None)
    assert view.round == 2
    trick = view.last_trick
    assert [(p.seat, p.card) for p in trick.plays] == [(0, "R5"), (1, "W"), (2, "B2"), (3, "G3")]
    assert trick.winner == 1
    (result,) = view.round_results
    assert [(s.bid, s.tricks, s.points) for s in result.seats] == [(0, 0, 20), (1, 1, 30), (1, 0, -10), (0, 0, 20)]
    assert state.scores == (20, 30, -10, 20)


def test_clairvoyance_round_two_has_normal_visibility():
    state = clairvoyant()
    bid_all(state, [0, 1, 1, 0])
    assert state.round == 2 and state.phase in (Phase.BID, Phase.CHOOSE_TRUMP)
    for viewer in range(4):
        view = state.view(viewer)
        assert view.hand is not None and len(view.hand) == 2
        assert view.seats[viewer].hand == view.hand
        assert all(view.seats[s].hand is None for s in range(4) if s != viewer)


def test_clairvoyance_with_hidden_bids_server_plays_after_the_last_bid():
    deal = stacked(CLAIRVOYANT_HANDS, "B1", dealer=3)
    state = new_test_match(4, dealer=3, deals=[deal], variants=["CLAIRVOYANCE", "HIDDEN_BIDS"])
    assert state.view(2).hand is None and state.view(2).seats[1].hand == ("W",)
    for seat in (2, 3, 0):
        state.apply(seat, Move(bid=0))
        assert state.round == 1
    state.apply(1, Move(bid=1))
    view = state.view(None)
    assert view.round == 2
    assert view.last_trick.winner == 1
    assert [s.points for s in view.round_results[0].seats] == [20, 30, 20, 20]


# ================================================================ SINGLE_SUIT
PILES = {0: "B", 1: "G", 2: "R", 3: "Y"}


def pile_hand(seat: int, first: str, size: int = 4) -> list[str]:
    """``first`` plus the lowest other cards of the seat's own pile."""
    pile = [f"{PILES[seat]}{r}" for r in range(1, 14)] + ["W", "J"]
    return [first] + [c for c in pile if c != first][: size - 1]


def single_suit_trick(cards: list[str], dealer: int) -> int:
    """Round 1 of SINGLE_SUIT with 3 players: the leader left of ``dealer`` and the next seats
    play ``cards`` in turn; returns the seat that took the trick."""
    n = len(cards)
    hands = [None] * n
    for i, card in enumerate(cards):
        seat = (dealer + 1 + i) % n
        hands[seat] = pile_hand(seat, card)
    state = new_test_match(n, dealer=dealer, variants=["SINGLE_SUIT"], deals=[dealing_order(hands, dealer)])
    bid_all(state, [0] * n)
    play(state, *cards)
    (trick,) = state.view(None).completed_tricks
    return trick.winner


@pytest.mark.parametrize(
    ("cards", "winner"),
    [
        (["B3", "G9", "R5"], 1),  # highest value
        (["B13", "G12", "W"], 2),  # Wizard 14 beats 13
        (["B1", "J", "R1"], 0),  # Jester 0 is lowest; the earlier of two 1s
        (["J", "G1", "R1"], 1),  # a led Jester is still worth 0
        (["B7", "G7", "R8"], 2),
        (["B7", "G7", "R7"], 0),  # equal values: the earliest played
        (["W", "W", "W"], 0),  # three Wizards: the first
        (["J", "J", "J"], 0),  # three Jesters: the first
        (["B2", "G13", "R13"], 1),
    ],
)
def test_single_suit_highest_value_wins_earliest_of_equals(cards, winner):
    assert single_suit_trick(cards, dealer=2) == winner


def test_single_suit_earliest_of_equals_is_by_play_order_not_seat():
    # dealer 0: seat 1 leads G7, seat 2 plays R7, seat 0 plays B7
    assert single_suit_trick(["G7", "R7", "B7"], dealer=0) == 1
    assert single_suit_trick(["W", "W", "W"], dealer=1) == 2


def test_single_suit_has_no_trump_card():
    state = new_test_match(4, dealer=0, variants=["SINGLE_SUIT"])
    view = state.view(None)
    assert view.trump_card is None and view.trump_suit is None
    assert view.phase is Phase.BID


def test_single_suit_has_no_following():
    hands = [pile_hand(0, "B5"), pile_hand(1, "G9"), pile_hand(2, "R2")]
    state = new_test_match(3, dealer=2, variants=["SINGLE_SUIT"], deals=[dealing_order(hands, 2)])
    bid_all(state, [0, 0, 0])
    play(state, "B5")
    assert {m.card for m in state.legal_moves(1)} == set(hands[1])
    assert state.view(None).lead_suit is None


@pytest.mark.parametrize("players", [3, 4])
def test_single_suit_twelve_rounds_of_four_to_fifteen_cards_from_own_pile(players):
    config = MatchConfig.create("WIZARD", players, ["SINGLE_SUIT"], first_dealer=0)
    assert config.rounds == 12
    state = new_test_match(players, dealer=0, variants=["SINGLE_SUIT"])
    for r in range(1, 13):
        view = state.view(None)
        assert view.round == r and view.rounds == 12 and view.hand_size == r + 3
        assert view.trump_card is None
        for seat in range(players):
            hand = state.view(seat).hand
            assert len(hand) == r + 3
            assert all(c in ("W", "J") or c[0] == PILES[seat] for c in hand)
            assert hand.count("W") <= 1 and hand.count("J") <= 1
        finish_round(state)
    assert state.phase is Phase.FINISHED


def test_single_suit_with_three_players_leaves_yellow_out():
    hands = [pile_hand(0, "B1"), pile_hand(1, "G1"), ["Y1", "R1", "R2", "R3"]]
    with pytest.raises(DealError):
        new_test_match(3, dealer=2, variants=["SINGLE_SUIT"], deals=[dealing_order(hands, 2)])


def test_single_suit_stacked_deal_is_dealt_as_listed():
    hands = [pile_hand(0, "B9"), pile_hand(1, "W"), pile_hand(2, "J"), pile_hand(3, "Y13")]
    state = new_test_match(4, dealer=1, variants=["SINGLE_SUIT"], deals=[dealing_order(hands, 1)])
    for seat in range(4):
        assert sorted(state.view(seat).hand) == sorted(hands[seat])


@pytest.mark.parametrize(
    "hands",
    [
        pytest.param([pile_hand(0, "G5"), pile_hand(1, "G1"), pile_hand(2, "R1")], id="another seat's suit"),
        pytest.param([pile_hand(0, "B1"), ["G2", "G2", "G3", "G4"], pile_hand(2, "R1")], id="a card twice"),
        pytest.param([pile_hand(0, "B1"), ["G2", "W", "W", "G4"], pile_hand(2, "R1")], id="two wizards"),
    ],
)
def test_single_suit_stacked_deal_must_come_from_each_seats_pile(hands):
    with pytest.raises(DealError):
        new_test_match(3, dealer=2, variants=["SINGLE_SUIT"], deals=[dealing_order(hands, 2)])


def test_single_suit_stacked_deal_must_list_exactly_the_drawn_cards():
    hands = [pile_hand(0, "B1"), pile_hand(1, "G1"), pile_hand(2, "R1")]
    deal = dealing_order(hands, 2)
    with pytest.raises(DealError):
        new_test_match(3, dealer=2, variants=["SINGLE_SUIT"], deals=[deal[:-1]])
    with pytest.raises(DealError):
        new_test_match(3, dealer=2, variants=["SINGLE_SUIT"], deals=[deal + ["B13"]])
    with pytest.raises(DealError):
        new_test_match(3, dealer=2, variants=["SINGLE_SUIT"], deals=[stacked([["B1"], ["G1"], ["R1"]], "J", dealer=2)])


def test_single_suit_stacked_deal_is_checked_against_the_dealer_of_its_round():
    # round 2 (5 cards each) is dealt by seat 1 when seat 0 deals round 1
    hands = [pile_hand(0, "B1", 5), pile_hand(1, "G1", 5), pile_hand(2, "R1", 5)]
    good = new_test_match(3, dealer=0, variants=["SINGLE_SUIT"], deals=[[], dealing_order(hands, 1)])
    finish_round(good)
    assert sorted(good.view(2).hand) == sorted(hands[2])
    with pytest.raises(DealError, match="round 2"):
        new_test_match(3, dealer=0, variants=["SINGLE_SUIT"], deals=[[], dealing_order(hands, 0)])


def test_single_suit_with_plus_minus_one_uses_the_hand_size():
    state = new_test_match(3, dealer=2, variants=["SINGLE_SUIT", "PLUS_MINUS_ONE"])
    state.apply(0, Move(bid=1))
    state.apply(1, Move(bid=1))
    # four cards each in round 1: the dealer may not bid 2
    assert state.legal_moves(2) == [Move(bid=b) for b in (0, 1, 3, 4)]


# ================================================================ refused combinations
@pytest.mark.parametrize(
    ("variants", "names"),
    [
        (["HIDDEN_BIDS", "SECRET_BIDS"], ["HIDDEN_BIDS", "SECRET_BIDS"]),
        (["PLUS_MINUS_ONE", "HIDDEN_BIDS"], ["PLUS_MINUS_ONE", "HIDDEN_BIDS"]),
        (["PLUS_MINUS_ONE", "SECRET_BIDS"], ["PLUS_MINUS_ONE", "SECRET_BIDS"]),
    ],
)
def test_conflicting_bid_variants_are_refused_naming_both(variants, names):
    with pytest.raises(ConfigError) as caught:
        MatchConfig.create("WIZARD", 4, variants)
    for name in names:
        assert name in str(caught.value)


@pytest.mark.parametrize("players", [5, 6])
def test_single_suit_with_five_or_six_players_is_refused(players):
    with pytest.raises(ConfigError) as caught:
        MatchConfig.create("WIZARD", players, ["SINGLE_SUIT"])
    assert "SINGLE_SUIT" in str(caught.value) and str(players) in str(caught.value)


@pytest.mark.parametrize("ruleset", ["WIZARD_JUNIOR", "WIZARD_JUNIOR_CLASSIC"])
def test_single_suit_with_a_junior_ruleset_is_refused(ruleset):
    with pytest.raises(ConfigError) as caught:
        MatchConfig.create(ruleset, 4, ["SINGLE_SUIT"])
    assert "SINGLE_SUIT" in str(caught.value) and ruleset in str(caught.value)


@pytest.mark.parametrize(
    "variants",
    [
        ["PLUS_MINUS_ONE"], ["HIDDEN_BIDS"], ["SECRET_BIDS"], ["CLAIRVOYANCE"], ["SINGLE_SUIT"],
        ["PLUS_MINUS_ONE", "CLAIRVOYANCE"], ["HIDDEN_BIDS", "CLAIRVOYANCE"],
        ["SECRET_BIDS", "SINGLE_SUIT"], ["PLUS_MINUS_ONE", "SINGLE_SUIT"],
    ],
)
def test_sensible_combinations_are_accepted(variants):
    config = MatchConfig.create("WIZARD", 4, variants)
    assert {v.value for v in config.variants} == set(variants)


def test_unknown_variant_is_refused():
    with pytest.raises(ConfigError, match="NO_SUCH_VARIANT"):
        MatchConfig.create("WIZARD", 4, ["NO_SUCH_VARIANT"])
