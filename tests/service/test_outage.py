"""Redis stopped under a running API and worker, then started again on the same data: while it
is away every request is answered 503 ``UNAVAILABLE`` with when to try again (never
INTERNAL_ERROR, which means a bug), the logs say the outage once when it starts and once
when it ends (no traceback per request or per tick of the clock), and everything works again
once it is back."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from rq import Worker

from service.store.embedded_redis import EmbeddedRedis
from service.store.keys import CLOCK_HEARTBEATS
from tests.service.arena_client import Api, Process, free_port, wait_until
from tests.service.ws_client import GraphQLWS
from worker import main as worker_main

ME = "{ me { id name } }"


def assert_unavailable(response: object, body: dict) -> None:  # type: ignore[type-arg]
    assert response.status_code == 503, (response.status_code, body)  # type: ignore[attr-defined]
    assert int(response.headers["Retry-After"]) >= 1  # type: ignore[attr-defined]


@pytest.fixture
def redis_folder(tmp_path: Path) -> Path:
    return tmp_path / "redis"


def test_a_redis_outage_is_unavailable_to_clients_and_said_once_in_the_logs(tmp_path: Path, database_url: str) -> None:
    redis_server = EmbeddedRedis(tmp_path / "redis")  # append-only: what it held comes back with it
    url = redis_server.start()
    env = {**os.environ, "REDIS_URL": url, "DATABASE_URL": database_url}
    port = free_port()
    api = Api(Process(["serve", "--port", str(port), "--log-level", "warning"], env, tmp_path / "serve.log"), port)
    worker = Process(["worker", "--log-level", "warning"], env, tmp_path / "worker.log")
    try:
        api.wait_healthy()
        token, bot_id = api.register()
        auth = {"Authorization": f"Bearer {token}"}
        # a bot waiting for its turns over a WebSocket: the API's event feed follows its inbox
        waiting = GraphQLWS(api.ws_url)
        waiting.init(token)
        waiting.subscribe("subscription { myTurns { id } }")
        # the outage comes to a worker at work: its RQ loop running, its clock gone round once
        wait_until(lambda: "Listening on" in worker.output() or None, "RQ's worker to start")
        with Redis.from_url(url) as client:
            wait_until(lambda: client.hlen(CLOCK_HEARTBEATS) or None, "the worker's clock to beat")

        redis_server.stop()
        graphql = api.http.post("/graphql", json={"query": ME}, headers=auth)
        body = graphql.json()
        assert_unavailable(graphql, body)
        (error,) = body["errors"]
        assert error["extensions"]["code"] == "UNAVAILABLE", body
        assert error["extensions"]["retryAfterSeconds"] > 0
        anonymous = api.http.post("/graphql", json={"query": "{ leaderboard(ruleset: WIZARD) { rank } }"})
        assert anonymous.json()["errors"][0]["extensions"]["code"] == "UNAVAILABLE", anonymous.text
        rest = api.http.get("/api/me", headers=auth)
        assert_unavailable(rest, rest.json())
        assert rest.json()["error"]["code"] == "UNAVAILABLE", rest.text
        health = api.http.get("/healthz")  # alive: 200, its redis line saying why it is degraded
        assert health.status_code == 200 and health.json()["status"] == "degraded", health.text
        assert health.json()["redis"].startswith("unavailable: "), health.text
        ready = api.http.get("/readyz")  # not ready: no traffic for it
        assert ready.status_code == 503 and ready.json()["redis"].startswith("unavailable: "), ready.text
        wait_until(lambda: "Redis is unavailable" in worker.output() or None, "the worker's clock to see the outage")
        for _ in range(20):  # many requests, one line in the log
            assert api.http.post("/graphql", json={"query": ME}, headers=auth).status_code == 503

        redis_server = EmbeddedRedis(tmp_path / "redis")
        assert redis_server.start() == url, "the same socket: the API and the worker reconnect by themselves"
        wait_until(api.reaches_redis, "the API to reach Redis again")
        assert api.data(ME, token=token)["me"] == {"id": bot_id, "name": api.data(ME, token=token)["me"]["name"]}
        wait_until(lambda: "Redis is back" in api.process.output() or None, "the API to say Redis is back")
        wait_until(lambda: "Redis is back" in worker.output() or None, "the clock to say Redis is back", timeout=40,
                   explain=lambda: f"the worker's log:\n{worker.output()[-4000:]}")
        wait_until(lambda: "Redis, for the event feed, is back" in api.process.output() or None, "the feed to say so")
        assert api.process.output().count("Redis, for the event feed, is unavailable") == 1, api.process.output()
        assert api.process.output().count("Redis, for the event feed, is back") == 1, api.process.output()
        for log in (api.process.output(), worker.output()):
            assert "Traceback" not in log, log
            assert "INTERNAL_ERROR" not in log and "unexpected error" not in log, log
            assert log.count("Redis is unavailable") == 1, log
            assert log.count("Redis is back") == 1, log
        assert len(worker.output().splitlines()) < 40, worker.output()
    finally:
        waiting.close()
        api.close()
        api.process.stop()
        worker.stop()
        redis_server.stop()


def test_an_rq_worker_whose_start_meets_a_redis_outage_starts_once_it_is_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RQ registers a worker's birth, follows its channel and sets its state before its loop,
    which is where it handles an outage: a worker whose start met a Redis restart died with a
    traceback. Here its birth is registered (a start cut short after it) and Redis stops; its
    start waits, and once Redis is back the worker is registered and started, once."""
    redis_server = EmbeddedRedis(tmp_path / "redis")
    url = redis_server.start()
    connection = Redis.from_url(url)
    worker = worker_main._rq_worker(connection)
    backing_off = threading.Event()
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        backing_off.set()
        real_sleep(seconds)

    monkeypatch.setattr(time, "sleep", sleep)  # the start's back-off (worker.main calls time.sleep)
    failures: list[BaseException] = []

    def start() -> None:
        try:
            worker.bootstrap("WARNING")
        except BaseException as error:  # noqa: BLE001 - reported by the test
            failures.append(error)

    try:
        worker.register_birth()
        redis_server.stop()
        thread = threading.Thread(target=start, daemon=True)
        thread.start()
        assert backing_off.wait(30), "the start backs off while Redis is away"
        redis_server = EmbeddedRedis(tmp_path / "redis")
        assert redis_server.start() == url
        thread.join(60)
        assert not thread.is_alive() and not failures, failures
        assert [w.name for w in Worker.all(connection=connection)] == [worker.name]
        assert connection.hget(worker.key, "state") == b"started"
    finally:
        worker.unsubscribe()
        connection.close()
        redis_server.stop()


@pytest.mark.parametrize("stopped", ["the next worker", "between the workers"])
def test_an_rq_loop_ended_by_an_outage_gives_way_to_a_new_worker_and_says_it_in_one_line(
    stopped: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """RQ's loop handles an outage only while it waits for a job: one during its other calls
    (setting its state before the wait, here) ended the loop, and the worker with it. A new
    worker takes its place, and the outage is one line of RQ's log, without a traceback. Told
    to stop (SIGTERM), the next worker stops; so does the wait before it."""
    redis_server = EmbeddedRedis(tmp_path / "redis")
    connection = Redis.from_url(redis_server.start())
    workers: list[str] = []

    def wait_for_a_job(self: worker_main.ArenaWorker, timeout: int | None, max_idle_time: int | None = None) -> None:
        workers.append(self.name)
        if len(workers) == 1:
            raise RedisConnectionError("Connection closed by server.")
        os.kill(os.getpid(), signal.SIGTERM)  # idle: RQ ends its loop at once

    monkeypatch.setattr(worker_main.ArenaWorker, "dequeue_job_and_maintain_ttl", wait_for_a_job)
    told: list[float] = []  # the waits between workers cut short by a SIGTERM
    if stopped == "between the workers":
        real_sleep = time.sleep

        def sleep(seconds: float) -> None:
            if not told and threading.current_thread() is threading.main_thread():  # the wait before the next worker
                told.append(seconds)
                os.kill(os.getpid(), signal.SIGTERM)  # to the last worker's handlers
            real_sleep(seconds)

        monkeypatch.setattr(time, "sleep", sleep)
    rq_lines: list[str] = []
    rq_log = logging.getLogger("rq.worker")  # RQ's own handlers, not propagated
    capture = logging.Handler()
    capture.emit = lambda record: rq_lines.append(logging.Formatter().format(record))  # type: ignore[method-assign]
    rq_log.addHandler(capture)
    handlers = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        with caplog.at_level(logging.WARNING, logger="wizard_arena.worker"):
            worker_main.work_until_told_to_stop(connection)
        assert len(set(workers)) == (2 if stopped == "the next worker" else 1), workers
        assert stopped == "the next worker" or told == [1.0], told
        assert Worker.all(connection=connection) == [], "every end registered"
    finally:
        for number, handler in handlers.items():
            signal.signal(number, handler)
        rq_log.removeHandler(capture)
        connection.close()
        redis_server.stop()
    (quit_line,) = [line for line in rq_lines if "unhandled exception" in line]
    assert quit_line.endswith("(ConnectionError: Connection closed by server.)"), quit_line
    assert not any("Traceback" in line for line in rq_lines), rq_lines
    assert f"RQ's worker {workers[0]} stopped on an error" in caplog.text, caplog.text
