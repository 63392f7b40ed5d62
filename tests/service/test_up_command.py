"""`wizard-arena up` on a machine with no Redis: it starts the embedded server with its data
in a local folder, the API and a worker, and says where GraphiQL is."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.service.arena_client import REPO, free_port


def test_up_starts_redis_api_and_worker_and_keeps_data_across_restarts(tmp_path: Path) -> None:
    data_dir = tmp_path / "arena-data"
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["ARENA_DATA_DIR"] = str(data_dir)
    port = free_port()

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "wizard_arena", "up", "--port", str(port), "--log-level", "warning"],
            env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )

    def wait_for_graphiql_line(process: subprocess.Popen[str]) -> list[str]:
        lines = []
        assert process.stdout is not None
        for line in process.stdout:  # the command prints the address once it is starting the API
            lines.append(line)
            if "GraphiQL:" in line:
                return lines
        raise AssertionError("up exited without printing the GraphiQL address:\n" + "".join(lines))

    def wait_healthy(client: httpx.Client) -> None:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            try:
                if client.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)  # the API is still binding its port
        raise AssertionError("up never became healthy")

    process = start()
    try:
        lines = wait_for_graphiql_line(process)
        assert f"http://localhost:{port}/graphql" in lines[-1]
        assert any("embedded Redis" in line for line in lines)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            wait_healthy(client)
            assert "GraphiQL" in client.get("/graphql", headers={"Accept": "text/html"}).text
            answer = client.post("/graphql", json={"query": 'mutation { registerBot(name: "kept-across-restarts") { bot { id } } }'})
            bot_id = answer.json()["data"]["registerBot"]["bot"]["id"]
    finally:
        process.terminate()
        process.wait(30)
    assert process.returncode is not None
    assert (data_dir / "appendonly.aof").exists(), "the embedded Redis keeps an append-only file in the data folder"
    assert not (data_dir / "redis.sock").exists(), "stopping `up` stops its embedded Redis too"

    process = start()
    try:
        wait_for_graphiql_line(process)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            wait_healthy(client)
            answer = client.post("/graphql", json={"query": "query($id: ID!) { bot(id: $id) { name } }", "variables": {"id": bot_id}})
            assert answer.json()["data"]["bot"] == {"name": "kept-across-restarts"}
    finally:
        process.terminate()
        process.wait(30)
