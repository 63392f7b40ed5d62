"""``wizard-arena bench engine``: full random matches in one process.

Two paths through the same rules code:

- ``playout``: ``wizard.playout.playout(state, rng)``, the RANDOM policy for every seat, as Monte
  Carlo search uses it (the headline figure, ``games_per_second``);
- ``step``: ``legal_actions`` + ``apply_action`` per move with every check, as the
  service applies moves from outside (``step_games_per_second``).

Deals always come from the seed (SHA-256 stream + Fisher-Yates), so dealing is counted.

``compiled`` says which build of the engine ran (``wizard.COMPILED``: the hot modules mypyc
compiled, or pure Python).  With ``peer`` (``--peer DIR``, a checkout of
github.com/tabularaza27/wizard, the fastest public Python Wizard engine we know of), its
``game_engine`` plays full matches of the same player count with every seat its
``RandomPlayer``, for as long again, in the same process: ``peer_games_per_second`` and
``vs_peer`` (our playout games per second over its).  Beside each wall-clock rate, the rate
per second of CPU time (``cpu_…``), steadier on a shared machine.
"""

from __future__ import annotations

import importlib
import platform
import random
import sys
import time
from typing import Any

from wizard import COMPILED, MatchConfig, new_match
from wizard.playout import playout


def _run(config: MatchConfig, seconds: float, step: bool, seed: int) -> tuple[int, int, float, float]:
    rng = random.Random(seed)
    games = moves = 0
    start = time.perf_counter()
    cpu = time.process_time()
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
    return games, moves, time.perf_counter() - start, time.process_time() - cpu


def _run_peer(directory: str, players: int, seconds: float, seed: int) -> tuple[int, float, float]:
    """Full matches of tabularaza27/wizard's engine (a checkout in ``directory``), every seat
    its RandomPlayer (random cards, random bids, random trump)."""
    sys.path.insert(0, directory)
    try:
        game_module = importlib.import_module("game_engine.game")
        player_module = importlib.import_module("game_engine.player")
    finally:
        sys.path.remove(directory)
    random.seed(seed)  # (it draws from the random module's generator)
    games = 0
    start = time.perf_counter()
    cpu = time.process_time()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        game_module.Game(players=[player_module.RandomPlayer() for _ in range(players)]).play_game()
        games += 1
    return games, time.perf_counter() - start, time.process_time() - cpu


def bench_engine(
    ruleset: str, players: int, variants: list[str], seconds: float, seed: int = 1, peer: str | None = None
) -> dict[str, Any]:
    config = MatchConfig.create(ruleset, players, variants)
    games, moves, elapsed, cpu = _run(config, seconds / 2, step=False, seed=seed)
    s_games, s_moves, s_elapsed, _ = _run(config, seconds / 2, step=True, seed=seed)
    compared: dict[str, Any] = {}
    if peer is not None:
        p_games, p_elapsed, p_cpu = _run_peer(peer, players, seconds / 2, seed)
        compared = {
            "peer_games_per_second": round(p_games / p_elapsed, 1),
            "cpu_peer_games_per_second": round(p_games / p_cpu, 1),
            "vs_peer": round(games / elapsed / (p_games / p_elapsed), 2),
            "cpu_vs_peer": round(games / cpu / (p_games / p_cpu), 2),
        }
    return {
        "benchmark": "engine",
        "ruleset": config.ruleset.value,
        "players": players,
        "variants": sorted(v.value for v in config.variants),
        "games": games,
        "games_per_second": round(games / elapsed, 1),
        "cpu_games_per_second": round(games / cpu, 1),
        "us_per_move": round(elapsed / moves * 1e6, 3),
        "moves_per_game": round(moves / games, 1),
        "step_games_per_second": round(s_games / s_elapsed, 1),
        "step_us_per_move": round(s_elapsed / s_moves * 1e6, 3),
        **compared,
        "compiled": COMPILED,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
    }
