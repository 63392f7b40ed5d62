"""The archive under faults: ended tournaments archived once (whoever ended them), a
settlement cut short after any of its steps and run again (nothing lost, nothing doubled), a
worker SIGKILLed while its settlement waits on the database, and the database stopped in the
middle of a tournament and started again: play goes on, `/healthz` says "degraded", and once
the database is back every match is archived exactly once.

In this process (the ``services`` fixture, no worker running): a step made to raise once,
then the settlement run again. With processes: an API and a worker of their own on a
PostgreSQL of their own (its socket kept across restarts, so its URL stays the same)."""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from sqlalchemy import func, select, text

from service.domain.archiving import tournament_standings
from service.domain.matches import Caller
from service.domain.services import Services
from service.domain.tournaments import NewTournament
from service.model.homes import homed_match_id
from service.model.live_match import LiveMatch, MatchSettings
from service.settings import Settings
from service.store.archive import Archive, match_rounds, match_seats, matches, migrate, tournaments
from service.store.clock import now_ms
from service.store.embedded_postgres import EmbeddedPostgres
from service.store.keys import (
    UNARCHIVED_TOURNAMENTS,
    history_key,
    match_home_key,
    match_key,
    rating_results_key,
    ratings_applied_key,
    tournament_key,
)
from tests.service.conftest import TIMEOUT_MS, embedded_redis_url, ended_by_its_last_commit
from tests.service.test_tournaments import Workers, create, get, play_to_the_end, wait_status, wait_until
from wizard import MatchConfig, new_match

RULESET = "WIZARD_JUNIOR"


class Killed(Exception):
    """The process 'dies' here: nothing after this point of the step runs."""


def crash_once(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, *, before: bool = False) -> None:
    """``owner.name`` raises Killed once: after its real call (its work done), or ``before`` it."""
    real = getattr(owner, name)
    armed = [True]

    async def step(*args: Any, **kwargs: Any) -> Any:
        if before and armed[0]:
            armed[0] = False
            raise Killed(name)
        result = await real(*args, **kwargs)
        if armed[0]:
            armed[0] = False
            raise Killed(name)
        return result

    monkeypatch.setattr(owner, name, step)


async def ended_rated_match(services: Any) -> LiveMatch:
    """A rated match of three house bots, ended by its last commit (so queued for settlement)."""
    config = MatchConfig.create(RULESET, 3)
    settings = MatchSettings(config, TIMEOUT_MS, True, False, "creator", now_ms())
    match = LiveMatch.new(f"faults-{secrets.token_hex(6)}", settings, new_match(config, secrets.token_hex(8)))
    return await ended_by_its_last_commit(services, match)


async def ended_tournament_match(services: Any) -> tuple[str, str]:
    """A rated one-round tournament of three house bots whose only match has ended (played
    by this process's house bots), its tournament not yet told: (tournament id, match id)."""
    caller = Caller(f"faults-{secrets.token_hex(4)}", "creator")
    t = await services.tournaments.create(caller, NewTournament(
        "faults", RULESET, players_per_match=3, rounds=1, move_timeout_ms=600_000, house_bots=["RANDOM"] * 3,
    ))
    assert await services.tournaments.advance(t.id)  # started: its table and match made
    await services.matches.drain()  # the house bots play it to the end
    match_id = homed_match_id(f"{t.id}-r1t0-0")
    assert (await services.matches.get(match_id)).ended
    return t.id, match_id


async def archive_rows(archive: Archive, match_id: str) -> tuple[int, int, int]:
    """(match rows, seat rows, round rows) of a match in the archive."""
    async with archive.engine.connect() as connection:
        counts = []
        for table in (matches, match_seats, match_rounds):
            column = table.c.id if table is matches else table.c.match_id
            counts.append((await connection.execute(
                select(func.count()).select_from(table).where(column == match_id)
            )).scalar_one())
    return counts[0], counts[1], counts[2]


def rated_times(redis_client: Any, match_id: str) -> tuple[int, int]:
    """(results stored, entries in house-random's rating history) for the match."""
    results = Counter(json.loads(r)["matchId"] for r in redis_client.lrange(rating_results_key(RULESET), 0, -1))
    history = Counter(json.loads(h)["matchId"] for h in redis_client.lrange(history_key("house-random", RULESET), 0, -1))
    return results[match_id], history[match_id]


# ---------------------------------------------------------------------- killed between two steps, in this process


@pytest.mark.parametrize(("kind", "step"), [
    ("free", "ratings applied"),
    ("free", "archive written"),
    ("free", "before leaving the queue"),
    ("tournament", "tournament advanced"),
    ("tournament", "archive written"),
    ("tournament", "before leaving the queue"),
])
def test_a_settlement_killed_after_any_step_and_run_again_loses_and_doubles_nothing(
    services, redis_client, monkeypatch, kind, step
):
    async def work() -> tuple[str, str | None, tuple[int, int, int], int, list[Any]]:
        try:
            if kind == "free":
                match_id, tid = (await ended_rated_match(services)).id, None
            else:
                tid, match_id = await ended_tournament_match(services)
            assert await services.redis.zscore(match_home_key(match_id, "unsettled"), match_id) is not None
            settlement = services.settlement
            if step == "ratings applied":
                crash_once(monkeypatch, settlement.ratings, "settle")
            elif step == "tournament advanced":
                crash_once(monkeypatch, settlement.tournaments, "advance")
            elif step == "archive written":
                crash_once(monkeypatch, settlement.archive, "put_matches")
            else:
                crash_once(monkeypatch, settlement.matches, "settled", before=True)
            with pytest.raises(Killed):
                await settlement.settle(match_id)
            assert await services.redis.zscore(match_home_key(match_id, "unsettled"), match_id) is not None, "still queued after the crash"

            await settlement.settle(match_id)  # the next worker's run
            await settlement.settle(match_id)  # and one more, for good measure (a duplicate job)
            rows = await archive_rows(services.archive, match_id)
            ttl = await services.redis.ttl(match_key(match_id))
            archived_tournament: list[Any] = []
            if tid is not None:  # its last match settled: the tournament ended, and awaits the archive
                t = await services.tournaments.store.load(tid)
                assert t is not None and t.status.value == "FINISHED"
                assert await services.redis.zscore(UNARCHIVED_TOURNAMENTS, tid) is not None
                crash_once(monkeypatch, settlement.archive, "put_tournament")
                with pytest.raises(Killed):
                    await settlement.archive_tournament(tid)
                assert await services.redis.zscore(UNARCHIVED_TOURNAMENTS, tid) is not None
                await settlement.archive_tournament(tid)
                await settlement.archive_tournament(tid)
                async with services.archive.engine.connect() as connection:
                    archived_tournament = [dict(r) for r in (await connection.execute(
                        select(tournaments).where(tournaments.c.id == tid)
                    )).mappings().all()]
                assert archived_tournament[0]["standings"] == tournament_standings(t)
            return match_id, tid, rows, ttl, archived_tournament
        finally:
            await services.close()

    match_id, tid, rows, ttl, archived_tournament = asyncio.run(work())
    assert rows == (1, 3, rows[2]) and rows[2] > 0 and rows[2] % 3 == 0, "one match row, its seats and rounds once"
    assert redis_client.zscore(match_home_key(match_id, "unsettled"), match_id) is None, "the match left the queue"
    assert 0 < ttl <= 600, "its keys expire after the grace period"
    assert rated_times(redis_client, match_id) == (1, 1), "its rating applied exactly once"
    if tid is not None:
        assert len(archived_tournament) == 1
        row = archived_tournament[0]
        assert row["status"] == "FINISHED" and row["ruleset"] == RULESET
        assert row["document"]["id"] == tid and row["document"]["matchIds"] == [match_id]
        assert row["document"]["status"] == "FINISHED" and row["document"]["finishedAt"]
        assert row["created_ms"] <= row["ended_ms"]
        assert redis_client.zscore(UNARCHIVED_TOURNAMENTS, tid) is None


def test_a_cancelled_tournament_is_archived_once_with_its_status(services, redis_client):
    async def work() -> tuple[str, list[dict[str, Any]]]:
        try:
            caller = Caller(f"faults-{secrets.token_hex(4)}", "creator")
            t = await services.tournaments.create(caller, NewTournament(
                "cancelled", RULESET, players_per_match=3, rounds=2, starts_at_ms=now_ms() + 3_600_000,
                house_bots=["RANDOM"] * 3,
            ))
            await services.tournaments.cancel(caller, t.id)
            assert await services.redis.zscore(UNARCHIVED_TOURNAMENTS, t.id) is not None
            for _ in range(2):
                await services.settlement.archive_tournament(t.id)
            async with services.archive.engine.connect() as connection:
                rows = [dict(r) for r in (await connection.execute(
                    select(tournaments).where(tournaments.c.id == t.id)
                )).mappings().all()]
            return t.id, rows
        finally:
            await services.close()

    tid, rows = asyncio.run(work())
    assert len(rows) == 1 and rows[0]["status"] == "CANCELLED"
    assert rows[0]["document"]["name"] == "cancelled" and rows[0]["document"]["matchIds"] == []
    assert [s["bot"]["name"] for s in rows[0]["standings"]] == [f"House Random {n}" for n in range(3)]
    assert redis_client.zscore(UNARCHIVED_TOURNAMENTS, tid) is None


# ---------------------------------------------------------------------- processes on a database of their own


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[tuple[str, redis.Redis]]:
    """A Redis of the test's own: no other test's worker (on the session's Redis, with the
    session's database) settles its matches into another archive."""
    for url in embedded_redis_url(tmp_path / "redis"):
        client = redis.Redis.from_url(url)
        yield url, client
        client.close()


@pytest.fixture
def own_database(tmp_path: Path) -> Iterator[tuple[EmbeddedPostgres, str]]:
    """A PostgreSQL of the test's own, its schema made; the socket folder is kept across a
    stop and start, so the URL the processes were given stays right."""
    socket_dir = Path(tempfile.mkdtemp(prefix="wza-pgf-"))
    server = EmbeddedPostgres(tmp_path / "pg", socket_dir=socket_dir)
    url = server.start()
    migrate(url)
    yield server, url
    server.stop()
    shutil.rmtree(socket_dir, ignore_errors=True)


def query(url: str, sql: str, **params: Any) -> list[Any]:
    async def run() -> list[Any]:
        archive = Archive(url)
        try:
            async with archive.engine.connect() as connection:
                return list((await connection.execute(text(sql), params)).all())
        finally:
            await archive.close()

    return asyncio.run(run())


def my_match(api: Any, tid: str, bot_id: str, done: set[str]) -> str | None:
    """The bot's match in the tournament that it has not played yet, once it exists."""
    for match in get(api, tid)["matches"]:
        if match["id"] not in done and any((s["bot"] or {}).get("id") == bot_id for s in match["seats"]):
            return match["id"]  # type: ignore[no-any-return]
    return None


def test_the_database_stopped_mid_tournament_then_started_again_loses_and_doubles_nothing(
    start_api, start_worker, own_database, own_redis
):
    server, url = own_database
    redis_url, redis_client = own_redis
    api = start_api(DATABASE_URL=url, REDIS_URL=redis_url)
    worker = start_worker(DATABASE_URL=url, REDIS_URL=redis_url, ARENA_ARCHIVE_RETRY_SECONDS="1")
    token, bot_id = api.register()
    # the test's bot sits at one table a round and plays when the test says: the tournament
    # cannot get ahead of the test
    t = create(api, token, format="ROUND_ROBIN", rounds=2, playersPerMatch=4, bots=[bot_id],
               houseBots=["RANDOM"] * 7, moveTimeoutMs=60_000)
    tid = t["id"]
    played: set[str] = set()

    first = wait_until(lambda: my_match(api, tid, bot_id, played), "the bot's first match")
    play_to_the_end(api, token, first)
    played.add(first)
    wait_until(lambda: query(url, "SELECT id FROM matches WHERE id = :m", m=first), "the first match archived", timeout=60,
               explain=lambda: f"the worker's log:\n{worker.output()[-4000:]}")

    server.stop()  # the database goes away mid-tournament
    health = api.http.get("/healthz")
    assert health.status_code == 200, health.text
    assert health.json()["status"] == "degraded" and health.json()["redis"] == "ok"
    assert health.json()["database"].startswith("unavailable")

    second = wait_until(lambda: my_match(api, tid, bot_id, played), "the bot's second-round match")
    play_to_the_end(api, token, second)  # moves and turns go on
    final = wait_status(api, tid, "FINISHED", timeout=60)  # so do the tournament's rounds
    ids = {m["id"] for m in final["matches"]}
    assert len(ids) == 4 and all(m["status"] == "FINISHED" for m in final["matches"])
    queued = {m for m in ids if redis_client.zscore(match_home_key(m, "unsettled"), m) is not None}
    assert second in queued, "a match ended while the database is away waits in the queue"
    assert redis_client.zscore(UNARCHIVED_TOURNAMENTS, tid) is not None
    # tried again every second, a job each time (RQ logs each; one job may settle it with other
    # matches waiting in its home's queue), and the outage said once
    def attempts() -> int:
        return sum(f"'{second}'" in line for line in worker.output().splitlines()
                   if "default: worker.jobs.settle_matches([" in line)

    wait_until(lambda: attempts() >= 3, "three attempts at settling it")
    assert worker.output().count("the archive is unavailable") == 1, worker.output()[-3000:]
    assert worker.popen.poll() is None, "the worker carries on"

    server.start()  # on the same folder (and socket)
    wait_until(lambda: all(redis_client.zscore(match_home_key(m, "unsettled"), m) is None for m in ids), "every settlement", timeout=60)
    wait_until(lambda: "the archive is back after" in worker.output(), "the worker to say the archive is back")
    assert worker.output().count("the archive is unavailable") == 1 and worker.output().count("the archive is back") == 1
    wait_until(lambda: query(url, "SELECT id FROM tournaments WHERE id = :t", t=tid), "the tournament archived")
    rows = query(url, "SELECT id FROM matches WHERE tournament_id = :t", t=tid)
    assert sorted(r.id for r in rows) == sorted(ids), "every match archived, once"
    seats = query(url, "SELECT match_id, count(*) AS n FROM match_seats WHERE match_id = ANY(:ids) GROUP BY match_id",
                  ids=list(ids))
    assert {r.match_id: r.n for r in seats} == {m: 4 for m in ids}
    results = Counter(json.loads(r)["matchId"] for r in redis_client.lrange(rating_results_key(RULESET), 0, -1))
    assert {m: results[m] for m in ids} == {m: 1 for m in ids}, "each match rated exactly once"
    [standings] = query(url, "SELECT standings FROM tournaments WHERE id = :t", t=tid)
    assert standings[0] == final["standings"]
    assert api.http.get("/healthz").json() == {"status": "ok", "redis": "ok", "database": "ok"}


def test_a_worker_killed_while_its_settlement_waits_on_the_database_loses_and_doubles_nothing(
    start_api, start_worker, own_database, own_redis
):
    """The archive's table locked by the test: the worker's settlement applies the rating,
    then waits in its INSERT (seen in pg_stat_activity, no sleeps); SIGKILL it there, let
    the table go, and a new worker finishes the settlement."""
    _server, url = own_database
    redis_url, redis_client = own_redis
    api = start_api(DATABASE_URL=url, REDIS_URL=redis_url)
    token, _ = api.register()

    async def hold_lock_until(release: asyncio.Event, locked: asyncio.Event) -> None:
        archive = Archive(url)
        try:
            async with archive.engine.begin() as connection:
                await connection.execute(text("LOCK TABLE matches IN ACCESS EXCLUSIVE MODE"))
                locked.set()
                await release.wait()
        finally:
            await archive.close()

    async def scenario() -> str:
        release, locked = asyncio.Event(), asyncio.Event()
        holder = asyncio.create_task(hold_lock_until(release, locked))
        await locked.wait()
        workers = Workers(lambda: start_worker(DATABASE_URL=url, REDIS_URL=redis_url))
        try:
            match_id = await asyncio.to_thread(
                api.create_match, token, ruleset=RULESET, players=3, rated=True
            )
            for _ in range(3):
                await asyncio.to_thread(api.add_house_bot, token, match_id, "RANDOM")

            def waiting() -> bool:
                rows = query(url, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                  "AND query LIKE 'INSERT INTO matches%'")
                return rows[0][0] >= 1

            await asyncio.to_thread(wait_until, waiting, "the settlement to wait on the locked table")
            assert redis_client.sismember(ratings_applied_key(RULESET), match_id), "the rating was applied before the archive"
            workers.kill_everything()
            release.set()
            await holder
            workers.replace()
            await asyncio.to_thread(
                wait_until, lambda: redis_client.zscore(match_home_key(match_id, "unsettled"), match_id) is None, "the settlement", timeout=60
            )
            return match_id
        finally:
            release.set()
            await asyncio.gather(holder, return_exceptions=True)
            workers.stop()

    match_id = asyncio.run(scenario())
    assert query(url, "SELECT count(*) FROM matches WHERE id = :m", m=match_id)[0][0] == 1
    assert query(url, "SELECT count(*) FROM match_seats WHERE match_id = :m", m=match_id)[0][0] == 3
    assert rated_times(redis_client, match_id) == (1, 1)


def test_an_archived_tournament_leaves_redis_and_reads_back_alike(api, redis_url, database_url, redis_client):
    """Once archived (grace 0 here), a tournament's keys leave Redis, and it is read back from
    the archive by the same code: the API answers as before, its listing too."""
    settings = Settings(REDIS_URL=redis_url, DATABASE_URL=database_url, archive_grace_seconds=0)
    services = Services.open(settings)
    token, bot_id = api.register()
    caller = Caller(bot_id, "creator")

    async def create() -> str:
        try:
            t = await services.tournaments.create(caller, NewTournament(
                "leaves redis", RULESET, players_per_match=3, rounds=1, starts_at_ms=now_ms() + 3_600_000,
                house_bots=["RANDOM"] * 3,
            ))
            await services.tournaments.cancel(caller, t.id)
            return t.id
        finally:
            await services.close()

    tid = asyncio.run(create())
    before = get(api, tid, token)
    listed = api.data("{ tournaments(first: 100) { edges { node { id status } } } }")["tournaments"]["edges"]
    assert {"id": tid, "status": "CANCELLED"} in [e["node"] for e in listed]

    async def archive() -> None:
        services = Services.open(settings)
        try:
            await services.settlement.archive_tournament(tid)
            await services.settlement.archive_tournament(tid)  # again, its keys gone: nothing changes
        finally:
            await services.close()

    asyncio.run(archive())
    assert not redis_client.exists(tournament_key(tid))
    assert get(api, tid, token) == before
    listed = api.data("{ tournaments(first: 100) { edges { node { id status } } } }")["tournaments"]["edges"]
    assert [e["node"] for e in listed].count({"id": tid, "status": "CANCELLED"}) == 1
    assert query(database_url, "SELECT stored IS NOT NULL AS kept FROM tournaments WHERE id = :t", t=tid)[0].kept
