"""The SDK client against answers no Wizard Arena server gives but proxies and broken
servers do: a real HTTP server (the standard library's, in a thread) sends each canned answer."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sdk.client import ArenaClient, ArenaError, ArenaUnavailable, BadAnswer, WebSocketsUnavailable


class Canned:
    """What the server answers next: status, headers, body."""

    status = 200
    headers: dict[str, str] = {}
    body = b""
    requests = 0
    #: (status, body) answered from the second request on
    then: tuple[int, bytes | dict] | None = None


@pytest.fixture
def server() -> Iterator[tuple[str, type[Canned]]]:
    answer = type("Answer", (Canned,), {})

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # what a WebSocket client expects, as any proxy speaks

        def _answer(self) -> None:
            answer.requests += 1
            if answer.then is not None and answer.requests > 1:  # the first answer once, then this
                answer_with(answer, *answer.then)
            self.send_response(answer.status)
            for name, value in {"Content-Length": str(len(answer.body)), **answer.headers}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(answer.body)

        def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self._answer()

        do_GET = _answer  # noqa: N815 (the WebSocket upgrade arrives as a GET)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", answer
    httpd.shutdown()
    httpd.server_close()


def answer_with(answer: type[Canned], status: int, body: bytes | dict, **headers: str) -> None:
    answer.status = status
    answer.body = json.dumps(body).encode() if isinstance(body, dict) else body
    answer.headers = {"Content-Type": "application/json" if isinstance(body, dict) else "text/html", **headers}


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
