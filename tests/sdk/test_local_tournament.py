"""``wizard-arena tournament run``: bots against each other in one process, no server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from sdk.local_tournament import run_local_tournament

REPO = Path(__file__).resolve().parents[2]


def tournament(*options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wizard_arena", "tournament", "run", *options],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )


def test_the_heuristic_ranks_above_random() -> None:
    run = tournament("--bots", "heuristic,random", "--matches", "40", "--players", "4", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert (result["matches"], result["players"], result["ruleset"], result["seed"]) == (40, 4, "WIZARD", 1)
    heuristic, random = result["leaderboard"]
    assert (heuristic["rank"], heuristic["bot"], random["rank"], random["bot"]) == (1, "heuristic", 2, "random")
    assert heuristic["matches"] == random["matches"] == 40
    assert heuristic["mean_score"] - heuristic["mean_score_ci95"] > random["mean_score"] + random["mean_score_ci95"]
    assert heuristic["rating"] - heuristic["rating_ci95"] > 1500 > random["rating"] + random["rating_ci95"]
    assert heuristic["win_rate"] + random["win_rate"] == pytest.approx(1.0)
    assert heuristic["errors"] == random["errors"] == 0


def test_the_table_names_the_bots_and_the_columns() -> None:
    run = tournament("--bots", "heuristic,random", "--matches", "4", "--players", "3", "--ruleset", "WIZARD_JUNIOR")
    assert run.returncode == 0, run.stderr
    for text in ("heuristic", "random", "#", "bot", "matches", "mean score", "win", "errors", "rating", "± 95%",
                 "Seed 1"):
        assert text in run.stdout
    assert "4/4" in run.stderr  # the progress bar, drawn once at the end when stderr is not a terminal


def test_a_bad_spec_exits_with_a_message_naming_it() -> None:
    run = tournament("--bots", "heuristic,no_such_module:Bot", "--matches", "2")
    assert run.returncode != 0
    assert "no_such_module:Bot" in run.stderr and run.stdout == ""


@pytest.mark.parametrize(("bots", "matches", "message"), [
    (["heuristic"], 2, "at least 2 bots"),
    (["heuristic", "random"], 0, "--matches must be at least 1"),
    (["heuristic", "nothing"], 2, "'nothing'"),
])
def test_what_cannot_be_played_is_refused(bots: list[str], matches: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run_local_tournament(bots, matches)


def test_same_seed_same_result() -> None:
    def played(seed: int) -> tuple[object, ...]:
        result = run_local_tournament(["heuristic", "random", "random"], 6, 4, "WIZARD_JUNIOR", seed=seed)
        return result.matches, [s.to_dict() for s in result.standings]

    assert played(7) == played(7)
    assert played(7) != played(8)


def test_a_bot_that_fails_costs_only_its_moves(tmp_path: Path) -> None:
    path = tmp_path / "shaky.py"
    path.write_text(
        "from sdk import Bot\n"
        "from wizard import Move\n"
        "class EveryOtherMove(Bot):\n"
        "    calls = 0\n"
        "    def act(self, view, match_id=None):\n"
        "        EveryOtherMove.calls += 1\n"
        "        if EveryOtherMove.calls % 2:\n"
        "            raise RuntimeError('odd move')\n"
        "        return view.legal_moves[0]\n"
    )
    (tmp_path / "illegal.py").write_text(
        "from sdk import Bot\n"
        "from wizard import Move\n"
        "class Illegal(Bot):\n"
        "    def act(self, view, match_id=None):\n"
        "        return Move(bid=0)\n"  # never a legal card
    )
    result = run_local_tournament(
        ["heuristic", f"{path}:EveryOtherMove", f"{tmp_path / 'illegal.py'}:Illegal"], 5, 3, "WIZARD_JUNIOR"
    )
    assert len(result.matches) == 5
    by_bot = {s.bot: s for s in result.standings}
    shaky, illegal = by_bot["shaky.py:EveryOtherMove"], by_bot["illegal.py:Illegal"]
    [module] = [m for name, m in sys.modules.items() if name.startswith("_wizard_arena_bot_shaky_")]
    assert shaky.matches == 5 and shaky.errors == (module.EveryOtherMove.calls + 1) // 2 > 0
    assert shaky.errors == sum(m.errors[m.seats.index(1)] for m in result.matches)
    assert "RuntimeError: odd move" in (shaky.first_error or "")
    assert illegal.errors > 0 and "illegal move" in (illegal.first_error or "")
    assert by_bot["heuristic"].errors == 0


def test_more_entrants_than_seats_play_equally_often() -> None:
    bots = ["heuristic", "random", "heuristic", "random", "random"]
    result = run_local_tournament(bots, 7, 3, "WIZARD_JUNIOR")
    assert [s.bot for s in result.standings if s.bot.endswith("#2")] != []  # the second copies are entrants
    counts = Counter(e for m in result.matches for e in m.seats)
    assert sorted(counts) == [0, 1, 2, 3, 4]
    assert max(counts.values()) - min(counts.values()) <= 1
    assert all(len(set(m.seats)) == 3 for m in result.matches)  # with seats to spare, nobody sits twice
    assert sorted(s.matches for s in result.standings) == sorted(counts.values())


def test_fewer_entrants_than_seats_take_turns_in_every_seat() -> None:
    result = run_local_tournament(["heuristic", "random"], 4, 3, "WIZARD_JUNIOR")
    seats = Counter((seat, e) for m in result.matches for seat, e in enumerate(m.seats))
    assert all(seats[seat, e] >= 1 for seat in range(3) for e in (0, 1))
    assert [s.matches for s in result.standings] == [4, 4]


def test_the_search_house_bot_enters_a_local_tournament() -> None:
    run = tournament("--bots", "search,heuristic", "--matches", "2", "--players", "3", "--ruleset", "WIZARD_JUNIOR",
                     "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert sorted(row["bot"] for row in result["leaderboard"]) == ["heuristic", "search"]
    assert all(row["errors"] == 0 and row["matches"] == 2 for row in result["leaderboard"])
