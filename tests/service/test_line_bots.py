"""Bots in any language against a real server and worker: `wizard-arena play --cmd` runs the
starters of examples/ (node, and shell with jq) as users run them, each in its own process,
through a whole match against house bots; what each wrote to stderr is in its own record and
nowhere else (not the other's record, not a spectator's, not the live views, not after
archiving, not in anyone else's export). A program that answers garbage, makes an illegal move or crashes
is handled as the README says; a move's debug text over its limit is refused."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from service.store.keys import match_key
from tests.service.arena_client import AWAIT_TURN, Api, Frozen, Process, first_legal, wait_until
from tests.service.test_sdk_play import follow_to_end

SEATS = "query($m: ID!) { match(id: $m) { status seats { bot { id } timeouts } } }"


@pytest.fixture(scope="module")
def archived_soon(start_api: Any, start_worker: Any) -> Iterator[Api]:
    """An API and a worker whose archived matches leave Redis a second after settlement, so
    that their records are read from the archive."""
    worker = start_worker(ARENA_ARCHIVE_GRACE_SECONDS="1")
    yield start_api(ARENA_ARCHIVE_GRACE_SECONDS="1")
    worker.stop()


@pytest.fixture
def play(tmp_path: Path) -> Iterator[Callable[[Api, str, str], Process]]:
    """Starts `wizard-arena play --cmd COMMAND` processes; each is stopped at teardown."""
    started: list[Process] = []

    def start(api: Api, token: str, command: str) -> Process:
        log = tmp_path / f"play-{len(started)}.log"
        process = Process(["play", "--url", api.base, "--token", token, "--cmd", command], dict(os.environ), log)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


def record(api: Api, match_id: str, token: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = api.http.get(f"/api/matches/{match_id}/record", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def debug_by_seat(rec: dict[str, Any]) -> dict[int, list[str]]:
    """The debug texts a record shows, by the seat whose move carried each."""
    shown: dict[int, list[str]] = {}
    for move, note in zip(rec["moves"], rec["moveNotes"], strict=True):
        if "debug" in note:
            shown.setdefault(move["seat"], []).append(note["debug"])
    return shown


@pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("jq") is None,
    reason="the starters need node and jq: `make test` installs jq (apt-get install jq nodejs)",
)
def test_the_node_and_the_shell_starters_play_a_match_and_only_each_sees_its_own_stderr(archived_soon, play, redis_client):
    api = archived_soon
    (node_token, node_id), (sh_token, sh_id) = api.register(), api.register()
    match_id = api.create_match(node_token, ruleset="WIZARD_JUNIOR", players=4, moveTimeoutMs=10_000)
    api.join(node_token, match_id, 0)
    api.join(sh_token, match_id, 1)
    for _ in range(2):
        api.add_house_bot(node_token, match_id, "HEURISTIC")
    processes = [play(api, node_token, "node examples/line_bot.mjs"), play(api, sh_token, "sh examples/line_bot.sh")]

    live_views: list[str] = []

    def watch_live(_: dict[str, Any]) -> None:  # what the other seat and a spectator read while it runs
        if len(live_views) < 6:
            live_views.extend(json.dumps(api.match(match_id, t)) for t in (sh_token, None))

    final = follow_to_end(api, match_id, watch_live)

    assert final["status"] == "FINISHED"
    assert [s["timeouts"] for s in final["seats"]] == [0, 0, 0, 0]
    assert live_views and not any("turn round" in view for view in live_views)

    def check(rec_of: Callable[[str | None], dict[str, Any]]) -> None:
        mine_node, mine_sh, anonymous = rec_of(node_token), rec_of(sh_token), rec_of(None)
        moves_by = {seat: sum(m["seat"] == seat for m in anonymous["moves"]) for seat in (0, 1)}
        # every move of each starter carried its stderr line, and its own record shows all of them
        assert debug_by_seat(mine_node).keys() == {0} and len(debug_by_seat(mine_node)[0]) == moves_by[0]
        assert debug_by_seat(mine_sh).keys() == {1} and len(debug_by_seat(mine_sh)[1]) == moves_by[1]
        for text in debug_by_seat(mine_node)[0] + debug_by_seat(mine_sh)[1]:
            assert text.startswith("turn round ") and text.endswith("\n"), text
        assert debug_by_seat(anonymous) == {}
        # the published record is the record without the owner's debug
        for rec in (mine_node, mine_sh):
            for note in rec["moveNotes"]:
                note.pop("debug", None)
        assert mine_node == anonymous == mine_sh

    check(lambda token: record(api, match_id, token))
    # once archived and gone from Redis, the records come from the archive and say the same
    wait_until(lambda: not redis_client.exists(match_key(match_id)), "the match to leave Redis after archiving", timeout=90)
    check(lambda token: record(api, match_id, token))
    # the export: the bot's own, with its token, as its record; anyone else's, none
    for bot_id, token, other in ((node_id, node_token, sh_token), (sh_id, sh_token, node_token)):
        assert exported(api, bot_id, match_id, token) == record(api, match_id, token)
        assert debug_by_seat(exported(api, bot_id, match_id, None)) == {}
        assert debug_by_seat(exported(api, bot_id, match_id, other)) == {}
    logs = [p.output() for p in processes]
    assert all("stderr: turn round" in log and "ERROR" not in log for log in logs), logs


def exported(api: Api, bot_id: str, match_id: str, token: str | None) -> dict[str, Any]:
    """The match's record in the bot's export, as ``token``'s bot (None: anyone) reads it."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    lines = api.http.get(f"/api/bots/{bot_id}/records", headers=headers).text.splitlines()
    [found] = [r for r in map(orjson.loads, lines) if r["matchId"] == match_id]
    return found  # type: ignore[no-any-return]


FAULTY = r'''
import json, os, sys
folder = sys.argv[1]
def flag(name):
    path = os.path.join(folder, name)
    if os.path.exists(path):
        return False
    open(path, "w").close()
    return True
for line in sys.stdin:
    msg = json.loads(line)
    with open(os.path.join(folder, "seen.jsonl"), "a") as seen:
        seen.write(line)
    match = msg["match"]
    legal = [{k: v for k, v in m.items() if v is not None} for m in match["legalMoves"]]
    if flag("garbled"):
        print("this is no move", flush=True)
    elif msg["type"] == "turn" and match["phase"] == "BID" and flag("illegal"):
        print(json.dumps({"bid": len(match["hand"]) + 1}), flush=True)
    elif msg["type"] == "turn" and match["movesMade"] >= 12 and flag("crashed"):
        print("crashing on purpose", file=sys.stderr, flush=True)
        sys.exit(1)
    else:
        print(json.dumps(legal[0]), flush=True)
'''


def test_garbage_an_illegal_move_and_a_crash_are_answered_as_documented(api, start_worker, play, tmp_path):
    worker = start_worker()
    try:
        token, _ = api.register()
        program = tmp_path / "faulty.py"
        program.write_text(FAULTY)
        match_id = api.create_match(token, ruleset="WIZARD_JUNIOR", players=3, moveTimeoutMs=10_000)
        api.join(token, match_id, 0)
        for _ in range(2):
            api.add_house_bot(token, match_id, "RANDOM")
        process = play(api, token, f"{shlex.quote(sys.executable)} {shlex.quote(str(program))} {shlex.quote(str(tmp_path))}")

        final = follow_to_end(api, match_id)

        assert final["status"] == "FINISHED"
        assert final["seats"][0]["timeouts"] == 0  # every fault was answered within the move clock
        errors = [json.loads(line) for line in (tmp_path / "seen.jsonl").read_text().splitlines()]
        errors = [e for e in errors if e["type"] == "error"]
        codes = [e["code"] for e in errors]
        assert codes.count("BAD_INPUT") >= 1 and codes.count("ILLEGAL_MOVE") == 1, errors
        illegal = next(e for e in errors if e["code"] == "ILLEGAL_MOVE")
        assert "legal" in illegal["message"] and illegal["matchId"] == illegal["match"]["id"] == match_id
        output = process.output()
        assert "exited with code 1; starting it again" in output, output
        assert "crashing on purpose" in output  # the dead program's stderr went to the terminal
    finally:
        worker.stop()


def test_debug_over_the_limit_is_refused_and_changes_nothing(api):
    token, _ = api.register()
    match_id = api.create_match(token, ruleset="WIZARD_JUNIOR", players=3, moveTimeoutMs=60_000, firstDealer=2)
    api.join(token, match_id, 0)
    for _ in range(2):
        api.add_house_bot(token, match_id, "RANDOM")
    turn = api.data(AWAIT_TURN, {"m": match_id, "t": 20_000}, token)["awaitTurn"]
    move = first_legal(turn)
    frozen = Frozen(api, match_id, [token])
    for debug, code in (("x" * 4097, "BAD_INPUT"), ("é" * 2049, "BAD_INPUT"), (7, "BAD_INPUT")):
        response = api.http.post(
            f"/api/matches/{match_id}/moves", json={**move, "debug": debug}, headers={"Authorization": f"Bearer {token}"}
        )
        assert response.status_code == 400 and response.json()["error"]["code"] == code, response.text
        assert "debug" in response.json()["error"]["message"]
        frozen.check()
    body = api.gql(
        "mutation($m: ID!, $mv: MoveInput!, $d: String) { submitMove(matchId: $m, move: $mv, debug: $d) { version } }",
        {"m": match_id, "mv": move, "d": "é" * 2048}, token,
    )
    assert not body.get("errors"), body


def test_a_seat_keeps_debug_text_up_to_its_budget_for_the_match(start_api):
    api = start_api(ARENA_MATCH_DEBUG_BYTES_PER_SEAT="10")
    token, _ = api.register()
    match_id = api.create_match(token, ruleset="WIZARD_JUNIOR", players=3, moveTimeoutMs=60_000)
    api.join(token, match_id, 0)
    for _ in range(2):
        api.add_house_bot(token, match_id, "RANDOM")
    for debug in ("abcdefgh", "ijklmnop", "qrstuvwx"):
        turn = api.data(AWAIT_TURN, {"m": match_id, "t": 20_000}, token)["awaitTurn"]
        body = api.gql(
            "mutation($m: ID!, $mv: MoveInput!, $d: String) { submitMove(matchId: $m, move: $mv, debug: $d) { version } }",
            {"m": match_id, "mv": first_legal(turn), "d": debug}, token,
        )
        assert not body.get("errors"), body  # the move is made, whatever is left of the budget
    assert api.play_out(token, match_id)["status"] == "FINISHED"
    # 8 bytes, then the 2 left of the 10, then none: the rest is cut off
    assert debug_by_seat(record(api, match_id, token)) == {0: ["abcdefgh", "ij"]}
