"""Prometheus metrics, one registry per app (no module-level state): requests, moves,
errors by code, latency histograms. ``GET /metrics`` serves them."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0)


class Metrics:
    content_type = CONTENT_TYPE_LATEST

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "wizard_arena_requests", "HTTP requests answered", ["route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "wizard_arena_request_seconds", "HTTP request latency", ["route"], buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.errors = Counter("wizard_arena_errors", "Errors answered, by API code", ["code"], registry=self.registry)
        self.moves = Counter("wizard_arena_moves", "Moves committed, by who made them", ["by"], registry=self.registry)
        self.matches_finished = Counter("wizard_arena_matches_finished", "Matches finished", registry=self.registry)
        self.waits = Gauge(
            "wizard_arena_waits_open", "Waits and subscriptions open in this process (service.feed)", registry=self.registry
        )
        self.followed = Gauge(
            "wizard_arena_channels_followed", "Channels this process's feed is subscribed to", registry=self.registry
        )
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

    def error(self, code: str) -> None:
        self.errors.labels(code).inc()

    def follow(self, feed: Any) -> None:
        """Read the feed's waits and channels whenever the metrics are rendered."""
        self.waits.set_function(lambda: feed.watches)
        self.followed.set_function(lambda: feed.channels)

    def render(self) -> bytes:
        return generate_latest(self.registry)
