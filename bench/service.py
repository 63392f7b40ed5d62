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
server CPU with a floor request's, and ``seated_interleaved.seat_cpu_vs_move_median`` a seated
bot's move (both its requests) with a solo move's, each in alternating slices (see
:func:`interleaved`). With Redis reachable, each phase also counts Redis's calls per
request (``redis_scripts_per_request``, ``redis_commands_per_request``) and the µs a script
took in it; ``commit_script_alone_us_per_call`` is the commit script's µs in a Redis the bench
started, run alone at the end (the server and clients idle).

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
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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
#: the same, waiting longer than a slice of :func:`seated_interleaved` holds a table
TURN_QUERY_LONG = TURN_QUERY.replace("timeoutMs: 2000", "timeoutMs: 10000")


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


#: a workload of :func:`_alternating`: one client, given its index, the gate it waits at
#: before each request (open during its slices), a counter of the requests it made, and when
#: to stop (perf_counter)
Workload = Callable[[int, asyncio.Event, Callable[[int], None], float], Coroutine[Any, Any, None]]


async def _alternating(
    workloads: dict[str, tuple[Workload, int]], seconds: float, server_pid: int | dict[str, int], slice_seconds: float
) -> list[dict[str, Any]]:
    """Two workloads (each with its number of clients) taking turns: one slice only the
    first's requests, the next only the second's, and so on; per slice, its kind, requests
    per second and the server's CPU per request (``server_pid``'s, or by kind, the server
    that kind's requests go to)."""
    stop = time.perf_counter() + seconds
    counts = dict.fromkeys(workloads, 0)
    gates = {kind: asyncio.Event() for kind in workloads}

    def counter(kind: str) -> Callable[[int], None]:
        def count(requests: int) -> None:
            counts[kind] += requests
        return count

    async def conductor() -> list[dict[str, Any]]:
        slices = []
        kinds = itertools.cycle(workloads)
        kind = next(kinds)
        while time.perf_counter() < stop - slice_seconds:
            gates[kind].set()
            await asyncio.sleep(slice_seconds / 10)  # let the last slice's requests drain first
            pid = server_pid[kind] if isinstance(server_pid, dict) else server_pid
            before_cpu, before = process_cpu_seconds(pid), dict(counts)
            await asyncio.sleep(slice_seconds)
            after_cpu, after = process_cpu_seconds(pid), dict(counts)
            gates[kind].clear()
            done = after[kind] - before[kind]
            if done and before_cpu is not None and after_cpu is not None:
                slices.append({
                    "kind": kind, "per_second": done / slice_seconds, "cpu_us": (after_cpu - before_cpu) / done * 1e6,
                })
            kind = next(kinds)
        for gate in gates.values():
            gate.set()
        return slices

    tasks = [
        asyncio.create_task(workload(i, gates[kind], counter(kind), stop))
        for kind, (workload, clients) in workloads.items() for i in range(clients)
    ]
    slices = await conductor()
    await asyncio.gather(*tasks)
    return slices


def _paired(slices: list[dict[str, Any]], first: str, second: str, both_orders: bool = False) -> dict[str, Any]:
    """Medians over the pairs of neighbouring slices (``first`` then ``second``; with
    ``both_orders``, also ``second`` then ``first``, which cancels what being the later slice
    of a pair does): each kind's rate and CPU per request, the CPU of ``second`` against
    ``first``'s, its range, and the same for the rates the other way round (what ``second``
    costs in ``first``'s requests)."""
    pairs = [(a, b) for a, b in itertools.pairwise(slices) if a["kind"] == first and b["kind"] == second]
    if both_orders:
        pairs += [(b, a) for a, b in itertools.pairwise(slices) if a["kind"] == second and b["kind"] == first]
    ratios = [b["cpu_us"] / a["cpu_us"] for a, b in pairs]
    rate_ratios = [a["per_second"] / b["per_second"] for a, b in pairs]

    def median(kind: str, field: str) -> float | None:
        values = [x[field] for x in slices if x["kind"] == kind]
        return round(statistics.median(values), 1) if values else None

    return {
        "slices": len(slices),
        f"{first}_per_second_median": median(first, "per_second"),
        f"{second}_per_second_median": median(second, "per_second"),
        f"{second}_cost_vs_{first}_median": round(statistics.median(rate_ratios), 2) if rate_ratios else None,
        f"{first}_cpu_us_median": median(first, "cpu_us"),
        f"{second}_cpu_us_median": median(second, "cpu_us"),
        f"{second}_cpu_vs_{first}_median": round(statistics.median(ratios), 2) if ratios else None,
        f"{second}_cpu_vs_{first}_range": [round(min(ratios), 2), round(max(ratios), 2)] if ratios else None,
    }


def _floor_workload(host: str, port: int) -> Workload:
    async def client(index: int, gate: asyncio.Event, count: Callable[[int], None], stop: float) -> None:
        conn = HttpConnection(host, port)
        while time.perf_counter() < stop:
            await gate.wait()
            await conn.post("/graphql", {"query": "{ __typename }"})
            count(1)
        await conn.close()
    return client


def _solo_workload(host: str, port: int, seed: int, query: str = MOVE_QUERY, tally: Tally | None = None) -> Workload:
    """Solo play: each client plays every seat of its own stacked match; every request is a
    move (``query``)."""
    async def client(index: int, gate: asyncio.Event, count: Callable[[int], None], stop: float) -> None:
        rng = random.Random(seed * 1000 + index)
        conn = HttpConnection(host, port)
        tokens = [await _register(conn, f"bench-il-{os.getpid()}-{seed}-{index}-{s}") for s in range(4)]
        while time.perf_counter() < stop:
            await gate.wait()  # set-up requests are made in move slices, and counted with them
            match_id, local, version = await _stacked_match(conn, rng, tokens)
            count(5)  # createMatch and four joinMatch: a few per ~540 moves
            while not local.is_finished and time.perf_counter() < stop:
                await gate.wait()
                seat = local.awaiting()[0]
                move = rng.choice(local.legal_moves(seat))
                started = time.perf_counter()
                data = await _gql(conn, query, {"m": match_id, "mv": move.to_dict(), "v": version}, tokens[seat])
                if tally is not None:
                    tally.latencies.append(time.perf_counter() - started)
                local.apply(seat, move)
                version = data["submitMove"]["version"]
                count(1)
            if tally is not None:
                tally.matches_finished += local.is_finished
        await conn.close()
    return client


def _seated_workload(host: str, port: int, seed: int, turn_query: str = TURN_QUERY_LONG, tally: Tally | None = None) -> Workload:
    """Seated play, a client a table of four bots, each awaitTurn (``turn_query``) then
    submitMove: a move counts once, for both its requests. A bot held at the gate holds its
    table's next turn: an open awaitTurn waits across the other kind's slice, at no cost."""
    async def client(index: int, gate: asyncio.Event, count: Callable[[int], None], stop: float) -> None:
        setup = HttpConnection(host, port)
        tokens = [await _register(setup, f"bench-ils-{os.getpid()}-{seed}-{index}-{s}") for s in range(4)]

        async def bot(match_id: str, token: str, rng: random.Random) -> None:
            conn = HttpConnection(host, port)
            while time.perf_counter() < stop:
                await gate.wait()
                waited = time.perf_counter()
                turn = (await _gql(conn, turn_query, {"m": match_id}, token))["awaitTurn"]
                if tally is not None:
                    tally.turn_waits.append(time.perf_counter() - waited)
                if turn is None:
                    break
                move = {k: v for k, v in rng.choice(turn["legalMoves"]).items() if v is not None}
                await gate.wait()
                started = time.perf_counter()
                answer = await conn.post("/graphql", {"query": MOVE_QUERY, "variables": {"m": match_id, "mv": move, "v": turn["version"]}}, token)
                if tally is not None and time.perf_counter() < stop:
                    tally.latencies.append(time.perf_counter() - started)
                if answer.get("errors") and answer["errors"][0]["extensions"]["code"] != "STALE_VERSION":
                    raise RuntimeError(answer["errors"])
                count(1)
            await conn.close()

        while time.perf_counter() < stop:
            await gate.wait()
            match_id = (await _gql(setup, "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id } }", {"i": {"players": 4}}, tokens[0]))["createMatch"]["id"]
            for s in range(4):
                await _gql(setup, "mutation($m: ID!, $s: Int) { joinMatch(matchId: $m, seat: $s) { version } }", {"m": match_id, "s": s}, tokens[s])
            count(5)
            await asyncio.gather(*(bot(match_id, tokens[s], random.Random(seed * 100 + index * 4 + s)) for s in range(4)))
        await setup.close()
    return client


@dataclass
class Tally:
    """What a sequential phase's clients saw: each move's latency, each awaitTurn's wait, and
    how many matches they finished."""

    latencies: list[float] = field(default_factory=list)
    turn_waits: list[float] = field(default_factory=list)
    matches_finished: int = 0


async def _unbroken(workload: Workload, clients: int, seconds: float) -> tuple[float, float]:
    """``clients`` of ``workload`` for ``seconds``, never held at a gate: when they started
    and when they were told to stop (perf_counter)."""
    gate = asyncio.Event()
    gate.set()
    started = time.perf_counter()
    stop = started + seconds
    await asyncio.gather(*(workload(i, gate, lambda requests: None, stop) for i in range(clients)))
    return started, stop


async def solo(host: str, port: int, clients: int, seconds: float, seed: int, query: str = MOVE_QUERY) -> dict[str, Any]:
    """Each client plays every seat of its own stacked match; every request is a move."""
    tally = Tally()
    started, _ = await _unbroken(_solo_workload(host, port, seed, query, tally), clients, seconds)
    elapsed = time.perf_counter() - started
    return {**_summary(tally.latencies, elapsed), "matches_finished": tally.matches_finished}


async def seats(host: str, port: int, clients: int, seconds: float, seed: int) -> dict[str, Any]:
    """Four clients per match, each one bot: awaitTurn, then submitMove."""
    tally = Tally()
    started, stop = await _unbroken(_seated_workload(host, port, seed, TURN_QUERY, tally), max(1, clients // 4), seconds)
    # moves are counted inside the window only: bots still waiting at its end do not stretch it
    return {**_summary(tally.latencies, stop - started), "await_turn_p50_ms": round(percentile(tally.turn_waits, 0.5) * 1000, 2)}


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
    workloads = {"floor": (_floor_workload(host, port), clients), "move": (_solo_workload(host, port, seed), clients)}
    return _paired(await _alternating(workloads, seconds, server_pid, slice_seconds), "floor", "move")


async def seated_interleaved(
    host: str, port: int, clients: int, seconds: float, seed: int, server_pid: int, slice_seconds: float = 1.0
) -> dict[str, Any]:
    """A seated bot's move (awaitTurn, then submitMove) against a solo move, in alternating
    slices as :func:`interleaved` (every pair of neighbouring slices, in either order):
    ``seat_cpu_vs_move_median`` is the issue's "seated bots ≤ 2× the server CPU of a solo move
    per move", read the way code is compared on a shared machine.
    ``clients`` solo clients and ``clients`` // 4 tables of four seated bots."""
    workloads = {
        "move": (_solo_workload(host, port, seed), clients),
        "seat": (_seated_workload(host, port, seed), max(1, clients // 4)),
    }
    return _paired(await _alternating(workloads, seconds, server_pid, slice_seconds), "move", "seat", both_orders=True)


async def against_checkout(
    host: str, port: int, other_port: int, clients: int, seconds: float, seed: int, server_pids: dict[str, int],
    slice_seconds: float = 1.0,
) -> dict[str, Any]:
    """This code against another checkout's, each in its own serve process on the same Redis,
    in alternating slices as :func:`interleaved`: seated play (``seat``: this server's CPU per
    move against the other's, over every pair of neighbouring slices) for ``seconds``, then
    solo moves (``move``) for ``seconds``. How code is compared on a shared machine: both sides
    meet the same moments, on the same core. ``server_pids``: ``this`` server's and ``that``'s."""
    result = {}
    for name, workload, bots in [("seat", _seated_workload, max(1, clients // 4)), ("move", _solo_workload, clients)]:
        workloads = {"that": (workload(host, other_port, seed), bots), "this": (workload(host, port, seed + 1), bots)}
        slices = await _alternating(workloads, seconds, server_pids, slice_seconds)
        result[name] = _paired(slices, "that", "this", both_orders=True)
    return result


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


def _command_stats(redis_url: str | None) -> dict[str, dict[str, float]]:
    if redis_url is None:
        return {}
    import redis

    with redis.Redis.from_url(redis_url) as client:
        return client.info("commandstats")


def _with_cpu(pids: dict[str, int], measure: Any, redis_url: str | None = None) -> dict[str, Any]:
    """Run one measurement; add each process's CPU per request (us) during it, and with
    ``redis_url``, the Redis calls per request: scripts (``EVALSHA``; the commit is one), all
    commands (a script's own calls counted too), and the µs a script took in Redis."""
    before = {name: process_cpu_seconds(pid) for name, pid in pids.items()}
    stats_before = _command_stats(redis_url)
    result: dict[str, Any] = measure()
    for name, pid in pids.items():
        after = process_cpu_seconds(pid)
        started = before[name]
        if started is not None and after is not None and result["requests"]:
            result[f"{name}_cpu_us_per_request"] = round((after - started) / result["requests"] * 1e6, 1)
    stats_after = _command_stats(redis_url)
    if stats_after and result["requests"]:
        def grown(command: str, field: str) -> float:
            return stats_after.get(command, {}).get(field, 0) - stats_before.get(command, {}).get(field, 0)

        scripts = grown("cmdstat_evalsha", "calls")
        result["redis_scripts_per_request"] = round(scripts / result["requests"], 2)
        result["redis_commands_per_request"] = round(sum(grown(c, "calls") for c in stats_after) / result["requests"], 2)
        if scripts:
            result["redis_script_us_per_call"] = round(grown("cmdstat_evalsha", "usec") / scripts, 1)
    return result


def commit_script_alone(redis_url: str, commits: int = 5000) -> float:
    """The µs Redis spends in one commit (:data:`service.store.matches.COMMIT_EVENT`, a move of a
    4-player match with a turn's webhook call to look up), the API and the clients idle: the
    script's own cost, next to what it takes while they share the cores (``redis_script_us_per_call``).
    A match of its own (a scratch key, deleted after), commits pipelined 50 at a time."""
    import redis

    from service.store.keys import events_key, home_key, match_key
    from service.store.matches import COMMIT_EVENT

    match_id = f"bench{os.getpid():011d}"
    keys = [match_key(match_id), events_key(match_id), *(home_key(0, n) for n in ("deadlines", "unsettled", "webhook-calls"))]
    state, live = bytes(range(256)) * 4, json.dumps({"status": "ACTIVE", "pad": "x" * 1000})
    event = '{"t":"move","seat":1,"a":64,"by":"bot","dl":1795880948333,"th":20}'
    with redis.Redis.from_url(redis_url) as client:
        sha = client.script_load(COMMIT_EVENT)
        client.hset(keys[0], mapping={"version": 0, "hooked": "|"})
        before = client.info("commandstats").get("cmdstat_evalsha", {"calls": 0, "usec": 0})
        for start in range(0, commits, 50):
            pipe = client.pipeline(transaction=False)
            for version in range(start, min(start + 50, commits)):
                pipe.evalsha(sha, len(keys), *keys, version, match_id, state, live, event, 1795880948333, "", "0", "",
                             2000, "", "", 1, f"{match_id}|{version + 1}|2|turn|bot")
            assert all(answer[0] == 1 for answer in pipe.execute())
        after = client.info("commandstats")["cmdstat_evalsha"]
        client.delete(keys[0], keys[1])
        client.zrem(keys[2], match_id)
    return round((after["usec"] - before["usec"]) / (after["calls"] - before["calls"]), 1)


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


def _serve(redis_url: str, port: int, checkout: Path | None = None) -> subprocess.Popen[bytes]:
    """A `serve` process on ``redis_url`` with the bench's clients unlimited, running this
    code, or that of ``checkout`` (a checkout of this project)."""
    env = {**os.environ, "REDIS_URL": redis_url, **UNLIMITED_CLIENTS, "ARENA_MAX_WAITS_PER_CLIENT": "100000"}
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    return subprocess.Popen(
        [sys.executable, "-m", "wizard_arena", "serve", "--port", str(port), "--log-level", "warning"], env=env, cwd=checkout
    )


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
            processes.append(_serve(redis_url, port))
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


def bench_service(
    clients: int, seconds: float, seed: int, url: str | None, quick: bool = False, against: Path | None = None
) -> dict[str, Any]:
    """Measure the floor, solo play and seated play (with ``quick``, the floor and solo play
    only) against :func:`running_server`; with ``against`` (a checkout), only this code
    against that one (:func:`against_checkout`)."""
    if against is not None and url is not None:
        raise ValueError("--against starts both servers itself: leave --url out")
    with running_server(url) as (host, port, redis_url, pids):
        result: dict[str, Any] = {
            "clients": clients,
            "seconds": seconds,
            "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        }
        if against is not None:
            assert redis_url is not None
            result["against"] = str(against)
            result.update(_code_against_code(host, port, redis_url, pids["server"], against, clients, seconds, seed))
            return result
        asyncio.run(floor(host, port, clients, 1.0))  # warm-up
        result["floor"] = _with_cpu(pids, lambda: asyncio.run(floor(host, port, clients, seconds)), redis_url)
        result["solo"] = _with_cpu(pids, lambda: asyncio.run(solo(host, port, clients, seconds, seed)), redis_url)
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
        result["seats"] = _with_cpu(pids, lambda: asyncio.run(seats(host, port, clients, seconds, seed)), redis_url)
        if redis_url is not None:
            result["house_bot_delay"] = asyncio.run(house_bots(host, port, redis_url, seed))
        if "redis" in pids:  # the bench's own Redis: nothing else's keys
            assert redis_url is not None
            result["commit_script_alone_us_per_call"] = commit_script_alone(redis_url)
        if "server" in pids:
            result["seated_interleaved"] = asyncio.run(
                seated_interleaved(host, port, clients, max(seconds, 10.0), seed + 11, pids["server"])
            )
        result["move_cost_vs_floor"] = round(result["floor"]["per_second"] / result["solo"]["per_second"], 2)
        _cpu_ratio(result)
        return result


def _code_against_code(
    host: str, port: int, redis_url: str, server_pid: int, checkout: Path, clients: int, seconds: float, seed: int
) -> dict[str, Any]:
    """:func:`against_checkout`, with a second `serve` running ``checkout``'s code on the same
    Redis, started and stopped here."""
    from service.store.embedded_redis import stop_processes

    other_port = _free_port()
    other = _serve(redis_url, other_port, checkout)
    try:
        # both servers on one core: only one of them works at a time, and a process kept on a
        # slower core (a busier neighbour) would bias the whole run
        core = max(os.sched_getaffinity(0))
        for pid in (server_pid, other.pid):
            os.sched_setaffinity(pid, {core})
        _wait_healthy(host, other_port)
        for warmed in (port, other_port):
            asyncio.run(floor(host, warmed, clients, 1.0))
        pids = {"this": server_pid, "that": other.pid}
        return asyncio.run(against_checkout(host, port, other_port, clients, max(seconds, 10.0), seed + 13, pids))
    finally:
        stop_processes([other], 15)


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
