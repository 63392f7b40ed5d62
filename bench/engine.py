"""``wizard-arena bench engine``: full random matches in one process.

Two paths through the same rules code:

- ``playout``: ``wizard.playout.playout(state, rng)``, the RANDOM policy for every seat, as Monte
  Carlo search uses it (the headline figure, ``games_per_second``);
- ``step``: ``legal_actions`` + ``apply_action`` per move with every check, as the
  service applies moves from outside (``step_games_per_second``).

Deals always come from the seed (SHA-256 stream + Fisher-Yates), so dealing is counted.
"""

from __future__ import annotations

import platform
import random
import time
from typing import Any

from wizard import MatchConfig, new_match
from wizard.playout import playout


def _run(config: MatchConfig, seconds: float, step: bool, seed: int) -> tuple[int, int, float]:
    rng = random.Random(seed)
    games = moves = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        state = new_match(config, seed=f"bench-{seed}-{games}")
        if step:
            rand = rng.random
            while not state.is_finished:
                seat = state.to_act
                if seat is None:
                    seat = state.awaiting()[0]
                actions = state.legal_actions(seat)
                state.apply_action(seat, actions[int(rand() * len(actions))])
        else:
            playout(state, rng)
        games += 1
        moves += state.moves_made
    return games, moves, time.perf_counter() - start


def bench_engine(ruleset: str, players: int, variants: list[str], seconds: float, seed: int = 1) -> dict[str, Any]:
    config = MatchConfig.create(ruleset, players, variants)
    games, moves, elapsed = _run(config, seconds / 2, step=False, seed=seed)
    s_games, s_moves, s_elapsed = _run(config, seconds / 2, step=True, seed=seed)
    return {
        "benchmark": "engine",
        "ruleset": config.ruleset.value,
        "players": players,
        "variants": sorted(v.value for v in config.variants),
        "games": games,
        "games_per_second": round(games / elapsed, 1),
        "us_per_move": round(elapsed / moves * 1e6, 3),
        "moves_per_game": round(moves / games, 1),
        "step_games_per_second": round(s_games / s_elapsed, 1),
        "step_us_per_move": round(s_elapsed / s_moves * 1e6, 3),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
    }
