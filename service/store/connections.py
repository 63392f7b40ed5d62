"""Connections of their own, outside the client's pool, for the process's long-lived readers
(the commit line, the feed)."""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.maint_notifications import MaintNotificationsConfig


def dedicated_connection(redis: Redis) -> AbstractConnection:
    """A new, unconnected connection made like the pool's (address, TLS, password, name), for
    one reader that owns it: no socket timeout (it would run every write in a task of its own;
    the owner times the answers itself), no health checks, RESP2 and no maintenance
    notifications (nothing arrives on it but what its owner asked for)."""
    pool = redis.connection_pool
    return pool.connection_class(**{
        **pool.connection_kwargs,
        "socket_timeout": None,
        "health_check_interval": 0,
        "protocol": 2,
        "maint_notifications_config": MaintNotificationsConfig(enabled=False),
    })
