"""The SEARCH house bot (wizard.search): legal in every ruleset and variant, blind to what
its seat cannot see, and deterministic under a node budget."""

from __future__ import annotations

import dataclasses
import random

import pytest

from tests.engine.conftest import allowed_triples, full_deck
from wizard import HOUSE_BOTS, MatchConfig, MatchState, Move, Phase, RandomBot, Ruleset, SearchBot, Variant, new_match
from wizard.bots import HeuristicBot, HouseBot
from wizard.cards import lowest_copy
from wizard.sampling import sample_state
from wizard.search import _key, _Round
from wizard.state import fields_of


def _label(triple: tuple[Ruleset, int, tuple[Variant, ...]]) -> str:
    ruleset, players, variants = triple
    return "-".join([ruleset.value, str(players), *(v.value for v in variants)])


def _play(config: MatchConfig, seed: str, bots: list[HouseBot], rng: random.Random) -> MatchState:
    """A whole match; the seat moving first among simultaneous bidders varies with ``rng``."""
    state = new_match(config, seed)
    while not state.is_finished:
        seat = rng.choice(state.awaiting())
        view = state.view(seat)
        move = bots[seat].act(view, rng)
        assert move in view.legal_moves
        state.apply(seat, move)
    return state


@pytest.mark.parametrize("triple", allowed_triples(), ids=_label)
def test_search_seats_finish_every_kind_of_match_legally(triple: tuple[Ruleset, int, tuple[Variant, ...]]) -> None:
    ruleset, players, variants = triple
    config = MatchConfig.create(ruleset, players, variants)
    rng = random.Random(_label(triple))
    bots: list[HouseBot] = [SearchBot(nodes=6), HeuristicBot(), RandomBot(), SearchBot(nodes=6), RandomBot(), HeuristicBot()]
    state = _play(config, f"search-{_label(triple)}", bots[:players], rng)
    assert state.is_finished and len(state.scores) == players


def _positions(config: MatchConfig, seed: str) -> list[MatchState]:
    """States where seat 0 must decide: a trump choice, bids, leads and follows, in several rounds."""
    state = new_match(config, seed)
    rng = random.Random(seed)
    out = []
    while not state.is_finished and len(out) < 12:
        seat = state.awaiting()[0]
        if 0 in state.awaiting() and len(state.legal_actions(0)) > 1 and rng.random() < 0.3:
            out.append(state.copy())
        state.apply(seat, HeuristicBot().act(state.view(seat), rng))
    return out


@pytest.mark.parametrize("variants", [(), ("HIDDEN_BIDS",), ("SECRET_BIDS",), ("SINGLE_SUIT",), ("CLAIRVOYANCE",)])
def test_the_move_depends_on_the_view_alone(variants: tuple[str, ...]) -> None:
    """States that differ only in what seat 0 cannot see (the others' cards, the deck, hidden
    bids: each redrawn from seat 0's view) get the same move from the same rng."""
    config = MatchConfig.create("WIZARD", 4, variants)
    positions = _positions(config, f"blind-{'-'.join(variants)}")
    assert len(positions) >= 5
    for state in positions:
        view = state.view(0)
        moves = set()
        for k in range(3):
            other = sample_state(view, random.Random(k))  # another hidden deal, the same view
            assert other.view(0) == dataclasses.replace(view, seed_hash=other.seed_hash)
            moves.add(SearchBot(nodes=30).act(other.view(0), random.Random(7)))
        moves.add(SearchBot(nodes=30).act(view, random.Random(7)))
        assert len(moves) == 1, (view.phase, moves)


def test_a_node_budget_makes_it_deterministic() -> None:
    state = _positions(MatchConfig.create("WIZARD", 4), "same")[-1]
    view = state.view(0)
    first = [SearchBot(nodes=40).act(view, random.Random(seed)) for seed in range(4)]
    assert first == [SearchBot(nodes=40).act(view, random.Random(seed)) for seed in range(4)]


def test_it_chooses_trump_bids_and_plays_by_search() -> None:
    """The dealer facing a turned Wizard names a suit; the search then bids and plays."""
    deck = full_deck()
    first = ["B3", "G5", "R7", "W"]
    for code in first:
        deck.remove(code)
    state = new_match(MatchConfig.create("WIZARD", 3, first_dealer=0, deals=[first + deck]), "trump")
    assert state.phase is Phase.CHOOSE_TRUMP
    move = SearchBot(nodes=40).act(state.view(0), random.Random(1))
    assert move.trump is not None
    state.apply(0, move)
    bid = SearchBot(nodes=20).act(state.view(1), random.Random(1))
    assert bid in state.view(1).legal_moves and bid.bid is not None


def test_it_is_a_house_bot_kind() -> None:
    assert HOUSE_BOTS["SEARCH"] is SearchBot
    assert isinstance(HOUSE_BOTS["SEARCH"]().act(new_match(MatchConfig.create(), "k").view(1), random.Random(0)), Move)


@pytest.mark.parametrize("triple", allowed_triples(), ids=_label)
def test_the_search_round_plays_by_the_engines_rules(triple: tuple[Ruleset, int, tuple[Variant, ...]]) -> None:
    """The search's own round (_Round, from a state or from a seat's view and the hands)
    offers the engine's legal moves, and ends with the engine's tricks and points, when both
    are played the same random way from random points of random matches."""
    ruleset, players, variants = triple
    config = MatchConfig.create(ruleset, players, variants)
    rng = random.Random(f"round-{_label(triple)}")
    for k in range(6):
        state = new_match(config, f"round-{k}")
        stop = rng.randint(1, config.rounds)
        while not state.is_finished and (state.round < stop or rng.random() < 0.85):
            seat = rng.choice(state.awaiting())
            state.apply_action(seat, rng.choice(state.legal_actions(seat)))
        if state.is_finished or state.phase not in (Phase.BID, Phase.PLAY):
            continue
        rounds = [_Round.of_state(state, {})]
        view = state.view(state.awaiting()[0])
        if [s.bid for s in view.seats] == fields_of(state).bids:  # (of_view makes hidden bids anew)
            rounds.append(_Round.of_view(view, config, list(fields_of(state).hands)))
        for play in rounds:
            _check_round(state.copy(), play, rng)


def _check_round(world: MatchState, play: _Round, rng: random.Random) -> None:
    start, before = world.round, world.scores
    me = world.awaiting()[0]
    while world.round == start and not world.is_finished:
        seat = play.seat_to_move(me)
        assert seat in world.awaiting()
        legal = {_key(a) for a in world.legal_actions(seat)}
        assert {_key(a) for a in play.legal(seat)} == legal
        if play.bidding:
            action = rng.choice(sorted(legal))
        else:
            action = lowest_copy(fields_of(world).hands[seat], rng.choice(sorted(legal)))
        world.apply_action(seat, action)
        play.apply(seat, action)
        me = seat
    while not play.over:  # CLAIRVOYANCE's round 1 plays itself in the engine once bid: one card each
        seat = play.seat_to_move(me)
        (card,) = play.legal(seat)
        play.apply(seat, card)
    assert play.gains() == [after - b for after, b in zip(world.scores, before, strict=True)]
