"""The archive (issue 15): how fast it answers a bot's latest matches, how fast one process
archives finished matches, and what Redis keeps of a live and of a settled match.

Everything runs on servers this benchmark starts itself: an embedded PostgreSQL
(``service.store.embedded_postgres``, migrated with ``service.store.archive.migrate``) and an
embedded Redis, in a temporary folder removed at the end.

- **latest**: the archive filled with ``--matches`` archived matches (copies of one real
  finished 4-player match, new ids, one second apart, seats spread over ``--bots`` bots:
  written with one ``INSERT … SELECT`` each for matches and seats, then ``ANALYZE`` and a ``CHECKPOINT``), then
  ``--queries`` times "a bot's 50 latest matches" (match_seats by bot_id, newest first, joined
  to matches for the listing's columns) for a random bot, one connection, one at a time.
- **put_match**: ``Archive.put_match`` of finished matches (the same match under new ids,
  seats and rounds included), one after another and ``--concurrency`` at a time, in one process.
- **redis**: ``MEMORY USAGE`` of a live 4-player WIZARD match's hash and event stream
  halfway through its moves, driven through the service's own MatchStore, and after it
  finished and settlement ran with a grace period of 0 (the keys the match leaves behind).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import select, text

from bench.deadlines import machine
from bench.service import percentile
from service.domain.archiving import archived_match
from service.model.live_match import LiveMatch, MatchSettings, MatchStatus, SeatHolder
from service.settings import Settings
from service.store.archive import Archive, ArchivedMatch, match_seats, matches, migrate
from service.store.clock import now_ms
from service.store.embedded_postgres import EmbeddedPostgres
from service.store.embedded_redis import EmbeddedRedis, stop_processes
from service.store.keys import UNSETTLED, events_key, match_key
from wizard import MatchConfig, new_match
from wizard.record import record_of
from worker.clock import SETTLE_BATCH

TARGET_LATEST_P99_MS = 20.0
TARGET_PUT_PER_SECOND = 200.0
TARGET_LIVE_BYTES = 16 * 1024
#: entries a trimmed event stream would keep (a subscriber further behind reads the snapshot)

MATCH_COLUMNS = (
    "status, ruleset, players, rated, tournament_id, ended_ms, seed, scores, winners, rating_changes, "
    "version, settings, state, live, event_id, sealed, archived_ms"
)


def new_live_match(match_id: str, players: int = 4, ruleset: str = "WIZARD") -> LiveMatch:
    config = MatchConfig.create(ruleset, players, ())
    settings = MatchSettings(config, 60_000, False, False, "bench", now_ms())
    return LiveMatch.new(match_id, settings, new_match(config, secrets.token_hex(8)))


def house(seat: int) -> SeatHolder:
    return SeatHolder("house-random", f"House Random #{seat}", "RANDOM")


def play(match: LiveMatch, moves: int | None = None) -> int:
    """The first legal move of the first awaited seat, ``moves`` times (None: to the end)."""
    played = 0
    while match.status is MatchStatus.ACTIVE and (moves is None or played < moves):
        seat = match.awaiting()[0]
        match.play(seat, match.state.legal_actions(seat)[0], "bot", now_ms())
        played += 1
    return played


def finished_match() -> ArchivedMatch:
    """A real finished 4-player WIZARD match as the archive keeps it."""
    match = new_live_match(f"bench-{secrets.token_hex(6)}")
    for seat in range(4):
        match.join(seat, SeatHolder(f"bench-bot-{seat}", f"Bench {seat}"), now_ms())
    play(match)
    record = orjson.dumps(record_of(match.state).to_dict(), option=orjson.OPT_NON_STR_KEYS)
    return archived_match(match, b"1-0", record, None, now_ms())


def renamed(template: ArchivedMatch, match_id: str, bots: list[str]) -> ArchivedMatch:
    record = None if template.record is None else {**template.record, "matchId": match_id}
    seats = [dataclasses.replace(s, bot_id=bot) for s, bot in zip(template.seats, bots, strict=True)]
    return dataclasses.replace(template, id=match_id, record=record, seats=seats)


async def fill(archive: Archive, template_id: str, count: int, bots: int, start_ms: int) -> float:
    """``count`` copies of the archived match ``template_id``, seats spread over ``bots`` bots; seconds taken."""
    started = time.perf_counter()
    async with archive.engine.begin() as connection:
        await connection.execute(text(f"""
            INSERT INTO matches (id, record, created_ms, {MATCH_COLUMNS})
            SELECT 'fill-' || g, jsonb_set(record, '{{matchId}}', to_jsonb('fill-' || g)), CAST(:start AS bigint) + g * 1000,
                   {MATCH_COLUMNS}
            FROM matches, generate_series(1, :count) AS g WHERE id = :template
        """), {"count": count, "template": template_id, "start": start_ms})
        # four seats a match, each a pseudo-random bot (the same bot never twice at one table)
        await connection.execute(text("""
            INSERT INTO match_seats (match_id, seat, bot_id, bot_name, house, score, place, timeouts, created_ms, ruleset)
            SELECT 'fill-' || g, s, 'bot-' || ((abs(hashtext(g::text)) + s * (:bots / 4)) % :bots), 'bot', NULL, 10 * s, s + 1, 0,
                   CAST(:start AS bigint) + g * 1000, 'WIZARD'
            FROM generate_series(1, :count) AS g, generate_series(0, 3) AS s
        """), {"count": count, "bots": bots, "start": start_ms})
    async with archive.engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(text("ANALYZE"))
        # the fill's ~1 GB of dirty pages written out now, not during the timed writes after it
        await connection.execute(text("CHECKPOINT"))
    return time.perf_counter() - started


def latest_query(bot_id: str) -> Any:
    c = matches.c
    return (
        select(c.id, c.status, c.ruleset, c.players, c.rated, c.tournament_id, c.created_ms, c.ended_ms, c.scores,
               c.winners, match_seats.c.seat, match_seats.c.score, match_seats.c.place)
        .select_from(match_seats.join(matches, c.id == match_seats.c.match_id))
        .where(match_seats.c.bot_id == bot_id)
        .order_by(match_seats.c.created_ms.desc(), match_seats.c.match_id.desc())
        .limit(50)
    )


async def time_latest(archive: Archive, bots: int, queries: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    times: list[float] = []
    rows = 0
    async with archive.engine.connect() as connection:
        for _ in range(20):  # warm the connection's prepared statements and the cache
            await connection.execute(latest_query(f"bot-{rng.randrange(bots)}"))
        for _ in range(queries):
            query = latest_query(f"bot-{rng.randrange(bots)}")
            started = time.perf_counter()
            found = (await connection.execute(query)).all()
            times.append((time.perf_counter() - started) * 1000)
            rows += len(found)
        plan = (await connection.execute(
            text("EXPLAIN " + str(latest_query("bot-1").compile(compile_kwargs={"literal_binds": True})))
        )).scalars().all()
    p99 = percentile(times, 0.99)
    return {
        "queries": queries,
        "mean_rows": round(rows / queries, 1),
        "p50_ms": round(percentile(times, 0.50), 3),
        "p99_ms": round(p99, 3),
        "max_ms": round(max(times), 3),
        "target_p99_ms": TARGET_LATEST_P99_MS,
        "met": p99 <= TARGET_LATEST_P99_MS,
        "plan": [line.strip() for line in plan],
    }


async def time_put(archive: Archive, template: ArchivedMatch, count: int, concurrency: int) -> dict[str, Any]:
    prefix = f"put-{concurrency}-{secrets.token_hex(3)}-"
    todo = [renamed(template, f"{prefix}{i}", [f"put-bot-{(i + s) % 997}" for s in range(4)]) for i in range(count)]
    queue = iter(todo)

    async def writer() -> None:
        for match in queue:
            await archive.put_match(match)

    started = time.perf_counter()
    await asyncio.gather(*(writer() for _ in range(concurrency)))
    seconds = time.perf_counter() - started
    rate = count / seconds
    return {
        "matches": count,
        "concurrency": concurrency,
        "seconds": round(seconds, 2),
        "per_second": round(rate, 1),
        "ms_each": round(seconds / count * 1000 * concurrency, 2),
        "target_per_second": TARGET_PUT_PER_SECOND,
        "met": rate >= TARGET_PUT_PER_SECOND,
    }


async def redis_memory(redis_url: str, database_url: str) -> dict[str, Any]:
    """MEMORY USAGE of a live 4-player match mid-match and after settlement (grace 0)."""
    from service.domain.services import Services

    settings = Settings(REDIS_URL=redis_url, DATABASE_URL=database_url, archive_grace_seconds=0)  # type: ignore[call-arg]
    services = await Services.start(settings)
    try:
        store = services.matches.matches
        redis = services.redis
        match = new_live_match(f"mem-{secrets.token_hex(6)}")
        total = play(_seated(match.copy()))  # how many moves the whole match takes
        assert await store.create(match)
        for seat in range(4):
            assert await store.commit(match, match.join(seat, house(seat), now_ms()))

        async def usage() -> dict[str, int]:
            keys = {"hash": match_key(match.id), "events": events_key(match.id)}
            sizes = {name: int(await redis.memory_usage(key, samples=0) or 0) for name, key in keys.items()}
            sizes["stream_entries"] = int(await redis.xlen(events_key(match.id)))
            sizes["total"] = sizes["hash"] + sizes["events"]
            return sizes

        played, largest = 0, 0
        while match.status is MatchStatus.ACTIVE:
            seat = match.awaiting()[0]
            event = match.play(seat, match.state.legal_actions(seat)[0], "bot", now_ms())
            record = (
                orjson.dumps(record_of(match.state).to_dict(), option=orjson.OPT_NON_STR_KEYS) if match.ended else b""
            )
            assert await store.commit(match, event, record)
            played += 1
            if played == total // 2:
                middle = await usage()
            if match.status is MatchStatus.ACTIVE:
                largest = max(largest, (await usage())["total"])
        finished = await usage()
        await services.settlement.settle(match.id)
        after = await usage()
        left = [k.decode() async for k in redis.scan_iter(match=f"*{match.id}*")]
        archived = await services.archive.has_match(match.id) if services.archive else False
        return {
            "match": "4 players, WIZARD, house RANDOM bots, first legal move",
            "moves": total,
            "mid_match": {"moves_played": total // 2, **middle},
            # the stream keeps about its latest ARENA_MATCH_EVENTS_KEPT (64) events, in whole nodes: it is
            # largest just before a node is let go
            "largest_while_live": largest,
            "finished_before_settlement": finished,
            "after_settlement_grace_0": {**after, "keys_naming_the_match": left, "archived": archived},
            "target_mid_match_bytes": TARGET_LIVE_BYTES,
            "met_mid_match": middle["total"] <= TARGET_LIVE_BYTES,
            "met_after": after["total"] == 0 and not left,
        }
    finally:
        await services.close()


async def queue_finished(redis_url: str, count: int) -> list[str]:
    """``count`` finished rated 4-player matches in Redis, in the settlement queue, as the
    commit that ends a match leaves them (the same match under new ids, registered bots)."""
    from service.domain.services import Services

    services = await Services.start(Settings(REDIS_URL=redis_url))  # type: ignore[call-arg]
    try:
        config = MatchConfig.create("WIZARD", 4, ())
        settings = MatchSettings(config, 60_000, True, False, "bench", now_ms())
        template = LiveMatch.new("template", settings, new_match(config, secrets.token_hex(8)))
        for seat in range(4):
            template.join(seat, SeatHolder(f"bench-settle-{seat}", f"Settle {seat}"), now_ms())
        play(template)
        record = orjson.dumps(record_of(template.state).to_dict(), option=orjson.OPT_NON_STR_KEYS)
        ids = []
        for i in range(count):
            match = template.copy()
            match.id = f"settle-{secrets.token_hex(4)}-{i}"
            assert await services.matches.matches.create(match)
            await services.redis.hset(match_key(match.id), "record", record)  # as the match's last commit stores it
            ids.append(match.id)
        await services.redis.zadd(UNSETTLED, {match_id: now_ms() for match_id in ids})
        return ids
    finally:
        await services.close()


def time_settle(redis_url: str, database_url: str, count: int) -> dict[str, Any]:
    """One `wizard-arena worker` (its clock claims and queues ended matches by the batch, its
    RQ worker forks a job process for each batch: ratings, archive, keys set to expire)
    settling ``count`` queued finished rated matches. The rate counts from the first match
    out of the settlement queue to the last (the worker's start apart, given on its own)."""
    import subprocess
    import sys

    import redis as sync_redis

    asyncio.run(queue_finished(redis_url, count))
    client = sync_redis.Redis.from_url(redis_url)
    env = {**os.environ, "REDIS_URL": redis_url, "DATABASE_URL": database_url}
    started = time.perf_counter()
    worker = subprocess.Popen(
        [sys.executable, "-m", "wizard_arena", "worker", "--log-level", "warning"], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    first = None
    try:
        deadline = started + 600
        while (left := int(client.zcard(UNSETTLED))) > 0 and time.perf_counter() < deadline:
            if first is None and left < count:
                first = time.perf_counter()
            time.sleep(0.01)  # a bench polling another process's progress
        done = time.perf_counter()
    finally:
        stop_processes([worker], 30)
        client.close()
    first = first or done
    rate = (count - 1) / (done - first) if done > first else 0.0
    return {
        "matches": count,
        "batch": SETTLE_BATCH,
        "worker_start_seconds": round(first - started, 2),
        "seconds": round(done - first, 2),
        "per_second": round(rate, 1),
        "left_unsettled": left,
        "target_per_second": TARGET_PUT_PER_SECOND,
        "met": rate >= TARGET_PUT_PER_SECOND and left == 0,
    }


def _seated(match: LiveMatch) -> LiveMatch:
    for seat in range(4):
        match.join(seat, house(seat), now_ms())
    return match


def bench_archive(
    count: int, bots: int, queries: int, puts: int, concurrency: int, seed: int, settles: int = 1000
) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="wza-bench-archive-"))
    postgres = EmbeddedPostgres(folder / "postgres")
    redis_server = EmbeddedRedis(folder / "redis", appendonly=False)
    try:
        database_url = postgres.start()
        migrate(database_url)
        redis_url = redis_server.start()

        async def run() -> dict[str, Any]:
            archive = Archive(database_url, pool_size=max(5, concurrency))
            try:
                template = finished_match()
                await archive.put_match(template)
                record_bytes = len(orjson.dumps(template.record))
                put_one = await time_put(archive, template, puts, 1)
                put_many = await time_put(archive, template, puts, concurrency)
                fill_seconds = await fill(archive, template.id, count, bots, now_ms() - count * 1000)
                async with archive.engine.connect() as connection:
                    archived = (await connection.execute(text("SELECT count(*) FROM matches"))).scalar_one()
                    size = (await connection.execute(
                        text("SELECT pg_size_pretty(pg_database_size(current_database()))")
                    )).scalar_one()
                latest = await time_latest(archive, bots, queries, seed)
            finally:
                await archive.close()
            memory = await redis_memory(redis_url, database_url)
            return {
                "machine": machine(),
                "archived_matches": archived,
                "bots": bots,
                "record_bytes": record_bytes,
                "fill_seconds": round(fill_seconds, 1),
                "database_size": size,
                "latest_50": latest,
                "put_match": put_one,
                "put_match_concurrent": put_many,
                "redis": memory,
            }

        result = asyncio.run(run())
        result["settlement"] = time_settle(redis_url, database_url, settles)
        return result
    finally:
        redis_server.stop()
        postgres.stop()
        shutil.rmtree(folder, ignore_errors=True)

