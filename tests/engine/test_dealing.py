"""Seats, dealer, rounds, dealing and trump (RULES.md, "Seats, dealer, rounds" and
"Dealing and trump"), and the checks on stacked decks."""

from __future__ import annotations

import random

import pytest

from tests.engine.conftest import (
    SEED,
    bid_all,
    finish_round,
    full_deck,
    match_at_round,
    new_test_match,
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
    new_match,
)
from wizard.playout import playout


# ---------------------------------------------------------------- dealing order
def test_card_k_goes_to_seat_left_of_dealer_plus_k():
    # written out by hand, not with the stacked() helper: dealer 1 of 3 seats
    deck = ["B1", "B2", "B3", "G5"] + [c for c in full_deck() if c not in ("B1", "B2", "B3", "G5")]
    state = new_test_match(3, dealer=1, deals=[deck])
    assert state.view(2).hand == ("B1",)
    assert state.view(0).hand == ("B2",)
    assert state.view(1).hand == ("B3",)
    assert state.view(None).trump_card == "G5"


def test_round_two_deals_round_robin_from_left_of_its_dealer():
    # round 2, dealer 2 of 3: cards 0..5 go to seats 0, 1, 2, 0, 1, 2; card 6 is turned up
    first = ["R1", "R2", "R3", "R4", "R5", "R6", "Y9"]
    deck = first + [c for c in full_deck() if c not in first]
    state = new_test_match(3, dealer=1, deals=[[], deck])
    finish_round(state)
    assert state.round == 2 and state.dealer == 2
    assert state.view(0).hand == ("R1", "R4")
    assert state.view(1).hand == ("R2", "R5")
    assert state.view(2).hand == ("R3", "R6")
    assert state.view(None).trump_card == "Y9"


def test_seat_sees_only_its_own_hand():
    state = new_test_match(3, dealer=0, deals=[stacked([["B1"], ["B2"], ["B3"]], "G1", dealer=0)])
    view = state.view(1)
    assert view.hand == ("B2",)
    assert view.seats[1].hand == ("B2",)
    assert view.seats[0].hand is None and view.seats[2].hand is None
    spectator = state.view(None)
    assert spectator.hand is None
    assert all(s.hand is None for s in spectator.seats)


# ---------------------------------------------------------------- trump
def test_suit_card_turned_up_makes_its_suit_trump():
    state = new_test_match(3, dealer=0, deals=[stacked([["B1"], ["B2"], ["B3"]], "G7", dealer=0)])
    view = state.view(None)
    assert view.trump_card == "G7"
    assert view.trump_suit is Suit.GREEN
    assert view.phase is Phase.BID


def test_jester_turned_up_means_no_trump():
    state = new_test_match(3, dealer=0, deals=[stacked([["B1"], ["B2"], ["B3"]], "J", dealer=0)])
    view = state.view(None)
    assert view.trump_card == "J"
    assert view.trump_suit is None
    assert view.phase is Phase.BID


def wizard_turned(dealer: int = 1):
    deal = stacked([["B1"], ["R2"], ["G3"], ["Y4"]], "W", dealer=dealer)
    return new_test_match(4, dealer=dealer, deals=[deal])


def test_wizard_turned_up_dealer_chooses_trump_first():
    state = wizard_turned(dealer=1)
    view = state.view(1)
    assert view.phase is Phase.CHOOSE_TRUMP
    assert view.trump_card == "W" and view.trump_suit is None
    assert state.to_act == 1
    assert state.awaiting() == (1,)
    assert view.hand == ("R2",)  # the dealer chooses after seeing their own hand
    assert set(state.legal_moves(1)) == {Move(trump=s) for s in Suit}


@pytest.mark.parametrize("seat", [0, 2, 3])
def test_wizard_turned_up_only_dealer_may_act(seat):
    state = wizard_turned(dealer=1)
    assert state.legal_moves(seat) == []
    refused(state, seat, Move(trump=Suit.RED), NotYourTurnError)
    refused(state, seat, Move(bid=0), NotYourTurnError)


def test_wizard_turned_up_dealer_may_not_bid_before_choosing():
    state = wizard_turned(dealer=1)
    error = refused(state, 1, Move(bid=0), IllegalMoveError)
    assert set(error.legal) == {Move(trump=s) for s in Suit}


def test_after_dealer_chooses_trump_bidding_starts_left_of_dealer():
    state = wizard_turned(dealer=1)
    state.apply(1, Move(trump=Suit.RED))
    view = state.view(None)
    assert view.trump_suit is Suit.RED
    assert view.trump_card == "W"
    assert view.phase is Phase.BID
    assert state.to_act == 2


def test_chosen_trump_counts_as_trump_in_play():
    state = wizard_turned(dealer=1)
    state.apply(1, Move(trump=Suit.YELLOW))
    bid_all(state, [0, 0, 0, 0])
    # seat 2 leads G3; seat 3's Y4 is trump and takes the trick
    for seat, card in [(2, "G3"), (3, "Y4"), (0, "B1"), (1, "R2")]:
        state.apply(seat, Move(card=card))
    assert state.view(None).last_trick.winner == 3


@pytest.mark.parametrize(("players", "rounds"), [(3, 20), (4, 15), (5, 12), (6, 10)])
def test_last_round_of_wizard_has_no_trump(players, rounds):
    state = match_at_round(rounds, dealer=0, players=players)
    view = state.view(None)
    assert view.round == view.rounds == rounds
    assert view.trump_card is None and view.trump_suit is None
    assert view.phase is Phase.BID
    assert sum(len(state.view(s).hand) for s in range(players)) == 60


def test_round_before_the_last_of_wizard_turns_a_card():
    state = match_at_round(14, dealer=0, players=4)
    assert state.view(None).trump_card is not None


@pytest.mark.parametrize("ruleset", ["WIZARD_JUNIOR", "WIZARD_JUNIOR_CLASSIC"])
def test_six_players_last_junior_round_has_no_trump(ruleset):
    hands = [full_deck("JUNIOR")[6 * i : 6 * i + 6] for i in range(6)]
    state = match_at_round(6, hands, None, dealer=2, ruleset=ruleset)
    view = state.view(None)
    assert view.round == view.rounds == 6
    assert view.trump_card is None and view.trump_suit is None
    assert view.phase is Phase.BID
    assert state.view(3).hand == tuple(hands[3])


@pytest.mark.parametrize("ruleset", ["WIZARD_JUNIOR", "WIZARD_JUNIOR_CLASSIC"])
def test_five_players_last_junior_round_turns_up_the_one_card_left(ruleset):
    deck = full_deck("JUNIOR")
    deck.remove("G4")
    hands = [deck[7 * i : 7 * i + 7] for i in range(5)]
    state = match_at_round(7, hands, "G4", dealer=4, ruleset=ruleset)
    view = state.view(None)
    assert view.round == view.rounds == 7
    assert view.trump_card == "G4"
    assert view.trump_suit is Suit.GREEN


# ---------------------------------------------------------------- dealer and rounds
@pytest.mark.parametrize("first", [0, 2])
def test_dealer_passes_one_seat_left_each_round(first):
    state = new_test_match(3, dealer=first)
    for r in range(1, 8):
        assert state.round == r
        assert state.dealer == (first + r - 1) % 3
        assert state.view(0).dealer == state.dealer
        finish_round(state)


def test_first_dealer_from_config():
    for dealer in range(5):
        assert new_test_match(5, dealer=dealer).dealer == dealer


def test_first_dealer_from_seed_is_deterministic_and_varies_with_the_seed():
    config = MatchConfig.create("WIZARD", 4)
    dealers = {}
    for i in range(40):
        seed = f"dealer-{i}"
        dealer = new_match(config, seed=seed).dealer
        assert dealer == new_match(config, seed=seed).dealer
        assert 0 <= dealer < 4
        dealers[seed] = dealer
    assert len(set(dealers.values())) > 1, "the first dealer must come from the seed"


def test_same_seed_deals_the_same_hands():
    config = MatchConfig.create("WIZARD", 4)
    a, b = new_match(config, seed="same"), new_match(config, seed="same")
    assert [a.view(s).hand for s in range(4)] == [b.view(s).hand for s in range(4)]
    assert a.view(None).trump_card == b.view(None).trump_card


def test_empty_rounds_of_deals_are_shuffled_from_the_seed_and_stack_nothing():
    plain = MatchConfig.create("WIZARD", 4, first_dealer=1)
    assert plain.stacked is False
    for deals in ([], [[]], [[], [], []]):
        config = MatchConfig.create("WIZARD", 4, first_dealer=1, deals=deals)
        assert config.stacked is False, deals
        a, b = new_match(config, seed="empty"), new_match(plain, seed="empty")
        assert [a.view(s).hand for s in range(4)] == [b.view(s).hand for s in range(4)]
    assert MatchConfig.create("WIZARD", 4, first_dealer=1, deals=[[], full_deck("WIZARD")]).stacked is True


@pytest.mark.parametrize(
    ("ruleset", "players", "rounds"),
    [
        ("WIZARD", 3, 20), ("WIZARD", 4, 15), ("WIZARD", 5, 12), ("WIZARD", 6, 10),
        ("WIZARD_JUNIOR", 3, 8), ("WIZARD_JUNIOR", 4, 8), ("WIZARD_JUNIOR", 5, 7), ("WIZARD_JUNIOR", 6, 6),
        ("WIZARD_JUNIOR_CLASSIC", 3, 12), ("WIZARD_JUNIOR_CLASSIC", 4, 9),
        ("WIZARD_JUNIOR_CLASSIC", 5, 7), ("WIZARD_JUNIOR_CLASSIC", 6, 6),
    ],
)
def test_round_count_and_hand_sizes(ruleset, players, rounds):
    config = MatchConfig.create(ruleset, players, first_dealer=0)
    assert config.rounds == rounds
    state = new_match(config, seed=SEED)
    assert state.view(None).rounds == rounds
    for r in range(1, rounds + 1):
        assert state.round == r
        assert state.view(None).hand_size == r
        assert all(len(state.view(s).hand) == r for s in range(players))
        finish_round(state)
    assert state.phase is Phase.FINISHED
    assert len(state.view(None).round_results) == rounds


def test_match_ends_after_last_round_via_playout():
    state = new_test_match(4, dealer=0)
    outcome = playout(state, random.Random(3))
    view = state.view(None)
    assert view.phase is Phase.FINISHED
    assert [r.round for r in view.round_results] == list(range(1, 16))
    assert outcome.scores == state.scores


# ---------------------------------------------------------------- bad configurations
@pytest.mark.parametrize("players", [0, 1, 2, 7, 10, -3])
def test_players_outside_three_to_six_are_refused(players):
    with pytest.raises(ConfigError, match="3 to 6"):
        MatchConfig.create("WIZARD", players)


@pytest.mark.parametrize("players", [3, 4, 5, 6])
def test_players_three_to_six_are_accepted(players):
    assert MatchConfig.create("WIZARD", players).players == players


def test_first_dealer_outside_the_seats_is_refused():
    with pytest.raises(ConfigError):
        MatchConfig.create("WIZARD", 4, first_dealer=4)


def good_deck():
    return stacked([["B1"], ["B2"], ["B3"]], "G1", dealer=0)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda d: d[:-1], id="one card short"),
        pytest.param(lambda d: d + ["W"], id="one card too many"),
        pytest.param(lambda d: d[:10], id="only the start"),
        pytest.param(lambda d: [d[1]] + d[1:], id="a card twice"),
        pytest.param(lambda d: ["J"] + [c for c in d[1:] if c != "B1"] + ["J"], id="a fifth jester"),
        pytest.param(lambda d: ["B14"] + d[1:], id="unknown code B14"),
        pytest.param(lambda d: ["X1"] + d[1:], id="unknown code X1"),
        pytest.param(lambda d: [""] + d[1:], id="empty code"),
    ],
)
def test_bad_stacked_deck_is_refused(change):
    deck = change(good_deck())
    with pytest.raises(DealError):
        new_test_match(3, dealer=0, deals=[deck])


def test_junior_stacked_deck_must_be_the_36_card_deck():
    with pytest.raises(DealError):
        new_test_match(3, dealer=0, ruleset="WIZARD_JUNIOR", deals=[good_deck()])
    junior = full_deck("JUNIOR")
    junior[0] = "B9"  # not a junior card
    with pytest.raises(DealError):
        new_test_match(3, dealer=0, ruleset="WIZARD_JUNIOR", deals=[junior])
    state = new_test_match(3, dealer=0, ruleset="WIZARD_JUNIOR", deals=[full_deck("JUNIOR")])
    assert state.view(1).hand == ("B1",)


def test_bad_stacked_deck_in_a_later_round_is_refused_at_creation():
    with pytest.raises(DealError, match="round 3"):
        new_test_match(3, dealer=0, deals=[[], [], good_deck()[:-1]])


def test_more_stacked_rounds_than_the_match_has_are_refused():
    with pytest.raises(ConfigError):
        new_test_match(6, dealer=0, deals=[good_deck()] * 11)


def test_stacked_deck_is_a_deal_error_and_a_config_error():
    assert issubclass(DealError, ConfigError)
