"""One build of the engine played through every configuration, for
tests/engine/test_compiled.py: ``python -m tests.engine.differential`` prints, as JSON lines,
whether the engine is compiled, then per configuration and seed a digest of the state's
bytes and outcome after every move, and of what a playout from every 25th move ends in.

Run once on the compiled build and once on the pure one, the two outputs must be equal:
same moves, same bytes, same outcomes, same draws of the playout's random generator.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Iterator

from tests.engine.conftest import allowed_triples, full_deck
from wizard import COMPILED, MatchConfig, MatchState, new_match
from wizard.playout import playout
from wizard.record import state_to_bytes

SEEDS = ("differential-0", "differential-1")
#: a playout (on a copy) from every this many moves of a match
PLAYOUT_EVERY = 25


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


def main() -> None:
    print(json.dumps({"compiled": COMPILED}))
    for label, config in configurations():
        for seed in SEEDS:
            print(json.dumps({"match": f"{label}/{seed}", "digests": play(config, seed)}))


if __name__ == "__main__":
    sys.exit(main())
