"""The SDK against a real server: `wizard-arena play` processes finish matches with no
timeouts, in several matches at once, across cut connections and where WebSockets are
refused; a bot that raises loses only those moves; register and match new work as shown."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.service.arena_client import REPO, Api, Process, free_port, wait_until
from tests.service.tcp_proxy import TcpProxy
from tests.service.ws_client import Completed, GraphQLWS

FOLLOW = "subscription($m: ID!) { matchUpdates(matchId: $m) { status rounds movesMade seats { timeouts } } }"


@pytest.fixture
def players(tmp_path: Path) -> Iterator[Callable[..., Process]]:
    """Starts `wizard-arena play` processes; each is stopped at teardown."""
    started: list[Process] = []

    def start(url: str, token: str, bot: str = "heuristic", *extra: str) -> Process:
        log = tmp_path / f"play-{len(started)}.log"
        process = Process(["play", "--url", url, "--token", token, "--bot", bot, *extra], dict(os.environ), log)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture(scope="module")
def worker(start_worker: Any) -> Iterator[Any]:
    """A worker, so that a seat whose bot fails to move really times out; stopped after the
    module, as test_readme_commands.py's is."""
    process = start_worker()
    yield process
    process.stop()


def follow_to_end(api: Api, match_id: str, on_update: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The match's last update, following matchUpdates (a spectator's) until it completes."""
    with GraphQLWS(api.ws_url) as ws:
        ws.init()
        op = ws.subscribe(FOLLOW, {"m": match_id})
        last: dict[str, Any] = {}
        while True:
            try:
                last = ws.data(op, "matchUpdates", timeout=30)
            except Completed:
                return last
            if on_update is not None:
                on_update(last)


def finished_with_no_timeouts(
    api: Api, match_id: str, proxy: TcpProxy, on_update: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Follows the match to its end (then closes the bot's proxy) and checks that no seat
    timed out; the last update."""
    try:
        final = follow_to_end(api, match_id, on_update)
    finally:
        proxy.close()
    assert final["status"] == "FINISHED"
    assert all(s["timeouts"] == 0 for s in final["seats"]), final
    return final


def house_match(api: Api, token: str, house: str = "HEURISTIC", **spec: Any) -> str:
    """A match with the token's bot in it and house bots in the other seats."""
    spec = {"ruleset": "WIZARD_JUNIOR", "players": 4, "moveTimeoutMs": 10_000, **spec}
    match_id = api.create_match(token, **spec)
    api.join(token, match_id)
    for _ in range(spec["players"] - 1):
        api.add_house_bot(token, match_id, house)
    return match_id


def test_four_sdk_bot_processes_finish_a_match_with_no_timeouts(api, worker, players):
    tokens = [api.register()[0] for _ in range(4)]
    match_id = api.create_match(tokens[0], ruleset="WIZARD_JUNIOR", players=4, moveTimeoutMs=10_000)
    for token in tokens:
        api.join(token, match_id)
    bots = ["heuristic", "random", "examples/random_bot.py:RandomBot", "heuristic"]
    processes = [players(api.base, token, bot) for token, bot in zip(tokens, bots, strict=True)]

    final = follow_to_end(api, match_id)

    assert final["status"] == "FINISHED"
    assert [s["timeouts"] for s in final["seats"]] == [0, 0, 0, 0]
    logs = [p.output() for p in processes]
    assert all("playing as" in log and "ERROR" not in log for log in logs), logs
    # the bot that made the last move logs the result once its answer arrives, which can be
    # after the spectator's subscription has seen the match finish
    wait_until(
        lambda: any(f"match {match_id} finished" in p.output() for p in processes),
        "a bot to log the match's result",
    )


def test_one_bot_plays_several_matches_at_once(api, worker, players):
    token = api.register()[0]
    match_ids = [house_match(api, token, "RANDOM", ruleset="WIZARD_JUNIOR", players=3) for _ in range(3)]
    players(api.base, token)

    finals = [follow_to_end(api, match_id) for match_id in match_ids]

    assert [f["status"] for f in finals] == ["FINISHED"] * 3
    assert all(s["timeouts"] == 0 for f in finals for s in f["seats"])


def test_a_bot_whose_connection_is_cut_mid_match_reconnects_and_finishes(api, worker, players):
    token = api.register()[0]
    match_id = house_match(api, token)
    proxy = TcpProxy(api.port)
    process = players(proxy.url, token)
    cuts: list[int] = []

    def cut_now_and_then(update: dict[str, Any]) -> None:
        if update["movesMade"] >= 20 * (len(cuts) + 1) and len(cuts) < 3:
            cuts.append(proxy.cut())

    finished_with_no_timeouts(api, match_id, proxy, cut_now_and_then)

    assert len(cuts) == 3 and all(closed >= 2 for closed in cuts), cuts  # the turn stream at least
    assert process.output().count("connection lost") >= 3


def test_where_websockets_are_refused_the_bot_long_polls(api, worker, players):
    token = api.register()[0]
    match_id = house_match(api, token)
    proxy = TcpProxy(api.port, refuse_websockets=True)
    process = players(proxy.url, token)

    finished_with_no_timeouts(api, match_id, proxy)

    assert proxy.websockets_refused >= 1
    assert "long-polling awaitTurn" in process.output()


FLAKY_BOT = '''
from sdk import Bot

class FlakyBot(Bot):
    """Bids fail in odd rounds; everything else is the first legal move."""

    def choose_trump(self, view):
        return view.legal_moves[0]

    def bid(self, view):
        if view.round % 2:
            raise RuntimeError(f"flaky bot fails to bid in round {view.round}")
        return view.legal_moves[0]

    def play(self, view):
        return view.legal_moves[0]
'''


@pytest.mark.parametrize("transport", ["ws", "poll"])
def test_a_bot_that_raises_loses_those_moves_and_keeps_playing(api, worker, players, tmp_path, transport):
    bot_file = tmp_path / "flaky.py"
    bot_file.write_text(FLAKY_BOT)
    token = api.register()[0]
    match_id = house_match(api, token, moveTimeoutMs=3000)  # (a loaded machine still moves well within 3 s)
    process = players(api.base, token, f"{bot_file}:FlakyBot", "--transport", transport)

    final = follow_to_end(api, match_id)

    assert final["status"] == "FINISHED"
    rounds = final["rounds"]
    failed_bids = (rounds + 1) // 2
    assert [s["timeouts"] for s in final["seats"]] == [failed_bids, 0, 0, 0]
    log = process.output()
    assert log.count("RuntimeError: flaky bot fails to bid") == failed_bids  # each turn decided once
    assert f"round {rounds}/{rounds} PLAY" in log  # it played on to the last round


def wizard_arena(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wizard_arena", *args], cwd=REPO, capture_output=True, text=True, timeout=60
    )


def test_register_and_match_new_commands(api):
    registered = wizard_arena("register", f"cli-{os.urandom(3).hex()}", "--url", api.base, "--json")
    assert registered.returncode == 0, registered.stderr
    token = json.loads(registered.stdout)["token"]

    created = wizard_arena(
        "match", "new", "--url", api.base, "--token", token, "--players", "3", "--join",
        "--house-bot", "heuristic", "--house-bot", "RANDOM", "--move-timeout-ms", "5000",
    )
    assert created.returncode == 0, created.stderr
    match = api.match(created.stdout.strip(), token)
    assert match["status"] == "ACTIVE" and match["mySeat"] == 0 and match["moveTimeoutMs"] == 5000

    refused = wizard_arena("match", "new", "--url", api.base, "--token", "wza_not-a-token")
    assert refused.returncode == 1 and "UNAUTHENTICATED" in refused.stderr
    too_many = wizard_arena("match", "new", "--url", api.base, "--token", token, "--players", "3",
                            *["--house-bot", "RANDOM"] * 4)
    assert too_many.returncode == 1 and "4 seats" in too_many.stderr


def test_watch_follows_a_live_match_as_a_spectator_until_it_ends(api):
    token = api.register()[0]
    match_id = house_match(api, token, "RANDOM", players=3)
    watcher = subprocess.Popen(
        [sys.executable, "-m", "wizard_arena", "watch", match_id, "--url", api.base],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert watcher.stdout is not None
        ready, _, _ = select.select([watcher.stdout], [], [], 30)
        assert ready, "watch printed nothing in 30 s"
        first = watcher.stdout.readline()  # subscribed: the match as it is now
        assert first.startswith(f"--- match {match_id} | v") and "ACTIVE" in first
        api.play_out(token, match_id)
        out, err = watcher.communicate(timeout=60)
    finally:
        watcher.kill()
    assert watcher.returncode == 0, err
    pictures = out.split("--- match ")
    assert len(pictures) > 20  # every change, not just the end
    assert "| FINISHED |" in pictures[-1] and "winners:" in pictures[-1]
    assert "your hand" not in out and "(you)" not in out  # a spectator sees no card of a live match


def test_watch_of_an_unknown_match_says_so(api):
    watched = wizard_arena("watch", "no-such-match", "--url", api.base)
    assert watched.returncode == 1 and "NOT_FOUND" in watched.stderr


def test_a_rate_limited_bot_waits_as_told_and_misses_no_turn(start_api, worker, players):
    strict = start_api(ARENA_RATE_LIMIT_PER_SECOND="15", ARENA_RATE_LIMIT_BURST="4")
    creator, token = strict.register()[0], strict.register()[0]
    match_id = strict.create_match(creator, ruleset="WIZARD_JUNIOR", players=3, moveTimeoutMs=10_000)
    strict.add_house_bot(creator, match_id, "RANDOM")
    strict.add_house_bot(creator, match_id, "RANDOM")
    process = players(strict.base, token)
    strict.join(token, match_id)  # the bot's token spends its burst on its own requests only

    final = follow_to_end(strict, match_id)

    assert final["status"] == "FINISHED"
    assert [s["timeouts"] for s in final["seats"]] == [0, 0, 0]
    log = process.output()
    assert "rate limited: waiting" in log and "ERROR" not in log


def test_a_bot_started_before_its_server_waits_for_it_then_plays(api, worker, players):
    token = api.register()[0]
    match_id = house_match(api, token)
    port = free_port()  # nothing listens there yet
    process = players(f"http://127.0.0.1:{port}", token)
    wait_until(lambda: "cannot reach the server" in process.output(), "the bot to say it waits")
    assert process.popen.poll() is None  # still waiting, not crashed

    proxy = TcpProxy(api.port, port=port)  # the server comes up at that address
    finished_with_no_timeouts(api, match_id, proxy)


FAILS_IN_ONE_MATCH = '''
import os
from sdk import Bot

class FailsInOneMatch(Bot):
    """Fails every bid of the match $FAILING_MATCH; the first legal move everywhere else."""

    def act(self, view, match_id=None):
        if match_id == os.environ["FAILING_MATCH"] and view.phase.value == "BID":
            raise RuntimeError("this match's bids fail")
        return view.legal_moves[0]
'''


@pytest.mark.parametrize("transport", ["ws", "poll"])
def test_a_turn_failing_in_one_match_holds_up_no_other(api, worker, players, tmp_path, monkeypatch, transport):
    bot_file = tmp_path / "fails.py"
    bot_file.write_text(FAILS_IN_ONE_MATCH)
    token = api.register()[0]
    failing = house_match(api, token, "RANDOM", players=3, moveTimeoutMs=500)
    others = [house_match(api, token, "RANDOM", players=3) for _ in range(2)]
    monkeypatch.setenv("FAILING_MATCH", failing)
    players(api.base, token, f"{bot_file}:FailsInOneMatch", "--transport", transport)

    finals = [follow_to_end(api, match_id) for match_id in (failing, *others)]

    assert [f["status"] for f in finals] == ["FINISHED"] * 3
    # every bid of that match (and, on a loaded machine, maybe a move right after one: 500 ms is short)
    assert finals[0]["seats"][0]["timeouts"] >= finals[0]["rounds"]
    assert all(s["timeouts"] == 0 for f in finals[1:] for s in f["seats"])


def test_a_rolling_restart_of_the_api_loses_and_doubles_no_move(start_api, worker, players):
    """Two API processes behind one address (a TCP proxy, as a load balancer would be): while
    four SDK bots play, new connections go to the second and the first is stopped (SIGTERM: it
    drains, its long polls answer and its WebSockets close with 1001); the bots play on through
    the second; then a fresh process replaces the second the same way. No move is lost (a lost
    one would have timed out), none is applied twice, and no bot saw an error."""
    old, new = start_api(), start_api()
    proxy = TcpProxy(old.port)
    tokens = [old.register()[0] for _ in range(4)]
    match_id = old.create_match(tokens[0], ruleset="WIZARD_JUNIOR", players=4, moveTimeoutMs=10_000)
    for token in tokens:
        old.join(token, match_id)
    processes = [players(proxy.url, token, bot) for token, bot in zip(tokens, ["heuristic", "random"] * 2, strict=True)]

    def moves(api: Api) -> int:
        return int(api.match(match_id)["movesMade"])

    wait_until(lambda: moves(new) >= 20, "the bots to play through the first process", timeout=60)
    proxy.upstream_port = new.port
    old.process.stop()  # SIGTERM
    restarted_at = moves(new)
    wait_until(lambda: moves(new) >= restarted_at + 20, "the bots to play on through the second", timeout=60)
    replacement = start_api()
    proxy.upstream_port = replacement.port
    new.process.stop()
    final = follow_to_end(replacement, match_id)

    assert final["status"] == "FINISHED", final
    assert [s["timeouts"] for s in final["seats"]] == [0, 0, 0, 0]
    record = replacement.http.get(f"/api/matches/{match_id}/record").json()
    assert len(record["moves"]) == final["movesMade"] and not any(n["byServer"] for n in record["moveNotes"])
    logs = [p.output() for p in processes]
    assert all("playing as" in log and "ERROR" not in log and "Traceback" not in log for log in logs), logs
    assert all("Traceback" not in api.process.output() for api in (old, new))  # each drained and stopped cleanly
    assert proxy.connections > len(processes)  # the bots did connect again, to the next process
