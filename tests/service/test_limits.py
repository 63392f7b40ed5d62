"""Limits and operations: the per-token rate limit (held in Redis, so shared by every API
process, and taken by every operation over a WebSocket too), the server's bound on
awaitTurn, small query limits, /healthz and /metrics."""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.service.ws_client import GraphQLWS

RATE = 0.01  # requests per second: after the burst the next one is ~100 s away
BURST = 5
AWAIT_MAX_MS = 5_500  # above redis-py's default 5 s read timeout, which a wait must survive
ME = "{ me { id } }"


@pytest.fixture(scope="module")
def limited(start_api: Any) -> tuple[Any, Any]:
    """Two API processes on the test Redis with small limits."""
    env = {
        "ARENA_RATE_LIMIT_PER_SECOND": str(RATE),
        "ARENA_RATE_LIMIT_BURST": str(BURST),
        "ARENA_AWAIT_TURN_MAX_MS": str(AWAIT_MAX_MS),
        "ARENA_MAX_QUERY_DEPTH": "3",
        "ARENA_MAX_ALIASES": "2",
        "ARENA_MAX_TOKENS": "50",
    }
    return start_api(**env), start_api(**env)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def me(api: Any, token: str) -> dict[str, Any]:
    response = api.http.post("/graphql", json={"query": ME}, headers=auth(token))
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def rate_limited(body: dict[str, Any]) -> float:
    """The wait a RATE_LIMITED answer asks for."""
    assert body.get("errors"), body
    error = body["errors"][0]
    assert error["extensions"]["code"] == "RATE_LIMITED", body
    assert "wait" in error["message"]
    return float(error["extensions"]["retryAfterSeconds"])


# ----------------------------------------------------------------------------- rate limit


def test_after_the_burst_a_token_is_rate_limited_and_told_how_long_to_wait(limited):
    api, _ = limited
    token, bot_id = api.register()
    for _ in range(BURST):
        assert me(api, token) == {"data": {"me": {"id": bot_id}}}
    wait = rate_limited(me(api, token))
    assert 0 < wait <= 1 / RATE
    assert wait > 1 / RATE - 30  # about one request's worth of refill, minus the little time spent
    # the REST mirror answers 429 with Retry-After
    response = api.http.get("/api/turns", params={"timeoutMs": "0"}, headers=auth(token))
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "RATE_LIMITED"
    assert response.json()["error"]["retryAfterSeconds"] > 0
    assert int(response.headers["Retry-After"]) >= 1
    assert int(response.headers["Retry-After"]) >= int(response.json()["error"]["retryAfterSeconds"])
    # a refused request does not make the wait longer than one request's refill
    assert rate_limited(me(api, token)) <= 1 / RATE


def test_a_rate_limited_token_changes_nothing(limited, redis_client):
    api, _ = limited
    token, _ = api.register()
    create = "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id } }"
    for _ in range(BURST):
        me(api, token)
    before = sum(1 for _ in redis_client.scan_iter(match="{m:*}:match", count=1000))
    response = api.http.post("/graphql", json={"query": create, "variables": {"i": {"players": 3}}}, headers=auth(token))
    rate_limited(response.json())
    assert response.json()["data"] is None
    assert sum(1 for _ in redis_client.scan_iter(match="{m:*}:match", count=1000)) == before


def test_another_token_is_not_affected(limited):
    api, _ = limited
    hog, _ = api.register()
    for _ in range(BURST):
        me(api, hog)
    rate_limited(me(api, hog))
    other, other_id = api.register()
    for _ in range(BURST):
        assert me(api, other) == {"data": {"me": {"id": other_id}}}
    rate_limited(me(api, other))
    # requests without a token are not counted against anyone
    for _ in range(BURST + 2):
        response = api.http.post("/graphql", json={"query": "{ __typename }"})
        assert response.json() == {"data": {"__typename": "Query"}}


def test_the_limit_holds_across_api_processes(limited):
    first, second = limited
    token, bot_id = first.register()
    for i in range(BURST):  # 3 requests to the first process, 2 to the second: each under BURST alone
        assert me((first, second)[i % 2], token) == {"data": {"me": {"id": bot_id}}}
    rate_limited(me(second, token))
    rate_limited(me(first, token))
    response = second.http.get("/api/turns", params={"timeoutMs": "0"}, headers=auth(token))
    assert response.status_code == 429 and "Retry-After" in response.headers


def error_codes(ws: GraphQLWS, op: str) -> list[str | None]:
    """The error codes an operation answered with (an ``error`` message, or a result with errors)."""
    message = ws.message(op)
    if message["type"] == "error":
        errors = message["payload"]
    else:
        assert message["type"] == "next", message
        errors = message["payload"].get("errors") or []
    return [(e.get("extensions") or {}).get("code") for e in errors]


def test_every_operation_over_one_websocket_takes_a_request_from_the_tokens_bucket(limited):
    api, _ = limited
    token, bot_id = api.register()  # registerBot needs no token: the bucket is still full
    with GraphQLWS(api.ws_url) as ws:
        ws.init(token)  # connection_init authenticates: request 1 of BURST
        for _ in range(BURST - 1):  # requests 2 to BURST
            op = ws.subscribe("query { me { id } }")
            assert ws.data(op, "me") == {"id": bot_id}
        op = ws.subscribe("query { me { id } }")
        assert error_codes(ws, op) == ["RATE_LIMITED"]
        op = ws.subscribe("subscription { myTurns { id } }")
        assert error_codes(ws, op) == ["RATE_LIMITED"]


# ----------------------------------------------------------------------------- other limits


def test_await_turn_is_bounded_by_the_server_and_outlasts_a_redis_read_timeout(limited):
    """timeoutMs far beyond the server's bound waits the bound, then answers null: a wait of
    more than 5 s must not die on the Redis client's read timeout (it did: a 500)."""
    api, _ = limited
    token, _ = api.register()
    started = time.monotonic()
    response = api.http.get("/api/turns", params={"timeoutMs": str(10**12)}, headers=auth(token))
    waited = time.monotonic() - started
    assert response.status_code == 200, response.text
    assert response.json() is None
    assert AWAIT_MAX_MS / 1000 - 0.1 <= waited < AWAIT_MAX_MS / 1000 + 3


def test_small_query_limits_are_limit_exceeded(limited):
    api, _ = limited

    def code(query: str) -> str:
        body = api.http.post("/graphql", json={"query": query}).json()
        assert body.get("errors") and body.get("data") is None, body
        return body["errors"][0]["extensions"]["code"]  # type: ignore[no-any-return]

    assert code('{ match(id: "x") { seats { bot { ratings { rating } } } } }') == "LIMIT_EXCEEDED"  # depth 5 > 3
    assert api.http.post("/graphql", json={"query": '{ match(id: "x") { seats { seat } } }'}).json() == {
        "data": {"match": None}
    }
    assert code("{ a: __typename b: __typename c: __typename }") == "LIMIT_EXCEEDED"  # 3 aliases > 2
    assert code("{ " + "__typename " * 60 + "}") == "LIMIT_EXCEEDED"  # 62 tokens > 50


# ----------------------------------------------------------------------------- health and metrics


def test_healthz_answers_200_with_redis_and_the_database_up(api, limited):
    for server in (api, *limited):
        response = server.http.get("/healthz")
        assert response.status_code == 200
        assert response.json() == {"status": "ok", "redis": "ok", "database": "ok"}


def metric_samples(api: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = api.http.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_count_requests_moves_errors_and_latency(api):
    tokens = [api.register()[0] for _ in range(3)]
    match_id = api.create_match(tokens[0], players=3, moveTimeoutMs=600_000)
    for seat, token in enumerate(tokens):
        api.join(token, match_id, seat)
    match = api.match(match_id)
    if match["phase"] == "CHOOSE_TRUMP":  # a Wizard was turned: the dealer names trump first
        dealer = tokens[match["toAct"]]
        assert not api.submit(dealer, match_id, {"trump": "RED"}).get("errors")
        match = api.match(match_id)
    actor = tokens[match["toAct"]]
    before = metric_samples(api)

    assert not api.submit(actor, match_id, {"bid": 0}).get("errors")  # 1: a move
    assert api.submit(actor, match_id, {"bid": 0})["errors"][0]["extensions"]["code"] == "NOT_YOUR_TURN"  # 2
    assert api.error_code('query { awaitTurn(matchId: "nope", timeoutMs: 0) { id } }', None, actor) == "NOT_FOUND"  # 3
    assert api.error_code('mutation { submitMove(matchId: "x", move: {bid: 0}) { id } }', None, actor) == "NOT_FOUND"  # 4
    assert api.data("{ __typename }") == {"__typename": "Query"}  # 5
    assert api.http.get("/api/matches/nope").status_code == 404

    after = metric_samples(api)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("wizard_arena_requests_total", route="/graphql", status="200") == 5
    assert delta("wizard_arena_requests_total", route="/api/matches/{id}", status="404") == 1
    assert delta("wizard_arena_requests_total", route="/metrics", status="200") == 1  # the first read
    assert delta("wizard_arena_moves_total", by="bot") == 1
    assert delta("wizard_arena_errors_total", code="NOT_YOUR_TURN") == 1
    assert delta("wizard_arena_errors_total", code="NOT_FOUND") == 3
    assert delta("wizard_arena_request_seconds_count", route="/graphql") == 5
    assert delta("wizard_arena_request_seconds_bucket", route="/graphql", le="+Inf") == 5
    assert delta("wizard_arena_request_seconds_sum", route="/graphql") > 0
    buckets = sorted(
        (float(dict(labels)["le"]), count) for (name, labels), count in after.items()
        if name == "wizard_arena_request_seconds_bucket" and dict(labels)["route"] == "/graphql"
    )
    assert len(buckets) > 5 and buckets[-1][0] == float("inf")
    assert [count for _, count in buckets] == sorted(count for _, count in buckets)  # cumulative
