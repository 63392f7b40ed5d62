"""Connections of their own, outside the client's pool, for the process's long-lived readers
(the commit line, the feed)."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Collection

from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import RedisClusterException, RedisError
from redis.maint_notifications import MaintNotificationsConfig

log = logging.getLogger("wizard_arena.redis")


def dedicated_connection(redis: Redis, avoid: Collection[str] = (), node: ClusterNode | None = None) -> AbstractConnection:
    """A new, unconnected connection made like the pool's (address, TLS, password, name), for
    one reader that owns it: no socket timeout (it would run every write in a task of its own;
    the owner times the answers itself), no health checks, RESP2 and no maintenance
    notifications (nothing arrives on it but what its owner asked for).

    On a Redis Cluster: to one of its nodes, drawn at random among those the client knows
    now, so that the readers of many processes spread over the nodes; not one named in
    ``avoid`` (``host:port``, :func:`node_name`: those its owner just failed to reach) while
    there is another. The client's list changes only when it is asked again
    (:func:`refresh_nodes`): a node killed stays on it until then. Or to ``node``, when given."""
    if node is not None:
        connection_class, kwargs = node.connection_class, node.connection_kwargs
    elif isinstance(redis, RedisCluster):
        # the nodes the client knows; before its first command, those it was given
        known = redis.get_nodes() or list(redis.nodes_manager.startup_nodes.values())
        node = random.choice([n for n in known if n.name not in avoid] or known)
        connection_class, kwargs = node.connection_class, node.connection_kwargs
    else:
        pool = redis.connection_pool
        connection_class, kwargs = pool.connection_class, pool.connection_kwargs
    return connection_class(**{
        **kwargs,
        "socket_timeout": None,
        "health_check_interval": 0,
        "protocol": 2,
        "maint_notifications_config": MaintNotificationsConfig(enabled=False),
    })


def node_name(connection: AbstractConnection) -> str:
    """``host:port`` of the server ``connection`` goes to (a cluster node's name in redis-py)."""
    return f"{getattr(connection, 'host', '')}:{getattr(connection, 'port', '')}"


async def refresh_nodes(redis: Redis, failed: str | None = None) -> None:
    """On a Redis Cluster: ask it again which nodes it has and which serve which slots (the
    client asks only when its own commands meet errors, so a reader of its own that lost its
    node must ask, or it would be sent back to a node that is gone); ``failed`` (a node's
    name) is asked last. Nothing on one server; a cluster that cannot answer now is left to
    the next attempt."""
    if not isinstance(redis, RedisCluster):
        return
    try:
        await redis.nodes_manager.initialize(last_failed_node_name=failed)
    except (RedisError, RedisClusterException, OSError) as error:
        log.debug("could not ask the Redis Cluster for its nodes again: %r", error)


class Backoff:
    """The wait between attempts to reconnect a connection of one's own to Redis: 50 ms,
    doubling to 2 s, each jittered by ±50 % so that processes that lost Redis together do not
    come back all at once; :meth:`reset` once connected again."""

    FIRST, MOST = 0.05, 2.0

    def __init__(self) -> None:
        self.delay = self.FIRST

    def reset(self) -> None:
        self.delay = self.FIRST

    async def wait(self) -> None:
        await asyncio.sleep(self.delay * (0.5 + random.random()))
        self.delay = min(self.delay * 2, self.MOST)
