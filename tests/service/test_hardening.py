"""The hardening review's attacks (issue 11), replayed against real `serve` processes on a
Redis server of this module's own (so that its connections can be counted exactly).

Each attack runs while :class:`HealthWatch` polls ``/healthz``: no answer may be a 5xx, and
``/healthz`` must answer 200 within a second throughout. Each refusal carries its code, and
what a refused request would have created is not there. The other attacks of the review
have tests of their own: ``kill -9`` of ``up`` (test_up_crash.py, test_up_aof.py), slow
clients (test_slow_clients.py), chosen seeds (test_seed_commitment.py), look-alike names
(test_bot_names.py), ``deals: []`` (test_seed_commitment.py) and several operations
without an ``operationName`` (test_operation_name.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from tests.service.arena_client import Api, Process, free_port, wait_until
from tests.service.conftest import embedded_redis_url
from tests.service.ws_client import GraphQLWS

POOL = 8  # the target's Redis pool: small, so that anything taking a connection per item shows
WAITS_PER_CLIENT = 40
MATCH_UPDATES = "subscription($m: ID!) { matchUpdates(matchId: $m) { id version } }"


# ----------------------------------------------------------------------------- set-up


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from embedded_redis_url(tmp_path_factory.mktemp("hardening-redis"))


class Servers:
    """`serve` (and `worker`) processes on the module's Redis, stopped at the end."""

    def __init__(self, redis_url: str, folder: Path) -> None:
        self.redis_url = redis_url
        self.folder = folder
        self.started: list[Process] = []

    def api(self, **env: str) -> Api:
        port = free_port()
        process = Process(
            ["serve", "--port", str(port), "--log-level", "warning"],
            {**os.environ, "REDIS_URL": self.redis_url, **env}, self.folder / f"serve-{port}.log",
        )
        self.started.append(process)
        api = Api(process, port)
        api.wait_healthy()
        return api

    def worker(self, **env: str) -> Process:
        process = Process(["worker", "--log-level", "warning"], {**os.environ, "REDIS_URL": self.redis_url, **env},
                          self.folder / f"worker-{len(self.started)}.log")
        self.started.append(process)
        return process

    def stop(self) -> None:
        for process in self.started:
            process.stop()


@pytest.fixture(scope="module")
def servers(own_redis: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    started = Servers(own_redis, tmp_path_factory.mktemp("hardening"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def target(servers: Servers) -> Api:
    """The attacked API process: a small Redis pool, a small cap on open waits."""
    return servers.api(ARENA_REDIS_POOL_SIZE=str(POOL), ARENA_MAX_WAITS_PER_CLIENT=str(WAITS_PER_CLIENT))


@pytest.fixture
def own_client(own_redis: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(own_redis)
    yield client
    client.close()


class HealthWatch:
    """Polls ``/healthz`` in a thread while an attack runs; on leaving, asserts that every
    answer was 200 and none took a second or more."""

    def __init__(self, api: Api) -> None:
        self.base = api.base
        self.slowest = 0.0
        self.polls = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        with httpx.Client(base_url=self.base, timeout=10) as http:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    status = http.get("/healthz").status_code
                except httpx.HTTPError as error:
                    self.failures.append(repr(error))
                else:
                    if status != 200:
                        self.failures.append(f"/healthz answered {status}")
                self.slowest = max(self.slowest, time.monotonic() - started)
                self.polls += 1
                self._stop.wait(0.02)

    def __enter__(self) -> HealthWatch:
        self._thread.start()
        wait_until(lambda: self.polls > 0, "the first /healthz answer", 10, 0.01)
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)
        if kind is None:  # (a failing attack's own error says more)
            assert not self.failures, self.failures[:5]
            assert self.slowest < 1.0, f"/healthz took {self.slowest:.2f} s during the attack"


def no_server_error(response: httpx.Response) -> httpx.Response:
    assert response.status_code < 500, (response.status_code, response.text)
    return response


def codes(body: dict[str, Any]) -> list[str]:
    return [e["extensions"]["code"] for e in body.get("errors") or []]


def api_connections(client: redis.Redis) -> dict[str, int]:
    """The module's Redis clients named by API processes (wizard-arena-api-<pid>), by name."""
    counts: dict[str, int] = {}
    for c in client.client_list():
        name = c.get("name", "")
        if name.startswith("wizard-arena-api-"):
            counts[name] = counts.get(name, 0) + 1
    return counts


def metric(api: Api, name: str) -> float:
    for family in text_string_to_metric_families(api.http.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    raise AssertionError(f"no metric {name}")


def match_count(client: redis.Redis) -> int:
    return sum(1 for _ in client.scan_iter(match="{m:*}:match", count=1000))


# ----------------------------------------------------------------------------- 1. costly documents


def fragment_bomb(levels: int) -> str:
    """Fragments that each spread the next twice: 2^levels paths through a 1 KB document."""
    fragments = " ".join(f"fragment L{i} on Match {{ ...L{i + 1} ...L{i + 1} }}" for i in range(levels))
    return f'query {{ match(id: "x") {{ ...L0 }} }} {fragments} fragment L{levels} on Match {{ id }}'


def fragment_chain(length: int) -> str:
    fragments = " ".join(f"fragment L{i} on Match {{ ...L{i + 1} }}" for i in range(length))
    return f'query {{ match(id: "x") {{ ...L0 }} }} {fragments} fragment L{length} on Match {{ id }}'


def test_costly_documents_are_refused_before_they_cost_anything(target):
    repeated = '{ match(id: "x") { ' + "seats { seat } " * 900 + "} }"
    expectations = {
        fragment_bomb(22): "fragmentDepth",  # 12 s of CPU before, /healthz stalled with it
        fragment_bomb(25): "fragmentDepth",  # no answer at all before
        fragment_chain(300): "fragmentDepth",  # "maximum recursion depth exceeded" without a code before
        repeated: "repeats",  # 0.7 s in graphql-core's overlapping-fields rule
    }
    with HealthWatch(target):
        for document, measure in expectations.items():
            body = no_server_error(target.http.post("/graphql", json={"query": document})).json()
            assert body["data"] is None and codes(body) and set(codes(body)) == {"LIMIT_EXCEEDED"}, body
            error = next(e for e in body["errors"] if measure in e["extensions"])
            assert error["extensions"][measure] > error["extensions"]["limit"], error
        # and many at once, from several clients
        def attack() -> None:
            with httpx.Client(base_url=target.base, timeout=30) as http:
                for _ in range(5):
                    body = no_server_error(http.post("/graphql", json={"query": fragment_bomb(24)})).json()
                    assert codes(body) and set(codes(body)) == {"LIMIT_EXCEEDED"}

        threads = [threading.Thread(target=attack) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)


def test_a_query_over_the_cost_limit_names_its_cost_and_the_limit(target):
    token, _ = target.register()
    heavy = "{ leaderboard(ruleset: WIZARD) { bot { ratingHistory(ruleset: WIZARD) { rating } } } }"
    body = target.gql(heavy, None, token)
    assert codes(body) == ["LIMIT_EXCEEDED"] and body["data"] is None, body
    error = body["errors"][0]
    assert error["extensions"]["cost"] > error["extensions"]["limit"] == 20_000
    assert "cost" in error["message"] and "first" in error["message"]
    # asking for fewer items brings it under the limit
    light = "{ leaderboard(ruleset: WIZARD, first: 5) { bot { ratingHistory(ruleset: WIZARD, last: 10) { rating } } } }"
    assert target.data(light, None, token) == {"leaderboard": []}
    # a bound set by a variable counts at the variable's value
    by_variable = ("query($n: Int!) { leaderboard(ruleset: WIZARD, first: $n) { bot { "
                   "ratingHistory(ruleset: WIZARD, last: 100) { rating } } } }")
    assert codes(target.gql(by_variable, {"n": 500}, token)) == ["LIMIT_EXCEEDED"]
    assert target.data(by_variable, {"n": 10}, token) == {"leaderboard": []}


# ----------------------------------------------------------------------------- 2. the Redis pool


def a_live_match(api: Api) -> tuple[str, str]:
    """A started match of one registered bot and two house bots, with a long move clock: (id,
    the bot's token)."""
    token, _ = api.register()
    match_id = api.create_match(token, players=3, ruleset="WIZARD_JUNIOR", moveTimeoutMs=600_000)
    api.add_house_bot(token, match_id, "HEURISTIC")
    api.add_house_bot(token, match_id, "RANDOM")
    api.join(token, match_id)
    return match_id, token


def test_anonymous_subscriptions_cannot_exhaust_the_pool(target, own_client):
    """5 WebSockets x 20 matchUpdates, without a token, took 100 Redis connections before."""
    match_id, token = a_live_match(target)
    sockets = [GraphQLWS(target.ws_url) for _ in range(5)]
    try:
        followed: list[tuple[GraphQLWS, str]] = []
        refused = 0
        with HealthWatch(target):
            for ws in sockets:
                ws.init()
                ops = [ws.subscribe(MATCH_UPDATES, {"m": match_id}) for _ in range(20)]
                for op in ops:
                    payload = ws.next(op)
                    if payload.get("errors"):  # refused as it started: its stream's one result
                        assert codes(payload) == ["LIMIT_EXCEEDED"], payload
                        refused += 1
                    else:
                        assert payload["data"]["matchUpdates"]["id"] == match_id
                        followed.append((ws, op))
            assert len(followed) == WAITS_PER_CLIENT and refused == 100 - WAITS_PER_CLIENT
            assert metric(target, "wizard_arena_waits_open") == WAITS_PER_CLIENT
            assert max(api_connections(own_client).values()) <= POOL + 2  # the pool, the feed, the commit line
            # the service goes on: a move commits, and every subscription sees it
            turn = target.data("query($m: ID) { awaitTurn(matchId: $m, timeoutMs: 10000) { version legalMoves "
                               "{ bid card trump } } }", {"m": match_id}, token)["awaitTurn"]
            move = {k: v for k, v in turn["legalMoves"][0].items() if v is not None}
            moved = target.submit(token, match_id, move, turn["version"])
            assert not moved.get("errors"), moved
            for ws, op in followed:
                view = ws.data(op, "matchUpdates")
                while view["version"] < moved["data"]["submitMove"]["version"]:
                    view = ws.data(op, "matchUpdates")
    finally:
        for ws in sockets:
            ws.close()
    wait_until(lambda: metric(target, "wizard_arena_waits_open") == 0, "the subscriptions to end with their sockets")


def long_poll(api: Api, token: str, timeout_ms: int, results: list[httpx.Response]) -> threading.Thread:
    def run() -> None:
        with httpx.Client(base_url=api.base, timeout=60) as http:
            results.append(http.get("/api/turns", params={"timeoutMs": str(timeout_ms)},
                                    headers={"Authorization": f"Bearer {token}"}))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_long_polls_cannot_exhaust_the_pool(target, own_client):
    """120 long polls of GET /api/turns took 120 Redis connections before."""
    tokens = [target.register()[0] for _ in range(3)]
    results: list[httpx.Response] = []
    with HealthWatch(target):
        # long enough that all 120 are open together however slowly a loaded machine starts them
        threads = [long_poll(target, tokens[i % 3], 15_000, results) for i in range(120)]
        wait_until(lambda: metric(target, "wizard_arena_waits_open") == 120, "120 long polls to wait", 30)
        assert max(api_connections(own_client).values()) <= POOL + 2
        # one more for a bot with WAITS_PER_CLIENT open already: refused with a code, at once
        extra: list[httpx.Response] = []
        long_poll(target, tokens[0], 4_000, extra).join(10)
        assert extra[0].status_code == 413 and extra[0].json()["error"]["code"] == "LIMIT_EXCEEDED", extra[0].text
        # meanwhile everything else answers
        assert target.data("{ __typename }") == {"__typename": "Query"}
        match_id, token = a_live_match(target)
        assert target.match(match_id, token)["status"] == "ACTIVE"
        for thread in threads:
            thread.join(30)
    assert len(results) == 120
    assert all(no_server_error(r).status_code == 200 and r.json() is None for r in results)


def test_fan_out_inside_a_query_is_batched(target, own_client):
    """tournament { entrants { ratings } } over 120 entrants, and 30 aliased leaderboards of
    bots with their ratings: one Redis call per item each exhausted the pool before."""
    token, _ = target.register()
    created = target.data(
        "mutation($i: CreateTournamentInput!) { createTournament(input: $i) { id } }",
        {"i": {"name": "fan-out", "format": "ROUND_ROBIN", "rounds": 1, "playersPerMatch": 4,
               "startsAt": "2027-06-01T00:00:00Z", "houseBots": ["RANDOM"] * 120}},
        token,
    )["createTournament"]
    entrants = "query($t: ID!) { tournament(id: $t) { entrants { id ratings { ruleset rating } } } }"
    aliased = "{ " + " ".join(
        f"l{i}: leaderboard(ruleset: WIZARD) {{ bot {{ name ratings {{ rating }} }} }}" for i in range(30)
    ) + " }"
    with HealthWatch(target):
        for _ in range(5):
            answer = target.data(entrants, {"t": created["id"]}, token)["tournament"]["entrants"]
            assert len(answer) == 120 and all(e["ratings"] == [] for e in answer)
            assert set(target.data(aliased, None, token)) == {f"l{i}" for i in range(30)}
        assert max(api_connections(own_client).values()) <= POOL + 2
    # the heavier form asks for every rating history too: refused for its cost, before it runs
    heavy = aliased.replace("ratings { rating }", "ratings { rating } ratingHistory(ruleset: WIZARD) { rating }")
    assert codes(target.gql(heavy, None, token)) == ["LIMIT_EXCEEDED"]
    target.data("mutation($t: ID!) { cancelTournament(tournamentId: $t) { id } }", {"t": created["id"]}, token)


# ----------------------------------------------------------------------------- 2b. thousands of waiters


Poll = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _hold_long_polls(port: int, tokens: list[str], per_token: int, timeout_ms: int) -> list[Poll]:
    """``per_token`` raw HTTP long polls of GET /api/turns per token, sent and left waiting."""
    polls = []
    for token in tokens:
        for _ in range(per_token):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                f"GET /api/turns?timeoutMs={timeout_ms} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Authorization: Bearer {token}\r\n\r\n".encode()
            )
            polls.append((reader, writer))
    for _, writer in polls:
        await writer.drain()
    return polls


async def _answer(poll: Poll) -> tuple[int, Any]:
    """A long poll's answer: its status and its JSON body."""
    reader, _ = poll
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
    status = int(head.split(b" ", 2)[1])
    length = int(next(line.split(b":", 1)[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    return status, json.loads(await asyncio.wait_for(reader.readexactly(length), 30))


async def _close(polls: list[Poll]) -> None:
    for _, writer in polls:
        writer.transport.abort()
    await asyncio.sleep(0)


async def _answers(polls: list[Poll]) -> list[tuple[int, Any]]:
    return list(await asyncio.gather(*(_answer(poll) for poll in polls)))


def test_two_thousand_waiters_on_one_api_process(servers, own_client):
    """2,000 long polls wait on one API process at once: it holds no Redis connection for
    them, answers everything else within a second meanwhile, wakes exactly the waiters a
    change concerns, and lets go of the waiters whose clients leave."""
    api = servers.api(ARENA_REDIS_POOL_SIZE=str(POOL))
    tokens = [api.register()[0] for _ in range(200)]
    loop = asyncio.new_event_loop()
    polls: list[Poll] = []
    try:
        with HealthWatch(api):
            polls = loop.run_until_complete(_hold_long_polls(api.port, tokens, 10, 60_000))
            wait_until(lambda: metric(api, "wizard_arena_waits_open") == 2_000, "2,000 waiters", 60)
            connections = api_connections(own_client)
            assert max(connections.values()) <= POOL + 2, f"Redis connections of the API processes: {connections}"
            assert api.data("{ __typename }") == {"__typename": "Query"}
            # seat the first bot in a match where it acts first: its ten waiters answer with
            # that turn, and no other waiter does
            first = tokens[0]
            match_id = api.create_match(first, players=3, ruleset="WIZARD_JUNIOR", moveTimeoutMs=600_000,
                                        firstDealer=2)
            api.join(first, match_id, 0)
            api.add_house_bot(first, match_id, "RANDOM")
            api.add_house_bot(first, match_id, "RANDOM")  # the last seat: the match starts
            answers = loop.run_until_complete(_answers(polls[:10]))
            for status, turn in answers:
                assert status == 200 and turn["id"] == match_id and turn["mySeat"] == 0, turn
            assert metric(api, "wizard_arena_waits_open") == 1_990
            # the clients of the other waiters go away: the server lets go of their waits
            loop.run_until_complete(_close(polls[10:]))
            wait_until(lambda: metric(api, "wizard_arena_waits_open") == 0, "the waits of gone clients to end", 60)
            assert api.data("{ __typename }") == {"__typename": "Query"}
    finally:
        loop.run_until_complete(_close(polls))  # (an aborted transport closes its socket in the next loop turn)
        loop.close()


# ----------------------------------------------------------------------------- 5. creation


def test_registrations_are_limited_per_address_and_a_refusal_registers_nothing(servers, own_client):
    own_client.delete("registrations:127.0.0.1")  # this module's other servers registered from here too
    api = servers.api(ARENA_REGISTRATIONS_PER_ADDRESS_PER_HOUR="3")
    register = "mutation($n: String!) { registerBot(name: $n) { token } }"
    with HealthWatch(api):
        names = [f"regs-{os.urandom(3).hex()}-{i}" for i in range(3)]
        for name in names[:2]:
            assert api.data(register, {"n": name})["registerBot"]["token"]
        # a taken name is refused for itself, and costs the address nothing: a third bot still may
        assert codes(api.gql(register, {"n": names[0]})) == ["BAD_INPUT"]
        assert api.data(register, {"n": names[2]})["registerBot"]["token"]
        # a fourth is one too many this hour
        refused = api.gql(register, {"n": "regs-one-too-many"})
        assert codes(refused) == ["RATE_LIMITED"] and refused["data"] is None, refused
        wait = refused["errors"][0]["extensions"]["retryAfterSeconds"]
        assert 3_500 < wait <= 3_600
        assert "hour" in refused["errors"][0]["message"]
    assert own_client.get("botname:regs-one-too-many") is None
    own_client.delete("registrations:127.0.0.1")


CREATE = "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id status } }"


def test_waiting_matches_per_bot_are_limited_and_expire(servers, own_client):
    api = servers.api(ARENA_WAITING_MATCHES_PER_BOT="2", ARENA_WAITING_MATCH_TTL_SECONDS="3")
    token, bot_id = api.register()
    spec = {"players": 3, "ruleset": "WIZARD_JUNIOR", "moveTimeoutMs": 600_000}
    first = api.data(CREATE, {"i": spec}, token)["createMatch"]["id"]
    second = api.data(CREATE, {"i": spec}, token)["createMatch"]["id"]
    before = match_count(own_client)
    refused = api.gql(CREATE, {"i": spec}, token)
    assert codes(refused) == ["LIMIT_EXCEEDED"] and refused["data"] is None, refused
    assert 0 < refused["errors"][0]["extensions"]["retryAfterSeconds"] <= 3
    assert match_count(own_client) == before  # the refused match was not created
    # a match whose seats are all taken no longer counts
    api.add_house_bot(token, first, "RANDOM")
    api.add_house_bot(token, first, "RANDOM")
    api.join(token, first)
    third = api.data(CREATE, {"i": spec}, token)["createMatch"]["id"]
    # a worker aborts the waiting ones unfilled at their time: they no longer count either
    servers.worker()
    for match_id in (second, third):
        wait_until(lambda m=match_id: api.match(m)["status"] == "ABORTED", f"match {match_id} to be aborted", 30)
    assert api.match(first)["status"] in ("ACTIVE", "FINISHED")
    assert own_client.zcard(f"{{b:{bot_id}}}:waiting") == 0
    assert api.data(CREATE, {"i": spec}, token)["createMatch"]["status"] == "WAITING"


def test_a_subscription_over_the_cost_limit_by_its_variables_is_refused(target):
    token, _ = target.register()
    match_id, _ = a_live_match(target)
    heavy = ("subscription($m: ID!, $n: Int!) { matchUpdates(matchId: $m) { seats { bot { "
             "ratingHistory(ruleset: WIZARD, last: $n) { rating matchId at } } } } }")
    with GraphQLWS(target.ws_url) as ws:
        ws.init(token)
        refused = ws.subscribe(heavy, {"m": match_id, "n": 10_000})
        message = ws.message(refused)
        assert message["type"] == "error" and message["payload"][0]["extensions"]["code"] == "LIMIT_EXCEEDED", message
        light = ws.subscribe(heavy, {"m": match_id, "n": 10})
        assert ws.data(light, "matchUpdates")["seats"]
