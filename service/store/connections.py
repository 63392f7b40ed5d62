"""Connections of their own, outside the client's pool, for the process's long-lived readers
(the commit line, the feed)."""

from __future__ import annotations

import asyncio
import random

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.maint_notifications import MaintNotificationsConfig


def dedicated_connection(redis: Redis) -> AbstractConnection:
    """A new, unconnected connection made like the pool's (address, TLS, password, name), for
    one reader that owns it: no socket timeout (it would run every write in a task of its own;
    the owner times the answers itself), no health checks, RESP2 and no maintenance
    notifications (nothing arrives on it but what its owner asked for).

    On a Redis Cluster: to one of its nodes, drawn at random among those the client knows
    now (a node that failed is gone from them once the client has seen the new layout), so
    that the readers of many processes spread over the nodes."""
    if isinstance(redis, RedisCluster):
        # the nodes the client knows; before its first command, those it was given
        node = random.choice(redis.get_nodes() or list(redis.nodes_manager.startup_nodes.values()))
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
