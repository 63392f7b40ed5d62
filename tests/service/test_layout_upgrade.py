"""The start-up step that brings Redis to the key layout the code reads (``service.store.upgrade``,
run by ``Services.start``): on one server, the ratings and ladders kept under their names from
before Redis Cluster are moved once, also when processes start at once, and the processes
started on such a server (an API and a worker, started together) find them.

Each test runs a Redis server of its own (a cluster never held the old layout)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from service.store.embedded_redis import EmbeddedRedis
from service.store.keys import (
    LADDERS_LAYOUT,
    RATINGS_LAYOUT,
    bot_key,
    bot_ladder_state_key,
    bot_ladders_key,
    leaderboard_key,
)
from service.store.ladders import LadderStore
from service.store.ratings import RatingStore, StoredRating
from service.store.redis_client import open_async, open_sync
from service.store.upgrade import SCAN_COUNT, upgrade_layout
from tests.service.arena_client import Api, Process, free_port, wait_until
from tests.service.conftest import ON_CLUSTER
from tests.service.test_ladder import held

pytestmark = pytest.mark.skipif(ON_CLUSTER, reason="a cluster never held the old layout (each test runs its own server)")

OLD_RATING = {"rating": 1600.0, "games": 3, "deviation": 200.0}
LADDER = "WIZARD:3"


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    """A Redis server of the test's own."""
    with EmbeddedRedis(tmp_path / "redis", appendonly=False) as server:
        yield server.url


def keep_old_ratings(client: redis.Redis, bot: str = "old", name: str = "old timer") -> None:
    """``bot``'s ratings as the service kept them before each ruleset's keys shared a hash tag:
    its ratings and histories under its own tag, the boards, names, applied marks, changes,
    results and fit requests under global names (``bot`` played match m1 with ``rival``)."""
    client.hset(f"{{b:{bot}}}:ratings", mapping={"WIZARD": json.dumps(OLD_RATING), "WIZARD_JUNIOR": json.dumps(OLD_RATING)})
    client.rpush(f"{{b:{bot}}}:history:WIZARD", json.dumps({"rating": 1600.0, "matchId": "m1", "at": 1}))
    client.zadd("leaderboard:WIZARD:ELO", {bot: 1600.0})
    client.zadd("leaderboard:WIZARD:FITTED", {bot: 1550.0})
    client.hset("ratings:fitted:WIZARD", bot, json.dumps({"games": 3, "deviation": 90.0}))
    client.hset("ratings:names", mapping={bot: name, "rival": "rival"})
    client.sadd("ratings:applied", "m1")
    client.hset("ratings:changes", "m1", json.dumps([{"bot": bot, "name": name, "before": 1500, "after": 1600}]))
    client.rpush("ratings:results:WIZARD", json.dumps({"matchId": "m1", "bots": [bot, "rival"], "scores": [40, -20]}))
    client.sadd("ratings:fit-requests", "WIZARD")


def keep_old_ladder(client: redis.Redis, bots: tuple[str, ...], table: dict[str, object] | None = None) -> None:
    """LADDER as kept before each ladder's keys shared a hash tag, ``bots`` its members (and,
    with ``table``, at that table in play, id 7ab: counted in their ``playing``, with no place)."""
    old = f"ladder:{LADDER}:"
    client.sadd("ladders", LADDER)
    client.zadd(old + "members", {bot: 5 + i for i, bot in enumerate(bots)})
    client.set(old + "tables-made", 7)
    for bot in bots:
        client.hset(bot_ladders_key(bot), LADDER, 5)
    if table is not None:
        client.hset(old + "tables", "7ab", json.dumps(table))
        client.hset(old + "meetings", "|".join(bots), 3)
        for bot in bots:
            client.hset(bot_ladder_state_key(bot), mapping={"playing": 1, f"playing:{LADDER}": 1})


def test_ratings_kept_under_the_old_names_are_moved_once_and_read_as_before(redis_url: str) -> None:
    """The ratings kept before each ruleset's keys shared a hash tag are moved by the start-up
    step, once: nothing applied is applied again, and every read answers as before."""
    with open_sync(redis_url) as client:
        keep_old_ratings(client)

    async def run() -> None:
        redis = open_async(redis_url, max_connections=4, timeout=5, client_name="test")
        try:
            await upgrade_layout(redis)
            store = RatingStore(redis)
            assert await store.elo(["old", "new"], "WIZARD") == [StoredRating(1600.0, 3, 200.0), None]
            assert await store.is_applied("m1", "WIZARD")
            assert await store.apply("m1", "WIZARD", [], {}) == 0  # (applied once: not again)
            assert [r.name for r in await store.leaderboard("WIZARD", "ELO", 10, 0, 0)] == ["old timer"]
            assert [(r.rating, r.deviation) for r in await store.leaderboard("WIZARD", "FITTED", 10, 0, 0)] == [(1550.0, 90.0)]
            assert await store.histories([("old", "WIZARD", 10)]) == [[{"rating": 1600.0, "matchId": "m1", "at": 1}]]
            assert [r["ruleset"] for r in (await store.current(["old"]))[0]] == ["WIZARD", "WIZARD_JUNIOR"]
            assert (await store.changes([("m1", "WIZARD")]))[0][0]["after"] == 1600  # type: ignore[index]
            assert [r["matchId"] for r in await store.results("WIZARD")] == ["m1"]
            assert await store.claim_fit_requests() == ["WIZARD"]
            left = [k async for k in redis.scan_iter(match="*")
                    if not k.startswith((b"{r:", b"{fits}", RATINGS_LAYOUT.encode(), LADDERS_LAYOUT.encode()))]
            assert left == []  # nothing kept under an old name
            await redis.hset("{b:late}:ratings", "WIZARD", json.dumps(OLD_RATING))  # (written by no process now)
            await upgrade_layout(redis)  # (the next process's start)
            assert await store.elo(["late"], "WIZARD") == [None]  # moved once, not again
        finally:
            await redis.aclose()

    asyncio.run(run())


def test_ladders_kept_under_the_old_names_are_moved_once_with_their_places(redis_url: str) -> None:
    """The ladders kept before each ladder's keys shared a hash tag are moved by the start-up
    step, and the registered bots at a table in play hold their place there: its end frees
    what the old table script counted."""
    table = {"seats": [{"id": "old-a", "name": "a", "house": None}, {"id": "old-b", "name": "b", "house": None},
                       {"id": "house-random", "name": "House Random", "house": "RANDOM"}],
             "seed": "old", "duplicate": False, "created": 0}
    with open_sync(redis_url) as client:
        keep_old_ladder(client, ("old-a", "old-b"), table)

    async def run() -> None:
        redis = open_async(redis_url, max_connections=4, timeout=5, client_name="test")
        try:
            await upgrade_layout(redis)
            store = LadderStore(redis)
            assert [b for b, _ in await store.members(LADDER, 10)] == ["old-a", "old-b"]
            assert list(await store.tables(LADDER)) == ["7ab"]
            assert await store.meetings_among(LADDER, ["old-a", "old-b"]) == {frozenset(("old-a", "old-b")): 3}
            assert await store.next_table_id(LADDER) > "8"
            assert await held(store, LADDER, ["old-a", "old-b"]) == [(1, ("7ab",))] * 2
            old = f"ladder:{LADDER}:"
            assert not await redis.exists(old + "members", old + "tables", old + "meetings", old + "tables-made")
            assert await store.end_table(LADDER, "7ab", {"old-a": False, "old-b": False}, 1, "")
            assert [f.playing for f in await store.facts(LADDER, ["old-a", "old-b"])] == [0, 0]
            await upgrade_layout(redis)  # (the next process's start: moved once)
            assert await store.tables(LADDER) == {}
            assert [f.playing for f in await store.facts(LADDER, ["old-a", "old-b"])] == [0, 0]
        finally:
            await redis.aclose()

    asyncio.run(run())


def test_processes_starting_at_once_move_each_bots_ratings_once(redis_url: str) -> None:
    """Two processes' start-up steps at once, over more keys than one SCAN page walks: every
    bot's rating and history moved, none lost or doubled, none left under an old name, and the
    bots' other keys left where they are."""
    bots = [f"bot{i}" for i in range(SCAN_COUNT)]
    with open_sync(redis_url) as client, client.pipeline(transaction=False) as pipe:
        pipe.hset("{b:bot0}:reserved", "a", "1")  # (another bot key that the SCAN's pattern lets through)
        for i, bot in enumerate(bots):
            pipe.hset(f"{{b:{bot}}}:ratings", "WIZARD", json.dumps({**OLD_RATING, "games": i}))
            pipe.rpush(f"{{b:{bot}}}:history:WIZARD", json.dumps({"rating": 1600.0, "matchId": f"m{i}", "at": i}))
            pipe.hset(bot_key(bot), "name", bot)  # (a key of the bot's that stays where it is)
        pipe.execute()

    async def run() -> None:
        first, second = (open_async(redis_url, max_connections=4, timeout=5, client_name=f"test-{n}") for n in (1, 2))
        try:
            await asyncio.gather(upgrade_layout(first), upgrade_layout(second))
            store = RatingStore(first)
            assert [r.games if r else None for r in await store.elo(bots, "WIZARD")] == list(range(len(bots)))
            histories = await store.histories([(bot, "WIZARD", 10) for bot in bots])
            assert [[h["matchId"] for h in history] for history in histories] == [[f"m{i}"] for i in range(len(bots))]
            assert [k async for k in first.scan_iter(match="{b:*}:*") if not k.endswith(b":bot")] == [b"{b:bot0}:reserved"]
            assert await first.mget(RATINGS_LAYOUT, LADDERS_LAYOUT) == [b"1", b"1"]
        finally:
            await first.aclose()
            await second.aclose()

    asyncio.run(run())


def started_env(redis_url: str) -> dict[str, str]:
    """The environment of a process started on ``redis_url`` (no archive: none is needed)."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    return {**env, "REDIS_URL": redis_url, "ARENA_QUEUE_URL": redis_url, "ARENA_LADDER_HOUSE_BOTS": ""}


def test_an_api_started_on_the_old_layout_answers_its_ratings_and_ladders(redis_url: str, tmp_path: Path) -> None:
    """`wizard-arena serve` started on a server that holds the old layout: through its start-up,
    it answers the old ratings, history and ladder membership."""
    with open_sync(redis_url) as client:
        keep_old_ratings(client)
        keep_old_ladder(client, ("old",))
        client.hset(bot_key("old"), mapping={"name": "old timer", "created": 1_700_000_000_000})
    port = free_port()
    api = Api(Process(["serve", "--port", str(port), "--log-level", "warning"], started_env(redis_url),
                      tmp_path / "serve.log"), port)
    try:
        api.wait_healthy()
        board = api.data("{ leaderboard(ruleset: WIZARD) { bot { id name } rating games } }")["leaderboard"]
        assert board == [{"bot": {"id": "old", "name": "old timer"}, "rating": 1600.0, "games": 3}]
        bot = api.data('{ bot(id: "old") { ratings { ruleset rating games } ratingHistory(ruleset: WIZARD) { matchId } } }')
        assert bot["bot"]["ratings"] == [{"ruleset": "WIZARD", "rating": 1600.0, "games": 3},
                                         {"ruleset": "WIZARD_JUNIOR", "rating": 1600.0, "games": 3}]
        assert bot["bot"]["ratingHistory"] == [{"matchId": "m1"}]
        ladder = api.data("{ ladder(ruleset: WIZARD, players: 3) { bot { id } } }")["ladder"]
        assert [row["bot"]["id"] for row in ladder] == ["old"]
    finally:
        api.close()
        api.process.stop()


def test_a_worker_started_on_the_old_layout_refits_from_its_results(redis_url: str, tmp_path: Path) -> None:
    """`wizard-arena worker` started alone on a server that holds the old layout: through its
    start-up, its clock takes the old fit request and its job refits from the old results (the
    FITTED board, which held one bot, then holds both bots of the old match)."""
    with open_sync(redis_url) as client:
        keep_old_ratings(client)
        worker = Process(["worker", "--log-level", "warning"], started_env(redis_url), tmp_path / "worker.log")
        try:
            refitted = lambda: set(client.zrange(leaderboard_key("WIZARD", "FITTED"), 0, -1)) == {b"old", b"rival"}  # noqa: E731
            wait_until(refitted, "the worker's refit of the old results", explain=worker.output)
        finally:
            worker.stop()


def test_an_api_started_while_redis_is_away_waits_for_it_before_it_serves(tmp_path: Path) -> None:
    """An API started while Redis is away waits for it (saying so once), rather than failing to
    start or serving before its start-up step; once Redis is back it moves the old layout and
    answers from it."""
    server = EmbeddedRedis(tmp_path / "redis")  # append-only: what it held comes back with it
    url = server.start()
    port = free_port()
    api: Api | None = None
    try:
        with open_sync(url) as client:
            keep_old_ratings(client)
        server.stop()
        api = Api(Process(["serve", "--port", str(port), "--log-level", "warning"], started_env(url),
                          tmp_path / "serve.log"), port)
        wait_until(lambda: "Redis is unavailable" in api.process.output(), "the API to say it waits for Redis")
        assert api.process.popen.poll() is None, api.process.output()  # (waiting, not failed)
        server = EmbeddedRedis(tmp_path / "redis")
        assert server.start() == url
        api.wait_healthy()
        board = api.data("{ leaderboard(ruleset: WIZARD) { bot { id } rating } }")["leaderboard"]
        assert board == [{"bot": {"id": "old"}, "rating": 1600.0}]
        log = api.process.output()
        assert log.count("Redis is unavailable") == 1 and log.count("Redis is back") == 1, log
        assert "Traceback" not in log, log
    finally:
        if api is not None:
            api.close()
            api.process.stop()
        server.stop()


def test_an_api_told_to_stop_while_redis_is_away_stops_without_waiting_for_it(tmp_path: Path) -> None:
    """SIGTERM (an operator's `docker compose stop`, a rolling restart) reaches an API whose
    start-up still waits for Redis: it stops then, cleanly, rather than once Redis is back (before,
    uvicorn noted the signal and went on waiting in the app's start-up)."""
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    api = Process(["serve", "--port", str(free_port()), "--log-level", "info"], started_env(url), tmp_path / "serve.log")
    try:
        wait_until(lambda: "Redis is unavailable" in api.output(), "the API to say it waits for Redis",
                   explain=api.output)
        api.popen.terminate()
        try:
            api.popen.wait(timeout=15)  # a bound, not a measurement: it stops at once
        except subprocess.TimeoutExpired:
            pytest.fail("the API went on waiting for Redis after SIGTERM:\n" + api.output())
        log = api.output()
        assert "stopped before serving: told to stop while Redis was away" in log, log
        assert "Traceback" not in log, log
    finally:
        api.stop()
