"""What waiting costs at scale, against one `wizard-arena serve` process: bots on the
``myTurns`` subscription (graphql-transport-ws, one WebSocket per bot, moves sent over it).

- ``idle``: ``--bots`` bots subscribed and nothing happening: the API process's Redis
  connections, its memory (and per waiter), and its CPU while idle.
- ``play``: ``--bots`` bots seated in ``--matches`` four-player matches (bot ``(4m + s) mod
  bots`` in seat ``s`` of match ``m``: with fewer bots than seats, a bot plays several matches
  through its one subscription), each moving as soon as its turn frame arrives, on a
  ``--move-timeout-ms`` clock. Per move: the server's CPU; from a move sent to the next turn
  frame of that match received, at the client (an upper bound of commit -> frame written)
  p50/p99/max; the server's own figure next to it, from a move's commit to the next turn frame
  written (``wizard_arena_turn_frame_seconds`` read from ``GET /metrics`` before and after the
  window: p50/p99 interpolated within its buckets, as Prometheus's ``histogram_quantile``);
  and the moves the server made for a bot that was too late (``timeouts``, read from the
  matches). With ``--moves-per-second R`` the bots' moves go out at most R a second over all
  of them (each waits for the next free slot of a shared pacer before sending): the latencies
  at a stated load below what the server can take, where without it they are those of a
  saturated server (every bot moving the instant its frame arrives). A bot handles its frames
  one at a time, so with a pacer the client's figure also holds the time a frame waits behind
  its bot's wait for a slot in another match; the server's is unaffected.

The load generator is this process (asyncio, ``websockets``): on a 2-core machine it shares the
CPU with the server, so rates are a floor; the server's CPU per move is its own.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import random
import subprocess
import sys
import time
from typing import Any

import redis
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Subprotocol

from bench.service import (
    HttpConnection,
    _free_port,
    _gql,
    _register,
    _wait_healthy,
    percentile,
    process_cpu_seconds,
    running_server,
)
from service.store.embedded_redis import stop_processes

PROTOCOL = "graphql-transport-ws"
TURNS = "subscription { myTurns { id version legalMoves { bid card trump } } }"
MOVE = "mutation($m: ID!, $mv: MoveInput!, $v: Int) { submitMove(matchId: $m, move: $mv, expectedVersion: $v) { version } }"
SEATS = "query($m: ID!) { match(id: $m) { status movesMade round seats { timeouts } } }"


async def _register_all(host: str, port: int, count: int, prefix: str) -> list[str]:
    tokens: list[str] = [""] * count
    indexes = iter(range(count))

    async def worker() -> None:
        conn = HttpConnection(host, port)
        for i in indexes:
            tokens[i] = await _register(conn, f"{prefix}-{i}")
        await conn.close()

    await asyncio.gather(*(worker() for _ in range(16)))
    return tokens


class SubscribedBot:
    """One bot: a WebSocket with its myTurns subscription; moves go over the same socket."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.ws: ClientConnection | None = None
        self.ids = itertools.count(2)
        self.answers: dict[str, asyncio.Future[dict[str, Any]]] = {}

    async def open(self, url: str) -> None:
        self.ws = await connect(url, subprotocols=[Subprotocol(PROTOCOL)], open_timeout=60, ping_interval=None, max_size=2**22)
        await self.ws.send(json.dumps({"type": "connection_init", "payload": {"token": self.token}}))
        ack = json.loads(await self.ws.recv())
        if ack.get("type") != "connection_ack":
            raise RuntimeError(f"no connection_ack: {ack}")
        await self.ws.send(json.dumps({"id": "1", "type": "subscribe", "payload": {"query": TURNS}}))

    async def move(self, match_id: str, move: dict[str, Any], version: int) -> dict[str, Any]:
        assert self.ws is not None
        op = str(next(self.ids))
        answer = self.answers[op] = asyncio.get_running_loop().create_future()
        payload = {"query": MOVE, "variables": {"m": match_id, "mv": move, "v": version}}
        await self.ws.send(json.dumps({"id": op, "type": "subscribe", "payload": payload}))
        return await answer

    async def frames(self) -> Any:
        """Turn frames (matches), while a task of their own hands the answers to moves to their
        futures (a bot waiting for its move's answer reads no frame meanwhile)."""
        turns: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        reader = asyncio.create_task(self._read(turns))
        try:
            while (turn := await turns.get()) is not None:
                yield turn
        finally:
            reader.cancel()

    async def _read(self, turns: asyncio.Queue[dict[str, Any] | None]) -> None:
        assert self.ws is not None
        try:
            async for raw in self.ws:
                message = json.loads(raw)
                kind, op = message.get("type"), message.get("id")
                if kind == "next" and op == "1":
                    turns.put_nowait(message["payload"]["data"]["myTurns"])
                elif kind == "next" and op in self.answers:
                    self.answers.pop(op).set_result(message["payload"])
                elif kind == "error":
                    raise RuntimeError(f"operation {op} failed: {message}")
                elif kind == "ping":
                    await self.ws.send(json.dumps({"type": "pong"}))
        finally:
            turns.put_nowait(None)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


def _api_redis_connections(redis_url: str) -> int:
    clients = redis.Redis.from_url(redis_url).client_list()
    return sum(1 for c in clients if c.get("name", "").startswith("wizard-arena-api"))


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


async def _open_all(url: str, tokens: list[str]) -> list[SubscribedBot]:
    bots = [SubscribedBot(t) for t in tokens]
    for start in range(0, len(bots), 200):  # a few hundred handshakes at a time
        await asyncio.gather(*(b.open(url) for b in bots[start : start + 200]))
    return bots


async def _metrics(host: str, port: int) -> list[Metric]:
    """The server's ``GET /metrics``."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET /metrics HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    _, _, body = (await reader.read()).decode().partition("\r\n\r\n")
    writer.close()
    return list(text_string_to_metric_families(body))


async def _waits_open(host: str, port: int) -> float:
    """The server's gauge of waits and subscriptions open."""
    for family in await _metrics(host, port):
        if family.name == "wizard_arena_waits_open":
            return float(family.samples[0].value)
    return 0.0


async def _turn_frame_buckets(host: str, port: int) -> dict[float, float]:
    """The server's histogram of commit -> turn frame written over WebSockets: the cumulative
    count of each bucket, by its upper bound."""
    for family in await _metrics(host, port):
        if family.name == "wizard_arena_turn_frame_seconds":
            return {
                float(s.labels["le"]): s.value for s in family.samples
                if s.name.endswith("_bucket") and s.labels.get("via") == "websocket"
            }
    return {}


def bucket_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The ``q`` quantile of what a histogram counted between two readings (cumulative counts
    by upper bound), interpolated linearly within its bucket as Prometheus's
    ``histogram_quantile`` does (NaN: nothing counted; the highest finite bound when it falls
    in the +Inf bucket)."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    if not counts or counts[-1] <= 0:
        return float("nan")
    rank = q * counts[-1]
    lower, below = 0.0, 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if count >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = bound, count
    return lower


async def idle(host: str, port: int, redis_url: str, server_pid: int, bots: int, seconds: float) -> dict[str, Any]:
    before_mb = _rss_mb(server_pid)
    tokens = await _register_all(host, port, bots, f"idle-{os.getpid()}")
    opened = time.perf_counter()
    subscribed = await _open_all(f"ws://{host}:{port}/graphql", tokens)
    while await _waits_open(host, port) < bots:  # every subscription is following its bot
        await asyncio.sleep(0.2)
    ready_s = time.perf_counter() - opened
    await asyncio.sleep(1.0)  # let the subscriptions' set-up work end
    cpu_before, started = process_cpu_seconds(server_pid), time.perf_counter()
    await asyncio.sleep(seconds)
    cpu_after, elapsed = process_cpu_seconds(server_pid), time.perf_counter() - started
    after_mb = _rss_mb(server_pid)
    result = {
        "bots": bots,
        "subscribed_in_s": round(ready_s, 1),
        "api_redis_connections": _api_redis_connections(redis_url),
        "server_rss_mb": round(after_mb, 1),
        "server_rss_mb_before": round(before_mb, 1),
        "kb_per_waiter": round((after_mb - before_mb) * 1024 / bots, 1),
        "idle_cpu_percent_of_a_core": round(((cpu_after or 0) - (cpu_before or 0)) / elapsed * 100, 2),
    }
    await asyncio.gather(*(b.close() for b in subscribed))
    return {**result, "floor_kb_per_websocket": round(await _floor_kb_per_websocket(bots), 1)}


async def _floor_kb_per_websocket(count: int) -> float:
    """Memory per idle WebSocket of the server alone (``bench.ws_floor``: uvicorn as `serve`
    runs it, an app that accepts and waits), ``count`` of them opened as the bots' were."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "bench.ws_floor", str(port)])
    sockets: list[ClientConnection] = []
    try:
        _wait_healthy("127.0.0.1", port)
        before_mb = _rss_mb(server.pid)
        url = f"ws://127.0.0.1:{port}/"
        for start in range(0, count, 200):  # a few hundred handshakes at a time, as _open_all
            sockets += await asyncio.gather(*(
                connect(url, subprotocols=[Subprotocol(PROTOCOL)], open_timeout=60, ping_interval=None, max_size=2**22)
                for _ in range(min(200, count - start))
            ))
        await asyncio.sleep(1.0)  # as for the bots: let the handshakes' work end
        return (_rss_mb(server.pid) - before_mb) * 1024 / count
    finally:
        await asyncio.gather(*(ws.close() for ws in sockets))
        stop_processes([server], 15)


async def play(
    host: str, port: int, server_pid: int, bots: int, matches: int, seconds: float, move_timeout_ms: int, seed: int,
    moves_per_second: float | None = None,
) -> dict[str, Any]:
    tokens = await _register_all(host, port, bots, f"play-{os.getpid()}-{seed}")
    subscribed = await _open_all(f"ws://{host}:{port}/graphql", tokens)
    while await _waits_open(host, port) < bots:
        await asyncio.sleep(0.1)
    setup = HttpConnection(host, port)
    match_ids = []
    for m in range(matches):
        spec = {"players": 4, "moveTimeoutMs": move_timeout_ms}
        created = await _gql(setup, "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id } }", {"i": spec}, tokens[(4 * m) % bots])
        match_ids.append(created["createMatch"]["id"])
    sent_at: dict[str, float] = {}
    delays: list[float] = []
    moves = 0
    stop = float("inf")  # set when the measured window opens
    measuring = False
    rng = random.Random(seed)
    next_slot = 0.0  # the pacer's next free send time (perf_counter), with moves_per_second

    async def run(bot: SubscribedBot) -> None:
        nonlocal moves, next_slot
        async for turn in bot.frames():
            now = time.perf_counter()
            match_id = turn["id"]
            sent = sent_at.pop(match_id, None)
            if measuring and sent is not None:
                delays.append(now - sent)
            if now >= stop:
                continue  # the window is over: stop moving, keep reading until closed
            move = {k: v for k, v in rng.choice(turn["legalMoves"]).items() if v is not None}
            if moves_per_second:
                slot, next_slot = max(now, next_slot), max(now, next_slot) + 1 / moves_per_second
                if slot > now:
                    await asyncio.sleep(slot - now)
            sent_at[match_id] = time.perf_counter()
            answer = await bot.move(match_id, move, turn["version"])
            if answer.get("errors") and answer["errors"][0]["extensions"]["code"] != "STALE_VERSION":
                raise RuntimeError(answer["errors"])
            if measuring:
                moves += 1

    tasks = [asyncio.create_task(run(b)) for b in subscribed]
    join = "mutation($m: ID!, $s: Int) { joinMatch(matchId: $m, seat: $s) { version } }"
    for m, match_id in enumerate(match_ids):  # every seat but the last: nothing starts yet
        for s in range(3):
            await _gql(setup, join, {"m": match_id, "s": s}, tokens[(4 * m + s) % bots])

    async def start(indexes: list[int]) -> None:  # the last seat's join starts its match
        conn = HttpConnection(host, port)
        for m in indexes:
            await _gql(conn, join, {"m": match_ids[m], "s": 3}, tokens[(4 * m + 3) % bots])
        await conn.close()

    await asyncio.gather(*(start(list(range(k, matches, 16))) for k in range(16)))  # all at once
    await asyncio.sleep(min(2.0, seconds / 5))  # past the start
    measuring = True
    frames_before = await _turn_frame_buckets(host, port)
    cpu_before, started = process_cpu_seconds(server_pid), time.perf_counter()
    stop = started + seconds
    await asyncio.sleep(seconds)
    cpu_after, elapsed = process_cpu_seconds(server_pid), time.perf_counter() - started
    measuring = False
    frames_after = await _turn_frame_buckets(host, port)
    timeouts = finished = 0
    for match_id in match_ids:
        data = (await setup.post("/graphql", {"query": SEATS, "variables": {"m": match_id}}))["data"]["match"]
        timeouts += sum(s["timeouts"] for s in data["seats"])
        finished += data["status"] == "FINISHED"
    await setup.close()
    await asyncio.gather(*(b.close() for b in subscribed))
    for task in tasks:
        task.cancel()
    failures = [r for r in await asyncio.gather(*tasks, return_exceptions=True) if isinstance(r, Exception)]
    if failures:
        raise failures[0]
    return {
        "bots": bots,
        "matches": matches,
        "move_timeout_ms": move_timeout_ms,
        "offered_moves_per_second": moves_per_second,
        "moves": moves,
        "moves_per_second": round(moves / elapsed, 1),
        "server_cpu_us_per_move": round(((cpu_after or 0) - (cpu_before or 0)) / max(moves, 1) * 1e6, 1),
        "move_to_next_turn_frame_ms": {
            "p50": round(percentile(delays, 0.5) * 1000, 2),
            "p99": round(percentile(delays, 0.99) * 1000, 2),
            "max": round(max(delays, default=float("nan")) * 1000, 2),
        },
        "server_commit_to_turn_frame_written_ms": {
            "frames": round(frames_after.get(math.inf, 0.0) - frames_before.get(math.inf, 0.0)),
            "p50": round(bucket_quantile(frames_before, frames_after, 0.5) * 1000, 2),
            "p99": round(bucket_quantile(frames_before, frames_after, 0.99) * 1000, 2),
        },
        "timeouts": timeouts,
        "matches_finished": finished,
    }


def bench_waiting(
    scenario: str, bots: int, matches: int, seconds: float, move_timeout_ms: int, seed: int,
    moves_per_second: float | None = None,
) -> dict[str, Any]:
    with running_server() as (host, port, redis_url, pids):
        if scenario == "idle":
            assert redis_url is not None
            result = asyncio.run(idle(host, port, redis_url, pids["server"], bots, seconds))
        else:
            result = asyncio.run(
                play(host, port, pids["server"], bots, matches, seconds, move_timeout_ms, seed, moves_per_second)
            )
    return {"scenario": scenario, "seconds": seconds, **result}


__all__ = ["bench_waiting"]
