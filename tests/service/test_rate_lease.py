"""Leased rate-limit allowance: API processes take a few requests at once from a token's
bucket in Redis and spend them without asking again. Two processes sharing one token still
admit no more than one bucket would (burst + rate x time), answer RATE_LIMITED beyond it,
and a lease (with the bot it names) only ever serves its own token."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.service.test_concurrency import at_once

RATE = 20.0  # requests per second
BURST = 10
ME = "{ me { id } }"


@pytest.fixture(scope="module")
def leasing(start_api: Any) -> tuple[Any, Any]:
    env = {
        "ARENA_RATE_LIMIT_PER_SECOND": str(RATE),
        "ARENA_RATE_LIMIT_BURST": str(BURST),
        "ARENA_RATE_LIMIT_LEASE_MAX": "8",
        "ARENA_RATE_LIMIT_LEASE_MS": "300",
    }
    return start_api(**env), start_api(**env)


def me(api: Any, token: str) -> dict[str, Any]:
    response = api.http.post("/graphql", json={"query": ME}, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def outcome(body: dict[str, Any], bot_id: str) -> str:
    if body.get("errors"):
        error = body["errors"][0]["extensions"]
        assert error["code"] == "RATE_LIMITED", body
        assert error["retryAfterSeconds"] > 0
        return "limited"
    assert body == {"data": {"me": {"id": bot_id}}}
    return "ok"


def test_two_processes_sharing_a_token_never_admit_more_than_one_bucket(leasing):
    first, second = leasing
    token, bot_id = first.register()
    admitted = limited = 0
    started = time.monotonic()
    # both processes at once, each as fast as it answers, for a few lease spans
    with ThreadPoolExecutor(4) as pool:
        def hammer(api: Any) -> list[str]:
            out = []
            while time.monotonic() - started < 2.0:
                out.append(outcome(me(api, token), bot_id))
            return out

        for results in pool.map(hammer, [first, second, first, second]):
            admitted += results.count("ok")
            limited += results.count("limited")
    elapsed = time.monotonic() - started
    assert limited > 0
    assert admitted <= BURST + RATE * elapsed
    # and not much stricter than one bucket: most of the refill is spent
    assert admitted >= BURST + RATE * (elapsed - 1.0) * 0.5


def test_a_burst_split_over_two_processes_stops_at_the_burst(leasing):
    first, second = leasing
    token, bot_id = first.register()
    started = time.monotonic()
    results = [outcome(me(api, token), bot_id) for _ in range(2 * BURST) for api in (first, second)]
    elapsed = time.monotonic() - started
    assert results.count("ok") <= BURST + RATE * elapsed
    if elapsed < 0.5:
        assert "limited" in results


def me_when_admitted(api: Any, token: str) -> dict[str, Any]:
    """``me``, waiting as told while the token is rate limited (leases held by the other
    process make the burst smaller: what is checked here is whom a lease serves)."""
    for _ in range(50):
        body = me(api, token)
        if not body.get("errors") or body["errors"][0]["extensions"]["code"] != "RATE_LIMITED":
            return body
        time.sleep(body["errors"][0]["extensions"]["retryAfterSeconds"])
    raise AssertionError(f"still rate limited: {body}")


def test_a_lease_serves_only_its_own_token(leasing):
    first, second = leasing
    bots = [first.register() for _ in range(3)]
    for _ in range(4):
        for api in (first, second):
            for token, bot_id in bots:
                assert me_when_admitted(api, token) == {"data": {"me": {"id": bot_id}}}
    # a token that differs from a leased one in one character is refused, not served the lease
    token, _ = bots[0]
    forged = token[:-1] + ("A" if token[-1] != "A" else "B")
    body = first.http.post("/graphql", json={"query": ME}, headers={"Authorization": f"Bearer {forged}"}).json()
    assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


def test_a_lapsed_lease_is_not_spent(leasing, redis_client):
    """After its span a process asks Redis again: a token whose bucket is emptied meanwhile (as
    by other processes) is refused even though this process had requests left."""
    first, _ = leasing
    token, bot_id = first.register()
    for _ in range(4):  # lease sizes grow 1, 2, 4: some are left over in this process
        assert outcome(me(first, token), bot_id) == "ok"
    import hashlib

    key = f"{{t:{hashlib.sha256(token.encode()).hexdigest()}}}:rate"
    time.sleep(0.35)
    # empty the bucket and say far more is leased out than the burst, as if elsewhere
    now_ms = int(time.time() * 1000)
    redis_client.hset(key, mapping={"t": now_ms, "n": "0", "e": now_ms // 300, "o1": BURST, "o0": 0})
    assert outcome(me(first, token), bot_id) == "limited"


def test_a_burst_of_one_tokens_requests_at_once_takes_no_more_than_it_spends(start_api):
    """Requests of one token that arrive together share one lookup at a time in a process and
    spend the lease it brings: the bucket gives up what they spend, plus at most one lease's
    rest, so a burst within the limit is admitted whole (were each request to lease for
    itself, forty would ask for sixteen each)."""
    warm_up, at_once_count, lease_max = 1 + 2 + 4 + 8, 40, 16
    api = start_api(
        ARENA_RATE_LIMIT_PER_SECOND="0.01",  # no refill to speak of while the test runs
        ARENA_RATE_LIMIT_BURST=str(warm_up + at_once_count + lease_max),
        ARENA_RATE_LIMIT_LEASE_MAX=str(lease_max),
        ARENA_RATE_LIMIT_LEASE_MS="5000",
    )
    token, bot_id = api.register()
    for _ in range(warm_up):  # leases of 1, 2, 4 and 8, each spent: the next asks for 16
        assert outcome(me(api, token), bot_id) == "ok"
    results = at_once(api, [(ME, {}, token)] * at_once_count)
    assert [outcome(body, bot_id) for body in results] == ["ok"] * at_once_count
