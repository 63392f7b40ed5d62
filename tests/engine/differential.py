"""One build of the engine played through every configuration, for
tests/engine/test_compiled.py: ``python -m tests.engine.differential`` prints, as JSON lines,
whether the engine is compiled, then per configuration and seed a digest of the state's
bytes and outcome after every move, and of what a playout from every 25th move ends in.

Then, per configuration, the moves the SEARCH house bot picks with a node budget (which
makes it deterministic) at every ``SEARCH_EVERY``-th move and every trump choice of a match
(labelled ``…/search``): the sampling, the rollouts and the tree of each build.

Run once on the compiled build and once on the pure one, the two outputs must be equal:
same moves, same bytes, same outcomes, same draws of the playout's random generator, same
choices of the search.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Iterator

from tests.engine.conftest import allowed_triples, full_deck
from wizard import COMPILED, MatchConfig, MatchState, Phase, SearchBot, new_match
from wizard.playout import playout
from wizard.record import state_to_bytes

SEEDS = ("differential-0", "differential-1")
#: a playout (on a copy) from every this many moves of a match
PLAYOUT_EVERY = 25
#: a search (on the view of the seat to act) at every this many moves of a match
SEARCH_EVERY = 50
#: the search's iterations per decision
SEARCH_NODES = 40


def configurations() -> Iterator[tuple[str, MatchConfig]]:
    """Every (ruleset, players, variants) the engine accepts, and stacked deals (which the
    playout plays on another path than deals from the seed)."""
    for ruleset, players, variants in allowed_triples():
        label = "-".join([ruleset.value, str(players), *(v.value for v in variants)])
        yield label, MatchConfig.create(ruleset, players, variants)
    for players in (3, 5):
        deals = [random.Random(r).sample(full_deck(), 60) for r in range(4)]
        yield f"WIZARD-{players}-stacked", MatchConfig.create("WIZARD", players, deals=deals)


def _digest(state: MatchState, *extra: object) -> str:
    data = state_to_bytes(state) + repr((state.outcome, state.awaiting(), *extra)).encode()
    return hashlib.sha256(data).hexdigest()[:16]


def play(config: MatchConfig, seed: str) -> list[str]:
    """The digests of one match played at random by the checked step, move by move, with a
    playout from every ``PLAYOUT_EVERY``-th move on a copy."""
    state = new_match(config, seed)
    chooser = random.Random(seed)
    digests = [_digest(state)]
    moves = 0
    while not state.is_finished:
        if moves % PLAYOUT_EVERY == 0:
            rollout = state.copy()
            rng = random.Random(moves)
            playout(rollout, rng)
            digests.append("playout " + _digest(rollout, rng.random()))
        awaiting = state.awaiting()
        seat = awaiting[moves % len(awaiting)]
        state.apply_action(seat, chooser.choice(state.legal_actions(seat)))
        moves += 1
        digests.append(_digest(state))
    return digests


def search_moves(config: MatchConfig, seed: str) -> list[str]:
    """The SEARCH bot's choices (``SEARCH_NODES`` iterations) along one match played at
    random, as ``move number: move``."""
    state = new_match(config, seed)
    chooser = random.Random(seed)
    out = []
    moves = 0
    while not state.is_finished:
        awaiting = state.awaiting()
        seat = awaiting[moves % len(awaiting)]
        if moves % SEARCH_EVERY == 0 or state.phase is Phase.CHOOSE_TRUMP:
            view = state.view(seat)
            move = SearchBot(nodes=SEARCH_NODES).act(view, random.Random(f"{seed}-{moves}"))
            out.append(f"{moves}: {move}")
        state.apply_action(seat, chooser.choice(state.legal_actions(seat)))
        moves += 1
    return out


def main() -> None:
    print(json.dumps({"compiled": COMPILED}))
    for label, config in configurations():
        for seed in SEEDS:
            print(json.dumps({"match": f"{label}/{seed}", "digests": play(config, seed)}))
        print(json.dumps({"match": f"{label}/{SEEDS[0]}/search", "digests": search_moves(config, SEEDS[0])}))


if __name__ == "__main__":
    sys.exit(main())
