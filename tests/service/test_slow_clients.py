"""Slow clients cannot hold connections: against a real `serve` whose limits are 2 s for a
request's headers and 2 s for its body, connections that trickle their headers (a thousand of
them) or a body a byte at a time are answered 408 (``LIMIT_EXCEEDED``) and closed, one that
sends nothing is closed, and ``/healthz`` answers all along; requests that arrive whole,
kept-alive connections, long polls and WebSockets are untouched. `serve` and `up` raise their
own soft open-file limit to the hard one. deploy/nginx.conf applies the same limits."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.settings import Settings
from tests.service.arena_client import AWAIT_TURN, REPO, Api, free_port
from tests.service.up_process import Up, up_env
from tests.service.ws_client import GraphQLWS

LIMIT = 2.0  # seconds, headers and body alike, for the API these tests start
PATIENCE = 30.0  # how long a test waits for the server to act on a limit before calling it broken


@pytest.fixture(scope="module")
def strict(start_api: Any) -> Api:
    return start_api(  # type: ignore[no-any-return]
        ARENA_HTTP_HEADER_TIMEOUT_SECONDS=str(LIMIT), ARENA_HTTP_BODY_TIMEOUT_SECONDS=str(LIMIT)
    )


# ------------------------------------------------------------------------- clients
async def slow_request(port: int, head: bytes, trickle: bytes, every: float = 0.5) -> tuple[float, bytes]:
    """Send ``head`` at once, then ``trickle`` a byte every ``every`` seconds (starting over
    when it runs out) until the server closes the connection; how long it stayed open, and
    everything the server sent."""
    opened = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = bytearray()

    async def read() -> None:
        while chunk := await reader.read(65536):
            received.extend(chunk)

    reading = asyncio.ensure_future(read())
    try:
        writer.write(head)
        i = 0
        while not reading.done():
            await asyncio.wait([reading], timeout=every)
            if reading.done() or time.monotonic() - opened > PATIENCE:
                break
            writer.write(trickle[i % len(trickle): i % len(trickle) + 1])
            i += 1
    except ConnectionError:
        pass  # the server closed it while we wrote
    try:
        await asyncio.wait_for(reading, timeout=5)
    except (TimeoutError, ConnectionError):
        pass
    held = time.monotonic() - opened
    writer.close()
    return held, bytes(received)


def parse_response(raw: bytes) -> tuple[int, dict[str, str], Any]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return status, headers, json.loads(body) if body else None


def graphql_408(raw: bytes, what: str) -> None:
    status, headers, body = parse_response(raw)
    assert status == 408, raw
    assert headers["connection"] == "close" and headers["content-type"] == "application/json"
    error = body["errors"][0]
    assert error["extensions"]["code"] == "LIMIT_EXCEEDED", body
    assert f"its {what} took longer than {LIMIT:g} s" in error["message"], body


# ------------------------------------------------------------------------- the limits
def test_a_thousand_slow_header_trickles_are_cut_off_while_healthz_answers(strict: Api) -> None:
    head = b"POST /graphql HTTP/1.1\r\nHost: arena\r\nContent-Type: application/json\r\n"
    health: list[int] = []

    async def probe(done: asyncio.Event) -> None:
        async with httpx.AsyncClient(base_url=strict.base, timeout=10) as client:
            while not done.is_set():
                health.append((await client.get("/healthz", headers={"Connection": "close"})).status_code)
                await asyncio.sleep(0.25)  # a steady trickle of probes, not a flood

    async def main() -> list[tuple[float, bytes]]:
        done = asyncio.Event()
        prober = asyncio.ensure_future(probe(done))
        slow = await asyncio.gather(*(slow_request(strict.port, head, b"X-Slow: aaaa") for _ in range(1000)))
        done.set()
        await prober
        return slow

    results = asyncio.run(main())
    held = sorted(h for h, _ in results)
    assert held[-1] < PATIENCE, "some slow connections were never closed"
    assert held[0] >= LIMIT - 0.05, "none is cut before its limit"
    for _, raw in results:
        graphql_408(raw, "headers")
    assert len(health) >= 4 and set(health) == {200}, health


def test_slow_headers_on_the_rest_mirror_get_its_error_shape(strict: Api) -> None:
    _, raw = asyncio.run(slow_request(strict.port, b"GET /api/turns HTTP/1.1\r\nHost: arena\r\n", b"X-Slow: a"))
    status, _, body = parse_response(raw)
    assert status == 408 and body["error"]["code"] == "LIMIT_EXCEEDED", raw
    assert "its headers took longer than 2 s" in body["error"]["message"]


@pytest.mark.parametrize("path", ["/graphql", "/api/matches/m1/moves"])
def test_a_slow_body_is_refused(strict: Api, path: str) -> None:
    token, _ = strict.register()  # so that the mirror reads the body rather than refusing the caller
    body = json.dumps({"query": "{ __typename }"}).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: arena\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {token}\r\nContent-Length: {len(body) + 100}\r\n\r\n"
    ).encode() + body[:5]
    held, raw = asyncio.run(slow_request(strict.port, head, b" "))
    assert held < PATIENCE, "the slow body was never cut off"
    status, _, answer = parse_response(raw)
    assert status == 408, raw
    error = answer["error"] if path.startswith("/api/") else answer["errors"][0]["extensions"] | answer["errors"][0]
    assert error["code"] == "LIMIT_EXCEEDED", answer
    assert "its body took longer than 2 s to arrive after its headers" in error["message"], answer


def test_a_connection_that_sends_nothing_is_closed_without_an_answer(strict: Api) -> None:
    with socket.create_connection(("127.0.0.1", strict.port)) as sock:
        sock.settimeout(PATIENCE)
        opened = time.monotonic()
        assert sock.recv(1024) == b"", "closed, with nothing to answer"
        assert time.monotonic() - opened >= LIMIT - 0.05


# ------------------------------------------------------------------------- untouched
def request(sock: socket.socket, raw: bytes) -> tuple[int, dict[str, str], Any]:
    sock.sendall(raw)
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head, re.I).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        body += sock.recv(65536)
    return parse_response(head + b"\r\n\r\n" + body)


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: arena\r\n\r\n"


def test_a_kept_alive_connection_idles_past_the_limits_and_serves_again(strict: Api) -> None:
    with socket.create_connection(("127.0.0.1", strict.port)) as sock:
        sock.settimeout(10)
        assert request(sock, HEALTHZ)[0] == 200
        time.sleep(LIMIT + 1)  # idle longer than the header limit, shorter than keep-alive (5 s)
        assert request(sock, HEALTHZ)[0] == 200


def test_a_body_in_pieces_within_the_limit_is_answered(strict: Api) -> None:
    body = json.dumps({"query": "{ __typename }"}).encode()
    with socket.create_connection(("127.0.0.1", strict.port)) as sock:
        sock.settimeout(10)
        sock.sendall(b"POST /graphql HTTP/1.1\r\nHost: arena\r\n")
        time.sleep(LIMIT / 4)
        sock.sendall(b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:3])
        time.sleep(LIMIT / 4)
        status, _, answer = request(sock, body[3:])
    assert status == 200 and answer == {"data": {"__typename": "Query"}}


def test_a_long_poll_outlasts_the_limits(strict: Api) -> None:
    token, _ = strict.register()
    started = time.monotonic()
    assert strict.data(AWAIT_TURN, {"m": None, "t": int((LIMIT + 1.5) * 1000)}, token)["awaitTurn"] is None
    assert time.monotonic() - started >= LIMIT + 1.5 - 0.05, "it waited its whole timeout, uncut"


def test_a_websocket_outlasts_the_limits(strict: Api) -> None:
    token, _ = strict.register()
    match_id = strict.create_match(token)
    with GraphQLWS(strict.ws_url) as ws:
        ws.init(token)
        time.sleep(LIMIT + 1)
        op = ws.subscribe("subscription($m: ID!) { matchUpdates(matchId: $m) { id status } }", {"m": match_id})
        assert ws.data(op, "matchUpdates") == {"id": match_id, "status": "WAITING"}


# ------------------------------------------------------------------------- processes
def soft_and_hard_open_files(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open-file limit in /proc")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_serve_and_up_raise_their_soft_open_file_limit(redis_url: str, tmp_path: Path) -> None:
    import resource

    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard <= 256:
        pytest.skip("the hard limit leaves nothing to raise")
    low = "ulimit -Sn 256; exec "  # bash lowers the soft limit, then becomes the command
    for name, command in (("serve", ["serve"]), ("up", ["up"])):
        port = free_port()
        words = [sys.executable, "-m", "wizard_arena", *command, "--port", str(port), "--log-level", "warning"]
        env = up_env(tmp_path / "arena") if name == "up" else {**up_env(tmp_path), "REDIS_URL": redis_url}
        server = Up(tmp_path, tmp_path / f"{name}.log", port=port, argv=["bash", "-c", low + " ".join(words)], env=env)
        try:
            server.wait_healthy()
            assert soft_and_hard_open_files(server.pid) == (hard, hard), name
        finally:
            server.stop()


def test_nginx_applies_the_same_limits_in_front() -> None:
    """The compose path's load balancer cuts slow clients off itself, at the API's limits."""
    conf = (REPO / "deploy" / "nginx.conf").read_text()
    defaults = {name: field.default for name, field in Settings.model_fields.items()}
    assert re.search(rf"^\s*client_header_timeout {defaults['http_header_timeout_seconds']:g}s;", conf, re.M), conf
    assert re.search(rf"^\s*client_body_timeout {defaults['http_body_timeout_seconds']:g}s;", conf, re.M), conf
