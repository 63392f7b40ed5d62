"""Browsers and tools: CORS on /graphql and /api/* (any origin by default, or the listed
ones; preflights answered; never credentials), a page on another origin calling the API in
real Chromium, and the rate limit's headers on every answer to a token's request."""

from __future__ import annotations

import http.server
import math
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.service.browser import chromium_page

PREFLIGHT = {
    "Origin": "http://elsewhere.test",
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type",
}
ME = {"query": "{ me { id } }"}


@pytest.mark.parametrize("path", ["/graphql", "/api/matches/nope", "/api/turns"])
def test_preflights_are_answered_for_any_origin_without_credentials(api, path):
    response = api.http.options(path, headers=PREFLIGHT)
    assert response.status_code == 200, response.text
    assert response.headers["access-control-allow-origin"] == "*"
    allowed = response.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed and "content-type" in allowed
    assert "POST" in response.headers["access-control-allow-methods"]
    assert "access-control-allow-credentials" not in response.headers


def test_a_cross_origin_answer_lets_the_script_read_the_rate_limit(api):
    token, _ = api.register()
    response = api.http.post("/graphql", json=ME, headers={"Origin": "http://elsewhere.test",
                                                          "Authorization": f"Bearer {token}"})
    assert response.headers["access-control-allow-origin"] == "*"
    exposed = response.headers["access-control-expose-headers"].lower()
    assert {"ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "retry-after"} <= set(exposed.split(", "))
    # the pages and the operator's paths stay same-origin
    assert "access-control-allow-origin" not in api.http.get("/metrics", headers={"Origin": "http://x.test"}).headers


def test_only_the_listed_origins_when_the_setting_lists_them(start_api):
    strict = start_api(ARENA_CORS_ALLOWED_ORIGINS='["http://good.test"]')
    good = strict.http.options("/graphql", headers=PREFLIGHT | {"Origin": "http://good.test"})
    assert good.status_code == 200 and good.headers["access-control-allow-origin"] == "http://good.test"
    bad = strict.http.options("/graphql", headers=PREFLIGHT)
    assert bad.status_code == 400 and "access-control-allow-origin" not in bad.headers
    read = strict.http.post("/graphql", json={"query": "{ __typename }"}, headers={"Origin": "http://elsewhere.test"})
    assert read.status_code == 200 and "access-control-allow-origin" not in read.headers


@pytest.fixture
def other_origin() -> Iterator[str]:
    """An empty page served from another origin (another port) than the API's."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # (http.server's name)
            body = b"<!doctype html><title>elsewhere</title>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_page_on_another_origin_calls_the_api_with_a_token_in_chromium(api, other_origin, tmp_path):
    token, bot_id = api.register()
    with chromium_page(tmp_path / "profile") as page:
        page.goto(other_origin + "/")
        answer = page.evaluate(
            """async ([url, token]) => {
                const response = await fetch(url + "/graphql", {method: "POST",
                    headers: {"Content-Type": "application/json", "Authorization": "Bearer " + token},
                    body: JSON.stringify({query: "{ me { id } }"})});
                const board = await fetch(url + "/api/matches?first=1");
                return {body: await response.json(), remaining: response.headers.get("RateLimit-Remaining"),
                        listing: board.status};
            }""",
            [api.base, token],
        )
    assert answer["body"] == {"data": {"me": {"id": bot_id}}}
    assert int(answer["remaining"]) >= 0 and answer["listing"] == 200


def test_rate_limit_headers_count_down_and_retry_after_agrees_with_the_body(start_api):
    tight = start_api(ARENA_RATE_LIMIT_BURST="5", ARENA_RATE_LIMIT_PER_SECOND="0.2")
    token, _ = tight.register()
    anonymous = tight.http.post("/graphql", json={"query": "{ __typename }"})
    assert not [h for h in anonymous.headers if h.lower().startswith("ratelimit")]  # no token: no token's limit
    auth = {"Authorization": f"Bearer {token}"}
    remaining = []
    for _ in range(12):
        response = tight.http.post("/graphql", json=ME, headers=auth)
        assert response.headers["ratelimit-limit"] == "5"
        assert 0 <= int(response.headers["ratelimit-reset"]) <= math.ceil(5 / 0.2)
        remaining.append(int(response.headers["ratelimit-remaining"]))
        if response.json().get("errors"):
            break
    error = response.json()["errors"][0]
    assert error["extensions"]["code"] == "RATE_LIMITED", remaining
    assert remaining[-1] == 0 and remaining[:-1] == sorted(remaining[:-1], reverse=True)
    wait = error["extensions"]["retryAfterSeconds"]
    assert response.headers["retry-after"] == str(max(1, math.ceil(wait)))
    rest = tight.http.get("/api/turns?timeoutMs=0", headers=auth)  # the REST mirror says the same
    assert rest.status_code == 429
    assert rest.headers["retry-after"] == str(max(1, math.ceil(rest.json()["error"]["retryAfterSeconds"])))
    assert rest.headers["ratelimit-remaining"] == "0"
