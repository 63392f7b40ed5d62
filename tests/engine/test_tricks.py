"""Who takes a trick, what may be played into it, and who leads (RULES.md, "Playing tricks")."""

from __future__ import annotations

import pytest

from tests.engine.conftest import bid_all, match_at_round, new_test_match, play, refused, stacked
from wizard import IllegalMoveError, Move, Phase, Suit


def round_one_trick(cards: list[str], trump: str) -> int:
    """Deal ``cards[i]`` to seat ``i`` in round 1 (seat 0 leads), play them in order and
    return the seat that took the trick."""
    n = len(cards)
    state = new_test_match(n, dealer=n - 1, deals=[stacked([[c] for c in cards], trump, dealer=n - 1)])
    bid_all(state, [0] * n)
    assert state.to_act == 0
    play(state, *cards)
    view = state.view(None)
    assert view.round == 2, "the one trick of round 1 ends the round"
    trick = view.last_trick
    assert [p.card for p in trick.plays] == cards
    return trick.winner


# ---------------------------------------------------------------- winner of a trick
@pytest.mark.parametrize(
    ("cards", "trump", "winner"),
    [
        (["R5", "W", "B2", "G3"], "G1", 1),  # a Wizard beats everything
        (["R5", "W", "W", "R13"], "G1", 1),  # two Wizards: the first
        (["W", "R5", "W", "R13"], "G1", 0),  # a led Wizard beats a later one
        (["G13", "G12", "W", "G11"], "G1", 2),  # a Wizard beats the highest trump
        (["R5", "W", "J", "W"], "J", 1),  # no trump: still the first Wizard
    ],
)
def test_first_wizard_wins(cards, trump, winner):
    assert round_one_trick(cards, trump) == winner


@pytest.mark.parametrize(
    ("cards", "trump", "winner"),
    [
        (["R5", "R9", "B2", "B3"], "B10", 3),  # highest trump, not highest lead card
        (["R13", "B1", "R12", "G13"], "B10", 1),  # the lowest trump beats the highest lead card
        (["B2", "R13", "G9", "Y1"], "B10", 0),  # trump led: highest trump
        (["R3", "B7", "B9", "B8"], "B10", 2),
    ],
)
def test_highest_trump_wins(cards, trump, winner):
    assert round_one_trick(cards, trump) == winner


@pytest.mark.parametrize(
    ("cards", "trump", "winner"),
    [
        (["R5", "R9", "G13", "R2"], "J", 1),  # no trump: an off-suit 13 loses
        (["R5", "R9", "G13", "R2"], "Y10", 1),  # trump turned, none played
        (["G2", "R13", "B13", "Y13"], "J", 0),  # only the leader followed the lead
        (["R5", "J", "R6", "G12"], "B1", 2),
    ],
)
def test_highest_of_lead_suit_wins(cards, trump, winner):
    assert round_one_trick(cards, trump) == winner


def test_all_jesters_first_jester_wins_with_four_players():
    assert round_one_trick(["J", "J", "J", "J"], "R3") == 0


def test_all_jesters_first_jester_wins_with_three_players():
    assert round_one_trick(["J", "J", "J"], "R3") == 0


def test_all_jesters_the_first_played_wins_not_the_lowest_seat():
    # dealer 0: seat 1 leads, so seat 1's Jester is the first one
    deal = stacked([["J"], ["J"], ["J"]], "R3", dealer=0)
    state = new_test_match(3, dealer=0, deals=[deal])
    bid_all(state, [0, 0, 0])
    play(state, "J", "J", "J")
    assert state.view(None).last_trick.winner == 1


# ---------------------------------------------------------------- Jester led
def test_jester_led_then_wizard_wins():
    assert round_one_trick(["J", "W", "R5", "R13"], "B1") == 1


def test_jester_led_then_jester_then_suit_card_sets_the_lead_suit():
    # R5 is the first suit card, so red is the lead suit and R13 takes the trick
    assert round_one_trick(["J", "J", "R5", "R13"], "J") == 3


def test_jester_led_first_suit_card_sets_lead_and_off_suit_loses():
    assert round_one_trick(["J", "R3", "G13", "J"], "J") == 1


def test_jester_led_first_suit_card_beaten_by_trump():
    assert round_one_trick(["J", "R3", "B1", "R13"], "B9") == 2


def test_lead_suit_open_while_only_jesters_played_then_set_by_first_suit_card():
    hands = [["J", "B4"], ["J", "Y5"], ["G5", "R5"], ["G9", "R1"]]
    state = match_at_round(2, hands, "Y13", dealer=3)
    bid_all(state, [0, 0, 0, 0])
    assert state.to_act == 0
    play(state, "J")
    assert state.view(None).lead_suit is None
    # seat 1 may play anything while only Jesters are down
    assert {m.card for m in state.legal_moves(1)} == {"J", "Y5"}
    play(state, "J")
    assert state.view(None).lead_suit is None
    assert {m.card for m in state.legal_moves(2)} == {"G5", "R5"}
    play(state, "G5")
    assert state.view(None).lead_suit is Suit.GREEN
    # seat 3 holds green, so it must follow green
    assert [m.card for m in state.legal_moves(3)] == ["G9"]
    refused(state, 3, Move(card="R1"), IllegalMoveError)
    play(state, "G9")
    assert state.view(None).last_trick.winner == 3


def test_jester_led_then_wizard_leaves_no_lead_suit():
    hands = [["J", "B4"], ["W", "Y5"], ["G5", "R5"], ["G9", "R1"]]
    state = match_at_round(2, hands, "Y13", dealer=3)
    bid_all(state, [0, 0, 0, 0])
    play(state, "J", "W", "G5")
    assert state.view(None).lead_suit is None
    # seat 3 holds green but need not follow it: the first non-Jester was a Wizard
    assert {m.card for m in state.legal_moves(3)} == {"G9", "R1"}
    play(state, "R1")
    assert state.view(None).last_trick.winner == 1


# ---------------------------------------------------------------- Wizard led
def test_wizard_led_anyone_may_play_anything_and_first_wizard_wins():
    hands = [["W", "B4"], ["R7", "B9"], ["W", "R2"]]
    state = match_at_round(2, hands, "B13", dealer=2)
    bid_all(state, [0, 0, 0])
    play(state, "W")
    assert state.view(None).lead_suit is None
    assert {m.card for m in state.legal_moves(1)} == {"R7", "B9"}
    play(state, "B9")  # a trump, after a Wizard: no lead suit, and it does not win
    assert {m.card for m in state.legal_moves(2)} == {"W", "R2"}
    play(state, "W")
    assert state.view(None).last_trick.winner == 0


# ---------------------------------------------------------------- following suit
def following_state():
    """Round 3, 3 players, seat 0 leads R5; seat 1 holds red, seat 2 does not."""
    hands = [["R5", "B2", "G2"], ["R9", "B7", "W"], ["G8", "B10", "J"]]
    state = match_at_round(3, hands, "Y1", dealer=2)
    bid_all(state, [0, 0, 0])
    play(state, "R5")
    return state


def test_holding_the_lead_suit_only_lead_suit_wizard_and_jester_are_legal():
    state = following_state()
    assert {m.card for m in state.legal_moves(1)} == {"R9", "W"}
    assert state.view(1).legal_moves == (Move(card="R9"), Move(card="W"))


def test_holding_the_lead_suit_off_suit_card_is_refused():
    state = following_state()
    error = refused(state, 1, Move(card="B7"), IllegalMoveError)
    assert set(error.legal) == {Move(card="R9"), Move(card="W")}


def test_wizard_may_be_played_while_holding_the_lead_suit():
    state = following_state()
    play(state, "W")
    assert state.to_act == 2


def test_without_the_lead_suit_anything_is_legal():
    state = following_state()
    play(state, "R9")
    assert {m.card for m in state.legal_moves(2)} == {"G8", "B10", "J"}


def test_jester_may_be_played_while_holding_the_lead_suit():
    hands = [["G3", "B2"], ["G4", "J"], ["Y1", "Y2"]]
    state = match_at_round(2, hands, "R1", dealer=2)
    bid_all(state, [0, 0, 0])
    play(state, "G3")
    assert {m.card for m in state.legal_moves(1)} == {"G4", "J"}
    play(state, "J")
    assert state.to_act == 2


def test_two_wizards_in_hand_are_listed_once():
    hands = [["R1", "B2"], ["W", "W"], ["Y1", "Y2"]]
    state = match_at_round(2, hands, "G1", dealer=2)
    bid_all(state, [0, 0, 0])
    play(state, "R1")
    assert state.legal_moves(1) == [Move(card="W")]


# ---------------------------------------------------------------- who leads
@pytest.mark.parametrize("dealer", [0, 1, 2, 3])
def test_player_left_of_dealer_leads_the_first_trick(dealer):
    deal = stacked([["B1"], ["B2"], ["B3"], ["B4"]], "G1", dealer=dealer)
    state = new_test_match(4, dealer=dealer, deals=[deal])
    bid_all(state, [0, 0, 0, 0])
    assert state.phase is Phase.PLAY
    assert state.to_act == (dealer + 1) % 4
    assert state.view(None).lead_suit is None


def test_trick_winner_leads_the_next_trick():
    # dealer 0: seat 1 leads; seat 3's R13 wins the first trick, so seat 3 leads the second
    hands = [["R2", "B1"], ["R5", "B2"], ["R9", "B3"], ["R13", "G4"]]
    state = match_at_round(2, hands, "Y1", dealer=0)
    bid_all(state, [0, 0, 0, 0])
    assert state.to_act == 1
    play(state, "R5", "R9", "R13", "R2")
    view = state.view(None)
    assert view.last_trick.leader == 1
    assert view.last_trick.winner == 3
    assert state.to_act == 3
    play(state, "G4", "B1", "B2", "B3")
    assert state.view(None).round_results[-1].seats[3].tricks == 2


def test_completed_tricks_list_plays_in_order_with_winner():
    hands = [["R2", "B1"], ["R5", "B2"], ["R9", "B3"], ["R13", "G4"]]
    state = match_at_round(2, hands, "Y1", dealer=0)
    bid_all(state, [0, 0, 0, 0])
    play(state, "R5", "R9")
    view = state.view(None)
    assert [(p.seat, p.card) for p in view.current_trick] == [(1, "R5"), (2, "R9")]
    assert view.lead_suit is Suit.RED
    play(state, "R13", "R2")
    (trick,) = state.view(None).completed_tricks
    assert trick.leader == 1 and trick.winner == 3
    assert [(p.seat, p.card) for p in trick.plays] == [(1, "R5"), (2, "R9"), (3, "R13"), (0, "R2")]
    assert state.view(None).seats[3].tricks == 1
