"""sample_state (and sample_hands, its hands alone): engine states consistent with one seat's view.

For random points of random matches over every ruleset x player count x variant set, and for
every seat and a spectator: the sampled state shows the viewer the same view (all but
``seed_hash``), deals no card twice and none the view shows elsewhere, keeps every seat's
revealed voids, and plays on to the end of the match. Plus stacked deals for the void
constraint and the hidden bids, and an exact check that the deal is uniform.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import zlib
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.conftest import allowed_triples, bid_all, match_at_round, play
from tests.engine.test_properties import _label, deck_codes, expected_lead, pile_codes
from wizard import MatchConfig, MatchFinishedError, MatchState, MatchView, Move, Phase, Variant, new_match, sample_state
from wizard.cards import SUIT_MASK, card_code, cards_of, mask_of
from wizard.playout import playout
from wizard.record import state_to_bytes
from wizard.sampling import _deal_hidden, sample_hands

TRIPLES = allowed_triples()


def hands_of(state: MatchState) -> list[tuple[str, ...]]:
    """Every seat's hand, read through the views (CLAIRVOYANCE round 1: a neighbour's view)."""
    n = state.players
    hands = []
    for s in range(n):
        hand = state.view(s).seats[s].hand
        if hand is None:
            hand = state.view((s + 1) % n).seats[s].hand
        assert hand is not None
        hands.append(hand)
    return hands


def voids_of(view: MatchView) -> dict[int, set[str]]:
    """The suits each seat showed it lacks this round: it played another suit's card while a
    lead suit was set (RULES.md, following suit; none under SINGLE_SUIT)."""
    voids: dict[int, set[str]] = {s: set() for s in range(view.players)}
    if Variant.SINGLE_SUIT in view.variants:
        return voids
    for plays in [t.plays for t in view.completed_tricks] + [view.current_trick]:
        for i, p in enumerate(plays):
            lead = expected_lead([q.card for q in plays[:i]], single=False)
            if lead is not None and p.card not in ("W", "J") and p.card[0] != lead:
                voids[p.seat].add(lead)
    return voids


def check_sample(state: MatchState, viewer: int | None, sample_seed: int) -> MatchState:
    view = state.view(viewer)
    world = sample_state(view, random.Random(sample_seed))
    where = f"round {view.round} {view.phase.value}, viewer {viewer}, sample {sample_seed}"
    seen = world.view(viewer)
    assert seen == dataclasses.replace(view, seed_hash=world.seed_hash), where
    assert seen.to_dict() == dict(view.to_dict(), seedHash=world.seed_hash), where
    check_hands(view, hands_of(world), where)
    # sample_hands: hands alone, held to the same checks
    check_hands(view, [tuple(card_code(c) for c in cards_of(h)) for h in sample_hands(view, random.Random(sample_seed))],
                f"{where}, sample_hands")
    # hidden bids were filled in with legal guesses
    for s in range(view.players):
        bid = world.view(s).seats[s].bid
        if view.seats[s].bid is not None:
            assert bid == view.seats[s].bid, where
        if bid is not None:
            assert 0 <= bid <= view.hand_size, where
    # same rng seed, same sample
    assert state_to_bytes(sample_state(view, random.Random(sample_seed))) == state_to_bytes(world), where
    return world


def check_hands(view: MatchView, hands: list[tuple[str, ...]], where: str) -> None:
    """Every seat's hand in a sample agrees with the view: the shown hands kept, the right
    number of cards, the revealed voids kept, no card twice (hands + played cards + the
    turned card fit in the deck, or the piles)."""
    played = view.cards_played_this_round()
    single = Variant.SINGLE_SUIT in view.variants
    for s, hand in enumerate(hands):
        shown = view.seats[s].hand
        if shown is not None:
            assert hand == shown, f"{where}: seat {s}'s hand is shown, and was changed"
        assert len(hand) == view.hand_size - sum(p.seat == s for p in played_plays(view)), where
        if single:
            mine = [p.card for p in played_plays(view) if p.seat == s]
            assert Counter(hand) + Counter(mine) <= Counter(pile_codes(s)), f"{where}: seat {s} off its pile"
        else:
            assert not set(hand) & voids_of(view)[s] - {"W", "J"}, where
            assert not any(c[0] in voids_of(view)[s] for c in hand if c not in ("W", "J")), (
                f"{where}: seat {s} holds {hand} though it showed a void in {voids_of(view)[s]}"
            )
    used = Counter(c for h in hands for c in h) + Counter(played)
    if view.trump_card is not None:
        used[view.trump_card] += 1
    if not single:
        assert used <= Counter(deck_codes(view.ruleset)), f"{where}: a card twice: {used - Counter(deck_codes(view.ruleset))}"


def played_plays(view: MatchView) -> list:
    return [p for t in view.completed_tricks for p in t.plays] + list(view.current_trick)


def play_to_random_point(state: MatchState, rng: random.Random) -> None:
    """Random legal moves up to a random round, then on into it for a random while."""
    stop_round = rng.randint(1, state.config.rounds)
    while not state.is_finished and (state.round < stop_round or rng.random() < 0.92):
        seat = rng.choice(state.awaiting())
        state.apply_action(seat, rng.choice(state.legal_actions(seat)))
        if state.round > stop_round:
            break


def check_every_viewer(state: MatchState, rng: random.Random) -> None:
    if state.is_finished:
        with pytest.raises(MatchFinishedError):
            sample_state(state.view(0), rng)
        return
    for viewer in [None, *range(state.players)]:
        world = check_sample(state, viewer, rng.randrange(1 << 30))
        outcome = playout(world, rng)
        assert world.is_finished and len(outcome.scores) == state.players


@pytest.mark.parametrize("triple", TRIPLES, ids=_label)
def test_every_configuration_samples_consistent_states(triple) -> None:
    ruleset, players, variants = triple
    rng = random.Random(zlib.crc32(_label(triple).encode()))
    for k in range(2):
        state = new_match(MatchConfig.create(ruleset, players, variants), seed=f"sampling-{k}")
        play_to_random_point(state, rng)
        check_every_viewer(state, rng)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    triple=st.sampled_from(TRIPLES),
    seed=st.text(min_size=1, max_size=20),
    rng_seed=st.integers(0, 2**32 - 1),
)
def test_sampled_states_agree_with_the_view_at_random_points(triple, seed, rng_seed) -> None:
    ruleset, players, variants = triple
    state = new_match(MatchConfig.create(ruleset, players, variants), seed=seed)
    rng = random.Random(rng_seed)
    play_to_random_point(state, rng)
    check_every_viewer(state, rng)


def test_a_seat_that_did_not_follow_suit_is_never_dealt_that_suit() -> None:
    hands = [["B1", "G5", "R3"], ["B9", "R11", "Y2"], ["G7", "G8", "Y13"], ["B4", "R2", "J"]]
    state = match_at_round(3, hands, trump="Y1", dealer=3)
    bid_all(state, [1, 1, 1, 0])
    play(state, "B1", "B9", "G7")  # seat 2 shows no blue
    view = state.view(0)
    assert voids_of(view) == {0: set(), 1: set(), 2: {"B"}, 3: set()}
    blue_seen = Counter()
    for k in range(300):
        world = sample_state(view, random.Random(k))
        world_hands = hands_of(world)
        assert world_hands[0] == view.hand
        assert len(world_hands[2]) == 2 and len(world_hands[1]) == 2 and len(world_hands[3]) == 3
        assert not any(c[0] == "B" for c in world_hands[2] if c not in ("W", "J")), world_hands[2]
        blue_seen.update(s for s in (1, 3) for c in world_hands[s] if c[0] == "B")
        play(world, "B4" if "B4" in world_hands[3] else world.legal_moves(3)[0].card)
        playout(world, random.Random(k))
    assert blue_seen[1] and blue_seen[3], "the other seats may still hold blue"


def test_hidden_bids_are_filled_in_with_legal_guesses() -> None:
    for variant in ("HIDDEN_BIDS", "SECRET_BIDS"):
        state = match_at_round(4, dealer=1, players=4, variants=[variant])
        state.apply(0, Move(bid=2))
        state.apply(3, Move(bid=1))
        view = state.view(2)
        assert [s.bid for s in view.seats] == [None, None, None, None] and view.awaiting == (1, 2)
        for k in range(20):
            world = check_sample(state, 2, k)
            assert world.awaiting() == (1, 2)
            assert world.view(0).seats[0].bid is not None and world.view(3).seats[3].bid is not None
        if variant == "SECRET_BIDS":
            bid_all(state, [2, 0, 3, 1])
            play(state, state.legal_moves(state.to_act)[0].card)
            view = state.view(1)
            assert [s.bid for s in view.seats] == [None, 0, None, None]
            for k in range(20):
                world = check_sample(state, 1, k)
                guesses = [world.view(s).seats[s].bid for s in range(4)]
                assert guesses[1] == 0 and all(0 <= b <= 4 for b in guesses)
                playout(world, random.Random(k))


def test_the_deal_of_hidden_cards_is_uniform_among_those_keeping_the_voids() -> None:
    """Every deal of 8 cards to three hidden hands of 2 (and 2 left undealt) in which seat 0
    holds no blue and seat 1 no green, counted exactly, comes up equally often; the fallback
    deal (no rejection tries) keeps the voids too."""
    pool = mask_of([0, 1, 2, 13, 14, 26, 52, 56])  # B1 B2 B3 G1 G2 R1 W J
    needs = [(0, 2, SUIT_MASK[0]), (1, 2, SUIT_MASK[1]), (2, 2, 0)]
    cards = list(cards_of(pool))
    feasible = set()
    for a, b, c in itertools.product(itertools.combinations(cards, 2), repeat=3):
        masks = (mask_of(a), mask_of(b), mask_of(c))
        if len(set(a + b + c)) == 6 and not masks[0] & SUIT_MASK[0] and not masks[1] & SUIT_MASK[1]:
            feasible.add(masks)
    assert len(feasible) == 558
    rng = random.Random(1)
    draws = 60_000
    counts = Counter(tuple(dealt[s] for s in range(3)) for dealt in (_deal_hidden(pool, needs, rng) for _ in range(draws)))
    assert set(counts) == feasible
    expected = draws / len(feasible)
    chi2 = sum((counts[f] - expected) ** 2 / expected for f in feasible)
    assert chi2 < 700, f"chi-square {chi2:.0f} on 557 degrees of freedom: not uniform"  # p < 1e-4
    for _ in range(200):
        dealt = _deal_hidden(pool, needs, rng, tries=0)
        assert tuple(dealt[s] for s in range(3)) in feasible


def test_a_finished_match_has_nothing_to_sample() -> None:
    state = new_match(MatchConfig.create("WIZARD_JUNIOR", 6), seed="done")
    playout(state, random.Random(1))
    with pytest.raises(MatchFinishedError, match="over"):
        sample_state(state.view(None), random.Random(1))


def test_moves_made_counts_earlier_rounds_and_phase_is_kept() -> None:
    state = match_at_round(5, dealer=2, players=5)
    bid_all(state, [1, 0, 2, 1, 1])
    view = state.view(4)
    world = sample_state(view, random.Random(3))
    assert world.moves_made == view.moves_made == state.moves_made
    assert world.phase is Phase.PLAY and world.round == 5 and world.scores == state.scores
