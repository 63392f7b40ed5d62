"""The organiser's commands, run for real against the test server: wizard-arena tournament
create|list|show|cancel, wizard-arena leaderboard, and wizard-arena --version."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

#: a start no worker reaches during the test (the tournament stays SCHEDULED)
LATER = (datetime.now(UTC) + timedelta(days=30)).isoformat()


def arena(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIZARD_ARENA_")}
    done = subprocess.run([sys.executable, "-m", "wizard_arena", *args], capture_output=True, text=True, env=env,
                          timeout=60)
    assert (done.returncode == 0) is ok, done.stderr
    return done


def as_json(*args: str) -> Any:
    return json.loads(arena(*args, "--json").stdout)


def test_version():
    assert arena("--version").stdout.startswith("wizard-arena ")


def test_an_organiser_creates_lists_shows_and_cancels_a_tournament(api):
    token, bot_id = api.register()
    entrant, entrant_id = api.register()
    server = ["--url", api.base]
    created = as_json("tournament", "create", "cli cup", "--rounds", "2", "--players", "3", "--bot", entrant_id,
                      "--house-bot", "random", "--starts-at", LATER, "--unrated", *server,
                      "--token", token)
    assert created["name"] == "cli cup" and created["status"] == "SCHEDULED" and created["createdBy"] == bot_id
    tid = created["id"]
    # the named bot is invited (it enters only by accepting); the house bot is entered
    assert created["rated"] is False and entrant_id not in [e["id"] for e in created["entrants"]]
    invited = api.data("{ invitations { status tournament { id } } }", token=entrant)["invitations"]
    assert {"status": "PENDING", "tournament": {"id": tid}} in invited

    listed = as_json("tournament", "list", "--status", "SCHEDULED", "--first", "100", *server)
    assert tid in [edge["node"]["id"] for edge in listed["edges"]]
    shown = arena("tournament", "show", tid, *server).stdout  # no token needed to read
    assert tid in shown and "cli cup" in shown and "ROUND_ROBIN of 2 rounds" in shown

    refused = arena("tournament", "cancel", tid, *server, "--token", entrant, ok=False)
    assert "FORBIDDEN" in refused.stderr  # only its creator cancels it
    cancelled = as_json("tournament", "cancel", tid, *server, "--token", token, "--reason", "rain")
    assert cancelled["status"] == "CANCELLED" and cancelled["cancelledReason"].endswith(": rain")
    assert "rain" in arena("tournament", "show", tid, *server).stdout
    missing = arena("tournament", "show", "nope", *server, ok=False)
    assert "NOT_FOUND" in missing.stderr


def test_a_cancel_without_a_reason_and_a_house_bot_named_by_its_id(api):
    token, _ = api.register()
    server = ["--url", api.base, "--token", token]
    created = as_json("tournament", "create", "no reason", "--rounds", "1", "--players", "3", "--house-bot", "random",
                      "--bot", "house-heuristic", "--starts-at", LATER, *server)
    assert [e["id"] for e in created["entrants"]] == ["house-heuristic-0", "house-random-1"]
    cancelled = as_json("tournament", "cancel", created["id"], *server)
    assert cancelled["status"] == "CANCELLED" and cancelled["cancelledReason"].startswith("cancelled by its creator")
    assert "invite a bot" in arena("tournament", "create", "--help").stdout


def test_create_and_cancel_need_a_token(api):
    done = arena("tournament", "create", "x", "--rounds", "1", "--url", api.base, ok=False)
    assert "token" in done.stderr


@pytest.mark.parametrize("method", ["ELO", "FITTED"])
def test_leaderboard_prints_the_servers_rows(api, method):
    rows = as_json("leaderboard", "--ruleset", "WIZARD", "--method", method, "--first", "5", "--url", api.base)
    assert isinstance(rows, list) and len(rows) <= 5
    assert [r["rank"] for r in rows] == sorted(r["rank"] for r in rows)
    assert all(r["deviation"] > 0 and isinstance(r["provisional"], bool) for r in rows)
    established = as_json("leaderboard", "--ruleset", "WIZARD", "--method", method, "--established", "--url", api.base)
    assert all(not r["provisional"] for r in established)
    assert [r["rank"] for r in established] == list(range(1, len(established) + 1))
    text = arena("leaderboard", "--ruleset", "WIZARD_JUNIOR", "--url", api.base).stdout
    assert text.strip()
    bad = arena("leaderboard", "--first", "0", "--url", api.base, ok=False)
    assert "BAD_INPUT" in bad.stderr or "LIMIT_EXCEEDED" in bad.stderr
