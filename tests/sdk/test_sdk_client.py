"""The SDK client against answers no Wizard Arena server gives but proxies and broken
servers do: a real HTTP server (tests/sdk/http_stub.py) sends each canned answer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from sdk.client import ArenaClient, ArenaError, ArenaUnavailable, BadAnswer, WebSocketsUnavailable
from tests.sdk.http_stub import Answer, http_stub


class Canned:
    """What the server answers: status, body, headers; from the second request on ``then``,
    when set."""

    def __init__(self) -> None:
        self.status = 200
        self.body: bytes | dict = b""
        self.headers: dict[str, str] = {}
        self.requests = 0
        self.then: tuple[int, bytes | dict] | None = None

    def __call__(self, method: str, path: str) -> Answer:
        self.requests += 1
        if self.then is not None and self.requests > 1:
            return (*self.then, {})
        return self.status, self.body, self.headers


@pytest.fixture
def server() -> Iterator[tuple[str, Canned]]:
    answer = Canned()
    with http_stub(answer) as url:
        yield url, answer


def answer_with(answer: Canned, status: int, body: bytes | dict, **headers: str) -> None:
    answer.status, answer.body, answer.headers = status, body, headers


async def call(url: str, wait_when_rate_limited: bool = False) -> object:
    async with ArenaClient(url, "wza_token", wait_when_rate_limited=wait_when_rate_limited) as client:
        return await client.me()


def error_of(url: str) -> BaseException:
    with pytest.raises((ArenaError, ArenaUnavailable)) as caught:
        asyncio.run(call(url))
    return caught.value


def test_a_proxys_429_is_a_rate_limit_with_its_retry_after(server):
    url, answer = server
    answer_with(answer, 429, b"<html>slow down</html>", **{"Retry-After": "2"})
    error = error_of(url)
    assert isinstance(error, ArenaError) and error.code == "RATE_LIMITED" and error.retry_after == 2.0


def test_a_rate_limited_request_is_sent_again_after_the_wait_the_server_names(server):
    url, answer = server
    answer_with(answer, 429, b"<html>slow down</html>", **{"Retry-After": "0.2"})
    answer.then = (200, {"data": {"me": {"id": "b1", "name": "bot"}}})
    started = time.monotonic()
    assert asyncio.run(call(url, wait_when_rate_limited=True)) == {"id": "b1", "name": "bot"}
    assert answer.requests == 2 and time.monotonic() - started >= 0.2


def test_a_rate_limited_record_is_fetched_again_after_the_wait_the_server_names(server):
    url, answer = server
    refusal = {"error": {"code": "RATE_LIMITED", "message": "wait 0.2 s", "retryAfterSeconds": 0.2}}
    answer_with(answer, 429, refusal, **{"Retry-After": "1"})
    answer.then = (200, {"matchId": "m1", "moves": []})

    async def record(wait_when_rate_limited: bool) -> object:
        async with ArenaClient(url, wait_when_rate_limited=wait_when_rate_limited) as client:
            return await client.record("m1")

    with pytest.raises(ArenaError) as caught:  # told not to wait: the refusal, with the body's exact wait
        asyncio.run(record(False))
    assert caught.value.code == "RATE_LIMITED" and caught.value.retry_after == 0.2
    answer.requests = 0
    started = time.monotonic()
    assert asyncio.run(record(True)) == {"matchId": "m1", "moves": []}
    assert answer.requests == 2 and time.monotonic() - started >= 0.2


def test_a_proxys_413_is_limit_exceeded_and_its_502_a_lost_connection(server):
    url, answer = server
    answer_with(answer, 413, b"<html>too large</html>")
    assert getattr(error_of(url), "code", None) == "LIMIT_EXCEEDED"
    answer_with(answer, 502, b"<html>bad gateway</html>")
    error = error_of(url)
    assert isinstance(error, ArenaUnavailable) and "HTTP 502" in str(error)


@pytest.mark.parametrize("errors", ["boom", ["boom"], {"message": "m"}, [{"message": "m", "extensions": "x"}]])
def test_errors_of_any_shape_are_an_arena_error(server, errors):
    url, answer = server
    answer_with(answer, 200, {"data": None, "errors": errors})
    error = error_of(url)
    assert isinstance(error, ArenaError) and error.code == "INTERNAL_ERROR"


def test_a_match_the_sdk_cannot_read_is_a_bad_answer_not_a_crash(server):
    url, answer = server
    answer_with(answer, 200, {"data": {"match": {"id": "m1", "ruleset": "SOME_NEW_RULESET"}}})

    async def read() -> object:
        async with ArenaClient(url) as client:
            return await client.match("m1")

    with pytest.raises(BadAnswer, match="could not be read"):
        asyncio.run(read())


async def first_turn(url: str) -> object:
    async with ArenaClient(url, "wza_token") as client:
        async for match in client.my_turns():
            return match
    return None


@pytest.mark.parametrize("status", [400, 403, 404, 405, 426])
def test_an_upgrade_refused_outright_means_no_websockets_here(server, status):
    url, answer = server
    answer_with(answer, status, b"no websockets here")
    with pytest.raises(WebSocketsUnavailable):
        asyncio.run(first_turn(url))


@pytest.mark.parametrize("status", [500, 502, 503])
def test_an_upgrade_failing_with_a_server_error_is_tried_again_not_given_up(server, status):
    url, answer = server
    answer_with(answer, status, b"restarting")
    with pytest.raises(ArenaUnavailable) as caught:
        asyncio.run(first_turn(url))
    assert not isinstance(caught.value, WebSocketsUnavailable)
    assert f"HTTP {status}" in str(caught.value)
