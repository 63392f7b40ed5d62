"""The web pages (issue 16), in a real headless Chromium (Debian's ``chromium``, driven by
Playwright, a development dependency): how soon the match page shows a move, what its first
load transfers, and what a replay costs the server to build.

Runs against :func:`bench.service.running_server` (an embedded Redis and one ``serve``).

- **follow**: ``--matches`` 4-player WIZARD matches, one at a time, each a bot of this bench
  (over HTTP, moving as soon as it is its turn) against three house bots, with the match page
  open. Per move of the bot: from sending ``submitMove`` to the page showing the version it
  made (the mutation's round trip included, so an upper bound of commit → page).
- **first_load**: a finished match's page opened in a fresh browser (an empty cache), every
  response counted (headers and body as transferred), the replay included; per player count.
- **replay_build**: ``replay_frames`` of a finished match in this process, per player count.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx

from bench.deadlines import machine
from bench.service import percentile, running_server
from service.domain.replays import replay_frames
from wizard import MatchConfig, RandomBot, new_match

TARGET_FOLLOW_P99_MS = 200.0
FIRST_LOAD_BUDGET_BYTES = 300 * 1024
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
TURN = "query($m: ID) { awaitTurn(matchId: $m, timeoutMs: 10000) { version legalMoves { bid card trump } } }"
MOVE = "mutation($m: ID!, $mv: MoveInput!, $v: Int) { submitMove(matchId: $m, move: $mv, expectedVersion: $v) { version } }"


def bench_pages(matches: int, seed: int) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    result: dict[str, Any] = {"machine": machine(), "matches": matches}
    result["replay_build_ms"] = {str(n): round(_replay_build_ms(n, seed), 1) for n in (3, 4, 6)}
    with running_server() as (host, port, _, _pids), sync_playwright() as playwright, TemporaryDirectory() as profiles:
        base = f"http://{host}:{port}"
        http = httpx.Client(base_url=base, timeout=30)
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        lags: list[float] = []
        finished: dict[int, str] = {}
        for _ in range(matches):
            page = browser.new_page()
            match_id, token = _house_match(http, 4, house=3)
            page.goto(f"{base}/matches/{match_id}")
            page.wait_for_selector("#table[data-version]")
            lags += _play(http, page, match_id, token)
            page.close()
            finished.setdefault(4, match_id)
        for players in (3, 6):
            finished[players] = _house_match(http, players, house=players)[0]
        result["follow"] = {
            "moves": len(lags),
            "p50_ms": round(percentile(lags, 0.5), 1),
            "p99_ms": round(percentile(lags, 0.99), 1),
            "max_ms": round(max(lags), 1),
            "target_p99_ms": TARGET_FOLLOW_P99_MS,
        }
        result["first_load_bytes"] = {
            str(players): _first_load(playwright, Path(profiles) / str(players), f"{base}/matches/{match_id}")
            for players, match_id in sorted(finished.items())
        }
        result["first_load_budget_bytes"] = FIRST_LOAD_BUDGET_BYTES
        browser.close()
    return result


def _house_match(http: httpx.Client, players: int, house: int) -> tuple[str, str]:
    """A new match with ``house`` house bots; when the bench's bot has a seat, it joins it."""
    token = _data(http, "mutation($n: String!) { registerBot(name: $n) { token } }",
                  {"n": f"pages-bench-{os.urandom(4).hex()}"})["registerBot"]["token"]
    match_id = _data(http, "mutation($p: Int!) { createMatch(input: {players: $p, moveTimeoutMs: 60000}) { id } }",
                     {"p": players}, token)["createMatch"]["id"]
    for _ in range(house):
        _data(http, "mutation($m: ID!) { addHouseBot(matchId: $m, kind: HEURISTIC) { id } }", {"m": match_id}, token)
    if house < players:
        _data(http, "mutation($m: ID!) { joinMatch(matchId: $m) { id } }", {"m": match_id}, token)
    else:
        end = time.monotonic() + 60
        while _data(http, "query($m: ID!) { match(id: $m) { status } }", {"m": match_id})["match"]["status"] != "FINISHED":
            assert time.monotonic() < end, "the house bots did not finish"
            time.sleep(0.05)
    return match_id, token


def _play(http: httpx.Client, page: Any, match_id: str, token: str) -> list[float]:
    lags: list[float] = []
    while True:
        turn = _data(http, TURN, {"m": match_id}, token)["awaitTurn"]
        if turn is None:
            return lags
        move = {k: v for k, v in turn["legalMoves"][0].items() if v is not None}
        sent = time.perf_counter()
        version = _data(http, MOVE, {"m": match_id, "mv": move, "v": turn["version"]}, token)["submitMove"]["version"]
        page.wait_for_function("v => +document.querySelector('#table').dataset.version >= v", arg=version,
                               polling="raf")
        lags.append((time.perf_counter() - sent) * 1000)


def _first_load(playwright: Any, profile: Path, url: str) -> int:
    context = playwright.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, args=FLAGS)
    try:
        page = context.new_page()
        done: list[Any] = []
        page.on("requestfinished", lambda request: done.append(request))
        page.goto(url)
        page.wait_for_selector("#seed[data-verified=true]")
        page.wait_for_load_state("networkidle")
        return sum(r.sizes()["responseBodySize"] + r.sizes()["responseHeadersSize"] for r in done)
    finally:
        context.close()


def _replay_build_ms(players: int, seed: int) -> float:
    state = new_match(MatchConfig.create("WIZARD", players), f"pages-bench-{seed}")
    bot, rng = RandomBot(), random.Random(seed)
    while not state.is_finished:
        seat = state.awaiting()[0]
        state.apply(seat, bot.act(state.view(seat), rng))
    started = time.perf_counter()
    replay_frames(state)
    return (time.perf_counter() - started) * 1000


def _data(http: httpx.Client, query: str, variables: dict[str, Any], token: str | None = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = http.post("/graphql", json={"query": query, "variables": variables}, headers=headers).json()
    assert not body.get("errors"), body
    return body["data"]
