"""Property tests: random full matches over every ruleset x player count x allowed variant set.

Every match is checked move by move against an independent reading of RULES.md (turn order,
legal moves, trick winners, the trump card, scoring) and against the engine's own promises
(serialisation round-trips exactly, copies are independent, records replay to the same
final state, a 6-player WIZARD state fits in 2 KB).

The move choices come from a seeded ``random.Random``: a failing example prints the
(ruleset, players, variants), the match seed and the rng seed, which replay it exactly.
"""

from __future__ import annotations

import itertools
import json
import random
import zlib
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.conftest import allowed_triples
from wizard import (
    IllegalMoveError,
    MatchConfig,
    MatchRecord,
    MatchState,
    Move,
    NotYourTurnError,
    Phase,
    Ruleset,
    Variant,
    new_match,
)
from wizard.moves import move_of_action
from wizard.playout import playout
from wizard.record import record_of, state_from_bytes, state_to_bytes

# ----------------------------------------------------------------------------- RULES.md, restated

ROUNDS = {
    Ruleset.WIZARD: {3: 20, 4: 15, 5: 12, 6: 10},
    Ruleset.WIZARD_JUNIOR: {3: 8, 4: 8, 5: 7, 6: 6},
    Ruleset.WIZARD_JUNIOR_CLASSIC: {3: 12, 4: 9, 5: 7, 6: 6},
}
CHIPS = {Ruleset.WIZARD_JUNIOR}
SPECIALS = ("W", "J")


def deck_codes(ruleset: Ruleset) -> list[str]:
    top, specials = (13, 4) if ruleset is Ruleset.WIZARD else (8, 2)
    return [f"{s}{r}" for s in "BGRY" for r in range(1, top + 1)] + ["W"] * specials + ["J"] * specials


def pile_codes(seat: int) -> list[str]:
    """SINGLE_SUIT: seat i's own 15 cards."""
    return [f"{'BGRY'[seat]}{r}" for r in range(1, 14)] + ["W", "J"]


def rank(code: str) -> int:
    """Jester 0, ranks 1-13, Wizard 14 (the SINGLE_SUIT values)."""
    return 14 if code == "W" else 0 if code == "J" else int(code[1:])


def points(ruleset: Ruleset, bid: int, tricks: int) -> int:
    if ruleset in CHIPS:
        return (bid if bid else 1) if bid == tricks else 0
    return 20 + 10 * tricks if bid == tricks else -10 * abs(tricks - bid)


def expected_winner(codes: list[str], trump: str | None, single: bool) -> int:
    """Position (in play order) of the card that takes a full trick, per RULES.md."""
    if single:
        best = 0
        for i, c in enumerate(codes):
            if rank(c) > rank(codes[best]):
                best = i
        return best
    if "W" in codes:
        return codes.index("W")
    if trump is not None:
        trumps = [i for i, c in enumerate(codes) if c not in SPECIALS and c[0] == trump]
        if trumps:
            return max(trumps, key=lambda i: rank(codes[i]))
    lead = next((c for c in codes if c != "J"), None)
    if lead is None:
        return 0
    return max((i for i, c in enumerate(codes) if c not in SPECIALS and c[0] == lead[0]), key=lambda i: rank(codes[i]))


def expected_lead(trick: list[str], single: bool) -> str | None:
    """The lead suit letter of a trick so far (None: none yet, Wizard led, or SINGLE_SUIT)."""
    if single:
        return None
    first = next((c for c in trick if c != "J"), None)
    return None if first is None or first == "W" else first[0]


def expected_playable(hand: tuple[str, ...], trick: list[str], single: bool) -> set[str]:
    lead = expected_lead(trick, single)
    if lead is None:
        return set(hand)
    follow = {c for c in hand if c not in SPECIALS and c[0] == lead}
    return follow | {c for c in hand if c in SPECIALS} if follow else set(hand)


# ----------------------------------------------------------------------------- configurations

TRIPLES = allowed_triples()


def _label(triple: tuple[Ruleset, int, tuple[Variant, ...]]) -> str:
    ruleset, players, variants = triple
    return f"{ruleset.value}-{players}-" + ("+".join(v.value for v in variants) or "plain")


def test_allowed_variant_sets_are_exactly_the_ones_rules_md_allows() -> None:
    """The enumeration the property tests sample from: refused exactly per RULES.md."""
    V = Variant
    for ruleset in Ruleset:
        for players in range(3, 7):
            for k in range(len(Variant) + 1):
                for combo in itertools.combinations(list(Variant), k):
                    vs = set(combo)
                    forbidden = (
                        {V.HIDDEN_BIDS, V.SECRET_BIDS} <= vs
                        or (V.PLUS_MINUS_ONE in vs and vs & {V.HIDDEN_BIDS, V.SECRET_BIDS})
                        or (V.SINGLE_SUIT in vs and (players > 4 or ruleset is not Ruleset.WIZARD))
                        or {V.CLAIRVOYANCE, V.SINGLE_SUIT} <= vs
                    )
                    allowed = (ruleset, players, combo) in TRIPLES
                    assert allowed == (not forbidden), (ruleset, players, combo)
    assert len(TRIPLES) == 104


# ----------------------------------------------------------------------------- the checker


def assert_same_state(a: MatchState, b: MatchState, where: str) -> None:
    """Same bytes, same views for every seat and a spectator, same legal moves."""
    assert state_to_bytes(a) == state_to_bytes(b), where
    for seat in [None, *range(a.players)]:
        assert a.view(seat) == b.view(seat), f"{where}: view of {seat}"
        assert a.view(seat).to_dict() == b.view(seat).to_dict(), f"{where}: view of {seat}"
        if seat is not None:
            assert a.legal_moves(seat) == b.legal_moves(seat), f"{where}: legal moves of {seat}"
            assert a.legal_actions(seat) == b.legal_actions(seat), f"{where}: legal actions of {seat}"
    assert a.awaiting() == b.awaiting(), where
    assert (a.phase, a.round, a.dealer, a.to_act, a.scores) == (b.phase, b.round, b.dealer, b.to_act, b.scores)


def check_bytes_roundtrip_and_copy(state: MatchState, rng: random.Random, where: str) -> None:
    data = state_to_bytes(state)
    restored = state_from_bytes(data)
    assert state_to_bytes(restored) == data, f"{where}: from_bytes/to_bytes is not exact"
    assert_same_state(state, restored, where)
    # copy() is independent: playing the copy out leaves the original untouched, and the
    # restored state, played with the same rng, ends exactly like the copy.
    copy = state.copy()
    assert state_to_bytes(copy) == data
    k = rng.randrange(1 << 30)
    outcome = playout(copy, random.Random(k))
    assert state_to_bytes(state) == data, f"{where}: playing a copy changed the original"
    assert playout(restored, random.Random(k)) == outcome
    assert state_to_bytes(restored) == state_to_bytes(copy), f"{where}: copy and restored state diverged"


def run_checked_match(config: MatchConfig, seed: str, rng_seed: int, roundtrip_rate: float = 0.04) -> MatchState:
    """Play one full match with random legal moves, checking RULES.md after every move."""
    rng = random.Random(rng_seed)
    ruleset = config.ruleset
    n = config.players
    single = Variant.SINGLE_SUIT in config.variants
    simultaneous = bool(config.variants & {Variant.HIDDEN_BIDS, Variant.SECRET_BIDS})
    pm1 = Variant.PLUS_MINUS_ONE in config.variants
    big = ruleset is Ruleset.WIZARD and n == 6
    rounds = 12 if single else ROUNDS[ruleset][n]
    deck = deck_codes(ruleset)

    state = new_match(config, seed=seed)
    assert config.rounds == rounds
    first_dealer = state.dealer
    if config.first_dealer is not None:
        assert first_dealer == config.first_dealer

    totals = [0] * n
    bids: list[int | None] = [None] * n
    dealt: list[list[tuple[str, ...]]] = []  # per round, per seat, as seen in the views
    trump_cards: list[str | None] = []
    played: list[Counter] = []

    def start_round(r: int) -> None:
        nonlocal bids
        bids = [None] * n
        h = r + 3 if single else r
        assert state.round == r and state.hand_size() == h
        assert state.dealer == (first_dealer + r - 1) % n, "the deal passes one seat left"
        spec = state.view(None)
        assert spec.hand is None and all(s.hand is None for s in spec.seats), "a spectator sees no hand"
        assert spec.completed_tricks == () and spec.current_trick == ()
        # hands as their owners see them (CLAIRVOYANCE round 1: as the next seat sees them)
        hands = []
        for s in range(n):
            if config.clairvoyant(r):
                own = state.view(s)
                assert own.hand is None and own.seats[s].hand is None, "clairvoyant: own card hidden"
                other = state.view((s + 1) % n)
                hand = other.seats[s].hand
                assert all(other.seats[t].hand is not None for t in range(n) if t != (s + 1) % n)
            else:
                v = state.view(s)
                hand = v.hand
                assert v.seats[s].hand == hand
                assert all(v.seats[t].hand is None for t in range(n) if t != s), "saw another seat's hand"
            assert hand is not None and len(hand) == h
            hands.append(hand)
        dealt.append(hands)
        used = Counter(c for hand in hands for c in hand)
        if single:
            assert spec.trump_card is None and spec.trump_suit is None
            for s in range(n):
                assert Counter(hands[s]) <= Counter(pile_codes(s)), f"seat {s} holds cards off its pile"
                assert len(set(c for c in hands[s] if c not in SPECIALS)) == len([c for c in hands[s] if c not in SPECIALS])
        else:
            if h * n < len(deck):
                assert spec.trump_card is not None, "a card is left, so one is turned up"
                used[spec.trump_card] += 1
            else:
                assert spec.trump_card is None, "every card dealt: nothing to turn"
            assert used <= Counter(deck), "a card dealt twice"
            tc = spec.trump_card
            if tc == "W":
                assert spec.phase is Phase.CHOOSE_TRUMP and spec.awaiting == (state.dealer,)
                assert spec.trump_suit is None
            else:
                assert spec.phase is Phase.BID
                if tc is None or tc == "J":
                    assert spec.trump_suit is None
                else:
                    assert spec.trump_suit is not None and spec.trump_suit.letter == tc[0]
        trump_cards.append(spec.trump_card)
        played.append(Counter())

    def check_round_end(r: int, round_tricks: tuple, after, trump: str | None) -> None:
        h = r + 3 if single else r
        assert len(round_tricks) == h, f"round {r}: {len(round_tricks)} tricks for hands of {h}"
        if single:
            assert trump is None, "SINGLE_SUIT has no trump"
        leader = (first_dealer + r) % n  # left of the dealer of round r
        won = [0] * n
        for trick in round_tricks:
            assert trick.leader == leader
            assert [p.seat for p in trick.plays] == [(leader + i) % n for i in range(n)]
            codes = [p.card for p in trick.plays]
            pos = expected_winner(codes, trump, single)
            assert trick.winner == (leader + pos) % n, f"round {r}: winner of {codes} (trump {trump})"
            won[trick.winner] += 1
            leader = trick.winner
            for p in trick.plays:
                played[-1][(p.seat, p.card)] += 1
        for s in range(n):
            assert Counter({(s, c): k for c, k in Counter(dealt[-1][s]).items()}) == Counter(
                {key: k for key, k in played[-1].items() if key[0] == s}
            ), f"round {r}: seat {s} did not play exactly its dealt hand"
        assert sum(won) == h
        result = after.round_results[r - 1]
        assert result.round == r
        assert [x.seat for x in result.seats] == list(range(n))
        assert [x.bid for x in result.seats] == bids, f"round {r}: recorded bids"
        assert [x.tricks for x in result.seats] == won, f"round {r}: recorded tricks"
        for x in result.seats:
            assert x.points == points(ruleset, x.bid, x.tricks), f"round {r}: points of seat {x.seat}"
            totals[x.seat] += x.points
        assert [s.score for s in after.seats] == totals, f"after round {r}: scores"

    start_round(1)
    before = state.view(None)
    moves = 0
    while not state.is_finished:
        r = state.round
        spec = before
        h = state.hand_size()
        awaiting = state.awaiting()
        assert spec.awaiting == awaiting
        for s in range(n):
            if s not in awaiting:
                assert state.legal_actions(s) == [] and state.legal_moves(s) == []
        # --- who moves, and what is legal, per RULES.md
        if state.phase is Phase.CHOOSE_TRUMP:
            assert awaiting == (state.dealer,)
        elif state.phase is Phase.BID:
            if simultaneous:
                assert state.to_act is None
                assert awaiting == tuple(s for s in range(n) if bids[s] is None)
            else:
                made = sum(b is not None for b in bids)
                assert awaiting == ((state.dealer + 1 + made) % n,), "bids go clockwise from left of the dealer"
        else:
            assert state.phase is Phase.PLAY
            trick = [p.card for p in spec.current_trick]
            leader = spec.completed_tricks[-1].winner if spec.completed_tricks else (state.dealer + 1) % n
            assert awaiting == ((leader + len(trick)) % n,)
            lead = expected_lead(trick, single)
            assert (spec.lead_suit.letter if spec.lead_suit is not None else None) == lead
        seat = rng.choice(awaiting)
        view = state.view(seat)
        legal = state.legal_moves(seat)
        assert list(view.legal_moves) == legal
        actions = state.legal_actions(seat)
        assert {move_of_action(a) for a in actions} == set(legal) and len(set(legal)) == len(legal)
        if state.phase is Phase.CHOOSE_TRUMP:
            assert {m.trump.letter for m in legal} == set("BGRY")
        elif state.phase is Phase.BID:
            expected = set(range(h + 1))
            if pm1 and seat == state.dealer:
                expected.discard(h - sum(b for b in bids if b is not None))
            assert {m.bid for m in legal} == expected, f"round {r}: legal bids of seat {seat}"
        else:
            assert {m.card for m in legal} == expected_playable(view.hand, trick, single), (
                f"round {r}: legal cards of seat {seat} holding {view.hand} on {trick}"
            )
        # --- now and then: an illegal move is refused and changes nothing
        if rng.random() < 0.05:
            data = state_to_bytes(state)
            with pytest.raises((IllegalMoveError, NotYourTurnError)):
                unfollowed = sorted(set(view.hand or ()) - {m.card for m in legal})
                if state.phase is Phase.BID:
                    state.apply(seat, Move(bid=h + 1))
                elif state.phase is Phase.PLAY and unfollowed:  # not following suit
                    state.apply(seat, Move(card=unfollowed[0]))
                else:
                    others = [s for s in range(n) if s not in awaiting]
                    state.apply(others[0] if others else seat, legal[0] if others else Move(bid=0))
            assert state_to_bytes(state) == data, "a refused move changed the state"
        # --- make a move, as a Move or as an action
        action = rng.choice(actions)
        move = move_of_action(action)
        if rng.random() < 0.5:
            state.apply_action(seat, action)
        else:
            state.apply(seat, move)
        moves += 1
        if move.bid is not None:
            bids[seat] = move.bid
        after = state.view(None)
        assert after.moves_made == moves
        if big:
            size = len(state_to_bytes(state))
            assert size <= 2048, f"6-player WIZARD state is {size} bytes after move {moves}"
        if move.trump is not None:
            assert after.phase is Phase.BID and after.trump_suit is move.trump, "the dealer's trump choice"
        if state.round != r or state.is_finished:
            if spec.phase is Phase.BID:
                # the last bid of a clairvoyant round: the server played the single cards
                assert config.clairvoyant(r) and h == 1
            round_tricks = spec.completed_tricks + (after.last_trick,)
            if state.is_finished:
                assert after.completed_tricks == round_tricks
            check_round_end(r, round_tricks, after, spec.trump_suit.letter if spec.trump_suit is not None else None)
            if not state.is_finished:
                start_round(r + 1)
                after = state.view(None)
        if rng.random() < roundtrip_rate:
            check_bytes_roundtrip_and_copy(state, rng, f"{_label((ruleset, n, tuple(config.variants)))} after move {moves}")
        before = after

    # --- the end of the match
    assert state.round == rounds and len(dealt) == rounds
    final = state.view(None)
    assert list(state.scores) == totals and [s.score for s in final.seats] == totals
    assert len(final.round_results) == rounds
    assert [sum(rr.seats[s].points for rr in final.round_results) for s in range(n)] == totals
    best = max(totals)
    assert final.winners == tuple(s for s in range(n) if totals[s] == best)
    assert state.outcome is not None and state.outcome.scores == tuple(totals)
    assert state.awaiting() == () and all(state.legal_actions(s) == [] for s in range(n))
    assert final.seed == seed
    check_bytes_roundtrip_and_copy(state, rng, "finished")

    # --- the record: JSON round trip, replay, and the dealt hands
    record = record_of(state)
    data = json.loads(json.dumps(record.to_dict()))
    again = MatchRecord.from_dict(data)
    replayed = again.replay()
    assert replayed.scores == state.scores
    for seat in [None, *range(n)]:
        assert replayed.view(seat) == state.view(seat), f"replay ends with another view for {seat}"
    rounds_dealt = again.dealt_rounds()
    assert len(rounds_dealt) == rounds
    for r, d in enumerate(rounds_dealt, start=1):
        assert d.round == r and d.dealer == (first_dealer + r - 1) % n
        assert d.hands == tuple(dealt[r - 1]), f"round {r}: record's hands differ from the views"
        assert d.trump_card == trump_cards[r - 1]
        for s in range(n):  # every card dealt was played exactly once
            assert Counter(d.hands[s]) == Counter({c: k for (t, c), k in played[r - 1].items() if t == s})
    assert [rd["hands"] for rd in data["rounds"]] == [[list(h) for h in hands] for hands in dealt]
    return state


# ----------------------------------------------------------------------------- the tests


@pytest.mark.parametrize("triple", TRIPLES, ids=_label)
def test_every_allowed_configuration_plays_by_the_rules(triple) -> None:
    """One seeded match per allowed (ruleset, players, variants): deterministic coverage."""
    ruleset, players, variants = triple
    config = MatchConfig.create(ruleset, players, variants)
    run_checked_match(config, seed=f"sweep-{_label(triple)}", rng_seed=zlib.crc32(_label(triple).encode()), roundtrip_rate=0.02)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    triple=st.sampled_from(TRIPLES),
    seed=st.text(min_size=1, max_size=40),
    rng_seed=st.integers(0, 2**32 - 1),
    dealer=st.one_of(st.none(), st.integers(0, 5)),
)
def test_random_matches_keep_every_invariant(triple, seed, rng_seed, dealer) -> None:
    ruleset, players, variants = triple
    first = None if dealer is None else dealer % players
    config = MatchConfig.create(ruleset, players, variants, first_dealer=first)
    run_checked_match(config, seed=seed, rng_seed=rng_seed)


@settings(max_examples=15, deadline=None)
@given(
    variants=st.sampled_from([t[2] for t in TRIPLES if t[0] is Ruleset.WIZARD and t[1] == 6]),
    seed=st.text(min_size=1, max_size=64),
    rng_seed=st.integers(0, 2**32 - 1),
)
def test_six_player_wizard_state_fits_in_2k_at_every_point(variants, seed, rng_seed) -> None:
    state = new_match(MatchConfig.create(Ruleset.WIZARD, 6, variants), seed=seed)
    rng = random.Random(rng_seed)
    largest = len(state_to_bytes(state))
    while not state.is_finished:
        seat = rng.choice(state.awaiting())
        state.apply_action(seat, rng.choice(state.legal_actions(seat)))
        largest = max(largest, len(state_to_bytes(state)))
    assert largest <= 2048, f"a 6-player WIZARD state took {largest} bytes"


@settings(max_examples=25, deadline=None)
@given(triple=st.sampled_from(TRIPLES), seed=st.text(min_size=1, max_size=20), rng_seed=st.integers(0, 2**32 - 1))
def test_copy_is_independent_both_ways(triple, seed, rng_seed) -> None:
    ruleset, players, variants = triple
    state = new_match(MatchConfig.create(ruleset, players, variants), seed=seed)
    rng = random.Random(rng_seed)
    for _ in range(rng.randrange(0, 60)):
        if state.is_finished:
            break
        seat = rng.choice(state.awaiting())
        state.apply_action(seat, rng.choice(state.legal_actions(seat)))
    copy = state.copy()
    snapshot = state_to_bytes(copy)
    assert snapshot == state_to_bytes(state)
    # moving the original leaves the copy untouched
    if not state.is_finished:
        playout(state, random.Random(rng_seed))
        assert state_to_bytes(copy) == snapshot, "playing the original changed its copy"
        views = [copy.view(s) for s in [None, *range(players)]]
        again = state_from_bytes(snapshot)
        assert views == [again.view(s) for s in [None, *range(players)]]
        # and the copy, played with the same rng, ends exactly where the original did
        playout(copy, random.Random(rng_seed))
        assert state_to_bytes(copy) == state_to_bytes(state)


def _play_and_replay(use_actions: bool, seed: str, rng_seed: int) -> tuple[bytes, bytes]:
    state = new_match(MatchConfig.create(Ruleset.WIZARD, 3), seed=seed)
    rng = random.Random(rng_seed)
    while not state.is_finished:
        seat = rng.choice(state.awaiting())
        if use_actions:  # any copy of a Wizard / Jester, as a search bot would pick it
            state.apply_action(seat, rng.choice(state.legal_actions(seat)))
        else:
            state.apply(seat, rng.choice(state.legal_moves(seat)))
    record = MatchRecord.from_dict(json.loads(json.dumps(record_of(state).to_dict())))
    return state_to_bytes(state), state_to_bytes(record.replay())


@settings(max_examples=10, deadline=None)
@given(seed=st.text(min_size=1, max_size=20), rng_seed=st.integers(0, 2**32 - 1))
def test_record_json_replay_gives_identical_final_bytes_for_moves(seed, rng_seed) -> None:
    played, replayed = _play_and_replay(False, seed, rng_seed)
    assert replayed == played


def test_record_json_replay_gives_identical_final_bytes_for_actions() -> None:
    played, replayed = _play_and_replay(True, "copies", 5)
    assert replayed == played, "replay of a match played with apply_action ends in other bytes"


def _first_seed_with_a_wizard_turned_in_round_one() -> str:
    for i in range(1000):
        seed = f"wizard-turned-{i}"
        if new_match(MatchConfig.create(Ruleset.WIZARD, 4), seed=seed).phase is Phase.CHOOSE_TRUMP:
            return seed
    raise AssertionError("no seed turns a Wizard in round 1")


def test_copy_works_when_round_one_opens_with_a_trump_choice() -> None:
    """(Regression: copy() used to raise AttributeError here, fixed in 97ecaac.)"""
    state = new_match(MatchConfig.create(Ruleset.WIZARD, 4), seed=_first_seed_with_a_wizard_turned_in_round_one())
    assert state.phase is Phase.CHOOSE_TRUMP
    copy = state.copy()
    assert state_to_bytes(copy) == state_to_bytes(state)
    playout(copy, random.Random(1))
    assert state.phase is Phase.CHOOSE_TRUMP and state.moves_made == 0


def test_from_bytes_works_when_round_one_opens_with_a_trump_choice() -> None:
    state = new_match(MatchConfig.create(Ruleset.WIZARD, 4), seed=_first_seed_with_a_wizard_turned_in_round_one())
    restored = state_from_bytes(state_to_bytes(state))
    assert_same_state(state, restored, "CHOOSE_TRUMP in round 1")
    other = state_from_bytes(state_to_bytes(state))
    assert playout(restored, random.Random(1)) == playout(other, random.Random(1))
    assert state_to_bytes(restored) == state_to_bytes(other)
    assert state.phase is Phase.CHOOSE_TRUMP and state.moves_made == 0
