"""Golden playthroughs: replay the seeded bot matches of tests/engine/golden/ and compare every move
and every view with the checked-in files.  A failure names the first difference: which
match, which move, which seat's view, which field.  If the change is intended, run
``.venv/bin/python tests/engine/golden/regenerate.py`` and review the diff of the files.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden"
_spec = importlib.util.spec_from_file_location("golden_regenerate", GOLDEN / "regenerate.py")
assert _spec is not None and _spec.loader is not None
regenerate = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = regenerate  # (dataclasses look their module up there)
_spec.loader.exec_module(regenerate)

HINT = "if the change is intended, run .venv/bin/python tests/engine/golden/regenerate.py and review the diff"


def first_difference(golden: Any, actual: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The path of the first place where two JSON values differ, and the two values there."""
    if isinstance(golden, dict) and isinstance(actual, dict):
        for key in list(golden) + [k for k in actual if k not in golden]:
            if key not in actual or key not in golden:
                return (f"{path}.{key}".lstrip("."), golden.get(key, "<missing>"), actual.get(key, "<missing>"))
            found = first_difference(golden[key], actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(golden, list) and isinstance(actual, list):
        for i, (g, a) in enumerate(zip(golden, actual, strict=False)):  # (the lengths are compared after)
            found = first_difference(g, a, f"{path}[{i}]")
            if found:
                return found
        if len(golden) != len(actual):
            return (f"{path} (length)".lstrip("."), len(golden), len(actual))
        return None
    if golden != actual or type(golden) is not type(actual):
        return (path.lstrip(".") or "<value>", golden, actual)
    return None


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _move_text(seat: Any, move: Any) -> str:
    if move is None:
        return "the start of the match"
    (kind, value), = move.items()
    return f"seat {seat} {kind} {value}"


def compare(name: str, golden: dict[str, Any], actual: dict[str, Any]) -> None:
    """Fail with a readable description of the first difference."""
    for key in ("format", "config", "seed", "bots", "rngSeed", "keptRounds"):
        if golden.get(key) != actual.get(key):
            pytest.fail(f"golden match {name}: setup field {key!r} is {golden.get(key)!r} in the file but "
                        f"{actual.get(key)!r} in regenerate.py; {HINT}")
    for g, a in zip(golden["snapshots"], actual["snapshots"], strict=False):  # (their counts: below)
        where = f"golden match {name}, after move {g['afterMove']}"
        if (g["afterMove"], g["seat"], g["move"]) != (a["afterMove"], a["seat"], a["move"]):
            pytest.fail(
                f"{where}: the move differs: golden {_move_text(g['seat'], g['move'])} (move {g['afterMove']}), "
                f"now {_move_text(a['seat'], a['move'])} (move {a['afterMove']}); the engine's legal moves or "
                f"views, or the house bots, changed before this point; {HINT}"
            )
        where += f" ({_move_text(g['seat'], g['move'])}, round {g['round']})"
        for who in g["views"]:
            found = first_difference(g["views"][who], a["views"].get(who))
            if found:
                field, want, got = found
                viewer = "the spectator's view" if who == "spectator" else f"seat {who}'s view"
                pytest.fail(
                    f"{where}, {viewer}: field {field}: golden {_short(want)}, engine now {_short(got)}; {HINT}"
                )
    if len(golden["snapshots"]) != len(actual["snapshots"]):
        pytest.fail(f"golden match {name}: {len(golden['snapshots'])} snapshots in the file, "
                    f"{len(actual['snapshots'])} now; {HINT}")
    for i, (g, a) in enumerate(zip(golden["moves"], actual["moves"], strict=False)):
        if g != a:
            pytest.fail(f"golden match {name}: move {i + 1} differs (beyond the kept snapshots): golden "
                        f"{_move_text(*g)}, now {_move_text(*a)}; {HINT}")
    if len(golden["moves"]) != len(actual["moves"]):
        pytest.fail(f"golden match {name}: {len(golden['moves'])} moves in the file, {len(actual['moves'])} now; {HINT}")
    if golden["finalScores"] != actual["finalScores"]:
        pytest.fail(f"golden match {name}: final scores {golden['finalScores']} in the file, "
                    f"{actual['finalScores']} now; {HINT}")
    found = first_difference(golden, actual)
    assert found is None, f"golden match {name}: {found}; {HINT}"


@pytest.mark.parametrize("match", regenerate.MATCHES, ids=lambda m: m.name)
def test_golden_playthrough(match) -> None:
    assert match.path.exists(), f"{match.path} is missing; {HINT}"
    golden = json.loads(match.path.read_text(encoding="utf-8"))
    compare(match.name, golden, regenerate.play(match))


def test_golden_files_are_exactly_the_listed_matches() -> None:
    on_disk = {p.stem for p in GOLDEN.glob("*.json")}
    listed = {m.name for m in regenerate.MATCHES}
    assert on_disk == listed, f"stale or missing golden files: {sorted(on_disk ^ listed)}; {HINT}"


def test_golden_data_stays_small() -> None:
    sizes = {p.name: p.stat().st_size for p in GOLDEN.glob("*.json")}
    assert all(size <= 1_500_000 for size in sizes.values()), sizes
    assert sum(sizes.values()) <= 6_000_000, sizes


def test_golden_files_cover_what_they_claim() -> None:
    """The matches reach what they are there for: a trump choice, hidden and secret bids,
    the clairvoyant round, every seat's view and the spectator's, and the final state."""
    phases = set()
    for match in regenerate.MATCHES:
        data = json.loads(match.path.read_text(encoding="utf-8"))
        snaps = data["snapshots"]
        assert set(snaps[0]["views"]) == {*map(str, range(match.players)), "spectator"}
        assert snaps[-1]["views"]["spectator"]["phase"] == "FINISHED"
        assert snaps[-1]["views"]["spectator"]["seed"] == match.seed
        assert snaps[-1]["afterMove"] == len(data["moves"])
        phases |= {s["views"]["spectator"]["phase"] for s in snaps}
    assert phases == {"CHOOSE_TRUMP", "BID", "PLAY", "FINISHED"}


def test_the_diff_names_match_move_seat_and_field() -> None:
    """The failure message of a changed view is readable (checked on a doctored copy)."""
    match = regenerate.MATCHES[0]
    golden = json.loads(match.path.read_text(encoding="utf-8"))
    actual = json.loads(json.dumps(golden))
    actual["snapshots"][5]["views"]["2"]["seats"][1]["score"] += 10
    with pytest.raises(pytest.fail.Exception) as caught:
        compare(match.name, golden, actual)
    message = str(caught.value)
    assert f"golden match {match.name}, after move 5" in message
    assert "seat 2's view: field seats[1].score" in message
