"""The move path's scripts while an operator reshards a Redis Cluster (``redis-cli --cluster
reshard`` moves a slot key by key: the source master answers ASK for the keys gone, the target
answers TRYAGAIN to a script whose keys it holds only some of). A script is followed to the
node that holds its keys (ASKING first, on the same connection), and waits out the slot's
migration instead of failing: the commits of a home being moved carry on. On a cluster of its
own (3 masters, no replicas), driven step by step with the commands redis-cli sends."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.crc import key_slot
from redis.exceptions import ClusterError

from service.errors import unavailable_dependency
from service.store.embedded_cluster import ClusterNode, EmbeddedCluster
from service.store.redis_client import open_async
from service.store.script_line import ScriptLine
from tests.service.arena_client import wait_until

#: both keys and a count of the script's runs, in one slot (a home's, as a commit's keys are)
BUMP = "return {redis.call('INCR', KEYS[1]), redis.call('INCR', KEYS[2])}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """A cluster of this module's own: its slots are moved."""
    cluster = EmbeddedCluster(Path(tmp_path_factory.mktemp("reshard-cluster")), masters=3, replicas=0)
    cluster.start()
    yield cluster
    cluster.remove()


def node_id(node: ClusterNode) -> str:
    return node.client().execute_command("CLUSTER", "MYID").decode()


def start_moving(slot: int, source: ClusterNode, target: ClusterNode) -> None:
    """The slot set migrating, as redis-cli does: the target importing first."""
    target.client().execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", node_id(source))
    source.client().execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", node_id(target))


def move_keys(source: ClusterNode, target: ClusterNode, *keys: str) -> None:
    source.client().execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", *keys)


def finish_moving(cluster: EmbeddedCluster, slot: int, target: ClusterNode) -> None:
    """The slot given to the target, told to every master (the target first, as redis-cli does)."""
    owner = node_id(target)
    for node in sorted(cluster.nodes_alive(), key=lambda n: n is not target):
        node.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", owner)


def read_on(node: ClusterNode, *keys: str) -> list[bytes | None]:
    """The keys' values on ``node`` itself (each GET after an ASKING: it may be importing
    their slot, and ASKING holds for one command)."""
    with node.client().pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.execute_command("ASKING")
            pipe.get(key)
        return pipe.execute()[1::2]


def try_agains(node: ClusterNode) -> int:
    stats = node.client().info("errorstats")
    return int(stats.get("errorstat_TRYAGAIN", {}).get("count", 0))


def test_a_script_follows_its_keys_while_their_slot_migrates_and_waits_out_a_split(cluster: EmbeddedCluster) -> None:
    first, second, third = "{reshard-1}a", "{reshard-1}b", "{reshard-1}c"
    slot = key_slot(first.encode())
    source = cluster.master_of(first)
    target = next(n for n in cluster.nodes_alive() if n is not source)

    async def main() -> None:
        client = open_async(cluster.url, max_connections=4, timeout=5, client_name="reshard-test")
        line = ScriptLine(client, timeout=5)
        bump = client.register_script(BUMP)
        try:
            assert await line.run(bump, [first, second], []) == [1, 1]
            source.client().set(third, 10)
            start_moving(slot, source, target)
            move_keys(source, target, first, second)
            # the source holds neither key: ASK, and the target runs it (ASKING before it)
            assert await line.run(bump, [first, second], []) == [2, 2]
            assert read_on(target, first, second) == [b"2", b"2"]

            # one key moved, the other not: each node holds only some of the script's keys
            refused_before = try_agains(target) + try_agains(source)
            waiting = asyncio.ensure_future(line.run(bump, [first, third], []))
            await asyncio.to_thread(wait_until, lambda: try_agains(target) + try_agains(source) > refused_before,
                                    "the script refused while its keys are split between two nodes")
            assert not waiting.done()
            move_keys(source, target, third)
            finish_moving(cluster, slot, target)
            assert await asyncio.wait_for(waiting, 30) == [3, 11], "ran once, where the slot went"
            assert read_on(target, first, second, third) == [b"3", b"2", b"11"]
            assert cluster.master_of(first) is target
            # and after the move, straight to the slot's new master (MOVED taught the client)
            assert await line.run(bump, [first, second], []) == [4, 3]
        finally:
            await line.close()
            await client.aclose()

    asyncio.run(main())


def test_a_cluster_that_kept_redirecting_is_redis_unavailable_to_the_caller() -> None:
    """A script (or redis-py's client) that ran out of attempts while a slot moved or a master
    failed over: the request answers UNAVAILABLE (try again), not INTERNAL."""
    assert unavailable_dependency(ClusterError("the Redis Cluster kept redirecting a script")) == "Redis"
    assert unavailable_dependency(ClusterError("TTL exhausted.")) == "Redis"
