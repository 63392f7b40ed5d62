"""`wizard-arena up` keeps its processes running and stops them all, in order, however it is
asked: a killed embedded Redis comes back on the same data, a killed worker is started again,
Ctrl-C (SIGINT to the terminal's whole process group) ends everything without a traceback,
and a taken port starts nothing and says which port and what to do."""

from __future__ import annotations

import os
import signal
import socket
import sys
from pathlib import Path

import pytest

from tests.service.arena_client import wait_until
from tests.service.up_process import Up, healthz, redis_server_pids, run_up, running, wait_gone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")

ME = "query($id: ID!) { bot(id: $id) { name } }"


def worker_pids(up: Up) -> set[int]:
    return {pid for pid, line in up.children().items() if "wizard_arena worker" in line}


def test_a_killed_embedded_redis_comes_back_on_the_same_data(tmp_path: Path) -> None:
    data = tmp_path / "arena"
    up = Up(data, tmp_path / "up.log").wait_healthy()
    try:
        token, bot_id = up.api.register("registered-before-the-crash")
        (old,) = redis_server_pids(data)
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: "the embedded Redis is back" in up.output() or None, "up to start Redis again", timeout=30)
        wait_until(up.api.reaches_redis, "the API to reach Redis again", timeout=30)
        assert redis_server_pids(data) - {old}, "a new Redis server"
        assert up.api.data(ME, {"id": bot_id})["bot"] == {"name": "registered-before-the-crash"}
        assert up.api.data("{ me { id } }", token=token)["me"] == {"id": bot_id}
        assert running(up.pid)
        assert "Traceback" not in up.output(), up.output()
    finally:
        up.stop()


def test_a_killed_worker_is_started_again(tmp_path: Path) -> None:
    up = Up(tmp_path / "arena", tmp_path / "up.log").wait_healthy()
    try:
        wait_until(lambda: worker_pids(up) or None, "the worker to start")
        (old,) = worker_pids(up)
        os.killpg(old, signal.SIGKILL)  # the worker and its RQ work-horse, as an OOM kill would
        wait_until(lambda: worker_pids(up) - {old} or None, "a new worker", timeout=30)
        assert "the worker exited (killed by SIGKILL); starting it again" in up.output(), up.output()
        assert running(up.pid) and healthz(up.port) == 200
        # the new worker works: it moves for a house bot
        token, _ = up.api.register()
        match_id = up.api.create_match(token, players=3)
        up.api.add_house_bot(token, match_id)
        up.api.add_house_bot(token, match_id)
        up.api.join(token, match_id)
        wait_until(lambda: up.api.match(match_id, token)["version"] > 1 or None, "house bots to move")
    finally:
        up.stop()


def test_ctrl_c_to_the_whole_group_stops_everything_without_a_traceback(tmp_path: Path) -> None:
    up = Up(tmp_path / "arena", tmp_path / "up.log", new_session=True).wait_healthy()
    family = up.descendants()
    assert len(up.children()) >= 3, up.children()  # Redis, PostgreSQL, the API, the worker
    up.api.close()
    os.killpg(up.pid, signal.SIGINT)  # what a terminal sends on Ctrl-C: `up` and all in its group
    assert up.popen.wait(60) == 0
    wait_gone(family, "every process `up` started")
    output = up.output()
    assert "Traceback" not in output, output
    assert "wizard-arena up: stopped" in output, output


def test_a_taken_port_starts_nothing_and_names_the_port_and_the_option(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = run_up(tmp_path / "arena", port=port)
    assert refused.returncode == 1, refused
    assert f"port {port} is taken" in refused.stderr, refused.stderr
    assert "--port" in refused.stderr and "nothing was started" in refused.stderr
    assert "Traceback" not in refused.stderr + refused.stdout
    assert "GraphiQL" not in refused.stdout, "no address printed for an API that never started"
    assert not (tmp_path / "arena" / "redis.log").exists(), "no Redis was started"
