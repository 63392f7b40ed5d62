"""The fast playout (wizard.playout) against step-by-step play: one rule, two implementations.

For every ruleset × player count × variant set MatchConfig allows, from several seeds and
several points of a match, the same random draws are played once by ``playout`` and once
move by move through ``apply_action``, each choice the legal action at ``floor(u * count)``
(lowest id first, one draw ``u`` per choice, the seat first in ``awaiting()`` moving): the two
must end in the same bytes and the same outcome.  This is what lets the playout keep loops
of its own for speed.
"""

from __future__ import annotations

import random
from math import floor

import pytest

from tests.engine.conftest import allowed_triples, full_deck
from wizard import MatchConfig, MatchState, Outcome, Ruleset, Variant, new_match
from wizard.playout import playout
from wizard.record import state_to_bytes

SEEDS = ("diff-0", "diff-1", "diff-2")
#: moves made (at random, before the two plays) to reach each starting point: the start of
#: the match, within round 1 or 2, mid-trick in a later round, late in the match
STARTS = (0, 3, 9, 40, 200)


def step_by_step(state: MatchState, rng: random.Random) -> Outcome:
    """The playout's policy, one checked move at a time: the reference the playout must equal."""
    while (outcome := state.outcome) is None:
        seat = state.awaiting()[0]
        legal = state.legal_actions(seat)
        state.apply_action(seat, legal[floor(rng.random() * len(legal))])
    return outcome


def _at(config: MatchConfig, seed: str, moves: int) -> MatchState:
    state = new_match(config, seed)
    chooser = random.Random(f"{seed}/{moves}")
    for _ in range(moves):
        if state.is_finished:
            break
        seat = state.awaiting()[-1]  # (the last of simultaneous bidders: another order than the playout's)
        state.apply_action(seat, chooser.choice(state.legal_actions(seat)))
    return state


def _label(triple: tuple[Ruleset, int, tuple[Variant, ...]]) -> str:
    ruleset, players, variants = triple
    return "-".join([ruleset.value, str(players), *(v.value for v in variants)])


@pytest.mark.parametrize("triple", allowed_triples(), ids=_label)
def test_playout_equals_step_by_step_play(triple: tuple[Ruleset, int, tuple[Variant, ...]]) -> None:
    ruleset, players, variants = triple
    config = MatchConfig.create(ruleset, players, variants)
    for seed in SEEDS:
        for moves in STARTS:
            start = _at(config, seed, moves)
            fast, stepped = start.copy(), start.copy()
            draws = f"{seed}/{moves}/draws"
            outcome = playout(fast, random.Random(draws))
            assert outcome == step_by_step(stepped, random.Random(draws)), (seed, moves)
            assert state_to_bytes(fast) == state_to_bytes(stepped), (seed, moves)


def test_playout_equals_step_by_step_play_on_a_stacked_deck() -> None:
    """A stacked round makes the playout deal round by round (not in its later-rounds loop)."""
    deck = ["W", "W", "W", "W", "R7", "G2", "B3", "Y4", "J"]
    config = MatchConfig.create(Ruleset.WIZARD, 4, (), first_dealer=0, deals=[[], deck + _rest(deck)])
    for moves in (0, 5, 12):
        start = _at(config, "stacked", moves)
        fast, stepped = start.copy(), start.copy()
        assert playout(fast, random.Random(moves)) == step_by_step(stepped, random.Random(moves))
        assert state_to_bytes(fast) == state_to_bytes(stepped)


def _rest(used: list[str]) -> list[str]:
    rest = full_deck()
    for card in used:
        rest.remove(card)
    return rest
