"""The event feed on a Redis Cluster of its own (3 masters, a replica each): it holds one
connection to a node drawn at random; when that node is killed (``kill -9``), the feed
reconnects to another node, not to the dead one again, tells its watches to read anew, and
a watch that follows again hears what is published through the cluster afterwards."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from service.store.connections import refresh_nodes
from service.store.embedded_cluster import ClusterNode, EmbeddedCluster
from service.store.feed import RESYNC, EventFeed
from service.store.keys import bot_channel
from service.store.matches import MatchStore, Seated
from service.store.redis_client import open_async
from service.store.script_line import ScriptLine


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    """A cluster of this module's own: its tests kill nodes."""
    cluster = EmbeddedCluster(Path(tmp_path_factory.mktemp("feed-cluster")), masters=3, replicas=1)
    cluster.start()
    yield cluster
    cluster.remove()


def node_named(cluster: EmbeddedCluster, name: str) -> ClusterNode:
    port = int(name.rsplit(":", 1)[1])
    return next(node for node in cluster.nodes if node.port == port)


async def next_items(watch_next: object, timeout: float = 10.0) -> list[object]:
    """What a watch's ``next`` hands out, failing the test when nothing comes in ``timeout`` s."""
    items = await watch_next(timeout)  # type: ignore[operator]
    assert items, f"nothing reached the watch in {timeout} s"
    return list(items)


def test_a_watch_hears_the_cluster_after_the_feeds_node_is_killed(cluster: EmbeddedCluster) -> None:
    async def main() -> None:
        redis: Redis = open_async(cluster.url, max_connections=8, timeout=5.0, client_name="feed-test")
        scripts = ScriptLine(redis)
        feed = EventFeed(redis, MatchStore(redis, scripts), max_watches_per_owner=10, timeout=5.0, ping_interval=1.0)
        channel = bot_channel("feed-bot")
        try:
            with feed.watch("test") as watch:
                await watch.follow(channel)
                assert feed.node is not None
                await redis.publish(channel, b"m-before")
                [before] = await next_items(watch.next)
                assert isinstance(before, Seated) and before.match_id == "m-before"

                dead = node_named(cluster, feed.node)
                was_master = dead.replica_of is None
                cluster.kill(dead)
                assert await next_items(watch.next) == [RESYNC]  # the loss is told at once
                await watch.ready()  # subscribed again: on another node
                assert feed.node != f"127.0.0.1:{dead.port}"
                if was_master:  # its replica takes over: the cluster client's PUBLISH needs a working layout
                    await asyncio.to_thread(cluster.wait_failover, dead)
                    await refresh_nodes(redis)  # what the feed asks after a loss: the dead node is gone
                    assert f"127.0.0.1:{dead.port}" not in [node.name for node in redis.get_nodes()]
                await redis.publish(channel, b"m-after")
                [after] = await next_items(watch.next)
                assert isinstance(after, Seated) and after.match_id == "m-after"
        finally:
            await feed.close()
            await scripts.close()
            await redis.aclose()

    asyncio.run(main())
