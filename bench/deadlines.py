"""``wizard-arena bench deadlines``: how late the server's fallback move lands after a
missed deadline.

Starts an embedded Redis, one ``wizard-arena serve`` process and one ``wizard-arena worker``
process (whose clock thread sweeps the deadlines), registers bots that never move, seats
them (with house bots, if asked) in matches with a short ``moveTimeoutMs`` and waits until
the worker has made at least the requested number of timeout moves. Then every match's
event stream is read: an entry's id is Redis's own millisecond clock at the commit, and the
event before a timeout move carries the deadline in force (``dl``), so

    lateness = timeout event's id (ms) - previous event's "dl".

The matches are started a fraction of the timeout apart, so their deadlines fall at
independent moments, as those of unrelated matches do.

:class:`Arena` (Redis, serve, workers; always cleaned up) is shared with
``bench/tournament.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import subprocess
import time
from typing import Any

from bench.processes import BenchProcesses
from bench.service import HttpConnection, _free_port, _gql, _register, _wait_healthy, percentile

#: The issue's target: the fallback move lands within this many ms of the deadline at p99.
TARGET_P99_MS = 100


def machine() -> str:
    return f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}"


class Arena(BenchProcesses):
    """An embedded Redis, one ``serve`` process and ``workers`` worker processes, for one
    benchmark; all stopped on exit, whatever happens inside (:class:`BenchProcesses`)."""

    def __init__(self, workers: int = 1, serve_env: dict[str, str] | None = None, log_level: str = "warning") -> None:
        super().__init__()
        self.workers = workers
        self.serve_env = serve_env or {}
        self.log_level = log_level
        self.redis_url = ""
        self.host = "127.0.0.1"
        self.port = 0
        self._embedded: Any = None
        self._serve: subprocess.Popen[bytes] | None = None
        self._workers: list[subprocess.Popen[bytes]] = []

    # ------------------------------------------------------------------ lifecycle
    def _start(self) -> None:
        from service.store.embedded_redis import EmbeddedRedis

        self._embedded = EmbeddedRedis(self.folder / "redis", appendonly=False)
        self.redis_url = self._embedded.start()
        self.port = _free_port()
        self._serve = self.spawn_serve("serve", self.port, self.redis_url, self.serve_env, self.log_level)
        for n in range(self.workers):
            self._workers.append(self.spawn(
                ["worker", "--log-level", self.log_level], {**os.environ, "REDIS_URL": self.redis_url}, f"worker-{n}.log"
            ))
        _wait_healthy(self.host, self.port)
        self._wait_workers()

    def _wait_workers(self, timeout: float = 30) -> None:
        """Until every worker has registered with RQ (its clock thread starts just before)."""
        import redis
        from rq import Worker

        connection = redis.Redis.from_url(self.redis_url)
        try:
            end = time.monotonic() + timeout
            while Worker.count(connection=connection) < self.workers:
                for process in self._workers:
                    if process.poll() is not None:
                        raise RuntimeError(f"a worker exited with {process.returncode}; see {self.folder}")
                if time.monotonic() > end:
                    raise RuntimeError(f"the workers did not start in {timeout} s; see {self.folder}")
                time.sleep(0.05)  # nothing to wait on: RQ registers workers in a set
        finally:
            connection.close()

    def _stop_redis(self) -> None:
        self._workers, self._serve = [], None
        if self._embedded is not None:
            self._embedded.stop()
            self._embedded = None

    # ------------------------------------------------------------------ for the benchmarks
    def cpu_seconds(self) -> dict[str, float | None]:
        """CPU used so far by Redis, the serve process and the workers (with the RQ work
        horses they have waited for: the jobs)."""
        from bench.service import process_cpu_seconds

        workers = [process_cpu_seconds(p.pid, children=True) for p in self._workers]
        redis_process = None if self._embedded is None else self._embedded.process
        return {
            "redis": None if redis_process is None else process_cpu_seconds(redis_process.pid),
            "serve": None if self._serve is None else process_cpu_seconds(self._serve.pid),
            "workers": None if None in workers else sum(w for w in workers if w is not None),
        }

    def check_alive(self) -> None:
        for process in [self._serve, *self._workers]:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"{process.args!r} exited with {process.returncode}; see {self.folder}")


def stream_ms(entry_id: bytes) -> int:
    """The millisecond part of a stream entry id (Redis's clock when it was added)."""
    return int(entry_id.split(b"-")[0])


def lateness_of(entries: list[tuple[bytes, dict[bytes, bytes]]]) -> list[int]:
    """For each timeout move in one match's event stream: its time minus the deadline in
    force before it (the previous event's ``dl``)."""
    out = []
    previous: dict[str, Any] | None = None
    for entry_id, fields in entries:
        event = json.loads(fields[b"e"])
        if event.get("t") == "move" and event.get("by") == "timeout" and previous is not None and previous.get("dl"):
            out.append(stream_ms(entry_id) - int(previous["dl"]))
        previous = event
    return out


async def _search_matches(conn: HttpConnection, token: str, count: int, players: int) -> list[str]:
    """``count`` matches of SEARCH house bots only, playing on their own beside the measured
    ones (a long move timeout: their moves are the load, not timeouts)."""
    ids = []
    for _ in range(count):
        created = await _gql(
            conn, "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id } }",
            {"i": {"players": players, "moveTimeoutMs": 30_000}}, token,
        )
        match_id = created["createMatch"]["id"]
        for _ in range(players):
            await _gql(conn, "mutation($m: ID!, $k: HouseBotKind!) { addHouseBot(matchId: $m, kind: $k) { version } }",
                       {"m": match_id, "k": "SEARCH"}, token)
        ids.append(match_id)
    return ids


async def _deadlines(
    arena: Arena, timeouts: int, matches: int, players: int, house_bots: int, move_timeout_ms: int, wait_seconds: float,
    search_matches: int = 0,
) -> dict[str, Any]:
    import redis.asyncio

    from service.store.keys import events_key

    conn = HttpConnection(arena.host, arena.port)
    store = redis.asyncio.Redis.from_url(arena.redis_url)
    try:
        silent = [await _register(conn, f"silent-{os.getpid()}-{s}") for s in range(players - house_bots)]
        searching = await _search_matches(conn, silent[0], search_matches, players)
        match_ids: list[str] = []
        for _ in range(matches):
            created = await _gql(
                conn, "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id } }",
                {"i": {"players": players, "moveTimeoutMs": move_timeout_ms}}, silent[0],
            )
            match_id = created["createMatch"]["id"]
            for n in range(house_bots):
                kind = "HEURISTIC" if n % 2 == 0 else "RANDOM"
                await _gql(conn, "mutation($m: ID!, $k: HouseBotKind!) { addHouseBot(matchId: $m, kind: $k) { version } }",
                           {"m": match_id, "k": kind}, silent[0])
            for token in silent:  # the last seat taken starts the match and its first deadline
                await _gql(conn, "mutation($m: ID!) { joinMatch(matchId: $m) { version } }", {"m": match_id}, token)
            match_ids.append(match_id)
            await asyncio.sleep(move_timeout_ms / 1000 / matches)  # deadlines at independent moments
        started = time.perf_counter()

        # count the timeout moves as they come, reading each stream on from where it was left
        positions = {m: b"-" for m in match_ids}
        seen = 0
        last_progress, last_seen = time.monotonic(), 0
        while seen < timeouts:
            await asyncio.sleep(0.25)
            arena.check_alive()
            for match_id in match_ids:
                rows = await store.xrange(events_key(match_id), min=positions[match_id])
                if positions[match_id] != b"-":
                    rows = rows[1:]  # the entry already counted
                for entry_id, fields in rows:
                    positions[match_id] = entry_id
                    seen += json.loads(fields[b"e"]).get("by") == "timeout"
            if seen > last_seen:
                last_progress, last_seen = time.monotonic(), seen
            elif time.monotonic() - last_progress > wait_seconds:
                raise RuntimeError(f"no timeout move for {wait_seconds} s ({seen} so far); see {arena.folder}")
        elapsed = time.perf_counter() - started

        late: list[int] = []
        moves = {"timeout": 0, "house": 0, "bot": 0}
        for match_id in match_ids:
            entries = await store.xrange(events_key(match_id))
            late += lateness_of(entries)
            for _, fields in entries:
                by = json.loads(fields[b"e"]).get("by")
                if by in moves:
                    moves[by] += 1
        search_moves = 0
        for match_id in searching:
            for _, fields in await store.xrange(events_key(match_id)):
                search_moves += json.loads(fields[b"e"]).get("by") == "house"
    finally:
        await store.aclose()
        await conn.close()
    late.sort()
    values = [float(v) for v in late]
    p99 = percentile(values, 0.99)
    return {
        "benchmark": "deadlines",
        "machine": machine(),
        "matches": matches,
        "players": players,
        "house_bots_per_match": house_bots,
        "move_timeout_ms": move_timeout_ms,
        "timeouts": len(late),
        "house_moves": moves["house"],
        "search_matches": search_matches,
        "search_house_moves": search_moves,
        "seconds": round(elapsed, 1),
        "lateness_ms": {
            "mean": round(sum(values) / len(values), 1) if values else None,
            "p50": percentile(values, 0.50),
            "p90": percentile(values, 0.90),
            "p99": p99,
            "max": late[-1] if late else None,
        },
        "target_p99_ms": TARGET_P99_MS,
        "target_met": bool(late) and p99 <= TARGET_P99_MS,
    }


def bench_deadlines(
    timeouts: int = 300,
    matches: int = 8,
    players: int = 4,
    house_bots: int = 1,
    move_timeout_ms: int = 100,
    wait_seconds: float = 30.0,
    search_matches: int = 0,
) -> dict[str, Any]:
    """Run the deadline benchmark; one serve process and one worker (see the module text).
    ``search_matches`` matches of SEARCH house bots play beside the measured ones."""
    if not 0 <= house_bots < players:
        raise ValueError(f"house bots per match must be from 0 to {players - 1} (at least one silent bot)")
    if timeouts < 1 or matches < 1 or move_timeout_ms < 1:
        raise ValueError("timeouts, matches and the move timeout must be positive")
    # the server refuses timeouts below ARENA_MIN_MOVE_TIMEOUT_MS (default 100)
    serve_env = {"ARENA_MIN_MOVE_TIMEOUT_MS": str(min(100, move_timeout_ms))}
    with Arena(workers=1, serve_env=serve_env) as arena:
        return asyncio.run(
            _deadlines(arena, timeouts, matches, players, house_bots, move_timeout_ms, wait_seconds, search_matches)
        )


__all__ = ["Arena", "bench_deadlines", "lateness_of"]
