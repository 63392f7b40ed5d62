"""Golden playthroughs: seeded matches between house bots, every view after every move.

    .venv/bin/python tests/engine/golden/regenerate.py          # rewrite every file
    .venv/bin/python tests/engine/golden/regenerate.py NAME ...  # rewrite only these

Each match is played by house bots (``wizard.bots``) deciding from their own views with
one seeded ``random.Random``; the seat to move is always ``state.awaiting()[0]``.  A file
holds the match's setup, every move of the match, the final scores and, for the first
``keep_rounds`` rounds and for the final state, one snapshot per move: the move made and
every seat's ``view.to_dict()`` plus the spectator's (legal moves and scores are inside the
views).  tests/engine/test_golden.py plays the same matches and compares.

Regenerate only after a deliberate change of the rules engine, the views or the house bots,
and review the diff of the files: every difference is a change of behaviour.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE.parents[2]) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(HERE.parents[2]))

from wizard import MatchConfig, new_match  # noqa: E402
from wizard.house import HOUSE_BOTS  # noqa: E402

FORMAT = 1


@dataclass(frozen=True)
class GoldenMatch:
    name: str
    description: str
    ruleset: str
    players: int
    variants: tuple[str, ...]
    bots: tuple[str, ...]
    seed: str
    rng_seed: int
    keep_rounds: int = 3

    @property
    def path(self) -> Path:
        return HERE / f"{self.name}.json"

    def config(self) -> MatchConfig:
        return MatchConfig.create(self.ruleset, self.players, self.variants)


H, R = "HEURISTIC", "RANDOM"

MATCHES: tuple[GoldenMatch, ...] = (
    GoldenMatch(
        "wizard4_heuristic_random",
        "4-player WIZARD, HEURISTIC and RANDOM bots; a Wizard is turned in round 1 (trump choice)",
        "WIZARD", 4, (), (H, R, H, R), "golden-wizard4-2", 1, keep_rounds=5,
    ),
    GoldenMatch(
        "junior3_hidden_bids",
        "3-player WIZARD_JUNIOR (chips) with HIDDEN_BIDS; a Wizard is turned in round 1; every move kept",
        "WIZARD_JUNIOR", 3, ("HIDDEN_BIDS",), (H, R, H), "golden-junior3-hidden-2", 2, keep_rounds=8,
    ),
    GoldenMatch(
        "junior_classic5_plus_minus_one",
        "5-player WIZARD_JUNIOR_CLASSIC with PLUS_MINUS_ONE",
        "WIZARD_JUNIOR_CLASSIC", 5, ("PLUS_MINUS_ONE",), (H, H, R, H, R), "golden-classic5-pm1", 3, keep_rounds=4,
    ),
    GoldenMatch(
        "wizard4_single_suit",
        "4-player WIZARD with SINGLE_SUIT (12 rounds of 4 to 15 cards)",
        "WIZARD", 4, ("SINGLE_SUIT",), (H, R, R, H), "golden-wizard4-single-suit", 4, keep_rounds=3,
    ),
    GoldenMatch(
        "wizard3_clairvoyance_secret_bids",
        "3-player WIZARD with CLAIRVOYANCE and SECRET_BIDS; a Wizard is turned in the clairvoyant round",
        "WIZARD", 3, ("CLAIRVOYANCE", "SECRET_BIDS"), (H, R, H), "golden-wizard3-clairvoyance-28", 5, keep_rounds=5,
    ),
)


def _views(state) -> dict[str, Any]:
    views = {str(seat): state.view(seat).to_dict() for seat in range(state.players)}
    views["spectator"] = state.view(None).to_dict()
    return views


def play(match: GoldenMatch) -> dict[str, Any]:
    """Play the match and return the golden data (plain JSON values)."""
    state = new_match(match.config(), seed=match.seed)
    bots = [HOUSE_BOTS[kind]() for kind in match.bots]
    rng = random.Random(match.rng_seed)
    moves: list[list[Any]] = []
    snapshots = [{"afterMove": 0, "seat": None, "move": None, "round": state.round, "views": _views(state)}]
    while not state.is_finished:
        seat = state.awaiting()[0]
        round_before = state.round
        move = bots[seat].act(state.view(seat), rng)
        state.apply(seat, move)
        moves.append([seat, move.to_dict()])
        if round_before <= match.keep_rounds or state.is_finished:
            snapshots.append(
                {"afterMove": len(moves), "seat": seat, "move": move.to_dict(), "round": round_before, "views": _views(state)}
            )
    data = {
        "format": FORMAT,
        "name": match.name,
        "description": match.description,
        "config": {"ruleset": match.ruleset, "players": match.players, "variants": list(match.variants)},
        "seed": match.seed,
        "bots": list(match.bots),
        "rngSeed": match.rng_seed,
        "keptRounds": match.keep_rounds,
        "moves": moves,
        "finalScores": list(state.scores),
        "snapshots": snapshots,
    }
    return json.loads(json.dumps(data))  # exactly what a file reads back as


def dumps(data: dict[str, Any]) -> str:
    """JSON with one snapshot per line, so that a diff of the file shows which move changed."""
    compact = {"separators": (",", ":"), "ensure_ascii": False}
    head = [f"{json.dumps(k)}:{json.dumps(v, **compact)}" for k, v in data.items() if k != "snapshots"]
    body = ",\n".join(json.dumps(s, **compact) for s in data["snapshots"])
    return "{\n" + ",\n".join(head) + ',\n"snapshots":[\n' + body + "\n]}\n"


def main(names: list[str]) -> None:
    unknown = set(names) - {m.name for m in MATCHES}
    if unknown:
        raise SystemExit(f"unknown golden match(es): {', '.join(sorted(unknown))}")
    total = 0
    for match in MATCHES:
        if names and match.name not in names:
            continue
        text = dumps(play(match))
        assert json.loads(text) == play(match), "the file does not read back as written"
        match.path.write_text(text, encoding="utf-8")
        total += len(text.encode())
        print(f"{match.path.relative_to(HERE.parents[2])}: {len(text.encode()) / 1e6:.2f} MB")
    print(f"total {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main(sys.argv[1:])
