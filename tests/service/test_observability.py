"""Health that means something, metrics an operator can run on, logs that name their request.

Each test runs on a Redis server of its own (the gauges read the whole service's state from
Redis), with the real API and worker processes: a wait, a WebSocket, a match started, a
deadline passing with no worker, work queued: each moves its gauge; `/readyz` follows the
clock's heartbeat; `wizard-arena worker --check` fails for a worker whose clock has stopped
while its RQ registration lives on; JSON log lines carry the request's and the match's id."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from service.health import host_name
from service.store.keys import CLOCK_HEARTBEATS
from tests.service.arena_client import REPO, Api, Process, free_port, wait_until
from tests.service.conftest import embedded_redis_url
from tests.service.ws_client import GraphQLWS


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[str]:
    yield from embedded_redis_url(tmp_path / "redis")


def gauges(api: Api) -> dict[str, float]:
    """Every unlabelled sample of ``/metrics`` (the gauges), and labelled ones as name{k=v,…}."""
    response = api.http.get("/metrics")
    assert response.status_code == 200
    out = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            out[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return out


def gauge(api: Api, name: str) -> float:
    return gauges(api)[name]


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_each_gauge_moves_with_what_it_measures(start_api: Any, start_worker: Any, own_redis: str) -> None:
    api = start_api(REDIS_URL=own_redis)
    before = gauges(api)
    assert before["wizard_arena_redis_up"] == 1
    assert before["wizard_arena_clock_heartbeat_age_seconds"] == float("inf")  # no worker has ever run
    assert before["wizard_arena_clocks_alive"] == 0
    assert before["process_resident_memory_bytes"] > 0 and before["process_open_fds"] > 0
    assert "process_cpu_seconds_total" in before
    for name in ("wizard_arena_matches_live", "wizard_arena_deadlines_pending", "wizard_arena_deadline_lag_seconds",
                 "wizard_arena_job_queue_depth", "wizard_arena_settlement_backlog", "wizard_arena_waits_open",
                 "wizard_arena_websockets_open"):
        assert before[name] == 0, name

    token, _ = api.register()

    # a wait: a long poll held open in another thread
    with httpx.Client(base_url=api.base, timeout=30) as other:
        poll = threading.Thread(target=lambda: other.get("/api/turns", params={"timeoutMs": 3000}, headers=auth(token)))
        poll.start()
        wait_until(lambda: gauge(api, "wizard_arena_waits_open") == 1, "the long poll to show as a wait")
        poll.join()
    wait_until(lambda: gauge(api, "wizard_arena_waits_open") == 0, "the wait to end")

    # a WebSocket, open then closed
    with GraphQLWS(api.ws_url) as ws:
        ws.init(token)
        assert gauge(api, "wizard_arena_websockets_open") == 1
    wait_until(lambda: gauge(api, "wizard_arena_websockets_open") == 0, "the WebSocket to be counted closed")

    # a match started whose bot never moves: with no worker, its deadline passes unswept
    match_id = api.create_match(token, players=3, moveTimeoutMs=100)
    api.join(token, match_id, 0)
    api.add_house_bot(token, match_id)
    api.add_house_bot(token, match_id)
    started = gauges(api)
    assert started["wizard_arena_matches_live"] == 1
    assert started["wizard_arena_deadlines_pending"] == 1
    lag = wait_until(lambda: gauge(api, "wizard_arena_deadline_lag_seconds"), "the deadline to be overdue")
    assert wait_until(lambda: gauge(api, "wizard_arena_deadline_lag_seconds") > lag, "the lag to grow")

    # work queued: a match of house bots plays to its end in the API; its settlement waits
    ended = api.create_match(token, players=3, moveTimeoutMs=60_000)
    for _ in range(3):
        api.add_house_bot(token, ended)
    wait_until(lambda: api.match(ended)["status"] == "FINISHED", "the house bots' match to end")
    assert gauge(api, "wizard_arena_settlement_backlog") == 1
    client = redis.Redis.from_url(own_redis)
    try:
        from rq import Queue

        Queue("default", connection=client).enqueue("worker.jobs.fit_ratings", "WIZARD", job_id="observability-fit")
        assert gauge(api, "wizard_arena_job_queue_depth") == 1

        # a worker: the clock beats, the overdue seat is moved for, the queue and backlog drain
        start_worker(REDIS_URL=own_redis)
        wait_until(lambda: gauge(api, "wizard_arena_clocks_alive") == 1, "the worker's clock to beat", 30)
        wait_until(lambda: gauge(api, "wizard_arena_deadline_lag_seconds") < 0.5, "the sweeper to catch up")
        wait_until(lambda: gauge(api, "wizard_arena_job_queue_depth") == 0, "the queue to drain")
        wait_until(lambda: gauge(api, "wizard_arena_settlement_backlog") == 0, "the settlement to be done")
        assert gauge(api, "wizard_arena_clock_heartbeat_age_seconds") < 5
    finally:
        client.close()

    after = gauges(api)
    assert after["wizard_arena_graphql_requests_total{operation=createMatch,outcome=ok}"] == 2
    assert after["wizard_arena_graphql_requests_total{operation=addHouseBot,outcome=ok}"] == 5
    assert after["wizard_arena_graphql_seconds_count{operation=joinMatch}"] == 1
    api.http.post("/graphql", json={"query": "{ noSuchField }"})
    api.http.post("/graphql", json={"query": "{ __typename }"})
    labelled = gauges(api)
    assert labelled["wizard_arena_graphql_requests_total{operation=other,outcome=error}"] == 1
    assert labelled["wizard_arena_graphql_requests_total{operation=other,outcome=ok}"] == 1
    operations = {key.split("operation=")[1].split(",")[0].rstrip("}") for key in labelled if "operation=" in key}
    assert "noSuchField" not in operations


def test_readyz_follows_the_clocks_heartbeat(start_api: Any, start_worker: Any, own_redis: str) -> None:
    api = start_api(REDIS_URL=own_redis, ARENA_CLOCK_STALE_SECONDS="2")
    # alive, whatever the clock: /healthz (and its alias /livez) does not ask about it
    for path in ("/healthz", "/livez"):
        alive = api.http.get(path)
        assert alive.status_code == 200 and alive.json() == {"status": "ok", "redis": "ok", "database": "ok"}, path

    never = api.http.get("/readyz")
    assert never.status_code == 503 and "ever beaten" in never.json()["clock"], never.text

    client = redis.Redis.from_url(own_redis)
    try:
        client.hset(CLOCK_HEARTBEATS, "some-host", int(time.time() * 1000) - 60_000)
        stale = api.http.get("/readyz")
        assert stale.status_code == 503 and stale.json()["clock"].startswith("stale"), stale.text
        client.hset(CLOCK_HEARTBEATS, "some-host", int(time.time() * 1000))
        fresh = api.http.get("/readyz")
        assert fresh.status_code == 200, fresh.text
        assert fresh.json()["status"] == "ready" and fresh.json()["database"] == "ok"
        client.hdel(CLOCK_HEARTBEATS, "some-host")
    finally:
        client.close()

    # a real worker's clock: ready while it runs, not ready a few seconds after it stops
    worker = start_worker(REDIS_URL=own_redis)
    wait_until(lambda: api.http.get("/readyz").status_code == 200, "a live clock to make the service ready", 30)
    worker.stop()
    wait_until(lambda: api.http.get("/readyz").status_code == 503, "the stopped clock to go stale", 10)


def worker_check(redis_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REDIS_URL": redis_url, "ARENA_CLOCK_STALE_SECONDS": "2"}
    return subprocess.run([sys.executable, "-m", "wizard_arena", "worker", "--check"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_worker_check_fails_when_the_clock_stops_though_rq_still_lists_the_worker(
    start_worker: Any, own_redis: str
) -> None:
    none = worker_check(own_redis)
    assert none.returncode == 1 and "no RQ worker" in none.stderr, none

    worker = start_worker(REDIS_URL=own_redis)
    wait_until(lambda: worker_check(own_redis).returncode == 0, "the worker to pass its check", 30, 0.2)

    # Frozen (as a hung clock would be): RQ's registration outlives it, the heartbeat does not.
    os.killpg(worker.popen.pid, signal.SIGSTOP)
    try:
        failed = wait_until(lambda: (c := worker_check(own_redis)).returncode == 1 and c, "the check to fail", 15, 0.2)
        assert "clock" in failed.stderr and "no RQ worker" not in failed.stderr, failed.stderr
        assert host_name() in failed.stderr
    finally:
        os.killpg(worker.popen.pid, signal.SIGCONT)
    wait_until(lambda: worker_check(own_redis).returncode == 0, "the thawed worker to pass again", 15, 0.2)


def test_json_logs_carry_the_request_id_and_the_match_id(database_url: str, own_redis: str, tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "REDIS_URL": own_redis, "DATABASE_URL": database_url, "ARENA_LOG_FORMAT": "json"}
    process = Process(["serve", "--port", str(port), "--log-level", "info"], env, tmp_path / "serve.log")
    api = Api(process, port)
    try:
        api.wait_healthy()
        token, _ = api.register()
        response = api.http.post(
            "/graphql", json={"query": "mutation { createMatch(input: {players: 3}) { id } }"},
            headers={**auth(token), "X-Request-Id": "trace-42.a:b"},
        )
        assert response.headers["x-request-id"] == "trace-42.a:b"
        match_id = response.json()["data"]["createMatch"]["id"]
        made = api.http.get("/livez").headers["x-request-id"]
        assert len(made) == 16 and int(made, 16) >= 0  # none sent: one made
        for bad in ("has space", "x" * 200, "semi;colon"):
            replaced = api.http.get("/livez", headers={"X-Request-Id": bad}).headers["x-request-id"]
            assert replaced != bad and len(replaced) == 16

        def created_line() -> dict[str, Any] | None:
            for line in process.output().splitlines():
                entry = json.loads(line)  # every line is one JSON object
                if entry["message"] == f"match {match_id} created by " + entry["message"].rsplit(" ", 1)[-1]:
                    return entry  # type: ignore[no-any-return]
            return None

        entry = wait_until(created_line, "the match's creation in the log")
        assert entry["request_id"] == "trace-42.a:b" and entry["match_id"] == match_id
        assert entry["level"] == "INFO" and entry["logger"] == "wizard_arena.matches" and entry["time"].endswith("+00:00")
        lines = [json.loads(line) for line in process.output().splitlines()]
        assert any(line["logger"].startswith("uvicorn") for line in lines), "uvicorn's own lines are JSON too"
    finally:
        api.close()
        process.stop()
