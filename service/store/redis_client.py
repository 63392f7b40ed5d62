"""The service's Redis clients, made in one place: a plain client for one Redis server, or
redis-py's cluster client when ``REDIS_URL`` names a node of a Redis Cluster. The service
finds that out by itself (``INFO cluster``), so pointing ``REDIS_URL`` at any node of a
cluster is enough. It may name several nodes, separated by commas
(``redis://10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379/0``: :func:`node_urls`), and should:
a process starting (an API, a worker, each job RQ runs) finds the cluster through them, so
one node named alone is a single point of failure for every process started while it is down.

The RQ queue is not on the cluster (RQ does not speak Redis Cluster): it lives on
``ARENA_QUEUE_URL``, by default ``REDIS_URL`` when that is one server (:func:`queue_url`).
Everything else holds to one rule that makes it run on both: every script and transaction
touches one slot (the key layout in ``service.store.keys`` says which slot holds what)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
from collections.abc import AsyncIterator
from typing import Any, cast
from urllib.parse import urlparse

import redis as sync_redis
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, ClusterPipeline, RedisCluster
from redis.cluster import ClusterNode as SyncClusterNode

log = logging.getLogger("wizard_arena.redis")


class QueueUrlMissing(ValueError):
    """``REDIS_URL`` is a cluster and no ``ARENA_QUEUE_URL`` names a Redis for RQ's queue."""


def node_urls(url: str) -> list[str]:
    """The URL of each node ``url`` names: itself, or one per address when its address part
    lists several, separated by commas (``redis://user:pass@host1:6379,host2:6379/0``), each
    with the same scheme, credentials and path."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return [url]
    credentials, at, location = rest.rpartition("@")
    addresses, slash, path = location.partition("/")
    if "," not in addresses:
        return [url]
    return [f"{scheme}://{credentials}{at}{address}{slash}{path}" for address in addresses.split(",") if address]


@functools.cache
def is_cluster(url: str) -> bool:
    """Whether ``url`` names a node of a Redis Cluster (asked once per process and URL). A URL
    naming several nodes is a cluster's, without asking: a process started while some of them
    are down still makes the cluster client. One node named is asked; if it cannot be reached
    it is taken for one server, and said so (the plain client then reports the outage as it
    would anyway; name several nodes of a cluster so that this never happens to one)."""
    nodes = node_urls(url)
    if len(nodes) > 1:  # several nodes named: a cluster's (one server has one address)
        return True
    failure: sync_redis.RedisError | None = None
    for node in nodes:
        client = sync_redis.Redis.from_url(node, socket_timeout=5, socket_connect_timeout=5)
        try:
            return bool(client.info("cluster").get("cluster_enabled"))
        except sync_redis.RedisError as error:
            failure = error
        finally:
            client.close()
    log.warning("could not ask %s whether it is a Redis Cluster (%s): taking it for one server", url, failure)
    is_cluster.cache_clear()  # ask again next time
    return False


def _other_nodes(url: str) -> list[tuple[str, int]]:
    """The host and port of each node ``url`` names after the first."""
    nodes = []
    for node in node_urls(url)[1:]:
        parsed = urlparse(node)
        nodes.append((parsed.hostname or "localhost", parsed.port or 6379))
    return nodes


def open_async(url: str, *, max_connections: int, timeout: float, client_name: str) -> Redis:
    """The API's and the workers' asyncio client. On one server: a bounded pool that makes a
    request wait (up to ``timeout``) for a free connection. On a cluster: redis-py's cluster
    client, ``max_connections`` per node, reading and writing the masters.

    The cluster client is typed as the plain one it stands in for: the stores use only what
    both have (commands, registered scripts, pipelines, single-slot transactions)."""
    if is_cluster(url):
        cluster = GatedCluster.from_url(
            node_urls(url)[0], max_connections=max_connections, socket_timeout=timeout, client_name=client_name,
            decode_responses=False, startup_nodes=[ClusterNode(host, port) for host, port in _other_nodes(url)],
        )
        cluster.gate(max_connections, timeout)
        return cast(Redis, cluster)
    pool = BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=timeout, health_check_interval=30,
        socket_timeout=timeout, client_name=client_name,
    )
    return Redis(connection_pool=pool, decode_responses=False)


class GatedCluster(RedisCluster):
    """redis-py's asyncio cluster client, whose requests beyond its connections wait their
    turn (up to a timeout) as they do on one server's blocking pool, instead of failing at once
    with MaxConnectionsError (redis-py's cluster nodes do not wait for a free connection).

    A command or a pipeline holds one permit while it runs, and uses at most one connection
    of each node meanwhile, so with as many permits as connections per node no node runs out."""

    _permits: asyncio.Semaphore
    _wait: float

    def gate(self, permits: int, wait: float) -> None:
        self._permits = asyncio.Semaphore(permits)
        self._wait = wait

    @contextlib.asynccontextmanager
    async def permit(self) -> AsyncIterator[None]:
        try:
            async with asyncio.timeout(self._wait):
                await self._permits.acquire()
        except TimeoutError:
            raise sync_redis.ConnectionError(
                f"no Redis connection came free in {self._wait:g} s (ARENA_REDIS_POOL_SIZE connections per node)"
            ) from None
        try:
            yield
        finally:
            self._permits.release()

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        async with self.permit():
            return await super().execute_command(*args, **kwargs)

    async def _determine_slot(self, command: str, *args: Any) -> int:
        """The slot of the streams of XREAD, XREADGROUP, XGROUP and XINFO, found here from the
        command itself: redis-py asks a node to find their keys (COMMAND GETKEYS), a round trip
        before every read, and always the same node, which it replaces only when a command of
        another kind meets an error: once that node has died, a client that only reads streams
        fails every read until the process restarts."""
        if command.upper() in ("XGROUP", "XINFO") and len(args) > 1:  # (XGROUP CREATE <stream> ...)
            return int(self.keyslot(args[1]))
        if command.upper() in ("XREAD", "XREADGROUP"):
            start = 3 if command.upper() == "XREADGROUP" else 0  # (after GROUP <group> <consumer>)
            marks = [i for i, a in enumerate(args) if i >= start and isinstance(a, str) and a.upper() == "STREAMS"]
            if marks:
                named = args[marks[0] + 1:]
                slots = {self.keyslot(key) for key in named[:len(named) // 2]}
                if len(slots) != 1:
                    raise sync_redis.RedisClusterException(f"{command} - all keys must map to the same key slot")
                return slots.pop()
        return await super()._determine_slot(command, *args)

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> ClusterPipeline:
        if shard_hint:
            raise sync_redis.RedisClusterException("shard_hint is deprecated in cluster mode")
        return _GatedPipeline(self, transaction)


class _GatedPipeline(ClusterPipeline):
    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> list[Any]:
        client = self.cluster_client
        assert isinstance(client, GatedCluster)
        async with client.permit():
            return await super().execute(raise_on_error, allow_redirections)


def open_sync(url: str, **options: Any) -> sync_redis.Redis:
    """A synchronous client (tools, the workers' checks): the cluster client on a cluster."""
    if is_cluster(url):
        others = [SyncClusterNode(host, port) for host, port in _other_nodes(url)]
        return cast(sync_redis.Redis, sync_redis.RedisCluster.from_url(node_urls(url)[0], startup_nodes=others, **options))
    return sync_redis.Redis.from_url(url, **options)


def clustered(client: Any) -> bool:
    """Whether ``client`` is a cluster client (sync or asyncio)."""
    return isinstance(client, (RedisCluster, sync_redis.RedisCluster))


class ClusterNotServing(sync_redis.ConnectionError):
    """The Redis Cluster says some of its slots are not served (``cluster_state:fail``)."""


async def serving(redis: Redis) -> None:
    """Raises unless Redis serves: a PING on one server; on a cluster, one node that answers
    (any: they are tried in turn) and says every slot is served. Not a PING of every node, as
    the cluster client's ``ping`` is: that fails while a replica is away, though the service
    then loses nothing, and while a dead master is still on the client's list after its
    replica took over."""
    if not isinstance(redis, RedisCluster):
        await redis.ping()
        return
    nodes = redis.get_nodes() or list(redis.nodes_manager.startup_nodes.values())
    random.shuffle(nodes)
    failure: BaseException | None = None
    for node in nodes:
        try:
            info = await redis.execute_command("CLUSTER INFO", target_nodes=node)
        except (sync_redis.ConnectionError, sync_redis.TimeoutError, OSError) as error:
            failure = error
            continue
        if isinstance(info, dict):  # redis-py parses it: {"cluster_state": "ok", ...}
            state = info.get("cluster_state")
        else:
            text = info.decode() if isinstance(info, bytes) else str(info)
            state = "ok" if "cluster_state:ok" in text else "fail"
        if state not in ("ok", b"ok"):
            raise ClusterNotServing(f"the Redis Cluster says some slots are not served (node {node.name}: "
                                    "cluster_state:fail; a master is down and no replica has taken over yet)")
        return
    raise sync_redis.ConnectionError(f"no node of the Redis Cluster answered: {failure!r}")


def queue_url(redis_url: str, queue: str | None) -> str:
    """Where RQ's queue lives: ``ARENA_QUEUE_URL``, else ``REDIS_URL`` when that is one server."""
    if queue:
        return queue
    if is_cluster(redis_url):
        raise QueueUrlMissing(
            f"REDIS_URL ({redis_url}) is a Redis Cluster, which RQ's job queue cannot use: set ARENA_QUEUE_URL to a "
            "Redis server of its own for the queue (nothing is lost if it restarts: the workers derive their work "
            "from the cluster again)"
        )
    return redis_url
