"""Prometheus metrics, one registry per app (no module-level state): requests, moves,
errors by code, latency histograms, GraphQL operations by name, the process's own figures
(CPU, memory, file descriptors) and the state of the whole service read from Redis when
``GET /metrics`` is scraped (live matches, the job queue, how late the deadline sweeper is,
settlements waiting, the clock's heartbeat). The request path only counts: nothing here asks
Redis per request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, MutableMapping
from typing import Any

from graphql import DocumentNode, FieldNode, OperationDefinitionNode
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from service.model.homes import ALL_HOMES
from service.store.keys import CLOCK_HEARTBEATS, home_key

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0)
#: finer where a turn's frame should be (its target: p99 within 5 ms of the commit)
TURN_FRAME_BUCKETS = (
    0.0005, 0.001, 0.0015, 0.002, 0.003, 0.004, 0.005, 0.0075, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
)
#: the request scope's key for the commit time of the turn an HTTP answer carries (a long
#: poll's: TurnWait.committed_at), observed once the answer is written (service.api.app)
TURN_COMMITTED_SCOPE_KEY = "wizard_arena.turn_committed_at"


def time_turn_when_written(scope: MutableMapping[str, Any], committed_at: float | None) -> None:
    """Have the request's metrics (service.api.app) time the turn its HTTP answer carries,
    from ``committed_at`` (TurnWait.committed_at; None: not one to count) to the answer
    written. A WebSocket's queries are not timed: its myTurns frames are."""
    if committed_at is not None and scope.get("type") == "http":
        scope[TURN_COMMITTED_SCOPE_KEY] = committed_at


#: the label of a GraphQL request whose operation is not one root field the schema has
OTHER_OPERATION = "other"
#: the RQ queue the workers run (worker.clock.JOB_QUEUE), as RQ keeps it in Redis
JOB_QUEUE_KEY = "rq:queue:default"
#: longest a scrape waits for Redis's figures (they are then reported missing: redis_up 0)
SCRAPE_REDIS_SECONDS = 2.0


def operation_label(document: DocumentNode | None, operation_name: str | None, known: frozenset[str]) -> str:
    """The label of a GraphQL operation: its first root field when the schema has that field
    (``submitMove``, ``awaitTurn``), else ``other``: a bounded set, whatever clients send."""
    if document is None:
        return OTHER_OPERATION
    for definition in document.definitions:
        if isinstance(definition, OperationDefinitionNode) and (
            operation_name is None or (definition.name is not None and definition.name.value == operation_name)
        ):
            for selection in definition.selection_set.selections:
                if isinstance(selection, FieldNode) and not selection.name.value.startswith("__"):
                    name = selection.name.value
                    return name if name in known else OTHER_OPERATION
            return OTHER_OPERATION
    return OTHER_OPERATION


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self, operations: Iterable[str] = ()) -> None:
        self.registry = CollectorRegistry()
        #: the GraphQL root fields: the operation labels besides "other"
        self.operations = frozenset(operations)
        self.requests = Counter(
            "wizard_arena_requests", "HTTP requests answered", ["route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "wizard_arena_request_seconds", "HTTP request latency", ["route"], buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.graphql = Counter(
            "wizard_arena_graphql_requests", "GraphQL requests over HTTP, by operation (its first root field) and "
            "whether the answer had errors", ["operation", "outcome"], registry=self.registry,
        )
        self.graphql_latency = Histogram(
            "wizard_arena_graphql_seconds", "GraphQL request latency over HTTP, by operation (its first root field)",
            ["operation"], buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.errors = Counter("wizard_arena_errors", "Errors answered, by API code", ["code"], registry=self.registry)
        self.moves = Counter("wizard_arena_moves", "Moves committed, by who made them", ["by"], registry=self.registry)
        self.matches_finished = Counter("wizard_arena_matches_finished", "Matches finished", registry=self.registry)
        self.replica_shortfalls = Counter(
            "wizard_arena_commit_replica_shortfalls", "Commits answered with fewer replicas than "
            "ARENA_COMMIT_REPLICAS acknowledged within ARENA_COMMIT_REPLICA_TIMEOUT_MS (a failover then could lose "
            "them)", registry=self.registry,
        )
        self.turn_frames = Histogram(
            "wizard_arena_turn_frame_seconds", "From a commit (Redis's clock, carried with its event) to the turn it "
            "gives a waiting bot written to that bot: a myTurns frame (via websocket), an awaitTurn, nextTurn or "
            "GET /api/turns answer (via http); only waits open at the commit", ["via"], buckets=TURN_FRAME_BUCKETS,
            registry=self.registry,
        )
        self._turn_frames_via = {via: self.turn_frames.labels(via) for via in ("websocket", "http")}
        self.waits = Gauge(
            "wizard_arena_waits_open", "Waits and subscriptions open in this process (service.feed)", registry=self.registry
        )
        self.followed = Gauge(
            "wizard_arena_channels_followed", "Channels this process's feed is subscribed to", registry=self.registry
        )
        self.websockets = Gauge(
            "wizard_arena_websockets_open", "WebSocket connections open in this process", registry=self.registry
        )
        # The service as a whole, read from Redis at each scrape (the same in every API process)
        self.redis_up = Gauge("wizard_arena_redis_up", "1 when this process's last scrape reached Redis",
                              registry=self.registry)
        self.matches_live = Gauge(
            "wizard_arena_matches_live", "Matches not yet archived (waiting for seats, in play, ended and not yet "
            "settled)", registry=self.registry,
        )
        self.deadlines_pending = Gauge(
            "wizard_arena_deadlines_pending", "Matches with a deadline the sweeper watches (in play, or waiting "
            "for seats)", registry=self.registry,
        )
        self.deadline_lag = Gauge(
            "wizard_arena_deadline_lag_seconds", "How late the deadline sweeper is: now minus the oldest deadline "
            "that has passed (0: none has)", registry=self.registry,
        )
        self.queue_depth = Gauge("wizard_arena_job_queue_depth", "Jobs waiting in the RQ queue", registry=self.registry)
        self.settlement_backlog = Gauge(
            "wizard_arena_settlement_backlog", "Ended matches not yet settled and archived", registry=self.registry
        )
        self.clock_age = Gauge(
            "wizard_arena_clock_heartbeat_age_seconds", "Age of the newest heartbeat of any worker's clock "
            "(+Inf: none)", registry=self.registry,
        )
        self.clocks = Gauge(
            "wizard_arena_clocks_alive", "Workers whose clock beat within ARENA_CLOCK_STALE_SECONDS",
            registry=self.registry,
        )
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, process_resident_memory_bytes, …
        # labels() looks its child up on every call: the few the commit path counts, kept
        self._moves_by: dict[str, Any] = {}

    def on_change(self, match: Any, event: dict[str, Any]) -> None:
        if event["t"] == "move":
            by = event["by"]
            counter = self._moves_by.get(by)
            if counter is None:
                counter = self._moves_by[by] = self.moves.labels(by)
            counter.inc()
            if match.state.is_finished:
                self.matches_finished.inc()

    def turn_written(self, committed_at: float | None, via: str) -> None:
        """A turn was written to its bot (``via`` websocket or http) just now; ``committed_at``
        (TurnWait.committed_at) None: not one to count. The two clocks are this host's and
        Redis's: the same one on one host, NTP apart otherwise."""
        if committed_at is not None:
            self._turn_frames_via[via].observe(max(0.0, time.time() - committed_at))

    def error(self, code: str) -> None:
        self.errors.labels(code).inc()

    def follow(self, feed: Any) -> None:
        """Read the feed's waits and channels whenever the metrics are rendered."""
        self.waits.set_function(lambda: feed.watches)
        self.followed.set_function(lambda: feed.channels)

    async def read_service(self, redis: Any, stale_seconds: float, queue: Any = None) -> None:
        """The service's gauges from Redis: one pipelined round trip of O(1) and O(log n)
        commands (those of the matches' homes summed over every home; the cluster client
        sends each node its share at once), at most SCRAPE_REDIS_SECONDS; Redis away,
        ``redis_up`` 0 and the rest kept. The job queue's length from ``queue``, RQ's Redis
        (``ARENA_QUEUE_URL``; None: not known)."""
        try:
            async with asyncio.timeout(SCRAPE_REDIS_SECONDS):
                async with redis.pipeline(transaction=False) as pipe:
                    pipe.hvals(CLOCK_HEARTBEATS)
                    for home in ALL_HOMES:
                        pipe.zcard(home_key(home, "live")).zcard(home_key(home, "deadlines"))
                        pipe.zrange(home_key(home, "deadlines"), 0, 0, withscores=True)
                        pipe.zcard(home_key(home, "unsettled"))
                    beats, *homes = await pipe.execute()
                queued = None if queue is None else await queue.llen(JOB_QUEUE_KEY)
        except Exception:  # noqa: BLE001 - any failure means "Redis not reached"
            self.redis_up.set(0)
            return
        now_ms = time.time() * 1000
        live, pending, firsts, unsettled = homes[0::4], homes[1::4], homes[2::4], homes[3::4]
        oldest = min((first[0][1] for first in firsts if first), default=None)
        self.redis_up.set(1)
        self.matches_live.set(sum(live))
        self.deadlines_pending.set(sum(pending))
        self.deadline_lag.set(0.0 if oldest is None else max(0.0, (now_ms - oldest) / 1000))
        if queued is not None:
            self.queue_depth.set(queued)
        self.settlement_backlog.set(sum(unsettled))
        ages = [(now_ms - float(beat)) / 1000 for beat in beats]
        self.clock_age.set(max(0.0, min(ages)) if ages else float("inf"))
        self.clocks.set(sum(1 for age in ages if age <= stale_seconds))

    def render(self) -> bytes:
        return generate_latest(self.registry)
