"""Clients for the service tests: child `wizard-arena` processes and a GraphQL-over-HTTP
client with the API's common operations."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

from contract import MATCH
from service.store.embedded_redis import stop_processes
from service.store.redis_client import clustered

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Process:
    """A `wizard-arena` child process; stopped (and its output shown on failure) at teardown."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._log_file = log.open("wb")
        self.popen = subprocess.Popen(
            [sys.executable, "-m", "wizard_arena", *args], env=env, stdout=self._log_file, stderr=subprocess.STDOUT,
            cwd=REPO, start_new_session=True,  # its own process group: a worker's RQ children die with it
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig_kill: bool = False) -> None:
        """Terminate (or, with ``sig_kill``, SIGKILL at once, as a crash would) the process
        and whatever it started (a worker's RQ work horse)."""
        if sig_kill and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
        stop_processes([self.popen], 15, group=True)
        self._log_file.close()


class Api:
    """One `wizard-arena serve` process and an HTTP client for it."""

    def __init__(self, process: Process, port: int) -> None:
        self.process = process
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.http = httpx.Client(base_url=self.base, timeout=30)

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/graphql"

    def wait_healthy(self, timeout: float = 30) -> None:
        """Until the API answers and reaches Redis (/healthz is 200 as soon as it answers;
        its "redis" line says whether it reaches Redis)."""
        end = time.monotonic() + timeout
        while True:
            if self.process.popen.poll() is not None:
                raise RuntimeError("the API process exited:\n" + self.process.output())
            try:
                if self.reaches_redis():
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > end:
                raise RuntimeError("the API did not become healthy:\n" + self.process.output())
            time.sleep(0.05)  # waiting for a child process to bind its port

    def reaches_redis(self) -> bool:
        health = self.http.get("/healthz")
        assert health.status_code == 200, f"/healthz is liveness: 200 whenever the API answers, not {health}"
        return health.json()["redis"] == "ok"  # type: ignore[no-any-return]

    # --------------------------------------------------------------- GraphQL helpers
    def gql(self, query: str, variables: dict[str, Any] | None = None, token: str | None = None) -> dict[str, Any]:
        """The whole GraphQL response (``data`` and ``errors``)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        response = self.http.post("/graphql", json={"query": query, "variables": variables or {}}, headers=headers)
        assert response.headers["content-type"].startswith("application/json"), response.text
        return response.json()  # type: ignore[no-any-return]

    def data(self, query: str, variables: dict[str, Any] | None = None, token: str | None = None) -> dict[str, Any]:
        """``data`` of a response that must have no errors."""
        body = self.gql(query, variables, token)
        assert not body.get("errors"), body
        return body["data"]  # type: ignore[no-any-return]

    def error_code(self, query: str, variables: dict[str, Any] | None = None, token: str | None = None) -> str:
        body = self.gql(query, variables, token)
        assert body.get("errors"), body
        return body["errors"][0]["extensions"]["code"]  # type: ignore[no-any-return]

    def register(self, name: str | None = None) -> tuple[str, str]:
        """A new bot: (token, bot id)."""
        name = name or f"bot-{os.urandom(4).hex()}"
        bot = self.data("mutation($n: String!) { registerBot(name: $n) { token bot { id } } }", {"n": name})
        return bot["registerBot"]["token"], bot["registerBot"]["bot"]["id"]

    def create_match(self, token: str, **spec: Any) -> str:
        spec.setdefault("players", 4)
        data = self.data("mutation($i: CreateMatchInput!) { createMatch(input: $i) { id } }", {"i": spec}, token)
        return data["createMatch"]["id"]  # type: ignore[no-any-return]

    def join(self, token: str, match_id: str, seat: int | None = None) -> dict[str, Any]:
        return self.data(
            "mutation($m: ID!, $s: Int) { joinMatch(matchId: $m, seat: $s) { " + MATCH_FIELDS + " } }",
            {"m": match_id, "s": seat}, token,
        )["joinMatch"]

    def add_house_bot(self, token: str, match_id: str, kind: str = "RANDOM") -> dict[str, Any]:
        return self.data(
            "mutation($m: ID!, $k: HouseBotKind!) { addHouseBot(matchId: $m, kind: $k) { id version status } }",
            {"m": match_id, "k": kind}, token,
        )["addHouseBot"]

    def match(self, match_id: str, token: str | None = None) -> dict[str, Any]:
        return self.data("query($m: ID!) { match(id: $m) { " + MATCH_FIELDS + " } }", {"m": match_id}, token)["match"]

    def submit(self, token: str, match_id: str, move: dict[str, Any], expected_version: int | None = None) -> dict[str, Any]:
        """The whole response of submitMove."""
        return self.gql(
            "mutation($m: ID!, $mv: MoveInput!, $v: Int) { submitMove(matchId: $m, move: $mv, expectedVersion: $v) { "
            + MATCH_FIELDS + " } }",
            {"m": match_id, "mv": move, "v": expected_version}, token,
        )

    def play_out(self, token: str, match_id: str, timeout_ms: int = 10_000) -> dict[str, Any]:
        """Play the caller's moves (first legal) until the match ends; its final view."""
        match = self.match(match_id, token)
        while match["status"] == "ACTIVE":
            turn = self.data(AWAIT_TURN, {"m": match_id, "t": timeout_ms}, token)["awaitTurn"]
            if turn is None:  # the match ended (awaitTurn stops waiting) or nobody moved
                match = self.match(match_id, token)
                assert match["status"] != "ACTIVE", "the house bots did not move"
                break
            body = self.submit(token, match_id, first_legal(turn), turn["version"])
            assert not body.get("errors"), body
            match = body["data"]["submitMove"]
        return match

    def close(self) -> None:
        self.http.close()


# every field of a Match (contract/) but timeLeftMs: a reading of the server's clock, which
# differs between two reads of a match that did not change (tests of it ask for it)
MATCH_FIELDS = " ".join(f for f in MATCH.selection().split(" ") if f != "timeLeftMs")


def first_legal(match: dict[str, Any]) -> dict[str, Any]:
    """The first legal move of a Match's legalMoves, as a MoveInput."""
    return {k: v for k, v in match["legalMoves"][0].items() if v is not None}


AWAIT_TURN = "query($m: ID, $t: Int) { awaitTurn(matchId: $m, timeoutMs: $t) { version legalMoves { bid card trump } } }"


class Frozen:
    """Every view of a match (each seat's and a spectator's), to check nothing changed."""

    def __init__(self, api: Api, match_id: str, tokens: Sequence[str | None]) -> None:
        self.api, self.match_id, self.tokens = api, match_id, [*tokens, None]
        self.views = self.read()

    def read(self) -> list[dict[str, Any]]:
        return [self.api.match(self.match_id, t) for t in self.tokens]

    def check(self) -> None:
        assert self.read() == self.views, "a refused request changed the match"


def wait_until(probe: Callable[[], T], what: str, timeout: float = 20.0, every: float = 0.05,
               explain: Callable[[], str] | None = None) -> T:
    """``probe()``'s first truthy answer, polled every ``every`` seconds up to ``timeout``;
    a time-out says what ``explain()`` tells (a process's log, say)."""
    end = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > end:
            told = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {value!r}{told}")
        time.sleep(every)  # a bounded poll of state another process changes


def wait_for_subscription(redis_client: Any, channel: bytes, timeout: float = 10.0) -> None:
    """Until an API process has subscribed to ``channel`` (``service.store.match_channel`` or
    ``bot_channel``): a waiter subscribes before it reads, so a change after this reaches it.
    Redis offers no event for this, so it is polled, briefly and bounded. On a Redis Cluster
    each node counts only its own subscribers, and the feed subscribes on any one: all are asked
    (the cluster client adds their counts up)."""
    nodes = {"target_nodes": "all"} if clustered(redis_client) else {}
    wait_until(lambda: redis_client.pubsub_numsub(channel, **nodes)[0][1] > 0, f"a subscription to {channel!r}",
               timeout, 0.005)
