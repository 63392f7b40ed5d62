"""End-to-end benchmark of the API: concurrent clients play whole matches through GraphQL over
real HTTP against one `wizard-arena serve` process, next to the same server's
``{ __typename }`` rate (the floor: HTTP + GraphQL with no work).

Two ways to play:
- ``solo``: each client holds the four bots of its own match and keeps a local copy of the
  match in the engine (the deals are stacked, so it knows every hand); every request is a
  submitMove, so this measures what a move costs the server.
- ``seats``: each client is one bot; four clients share a match; each loops awaitTurn ->
  submitMove, as real bots do (two requests per move).

Next to each rate, the CPU time the serve process (and the Redis server, when the bench
started it) spent per request in that phase: on a shared machine this is steadier than the
rate, which also depends on what else runs. ``move_cpu_vs_floor`` compares a solo move's
server CPU with a floor request's.

The load generator speaks HTTP/1.1 over asyncio streams itself: httpx's async client topped
out near 400 requests/s on this machine, which would have measured the client, not the server.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from wizard import MatchConfig, new_match
from wizard.cards import CODES

#: What a bot needs back from its move: the new version (its next view comes with its turn).
MOVE_QUERY = (
    "mutation($m: ID!, $mv: MoveInput!, $v: Int) { submitMove(matchId: $m, move: $mv, expectedVersion: $v) "
    "{ version } }"
)
#: The same move asking for the whole view back.
MOVE_QUERY_FULL_VIEW = (
    "mutation($m: ID!, $mv: MoveInput!, $v: Int) { submitMove(matchId: $m, move: $mv, expectedVersion: $v) "
    "{ version phase toAct hand legalMoves { bid card trump } currentTrick { seat card } "
    "seats { seat score bid tricks } } }"
)
TURN_QUERY = (
    "query($m: ID!) { awaitTurn(matchId: $m, timeoutMs: 2000) { version status phase toAct hand "
    "legalMoves { bid card trump } currentTrick { seat card } seats { seat score bid tricks } } }"
)


class HttpConnection:
    """One keep-alive HTTP/1.1 connection posting JSON."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, payload: dict[str, Any], token: str | None = None) -> dict[str, Any]:
        try:
            return await self._post(path, payload, token)
        except (asyncio.IncompleteReadError, ConnectionResetError):
            # the server closed an idle keep-alive connection before this request reached it
            self.writer = None
            return await self._post(path, payload, token)

    async def _post(self, path: str, payload: dict[str, Any], token: str | None) -> dict[str, Any]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        body = json.dumps(payload).encode()
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n{auth}"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        self.writer.write(head + body)
        assert self.reader is not None
        header = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in header.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return json.loads(await self.reader.readexactly(length))

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else float("nan")


async def _register(conn: HttpConnection, name: str) -> str:
    answer = await conn.post("/graphql", {"query": "mutation($n: String!) { registerBot(name: $n) { token } }", "variables": {"n": name}})
    return answer["data"]["registerBot"]["token"]


async def _gql(conn: HttpConnection, query: str, variables: dict[str, Any], token: str) -> dict[str, Any]:
    answer = await conn.post("/graphql", {"query": query, "variables": variables}, token)
    if answer.get("errors"):
        raise RuntimeError(answer["errors"])
    return answer["data"]


async def floor(host: str, port: int, clients: int, seconds: float) -> dict[str, float]:
    latencies: list[float] = []
    stop = time.perf_counter() + seconds

    async def client() -> None:
        conn = HttpConnection(host, port)
        while time.perf_counter() < stop:
            started = time.perf_counter()
            await conn.post("/graphql", {"query": "{ __typename }"})
            latencies.append(time.perf_counter() - started)
        await conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    elapsed = time.perf_counter() - started
    return _summary(latencies, elapsed)


def _summary(latencies: list[float], elapsed: float) -> dict[str, float]:
    return {
        "requests": len(latencies),
        "per_second": round(len(latencies) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 2),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 2),
    }


def _stacked_deals(rng: random.Random, rounds: int) -> list[list[str]]:
    deals = []
    for _ in range(rounds):
        deck = list(CODES[:60])
        rng.shuffle(deck)
        deals.append(deck)
    return deals


async def _stacked_match(conn: HttpConnection, rng: random.Random, tokens: list[str]) -> tuple[str, Any, int]:
    """A new 4-player match with stacked deals, every seat taken by ``tokens``: its id, a
    local engine copy (which knows every hand) and its version."""
    config = MatchConfig.create("WIZARD", 4, first_dealer=0, deals=_stacked_deals(rng, 15))
    spec = {"players": 4, "firstDealer": 0, "seed": "bench", "deals": [list(r) for r in config.deals or ()]}
    match_id = (await _gql(conn, "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id } }", {"i": spec}, tokens[0]))["createMatch"]["id"]
    version = 0
    for s in range(4):
        version = (await _gql(conn, "mutation($m: ID!, $s: Int) { joinMatch(matchId: $m, seat: $s) { version } }", {"m": match_id, "s": s}, tokens[s]))["joinMatch"]["version"]
    return match_id, new_match(config, "bench"), version


async def solo(host: str, port: int, clients: int, seconds: float, seed: int, query: str = MOVE_QUERY) -> dict[str, Any]:
    """Each client plays every seat of its own stacked match; every request is a move."""
    latencies: list[float] = []
    matches_done = 0
    stop = time.perf_counter() + seconds

    async def client(index: int) -> None:
        nonlocal matches_done
        rng = random.Random(seed * 1000 + index)
        conn = HttpConnection(host, port)
        tokens = [await _register(conn, f"bench-{os.getpid()}-{seed}-{index}-{s}") for s in range(4)]
        while time.perf_counter() < stop:
            match_id, local, version = await _stacked_match(conn, rng, tokens)
            while not local.is_finished and time.perf_counter() < stop:
                seat = local.awaiting()[0]
                move = rng.choice(local.legal_moves(seat))
                started = time.perf_counter()
                data = await _gql(conn, query, {"m": match_id, "mv": move.to_dict(), "v": version}, tokens[seat])
                latencies.append(time.perf_counter() - started)
                local.apply(seat, move)
                version = data["submitMove"]["version"]
            matches_done += local.is_finished
        await conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.perf_counter() - started
    return {**_summary(latencies, elapsed), "matches_finished": matches_done}


async def interleaved(
    host: str, port: int, clients: int, seconds: float, seed: int, server_pid: int, slice_seconds: float = 1.0
) -> dict[str, Any]:
    """A move's server CPU against a floor request's, in alternating slices.

    On a shared machine the CPU a request costs drifts by tens of percent within minutes
    (other work shares the caches and the cores), so two measurements taken one after the
    other compare the moments as much as the code. Here the same clients take turns: one
    slice only floor requests, the next only moves (solo play), and so on; each pair of
    neighbouring slices gives one ratio of server CPU per request, and their median is
    ``move_cpu_vs_floor``."""
    stop = time.perf_counter() + seconds
    counts = {"floor": 0, "move": 0}
    turn = {"floor": asyncio.Event(), "move": asyncio.Event()}

    async def floor_client() -> None:
        conn = HttpConnection(host, port)
        while time.perf_counter() < stop:
            await turn["floor"].wait()
            await conn.post("/graphql", {"query": "{ __typename }"})
            counts["floor"] += 1
        await conn.close()

    async def move_client(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        conn = HttpConnection(host, port)
        tokens = [await _register(conn, f"bench-il-{os.getpid()}-{seed}-{index}-{s}") for s in range(4)]
        while time.perf_counter() < stop:
            await turn["move"].wait()  # set-up requests are made in move slices, and counted with them
            match_id, local, version = await _stacked_match(conn, rng, tokens)
            counts["move"] += 5  # createMatch and four joinMatch: a few per ~540 moves
            while not local.is_finished and time.perf_counter() < stop:
                await turn["move"].wait()
                seat = local.awaiting()[0]
                move = rng.choice(local.legal_moves(seat))
                data = await _gql(conn, MOVE_QUERY, {"m": match_id, "mv": move.to_dict(), "v": version}, tokens[seat])
                local.apply(seat, move)
                version = data["submitMove"]["version"]
                counts["move"] += 1
        await conn.close()

    async def conductor() -> list[dict[str, Any]]:
        slices = []
        kind = "floor"
        while time.perf_counter() < stop - slice_seconds:
            turn[kind].set()
            await asyncio.sleep(slice_seconds / 10)  # let the last slice's requests drain first
            before_cpu, before = process_cpu_seconds(server_pid), dict(counts)
            await asyncio.sleep(slice_seconds)
            after_cpu, after = process_cpu_seconds(server_pid), dict(counts)
            turn[kind].clear()
            done = after[kind] - before[kind]
            if done and before_cpu is not None and after_cpu is not None:
                slices.append({
                    "kind": kind, "per_second": done / slice_seconds, "cpu_us": (after_cpu - before_cpu) / done * 1e6,
                })
            kind = "move" if kind == "floor" else "floor"
        turn["floor"].set()
        turn["move"].set()
        return slices

    tasks = [asyncio.create_task(floor_client()) for _ in range(clients)]
    tasks += [asyncio.create_task(move_client(i)) for i in range(clients)]
    slices = await conductor()
    await asyncio.gather(*tasks)
    pairs = [(a, b) for a, b in itertools.pairwise(slices) if a["kind"] == "floor" and b["kind"] == "move"]
    ratios = [move["cpu_us"] / floor_slice["cpu_us"] for floor_slice, move in pairs]
    rate_ratios = [floor_slice["per_second"] / move["per_second"] for floor_slice, move in pairs]
    floor_cpu = [x["cpu_us"] for x in slices if x["kind"] == "floor"]
    move_cpu = [x["cpu_us"] for x in slices if x["kind"] == "move"]
    return {
        "slices": len(slices),
        "floor_per_second_median": round(statistics.median(x["per_second"] for x in slices if x["kind"] == "floor"), 1),
        "moves_per_second_median": round(statistics.median(x["per_second"] for x in slices if x["kind"] == "move"), 1),
        "move_cost_vs_floor_median": round(statistics.median(rate_ratios), 2) if rate_ratios else None,
        "floor_cpu_us_median": round(statistics.median(floor_cpu), 1) if floor_cpu else None,
        "move_cpu_us_median": round(statistics.median(move_cpu), 1) if move_cpu else None,
        "move_cpu_vs_floor_median": round(statistics.median(ratios), 2) if ratios else None,
        "move_cpu_vs_floor_range": [round(min(ratios), 2), round(max(ratios), 2)] if ratios else None,
    }


async def seats(host: str, port: int, clients: int, seconds: float, seed: int) -> dict[str, Any]:
    """Four clients per match, each one bot: awaitTurn, then submitMove."""
    move_latencies: list[float] = []
    turn_waits: list[float] = []
    stop = time.perf_counter() + seconds
    tables = max(1, clients // 4)

    async def table(index: int) -> None:
        setup = HttpConnection(host, port)
        tokens = [await _register(setup, f"bench-seat-{os.getpid()}-{seed}-{index}-{s}") for s in range(4)]
        while time.perf_counter() < stop:
            match_id = (await _gql(setup, "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id } }", {"i": {"players": 4}}, tokens[0]))["createMatch"]["id"]
            for s in range(4):
                await _gql(setup, "mutation($m: ID!, $s: Int) { joinMatch(matchId: $m, seat: $s) { version } }", {"m": match_id, "s": s}, tokens[s])
            await asyncio.gather(*(bot(match_id, tokens[s], random.Random(seed * 100 + index * 4 + s)) for s in range(4)))
        await setup.close()

    async def bot(match_id: str, token: str, rng: random.Random) -> None:
        conn = HttpConnection(host, port)
        while time.perf_counter() < stop:
            waited = time.perf_counter()
            turn = (await _gql(conn, TURN_QUERY, {"m": match_id}, token))["awaitTurn"]
            turn_waits.append(time.perf_counter() - waited)
            if turn is None:
                break
            move = {k: v for k, v in rng.choice(turn["legalMoves"]).items() if v is not None}
            started = time.perf_counter()
            answer = await conn.post("/graphql", {"query": MOVE_QUERY, "variables": {"m": match_id, "mv": move, "v": turn["version"]}}, token)
            if time.perf_counter() < stop:
                move_latencies.append(time.perf_counter() - started)
            if answer.get("errors") and answer["errors"][0]["extensions"]["code"] != "STALE_VERSION":
                raise RuntimeError(answer["errors"])
        await conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(table(i) for i in range(tables)))
    # moves are counted inside the window only: bots still waiting at its end do not stretch it
    return {**_summary(move_latencies, stop - started), "await_turn_p50_ms": round(percentile(turn_waits, 0.5) * 1000, 2)}


async def house_bots(host: str, port: int, redis_url: str, seed: int, matches: int = 2) -> dict[str, Any]:
    """An idle server, one bot against three HEURISTIC house bots: how soon after its turn
    begins does each house bot move? Read from the match's event stream, whose entry ids are
    Redis's millisecond clock: a house move's id minus the id of the change before it."""
    import redis.asyncio

    from service.store.keys import events_key

    conn = HttpConnection(host, port)
    token = await _register(conn, f"bench-house-{os.getpid()}-{seed}")
    rng = random.Random(seed)
    delays: list[int] = []
    store = redis.asyncio.Redis.from_url(redis_url)
    for _ in range(matches):
        match_id = (await _gql(conn, "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id } }", {"i": {"players": 4}}, token))["createMatch"]["id"]
        for _ in range(3):
            await _gql(conn, "mutation($m: ID!) { addHouseBot(matchId: $m, kind: HEURISTIC) { version } }", {"m": match_id}, token)
        await _gql(conn, "mutation($m: ID!) { joinMatch(matchId: $m) { version } }", {"m": match_id}, token)
        while True:
            turn = (await _gql(conn, TURN_QUERY, {"m": match_id}, token))["awaitTurn"]
            if turn is None:
                break
            move = {k: v for k, v in rng.choice(turn["legalMoves"]).items() if v is not None}
            await _gql(conn, MOVE_QUERY, {"m": match_id, "mv": move, "v": turn["version"]}, token)
        entries = await store.xrange(events_key(match_id))
        for (previous_id, _), (entry_id, fields) in itertools.pairwise(entries):
            if json.loads(fields[b"e"]).get("by") == "house":
                delays.append(int(entry_id.split(b"-")[0]) - int(previous_id.split(b"-")[0]))
    await store.aclose()
    await conn.close()
    delays.sort()
    return {
        "house_moves": len(delays),
        "p50_ms": percentile([float(d) for d in delays], 0.5),
        "p99_ms": percentile([float(d) for d in delays], 0.99),
        "max_ms": delays[-1] if delays else None,
    }


def process_cpu_seconds(pid: int, children: bool = False) -> float | None:
    """User + system CPU time a process has used so far (None where /proc is missing); with
    ``children``, also that of its children it has waited for (an RQ worker's work horses)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def _with_cpu(pids: dict[str, int], measure: Any) -> dict[str, Any]:
    """Run one measurement; add each process's CPU per request (us) during it."""
    before = {name: process_cpu_seconds(pid) for name, pid in pids.items()}
    result: dict[str, Any] = measure()
    for name, pid in pids.items():
        after = process_cpu_seconds(pid)
        started = before[name]
        if started is not None and after is not None and result["requests"]:
            result[f"{name}_cpu_us_per_request"] = round((after - started) / result["requests"] * 1e6, 1)
    return result


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cpu_ratio(result: dict[str, Any]) -> None:
    move, floor_cpu = result["solo"].get("server_cpu_us_per_request"), result["floor"].get("server_cpu_us_per_request")
    if move and floor_cpu:
        result["move_cpu_vs_floor"] = round(move / floor_cpu, 2)


#: a benchmark's serve process lets its clients, all on this machine, register many bots
#: and make many requests
UNLIMITED_CLIENTS = {
    "ARENA_RATE_LIMIT_PER_SECOND": "100000", "ARENA_RATE_LIMIT_BURST": "100000",
    "ARENA_REGISTRATIONS_PER_ADDRESS_PER_HOUR": "1000000",
}


@contextmanager
def running_server(url: str | None = None) -> Iterator[tuple[str, int, str | None, dict[str, int]]]:
    """Redis (embedded, unless REDIS_URL is set) and one `serve` process, unless ``url`` names
    a running server: (host, port, Redis URL or None, the pids whose CPU is measured)."""
    from service.store.embedded_redis import EmbeddedRedis, stop_processes

    processes: list[subprocess.Popen[bytes]] = []
    embedded = None
    redis_url: str | None = os.environ.get("REDIS_URL")
    try:
        pids: dict[str, int] = {}
        if url is None:
            if not redis_url:
                embedded = EmbeddedRedis(Path(tempfile.mkdtemp(prefix="wza-bench-")), appendonly=False)
                redis_url = embedded.start()
                assert embedded.process is not None
                pids["redis"] = embedded.process.pid
            port = _free_port()
            env = {**os.environ, "REDIS_URL": redis_url, **UNLIMITED_CLIENTS, "ARENA_MAX_WAITS_PER_CLIENT": "100000"}
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "wizard_arena", "serve", "--port", str(port), "--log-level", "warning"], env=env
            ))
            pids["server"] = processes[0].pid
            host = "127.0.0.1"
            _wait_healthy(host, port)
        else:
            host, _, port_text = url.removeprefix("http://").rstrip("/").partition(":")
            port = int(port_text or 80)
        yield host, port, redis_url, pids
    finally:
        stop_processes(processes, 15)
        if embedded is not None:
            embedded.stop()
            shutil.rmtree(embedded.data_dir, ignore_errors=True)


def bench_service(clients: int, seconds: float, seed: int, url: str | None, quick: bool = False) -> dict[str, Any]:
    """Measure the floor, solo play and seated play (with ``quick``, the floor and solo play
    only) against :func:`running_server`."""
    with running_server(url) as (host, port, redis_url, pids):
        result: dict[str, Any] = {
            "clients": clients,
            "seconds": seconds,
            "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        }
        asyncio.run(floor(host, port, clients, 1.0))  # warm-up
        result["floor"] = _with_cpu(pids, lambda: asyncio.run(floor(host, port, clients, seconds)))
        result["solo"] = _with_cpu(pids, lambda: asyncio.run(solo(host, port, clients, seconds, seed)))
        if "server" in pids:
            result["interleaved"] = asyncio.run(
                interleaved(host, port, clients, max(seconds, 10.0), seed + 7, pids["server"])
            )
        if quick:
            result["move_cost_vs_floor"] = round(result["floor"]["per_second"] / result["solo"]["per_second"], 2)
            _cpu_ratio(result)
            return result
        result["solo_full_view"] = _with_cpu(
            pids, lambda: asyncio.run(solo(host, port, clients, seconds, seed + 1, MOVE_QUERY_FULL_VIEW))
        )
        result["seats"] = _with_cpu(pids, lambda: asyncio.run(seats(host, port, clients, seconds, seed)))
        if redis_url is not None:
            result["house_bot_delay"] = asyncio.run(house_bots(host, port, redis_url, seed))
        result["move_cost_vs_floor"] = round(result["floor"]["per_second"] / result["solo"]["per_second"], 2)
        _cpu_ratio(result)
        return result


def _wait_healthy(host: str, port: int, timeout: float = 30) -> None:
    import urllib.request

    end = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            if time.monotonic() > end:
                raise
        time.sleep(0.05)  # waiting for the child to bind its port


__all__ = ["bench_service"]
