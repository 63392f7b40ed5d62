"""SIGTERM to a `wizard-arena serve` process drains it: a long poll is answered (null) at once
instead of at its timeout, a WebSocket is closed with 1001 ("going away": reconnect
elsewhere), and the process exits cleanly, without a traceback."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx

from tests.service.arena_client import AWAIT_TURN, Api, Process, free_port, wait_until
from tests.service.ws_client import GraphQLWS


def test_sigterm_answers_long_polls_closes_websockets_with_1001_and_exits_cleanly(
    tmp_path: Path, redis_url: str, database_url: str
) -> None:
    env = {**os.environ, "REDIS_URL": redis_url, "DATABASE_URL": database_url}
    port = free_port()
    api = Api(Process(["serve", "--port", str(port), "--log-level", "info"], env, tmp_path / "serve.log"), port)
    try:
        api.wait_healthy()
        token, _ = api.register()
        ws = GraphQLWS(api.ws_url)
        ws.init(token)
        ws.subscribe("subscription { myTurns { version } }")
        answers: list[tuple[float, dict]] = []  # type: ignore[type-arg]

        def long_poll() -> None:
            with httpx.Client(base_url=api.base, timeout=60) as http:
                body = http.post("/graphql", json={"query": AWAIT_TURN, "variables": {"t": 30_000}},
                                 headers={"Authorization": f"Bearer {token}"}).json()
                answers.append((time.monotonic(), body))

        poller = threading.Thread(target=long_poll)
        poller.start()
        # the poll is waiting once the process holds its watch (the feed's gauge in /metrics)
        wait_until(lambda: "wizard_arena_waits_open 2.0" in api.http.get("/metrics").text or None, "both waits open")
        api.http.close()
        sent = time.monotonic()
        api.process.popen.send_signal(signal.SIGTERM)
        closed = ws.wait_closed(timeout=10)
        assert closed.code == 1001, closed
        poller.join(10)
        assert answers, "the long poll was answered"
        answered_at, body = answers[0]
        assert body == {"data": {"awaitTurn": None}}, body
        assert answered_at - sent < 5, "answered at once, not at its 30 s timeout"
        # uvicorn, its shutdown done, raises the signal it caught again (as a process that
        # handles SIGTERM should end): "killed by SIGTERM", having drained, and nothing else
        assert api.process.popen.wait(30) == -signal.SIGTERM, api.process.output()
        assert "Finished server process" in api.process.output(), "the shutdown ran to its end"
        assert "Traceback" not in api.process.output(), api.process.output()
    finally:
        api.process.stop()
