"""`wizard-arena replay MATCH --url`: a match played on the server replays and verifies from
its published record (which carries the seedHash published at the start and the winners);
the record of a match not yet finished, or of no match, is a clear error."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from tests.service.arena_client import REPO

SEATS = ("HEURISTIC", "RANDOM", "HEURISTIC", "RANDOM", "HEURISTIC")


def replay(api: Any, source: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wizard_arena", "replay", source, "--url", api.base, *options],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )


def seated_match(api: Any, token: str, name: str) -> str:
    """A WIZARD_JUNIOR match (6 short rounds): the caller in seat 0, five house bots."""
    match_id = api.create_match(token, ruleset="WIZARD_JUNIOR", players=6, seed=f"replay-{name}")
    api.join(token, match_id, 0)
    for kind in SEATS:
        api.add_house_bot(token, match_id, kind)
    return match_id


def test_a_finished_match_replays_and_verifies(api):
    name = f"replayer-{api.port}"
    token, _ = api.register(name)
    match_id = seated_match(api, token, name)
    final = api.play_out(token, match_id)
    assert final["status"] == "FINISHED"

    record = api.http.get(f"/api/matches/{match_id}/record").json()
    assert record["seedHash"] == final["seedHash"]
    assert record["winners"] == final["winners"]

    run = replay(api, match_id)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert out.rstrip().splitlines()[-1] == "verified: seed matches seedHash, replay reproduces the recorded result"
    assert out.startswith(f"match {match_id} | WIZARD_JUNIOR | 6 players")
    assert f"seats: 0 {name}, " in out
    for r in range(1, 7):
        assert f"\nround {r}/6 | dealer " in out
    assert f"\nfinal scores: {name} {final['seats'][0]['score']}, " in out

    quiet = replay(api, match_id, "--quiet")
    assert quiet.returncode == 0 and quiet.stdout.startswith("verified: seed matches seedHash")


def test_replaying_a_match_not_yet_finished_or_unknown_is_a_clear_error(api):
    token, _ = api.register()
    match_id = seated_match(api, token, "unfinished")
    run = replay(api, match_id)
    assert run.returncode != 0
    assert "MATCH_NOT_ACTIVE" in run.stderr and "once it has finished" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""

    run = replay(api, "no-such-match")
    assert run.returncode != 0 and "NOT_FOUND" in run.stderr, run.stderr


def test_an_unreachable_server_is_a_clear_error():
    run = subprocess.run(
        [sys.executable, "-m", "wizard_arena", "replay", "some-match", "--url", "http://127.0.0.1:9"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert run.returncode != 0 and "cannot reach http://127.0.0.1:9" in run.stderr, run.stderr
