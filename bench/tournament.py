"""``wizard-arena bench tournament``: a whole tournament of house bots end to end through
Redis and the workers, against the engine playing the same matches in-process.

Starts an embedded Redis, one ``wizard-arena serve`` process (for the createTournament call)
and N ``wizard-arena worker`` processes; registers one bot, creates a ROUND_ROBIN tournament
whose entrants are house bots (``houseBots: [HEURISTIC, RANDOM, ...]``) and times it from the
call to the status FINISHED. Everything between is the workers': RQ starts the tournament,
the house bots' moves are made through the same load / compare-and-set commit as any move,
each ended match is settled by a job (Elo, the table's result) that also creates the next
round's tables.

The comparison: ``wizard.bots.play_match`` in this process with the same bot kinds at the
same tables (each table's kinds in seat order, new seeds), repeated for at least
``engine_seconds``. The ratio of the two rates is what the infrastructure costs.

Also reported, from Redis: each match's play time (its creation, stored in its settings, to
its last event's stream id, Redis's clock) and the time between a round's last match ending
and the next round's first match being created (scheduling: settlement queue, RQ job).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import time
from typing import Any

from bench.deadlines import Arena, machine, stream_ms
from bench.service import HttpConnection, _gql, _register, percentile
from service.model.homes import homed_match_id

CREATE = "mutation($i: CreateTournamentInput!) { createTournament(input: $i) { id status } }"
RESULT = """query($t: ID!) { tournament(id: $t) {
  status startedAt finishedAt
  standings { rank points matches score bot { id name } }
} }"""


def house_kinds(entrants: int) -> list[str]:
    """HEURISTIC, RANDOM, HEURISTIC, ... (half each)."""
    return ["HEURISTIC" if n % 2 == 0 else "RANDOM" for n in range(entrants)]


async def _tournament(
    arena: Arena, entrants: int, players: int, rounds: int, limit_seconds: float, move_timeout_ms: int | None = None
) -> dict[str, Any]:
    import redis.asyncio

    conn = HttpConnection(arena.host, arena.port)
    store = redis.asyncio.Redis.from_url(arena.redis_url)
    try:
        token = await _register(conn, f"organiser-{os.getpid()}")
        spec = {
            "name": "bench", "playersPerMatch": players, "format": "ROUND_ROBIN", "rounds": rounds,
            "houseBots": house_kinds(entrants),
        }
        if move_timeout_ms is not None:
            spec["moveTimeoutMs"] = move_timeout_ms
        cpu_before = arena.cpu_seconds()
        called_ms = int(time.time() * 1000)
        started = time.perf_counter()
        tid = (await _gql(conn, CREATE, {"i": spec}, token))["createTournament"]["id"]
        key = f"{{tn:{tid}}}:tournament"
        while True:  # the status lives in one hash field: read it straight from Redis
            status = (await store.hget(key, "status") or b"").decode()
            if status in ("FINISHED", "CANCELLED"):
                break
            arena.check_alive()
            if time.perf_counter() - started > limit_seconds:
                raise RuntimeError(f"tournament {tid} still {status} after {limit_seconds} s; see {arena.folder}")
            await asyncio.sleep(0.02)
        wall = time.perf_counter() - started
        cpu_after = arena.cpu_seconds()
        if status != "FINISHED":
            raise RuntimeError(f"tournament {tid} was {status}; see {arena.folder}")
        result = (await _gql(conn, RESULT, {"t": tid}, token))["tournament"]
        stamps = await store.hmget(key, ["started", "finished"])

        # every table, with its kinds in seat order, from the tournament's own slots
        slots = {k.decode(): json.loads(v) for k, v in (await store.hgetall(f"{{tn:{tid}}}:slots")).items()}
        kinds = house_kinds(entrants)
        tables: list[dict[str, Any]] = []
        for slot_id, slot in sorted(slots.items()):
            match_id = homed_match_id(f"{tid}-{slot_id}-0")  # as Tournament.match_ids names a table's match
            settings = json.loads(await store.hget(f"{{m:{match_id}}}:match", "settings"))
            live = json.loads(await store.hget(f"{{m:{match_id}}}:match", "live"))
            last = await store.xrevrange(f"{{m:{match_id}}}:events", count=1)
            tables.append({
                "round": slot["round"],
                "kinds": ["HEURISTIC" if e is None else kinds[e] for e in slot["table"]],
                "created": settings["createdAt"],
                "ended": stream_ms(last[0][0]),
                "status": live["status"],
                "timeouts": sum(live["timeouts"]),
            })
    finally:
        await store.aclose()
        await conn.close()
    play = sorted((t["ended"] - t["created"]) / 1000 for t in tables)
    gaps = []
    for r in range(1, rounds):
        ended = max(t["ended"] for t in tables if t["round"] == r)
        created = min(t["created"] for t in tables if t["round"] == r + 1)
        gaps.append((created - ended) / 1000)
    started_ms, finished_ms = (int(v) for v in stamps)
    return {
        "tournament": tid,
        "wall": wall,
        "phases_seconds": {
            # the call to RUNNING: the start job (RQ's scheduler) and the first round's tables
            "call_to_running": round((started_ms - called_ms) / 1000, 2),
            "running_to_first_table": round((min(t["created"] for t in tables) - started_ms) / 1000, 2),
            "last_match_end_to_finished": round((finished_ms - max(t["ended"] for t in tables)) / 1000, 2),
        },
        "tables": tables,
        "status": result["status"],
        "standings_top": [
            {"rank": s["rank"], "bot": s["bot"]["name"], "points": s["points"], "score": s["score"]}
            for s in result["standings"][:3]
        ],
        "match_play_seconds": {"p50": round(percentile(play, 0.5), 2), "max": round(play[-1], 2)},
        "between_rounds_seconds": {
            "mean": round(statistics.fmean(gaps), 2) if gaps else None, "max": round(max(gaps), 2) if gaps else None,
        },
        "timeout_moves": sum(t["timeouts"] for t in tables),
        "cpu_seconds": {
            name: None if after is None or cpu_before[name] is None else round(after - cpu_before[name], 2)  # type: ignore[operator]
            for name, after in cpu_after.items()
        },
    }


def engine_rate(players: int, tables: list[list[str]], min_seconds: float, seed: int = 1) -> dict[str, Any]:
    """The same tables played by the engine in this process: games per second."""
    from wizard import HOUSE_BOTS, MatchConfig
    from wizard.bots import play_match

    config = MatchConfig.create("WIZARD", players)
    rng = random.Random(seed)
    played = 0
    started = time.perf_counter()
    while True:
        for kinds in tables:
            play_match(config, f"bench-tournament-{seed}-{played}", [HOUSE_BOTS[k]() for k in kinds], rng)
            played += 1
        elapsed = time.perf_counter() - started
        if elapsed >= min_seconds:
            return {"games": played, "seconds": round(elapsed, 2), "games_per_second": round(played / elapsed, 2)}


def bench_tournament(
    entrants: int = 16, players: int = 4, rounds: int = 5, workers: int = 1, engine_seconds: float = 3.0,
    move_timeout_ms: int | None = None, limit_seconds: float = 900.0,
) -> dict[str, Any]:
    if entrants < 2 or rounds < 1 or workers < 1:
        raise ValueError("a tournament needs 2 or more entrants, 1 or more rounds and 1 or more workers")
    with Arena(workers=workers) as arena:
        run = asyncio.run(_tournament(arena, entrants, players, rounds, limit_seconds, move_timeout_ms))
    matches = len(run["tables"])
    per_minute = matches / run["wall"] * 60
    engine = engine_rate(players, [t["kinds"] for t in run["tables"]], engine_seconds)
    return {
        "benchmark": "tournament",
        "machine": machine(),
        "entrants": entrants,
        "players_per_match": players,
        "rounds": rounds,
        "format": "ROUND_ROBIN",
        "workers": workers,
        "move_timeout_ms": move_timeout_ms,
        "matches": matches,
        "finished_matches": sum(t["status"] == "FINISHED" for t in run["tables"]),
        "wall_seconds": round(run["wall"], 2),
        "matches_per_minute": round(per_minute, 1),
        "match_play_seconds": run["match_play_seconds"],
        "between_rounds_seconds": run["between_rounds_seconds"],
        "phases_seconds": run["phases_seconds"],
        "timeout_moves": run["timeout_moves"],
        # (the workers' with their jobs', up to the status FINISHED)
        "cpu_seconds": run["cpu_seconds"],
        "engine_in_process": {**engine, "matches_per_minute": round(engine["games_per_second"] * 60, 1)},
        "engine_over_infrastructure": round(engine["games_per_second"] * 60 / per_minute, 1),
        "standings_top": run["standings_top"],
    }


__all__ = ["bench_tournament", "engine_rate", "house_kinds"]
