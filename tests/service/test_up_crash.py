"""`wizard-arena up` killed with SIGKILL in the middle of a match, and started again on the same
data folder: nothing of the killed run outlives it, one run at a time has the folder (a
second `up` is refused and changes nothing), and the match is whole: its version agrees with
its event stream, its snapshot with the state its log replays to, and it plays on to the end.

Redis keys as service/store.py documents them: ``{m:<id>}:match`` (version, state, live, eid)
and ``{m:<id>}:events`` (one entry per change, ``v`` its version)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis

from service.model.live_match import LiveMatch
from service.store.keys import match_home_key
from tests.service.arena_client import AWAIT_TURN, Api, first_legal, wait_until
from tests.service.up_process import (
    Up,
    assert_one_redis_at_a_time,
    healthz,
    redis_server_pids,
    run_up,
    running,
    wait_gone,
)
from wizard import new_match
from wizard.record import state_to_bytes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")


def assert_match_whole(client: redis.Redis, match_id: str) -> LiveMatch:
    """The stored match agrees with its log: versions 1..N without gap or repeat, N the
    match's version, the latest event the one it names, its snapshot (engine state and the
    rest) what replaying the log gives, its deadline where the sweeper looks. Read in one
    MULTI: the restarted worker goes on playing the match meanwhile."""
    with client.pipeline(transaction=True) as pipe:
        pipe.hgetall(f"{{m:{match_id}}}:match")
        pipe.xrange(f"{{m:{match_id}}}:events")
        pipe.zscore(match_home_key(match_id, "deadlines"), match_id)
        stored, events, deadline = pipe.execute()
    versions = [int(fields[b"v"]) for _, fields in events]
    assert versions == list(range(1, len(events) + 1)), f"event versions {versions[:5]}…{versions[-5:]}"
    assert int(stored[b"version"]) == versions[-1], "the match's version is its latest event's"
    assert stored[b"eid"] == events[-1][0], "the match names its latest event"
    match = LiveMatch.from_stored(match_id, int(stored[b"version"]), stored[b"settings"], stored[b"state"], stored[b"live"])
    replayed = LiveMatch.new(match_id, match.settings, new_match(match.state.config, match.state.seed, match.state.salt))
    assert orjson.loads(events[0][1][b"e"]) == {"t": "create"}
    for _, fields in events[1:]:
        replayed.apply_event(orjson.loads(fields[b"e"]))
    assert replayed.version == match.version
    assert state_to_bytes(replayed.state) == stored[b"state"], "the snapshot is the state the log replays to"
    assert replayed.live_json() == stored[b"live"], "seats, status, timeouts and deadline agree with the log"
    assert (None if deadline is None else int(deadline)) == match.due_ms, "the sweeper looks at the match when it is due"
    return match


def keep_playing(api: Api, token: str, match_id: str, stop: threading.Event) -> None:
    """The bot's moves, first legal, as fast as they come, until stopped or the server is gone.
    Refusals are expected (the worker moves for the seat whenever it is late; a fast bot
    meets its rate limit): the bot just asks again."""
    with httpx.Client(base_url=api.base, timeout=10) as http:
        headers = {"Authorization": f"Bearer {token}"}
        while not stop.is_set():
            try:
                turn = http.post(
                    "/graphql", json={"query": AWAIT_TURN, "variables": {"m": match_id, "t": 1000}}, headers=headers
                ).json()
                if turn.get("errors"):
                    stop.wait(0.05)  # e.g. RATE_LIMITED: a moment, then again
                    continue
                if turn["data"]["awaitTurn"] is None:
                    continue
                http.post("/graphql", headers=headers, json={
                    "query": "mutation($m: ID!, $mv: MoveInput!, $v: Int) { submitMove(matchId: $m, move: $mv, "
                             "expectedVersion: $v) { version } }",
                    "variables": {"m": match_id, "mv": first_legal(turn["data"]["awaitTurn"]),
                                  "v": turn["data"]["awaitTurn"]["version"]},
                })
            except (httpx.TransportError, ValueError):
                return  # the server was killed under us (mid-answer, too)


def test_kill_9_of_up_leaves_nothing_behind_and_the_next_up_finds_the_match_whole(tmp_path: Path) -> None:
    data = tmp_path / "arena"
    # every event kept (not only the latest): the match is checked against its whole log
    first = Up(data, tmp_path / "up-1.log", ARENA_MATCH_EVENTS_KEPT="0").wait_healthy()
    api = first.api
    mover, _ = api.register()
    idler, _ = api.register()  # never moves before the kill: the worker moves for it
    match_id = api.create_match(mover, players=4, ruleset="WIZARD_JUNIOR", moveTimeoutMs=300)
    api.add_house_bot(mover, match_id, "HEURISTIC")
    api.add_house_bot(mover, match_id, "RANDOM")
    api.join(mover, match_id)
    joined = api.join(idler, match_id)
    assert joined["status"] == "ACTIVE"
    idle_seat = joined["mySeat"]
    stop = threading.Event()
    player = threading.Thread(target=keep_playing, args=(api, mover, match_id, stop))
    player.start()
    try:
        wait_until(lambda: (m := api.match(match_id))["version"] >= 30 and m["seats"][idle_seat]["timeouts"] >= 3,
                   "the match under way, with the worker's timeout moves")
        children = first.descendants()
        assert any("redis-server" in c for c in children.values()), children
        assert any("wizard_arena worker" in c for c in children.values()), children

        os.kill(first.pid, signal.SIGKILL)  # the whole `up` at once, mid-match
        first.popen.wait()
    finally:
        stop.set()
        player.join()
    first.api.close()
    wait_gone(children, "the killed up's Redis and worker (and the worker's children) to exit")
    assert not (data / "redis.sock").exists(), "the Redis server shut down cleanly (it removes its socket)"
    assert assert_one_redis_at_a_time(data / "redis.log") == 1

    second = Up(data, tmp_path / "up-2.log", ARENA_MATCH_EVENTS_KEPT="0").wait_healthy()
    try:
        client = redis.Redis(unix_socket_path=str(data / "redis.sock"))
        assert_match_whole(client, match_id)

        # A second `up` on the folder while this one runs: refused, with the pid, and nothing changes.
        lock_before = (data / "up.lock").read_bytes()
        log_before = (data / "redis.log").read_bytes()
        servers_before, children_before = redis_server_pids(data), second.children()
        refused = run_up(data)
        assert refused.returncode == 1, refused
        message = refused.stderr
        assert f"is in use by wizard-arena up (pid {second.pid}" in message, message
        assert f"kill {second.pid}" in message and "ARENA_DATA_DIR=" in message, message
        assert (data / "up.lock").read_bytes() == lock_before
        assert (data / "redis.log").read_bytes()[: len(log_before)] == log_before
        assert "Redis is starting" not in (data / "redis.log").read_bytes()[len(log_before):].decode()
        assert redis_server_pids(data) == servers_before and len(servers_before) == 1
        assert second.children() == children_before, "no Redis or worker more, none less"
        assert healthz(second.port) == 200

        # The match plays on to its end, both bots moving now; then it is still whole.
        finals: dict[str, Any] = {}
        threads = [
            threading.Thread(target=lambda t=token: finals.__setitem__(t, second.api.play_out(t, match_id)))
            for token in (mover, idler)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert {final["status"] for final in finals.values()} == {"FINISHED"}, finals
        match = assert_match_whole(client, match_id)
        assert match.status.value == "FINISHED"
        client.close()
    finally:
        family = second.descendants()
        second.stop()
    wait_gone(family, "the second up's Redis and worker, stopped with it")
    assert assert_one_redis_at_a_time(data / "redis.log") == 2


def hold_lock_as_orphan(data: Path) -> subprocess.Popen[str]:
    """A process holding the folder's lock as a killed `up`'s leftover Redis would: the lock
    file names an `up` that is gone. It lets go when its stdin closes."""
    data.mkdir(parents=True, exist_ok=True)
    gone = subprocess.Popen(["true"])
    gone.wait()
    owner = {"pid": gone.pid, "ticks": 1, "command": "wizard-arena up", "started": "earlier", "api": None, "state": "running"}
    script = (
        "import fcntl, os, sys\n"
        f"fd = os.open({str(data / 'up.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        f"os.ftruncate(fd, 0); os.write(fd, {json.dumps(owner).encode()!r})\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_up_says_which_leftover_processes_hold_the_folder_when_they_do_not_exit(tmp_path: Path) -> None:
    data = tmp_path / "arena"
    holder = hold_lock_as_orphan(data)
    try:
        refused = run_up(data, ARENA_DATA_DIR_WAIT_SECONDS="1")
        assert refused.returncode == 1, refused
        message = refused.stderr
        assert "waiting up to 1 s" in message, message
        assert "still held, after waiting 1 s, by the processes of wizard-arena up (pid " in message, message
        assert f"pid {holder.pid} ({sys.executable} -c" in message, message
        assert f"kill {holder.pid}" in message, message
        assert not (data / "redis.log").exists(), "no Redis was started"
    finally:
        holder.communicate("")


def test_up_waits_for_the_leftovers_of_an_ended_run_then_starts(tmp_path: Path) -> None:
    data = tmp_path / "arena"
    holder = hold_lock_as_orphan(data)
    up = Up(data, tmp_path / "up.log")
    try:
        wait_until(lambda: "waiting up to 30 s" in up.output(), "up to say what it waits for")
        assert f"pid {holder.pid}" in up.output()
        assert not (data / "redis.log").exists(), "no Redis while the leftover holds the folder"
        holder.communicate("")  # the leftover exits
        up.wait_healthy()
        assert running(up.pid)
    finally:
        up.stop()
        if holder.poll() is None:
            holder.kill()


def test_ctrl_c_stops_the_worker_then_redis(tmp_path: Path) -> None:
    """SIGINT (Ctrl-C) reaches `up` alone (its children have process groups of their own)
    and it stops everything itself, Redis last and cleanly."""
    data = tmp_path / "arena"
    up = Up(data, tmp_path / "up.log").wait_healthy()
    family = up.descendants()
    up.api.close()
    up.popen.send_signal(signal.SIGINT)
    assert up.popen.wait(40) is not None
    wait_gone(family, "up's children, stopped by up")
    assert assert_one_redis_at_a_time(data / "redis.log") == 1
    # the folder is free at once for the next run
    again = Up(data, tmp_path / "again.log").wait_healthy()
    again.stop()

