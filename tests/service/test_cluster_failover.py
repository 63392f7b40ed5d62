"""The service on a Redis Cluster of its own (3 masters, a replica each), with RQ's queue on a
Redis of its own (ARENA_QUEUE_URL), an API process and two workers, all with
``ARENA_COMMIT_REPLICAS=1``:

- the operators' side: ``/readyz`` is ready, ``wizard-arena worker --check`` passes, the
  metrics read the job queue's length from the queue's Redis, and ``wizard-arena backup``
  refuses the cluster, naming what to use instead;
- a failover: a tournament of house bots and one registered bot that moves through the API
  runs; the master holding its matches is killed (``kill -9``) mid-tournament; its replica
  takes over, and the tournament finishes by itself, every match settled (the bot's rating
  counts each of its games). Every move the API acknowledged to the bot before (and after)
  the kill is in its match's record."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.store.embedded_cluster import ClusterNode, EmbeddedCluster
from service.store.embedded_redis import EmbeddedRedis
from service.store.keys import match_key
from service.store.redis_client import node_urls
from tests.service.arena_client import REPO, Api, wait_until

CREATE = """mutation($i: CreateTournamentInput!) { createTournament(input: $i) { id status } }"""
GET = "query($t: ID!) { tournament(id: $t) { id status entrants { id } matches { id status seats { seat bot { id } } } } }"
AWAIT = "query($t: Int) { awaitTurn(timeoutMs: $t) { id version status mySeat legalMoves { bid card trump } } }"
SUBMIT = ("mutation($m: ID!, $mv: MoveInput!, $v: Int) { submitMove(matchId: $m, move: $mv, expectedVersion: $v) "
          "{ id version movesMade mySeat } }")
#: a move refused for a reason of the race between the bot and the server, not a fault
RACES = {"STALE_VERSION", "NOT_YOUR_TURN", "MATCH_NOT_ACTIVE"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """A cluster of this module's own: a test kills one of its masters."""
    cluster = EmbeddedCluster(Path(tmp_path_factory.mktemp("failover-cluster")), masters=3, replicas=1)
    cluster.start()
    yield cluster
    cluster.remove()


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """RQ's Redis (keeping nothing on disk: a restart empties it)."""
    queue = EmbeddedRedis(tmp_path_factory.mktemp("failover-queue"), appendonly=False)
    queue.start()
    yield queue
    queue.stop()


@pytest.fixture(scope="module")
def service_env(cluster: EmbeddedCluster, queue: EmbeddedRedis) -> dict[str, str]:
    """The settings of this module's processes: the cluster, the queue's Redis, commits that
    wait for a replica (up to 1 s: on loopback a replica answers in well under a millisecond)."""
    # every master named, as an operator should: a process (a job, say) started while the one
    # named first is dead finds the cluster through another
    masters = ",".join(f"127.0.0.1:{node.port}" for node in cluster.nodes if node.replica_of is None)
    return {"REDIS_URL": f"redis://{masters}/0", "ARENA_QUEUE_URL": queue.url, "ARENA_COMMIT_REPLICAS": "1",
            "ARENA_COMMIT_REPLICA_TIMEOUT_MS": "1000", "ARENA_CLOCK_STALE_SECONDS": "5"}


@pytest.fixture(scope="module")
def service(start_api: Any, start_worker: Any, service_env: dict[str, str]) -> Iterator[Api]:
    """An API process and two workers on the cluster, stopped before the cluster and the
    queue's Redis are (the session's processes outlive this module's servers)."""
    api: Api = start_api(**service_env)
    workers = [start_worker(**service_env) for _ in range(2)]
    yield api
    for process in [api.process, *workers]:
        process.stop()


def test_redis_url_may_name_several_nodes() -> None:
    assert node_urls("redis://u:p@h1:6379,h2:6380/2") == ["redis://u:p@h1:6379/2", "redis://u:p@h2:6380/2"]
    assert node_urls("redis://h1:6379,h2:6380") == ["redis://h1:6379", "redis://h2:6380"]
    assert node_urls("redis://h1:6379/0") == ["redis://h1:6379/0"]
    assert node_urls("unix:///run/redis.sock") == ["unix:///run/redis.sock"]


def test_operators_see_the_cluster_service_ready_and_backup_says_what_to_use(
    service: Api, service_env: dict[str, str], queue: EmbeddedRedis, tmp_path: Path
) -> None:
    wait_until(lambda: service.http.get("/readyz").status_code == 200, "the service on the cluster to be ready", 30)
    ready = service.http.get("/readyz").json()
    assert ready["redis"] == "ok" and ready["clock"] == "ok", ready

    env = {**os.environ, **service_env}
    wait_until(lambda: run(["worker", "--check"], env).returncode == 0, "each worker's check to pass", 30, 0.2)
    # the queue's Redis restarts empty: the workers register with RQ again by themselves
    queue.stop()
    queue.start()
    forgotten = run(["worker", "--check"], env)
    assert forgotten.returncode == 0 or "no RQ worker" in forgotten.stderr, forgotten.stderr
    wait_until(lambda: run(["worker", "--check"], env).returncode == 0, "the workers to be listed again", 30, 0.2)

    metrics = service.http.get("/metrics").text
    assert "wizard_arena_redis_up 1.0" in metrics
    assert "wizard_arena_job_queue_depth" in metrics and "wizard_arena_commit_replica_shortfalls_total 0.0" in metrics

    refused = run(["backup", str(tmp_path / "backup")], env)
    assert refused.returncode != 0
    assert "Redis Cluster" in refused.stderr and "CLIENT PAUSE" in refused.stderr and "pg_dump" in refused.stderr
    assert not (tmp_path / "backup").exists() or not any((tmp_path / "backup").iterdir())


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wizard_arena", *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=60)


class Bot(threading.Thread):
    """A registered bot that plays the LAST legal move of whatever turn it has (the server's
    own moves for a late seat are not chosen so), noting every move the API acknowledged:
    (match, moves made once it was, seat, move)."""

    def __init__(self, api: Api, token: str) -> None:
        super().__init__(daemon=True)
        self.api, self.token = api, token
        self.halt = threading.Event()
        self.acknowledged: list[tuple[str, int, int, dict[str, Any]]] = []
        self.refused: list[str] = []
        self.failures = 0

    def run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.api.base, timeout=30, headers=headers) as http:
            while not self.halt.is_set():
                try:
                    self.play_one(http)
                except httpx.TransportError:
                    self.failures += 1

    def play_one(self, http: httpx.Client) -> None:
        body = http.post("/graphql", json={"query": AWAIT, "variables": {"t": 300}}).json()
        if body.get("errors"):  # UNAVAILABLE while the cluster fails over: the bot asks again
            self.failures += 1
            return
        turn = body["data"]["awaitTurn"]
        if turn is None or not turn["legalMoves"]:
            return
        move = {k: v for k, v in turn["legalMoves"][-1].items() if v is not None}
        answer = http.post("/graphql", json={"query": SUBMIT, "variables": {
            "m": turn["id"], "mv": move, "v": turn["version"]}}).json()
        if answer.get("errors"):
            code = answer["errors"][0]["extensions"]["code"]
            if code == "UNAVAILABLE":
                self.failures += 1
            elif code not in RACES:
                self.refused.append(code)
            return
        made = answer["data"]["submitMove"]
        self.acknowledged.append((made["id"], made["movesMade"], made["mySeat"], move))


def master_holding_most(cluster: EmbeddedCluster, match_ids: list[str]) -> ClusterNode:
    """The master serving the slots of the most of ``match_ids``."""
    masters = [cluster.master_of(match_key(m)) for m in match_ids]
    return max(masters, key=masters.count)


def test_a_tournament_finishes_by_itself_across_a_failover_and_keeps_every_acknowledged_move(
    service: Api, cluster: EmbeddedCluster
) -> None:
    api = service
    token, bot_id = api.register()
    tournament = api.data(CREATE, {"i": {
        "name": "failover", "ruleset": "WIZARD_JUNIOR", "format": "ROUND_ROBIN", "rounds": 4, "playersPerMatch": 4,
        "houseBots": ["RANDOM", "HEURISTIC"] * 4 + ["RANDOM"], "bots": [bot_id], "moveTimeoutMs": 1500,
    }}, token)["createTournament"]
    tid = tournament["id"]

    def view() -> dict[str, Any]:
        return api.data(GET, {"t": tid})["tournament"]  # type: ignore[no-any-return]

    bot = Bot(api, token)
    bot.start()
    try:
        def midway() -> dict[str, Any] | None:
            seen = view()
            assert seen["status"] != "FINISHED", "the tournament finished before a master could be killed"
            ended = sum(m["status"] == "FINISHED" for m in seen["matches"])
            playing = [m["id"] for m in seen["matches"] if m["status"] == "ACTIVE"]
            return seen if ended >= 1 and playing and bot.acknowledged else None

        seen = wait_until(midway, "the first matches to end with others in play", 60, 0.05)
        assert bot_id in [e["id"] for e in seen["entrants"]]
        playing = [m["id"] for m in seen["matches"] if m["status"] == "ACTIVE"]
        dead = master_holding_most(cluster, playing)
        acknowledged_before = len(bot.acknowledged)
        cluster.kill(dead)
        cluster.wait_failover(dead)

        final = wait_until(lambda: (t := view())["status"] == "FINISHED" and t, "the tournament to finish", 120, 0.2)
    finally:
        bot.halt.set()
        bot.join(10)

    assert all(m["status"] == "FINISHED" for m in final["matches"]), final["matches"]
    assert bot.refused == [], bot.refused
    assert len(bot.acknowledged) > acknowledged_before, "the bot moved no more after the failover"
    # every acknowledged move is in its match's record, where the answer put it
    records: dict[str, dict[str, Any]] = {}
    for match_id, moves_made, seat, move in bot.acknowledged:
        if match_id not in records:
            response = api.http.get(f"/api/matches/{match_id}/record")
            assert response.status_code == 200, response.text
            records[match_id] = response.json()
        recorded = records[match_id]["moves"][moves_made - 1]
        assert recorded == {"seat": seat, **move}, (match_id, moves_made, recorded, move)
    # settled, each of them (by jobs: processes started after the kill)
    played = sum(1 for m in final["matches"] if bot_id in [s["bot"]["id"] for s in m["seats"] if s["bot"]])
    wait_until(lambda: games_rated(api, bot_id) == played, f"the bot's {played} games to be rated", 60, 0.2)


def games_rated(api: Api, bot_id: str) -> int:
    ratings = api.data("query($b: ID!) { bot(id: $b) { ratings { ruleset games } } }", {"b": bot_id})["bot"]["ratings"]
    return sum(r["games"] for r in ratings if r["ruleset"] == "WIZARD_JUNIOR")
