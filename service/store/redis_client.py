"""The service's Redis clients, made in one place: a plain client for one Redis server, or
redis-py's cluster client when ``REDIS_URL`` names a node of a Redis Cluster. The service
finds that out by itself (``INFO cluster``), so pointing ``REDIS_URL`` at any node of a
cluster is enough.

The RQ queue is not on the cluster (RQ does not speak Redis Cluster): it lives on
``ARENA_QUEUE_URL``, by default ``REDIS_URL`` when that is one server (:func:`queue_url`).
Everything else holds to one rule that makes it run on both: every script and transaction
touches one slot (the key layout in ``service.store.keys`` says which slot holds what)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

import redis as sync_redis
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterPipeline, RedisCluster

log = logging.getLogger("wizard_arena.redis")


class QueueUrlMissing(ValueError):
    """``REDIS_URL`` is a cluster and no ``ARENA_QUEUE_URL`` names a Redis for RQ's queue."""


@functools.cache
def is_cluster(url: str) -> bool:
    """Whether ``url`` names a node of a Redis Cluster (asked once per process and URL). A
    server that cannot be reached is taken for one server, and said so: the plain client then
    reports the outage as it would anyway."""
    client = sync_redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    try:
        return bool(client.info("cluster").get("cluster_enabled"))
    except sync_redis.RedisError as error:
        log.warning("could not ask %s whether it is a Redis Cluster (%s): taking it for one server", url, error)
        is_cluster.cache_clear()  # ask again next time
        return False
    finally:
        client.close()


def open_async(url: str, *, max_connections: int, timeout: float, client_name: str) -> Redis:
    """The API's and the workers' asyncio client. On one server: a bounded pool that makes a
    request wait (up to ``timeout``) for a free connection. On a cluster: redis-py's cluster
    client, ``max_connections`` per node, reading and writing the masters.

    The cluster client is typed as the plain one it stands in for: the stores use only what
    both have (commands, registered scripts, pipelines, single-slot transactions)."""
    if is_cluster(url):
        cluster = GatedCluster.from_url(
            url, max_connections=max_connections, socket_timeout=timeout, client_name=client_name,
            decode_responses=False,
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
        return cast(sync_redis.Redis, sync_redis.RedisCluster.from_url(url, **options))
    return sync_redis.Redis.from_url(url, **options)


def clustered(client: Any) -> bool:
    """Whether ``client`` is a cluster client (sync or asyncio)."""
    return isinstance(client, (RedisCluster, sync_redis.RedisCluster))


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
