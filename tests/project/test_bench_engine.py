"""`wizard-arena bench engine`: which build ran, and the comparison with the peer engine
(`--peer`, a checkout of tabularaza27/wizard; a stand-in with its interface here, since CI
reaches no GitHub)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from bench.engine import bench_engine


def test_the_engine_bench_says_which_build_ran_and_compares_with_the_peer(tmp_path: Path) -> None:
    package = tmp_path / "game_engine"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "game.py").write_text(textwrap.dedent("""
        class Game:
            def __init__(self, players):
                self.players = players

            def play_game(self):
                return [0] * len(self.players)
    """))
    (package / "player.py").write_text("class RandomPlayer:\n    pass\n")
    result = bench_engine("WIZARD", 4, [], seconds=0.4, peer=str(tmp_path))
    assert isinstance(result["compiled"], bool)
    assert result["games"] > 0 and result["peer_games_per_second"] > 0 and result["vs_peer"] >= 0
    assert {"cpu_games_per_second", "cpu_peer_games_per_second", "cpu_vs_peer"} <= result.keys()
