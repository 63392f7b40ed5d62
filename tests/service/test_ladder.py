"""The continuous rated ladder on a real worker: SDK bots that join it (`wizard-arena play
--ladder`) are paired with the house bots into rated matches with nobody organising them, and
the ratings move; a bot sits in no more ladder matches at once than the cap; leaving stops new
pairings while its matches in play finish; a bot that stops answering is paused (visible, with
the reason) and comes back when it answers again; bad input changes nothing.

The module runs its own Redis, API and worker, with the ladder's settings small (a pass every
0.2 s, moves timing out in 250 ms, a pause after one table with a timed-out move, three house
bots), so that no
other module's worker pairs its ladders with other settings."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ranking.ratings import elo_deviation_after
from service.domain.ladders import house_kinds, ladder_match_id, ladder_standing
from service.domain.matches import Caller
from service.model.homes import homed_match_id
from service.settings import Settings
from service.store.embedded_cluster import EmbeddedCluster
from service.store.embedded_redis import EmbeddedRedis
from service.store.keys import (
    bot_key,
    bot_ladder_state_key,
    ladder_members_key,
    ladder_seat_field,
)
from service.store.ladders import LadderStore, LockLost
from service.store.ratings import StoredRating
from service.store.redis_client import open_async
from tests.service.arena_client import Api, Process, wait_until
from tests.service.conftest import ON_CLUSTER

LADDER_ENV = {
    "ARENA_LADDER_PAIR_SECONDS": "0.2",
    "ARENA_LADDER_MOVE_TIMEOUT_MS": "250",
    "ARENA_LADDER_PAUSE_AFTER_TIMEOUTS": "1",
    "ARENA_LADDER_MAX_MATCHES": "2",
    "ARENA_LADDER_HOUSE_BOTS": "HEURISTIC,RANDOM,SEARCH",
}
MEMBERSHIP = "bot { id name } ruleset players state joinedAt pausedAt pausedReason playing"
JOIN = f"mutation($r: Ruleset!, $p: Int!) {{ joinLadder(ruleset: $r, players: $p) {{ {MEMBERSHIP} }} }}"
LEAVE = f"mutation($r: Ruleset!, $p: Int!) {{ leaveLadder(ruleset: $r, players: $p) {{ {MEMBERSHIP} }} }}"
LADDER = f"query($r: Ruleset!, $p: Int!) {{ ladder(ruleset: $r, players: $p) {{ {MEMBERSHIP} }} }}"
MY_LADDERS = f"{{ me {{ ladders {{ {MEMBERSHIP} }} }} }}"
MATCHES = (
    "query($b: ID!) { bot(id: $b) { matches(first: 100) { edges { node { id status rated moveTimeoutMs createdBy "
    "seats { bot { id } houseBot timeouts } } } } } }"
)
LEADERBOARD = (
    "query($r: Ruleset!, $m: RatingMethod!) { leaderboard(ruleset: $r, method: $m, first: 50) { bot { id } rating games } }"
)


def own_redis(folder: Path) -> Iterator[dict[str, str]]:
    """A Redis of this module's own (with ARENA_TEST_REDIS=cluster, a cluster of 3 masters,
    and a Redis of its own for RQ's queue, so that no other worker takes its jobs): the
    settings that name it."""
    queue = EmbeddedRedis(folder / "queue", appendonly=False)
    server: EmbeddedCluster | EmbeddedRedis = (
        EmbeddedCluster(folder / "cluster", masters=3, replicas=0) if ON_CLUSTER
        else EmbeddedRedis(folder / "redis", appendonly=False)
    )
    try:
        yield {"REDIS_URL": server.start(), "ARENA_QUEUE_URL": queue.start()}
    finally:
        queue.stop()
        server.stop()


@pytest.fixture(scope="module")
def ladder_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    yield from own_redis(tmp_path_factory.mktemp("ladder-redis"))


@pytest.fixture(scope="module")
def ladder_api(start_api: Any, start_worker: Any, ladder_redis: dict[str, str]) -> Iterator[tuple[Api, Process]]:
    """An API and a worker on this module's Redis, with the ladder's test settings."""
    env = {**ladder_redis, **LADDER_ENV}
    api, worker = start_api(**env), start_worker(**env)
    yield api, worker
    worker.stop()  # (before its Redis goes)
    api.process.stop()


@pytest.fixture
def players(tmp_path: Path) -> Iterator[Callable[..., Process]]:
    """Starts `wizard-arena play` processes; each is stopped at teardown."""
    started: list[Process] = []

    def start(url: str, token: str, *extra: str, bot: tuple[str, str] = ("--bot", "examples/random_bot.py:RandomBot")
              ) -> Process:
        log = tmp_path / f"play-{len(started)}.log"
        process = Process(["play", "--url", url, "--token", token, *bot, "--transport", "poll", *extra],
                          dict(os.environ), log)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


def ladder_matches(api: Api, bot_id: str) -> list[dict[str, Any]]:
    edges = api.data(MATCHES, {"b": bot_id})["bot"]["matches"]["edges"]
    return [e["node"] for e in edges if e["node"]["createdBy"] == "ladder"]


def member(api: Api, ruleset: str, players: int, bot_id: str) -> dict[str, Any] | None:
    rows = api.data(LADDER, {"r": ruleset, "p": players})["ladder"]
    return next((r for r in rows if r["bot"]["id"] == bot_id), None)


#: the pairing locks this module's tests took, released by ``let_go`` however a test ends
TAKEN: list[tuple[str, str]] = []


async def pass_lock(store: LadderStore, ladder: str) -> str:
    """The ladder's pairing lock, as a pass takes it (waiting for a worker's pass to let go)."""
    for _ in range(200):
        token = await store.lock(ladder, 30)
        if token is not None:
            TAKEN.append((ladder, token))
            return token
        await asyncio.sleep(0.05)  # (a bounded poll: a worker's pass holds it for milliseconds)
    raise AssertionError(f"the pairing lock of {ladder} stayed taken")


async def held(store: LadderStore, ladder: str, bots: list[str]) -> list[tuple[int, tuple[str, ...]]]:
    """Each bot's ladder matches (all ladders: what the cap counts) and its places at ``ladder``'s tables."""
    facts = await store.facts(ladder, bots)
    return [(f.playing, tuple(await store.places(ladder, b))) for b, f in zip(bots, facts, strict=True)]


async def let_go(store: LadderStore) -> None:
    """The locks the test took, released (one that failed half way leaves none to the next)."""
    while TAKEN:
        await store.unlock(*TAKEN.pop())


def test_sdk_bots_on_the_ladder_play_rated_matches_and_move_the_ratings_with_no_organiser(
    ladder_api: tuple[Api, Process], players: Callable[..., Process]
) -> None:
    api, worker = ladder_api
    ruleset = "WIZARD_JUNIOR_CLASSIC"
    bots = [api.register() for _ in range(2)]
    runners = [players(api.base, token, "--ladder", f"{ruleset}:3") for token, _ in bots]
    explain = lambda: worker.output() + "".join(p.output() for p in runners)  # noqa: E731

    def rated_by_all() -> list[dict[str, Any]] | None:
        board = api.data(LEADERBOARD, {"r": ruleset, "m": "ELO"})["leaderboard"]
        games = {row["bot"]["id"]: row["games"] for row in board}
        return board if all(games.get(bot_id, 0) >= 2 for _, bot_id in bots) else None

    board = wait_until(rated_by_all, "both SDK bots rated after two ladder matches each", timeout=120, explain=explain)
    ids = {row["bot"]["id"] for row in board}
    assert ids & {"house-heuristic", "house-random"}, "the house bots filled the tables, and were rated as their kind"
    assert any(row["rating"] != 1500.0 for row in board if row["bot"]["id"] in {b for _, b in bots})
    for _, bot_id in bots:
        played = ladder_matches(api, bot_id)
        assert played and all(m["rated"] and m["moveTimeoutMs"] == 250 for m in played)
        assert all(len({s["bot"]["id"] if s["bot"] else s["houseBot"] for s in m["seats"]}) == 3 for m in played)
        joined = api.data(LADDER, {"r": ruleset, "p": 3})["ladder"]
        assert {"house-heuristic", "house-random", bot_id} <= {r["bot"]["id"] for r in joined}
    # the workers asked for a refit as ladder tables ended: the FITTED leaderboard has them too
    wait_until(lambda: {b for _, b in bots} <= {r["bot"]["id"] for r in api.data(
        LEADERBOARD, {"r": ruleset, "m": "FITTED"})["leaderboard"]}, "the FITTED refit after ladder matches",
        timeout=60, explain=explain)


def test_the_cap_holds_a_bot_that_stops_answering_is_paused_and_comes_back(ladder_api: tuple[Api, Process]) -> None:
    api, worker = ladder_api
    token, bot_id = api.register()
    ladders = [("WIZARD_JUNIOR", 3), ("WIZARD_JUNIOR_CLASSIC", 4)]
    for ruleset, n in ladders:
        joined = api.data(JOIN, {"r": ruleset, "p": n}, token)["joinLadder"]
        assert joined["state"] == "ACTIVE" and joined["bot"]["id"] == bot_id and joined["pausedReason"] is None

    def playing() -> int:
        return sum(m["playing"] for m in api.data(MY_LADDERS, token=token)["me"]["ladders"])

    # it never moves: the passes seat it at two tables (the cap, over both its ladders), never a third
    wait_until(lambda: playing() == 2, "the bot seated at the cap of 2 tables", explain=worker.output)

    def paused() -> list[dict[str, Any]] | None:
        live = [m for m in ladder_matches(api, bot_id) if m["status"] == "ACTIVE"]
        assert len(live) <= 2, f"the bot sits in {len(live)} ladder matches at once, over the cap of 2"
        mine = api.data(MY_LADDERS, token=token)["me"]["ladders"]
        return mine if all(m["state"] == "PAUSED" for m in mine) else None

    pause = wait_until(paused, "the bot paused after a table where its moves timed out", timeout=90,
                       explain=worker.output)
    assert len(pause) == 2 and pause[0]["pausedAt"] == pause[1]["pausedAt"]
    assert "time out" in pause[0]["pausedReason"] and "awaitTurn" in pause[0]["pausedReason"]
    assert any(s["timeouts"] > 0 for m in ladder_matches(api, bot_id) for s in m["seats"]
               if s["bot"] and s["bot"]["id"] == bot_id)
    # paused: it is paired no more; once its tables in play end, it plays nothing
    wait_until(lambda: playing() == 0, "its tables in play ended", timeout=60, explain=worker.output)
    made = {m["id"] for m in ladder_matches(api, bot_id)}
    assert member(api, "WIZARD_JUNIOR", 3, bot_id)["state"] == "PAUSED"  # type: ignore[index]
    # it answers again: it waits for a turn, and the pause is lifted
    assert api.data("{ awaitTurn(timeoutMs: 0) { id } }", token=token)["awaitTurn"] is None
    back = api.data(MY_LADDERS, token=token)["me"]["ladders"]
    assert all(m["state"] == "ACTIVE" and m["pausedReason"] is None and m["pausedAt"] is None for m in back)
    wait_until(lambda: {m["id"] for m in ladder_matches(api, bot_id)} - made, "a new table for the bot back",
               explain=worker.output)
    for ruleset, n in ladders:
        api.data(LEAVE, {"r": ruleset, "p": n}, token)


def test_leaving_stops_new_pairings_and_the_matches_in_play_finish(ladder_api: tuple[Api, Process]) -> None:
    api, worker = ladder_api
    ruleset, n = "WIZARD_JUNIOR", 4
    leaving_token, leaving = api.register()
    api.data(JOIN, {"r": ruleset, "p": n}, leaving_token)
    wait_until(lambda: member(api, ruleset, n, leaving)["playing"] == 2, "the bot at two tables",  # type: ignore[index]
               explain=worker.output)
    left = api.data(LEAVE, {"r": ruleset, "p": n}, leaving_token)["leaveLadder"]
    assert left["state"] == "LEFT" and left["joinedAt"] is None and left["playing"] == 2
    assert api.data(LEAVE, {"r": ruleset, "p": n}, leaving_token)["leaveLadder"]["state"] == "LEFT"  # again: the same
    assert member(api, ruleset, n, leaving) is None
    assert api.data(MY_LADDERS, token=leaving_token)["me"]["ladders"] == []
    before = {m["id"] for m in ladder_matches(api, leaving)}
    # another bot joins and is paired twice: the passes went round since, and paired the one who left no more
    other_token, other = api.register()
    api.data(JOIN, {"r": ruleset, "p": n}, other_token)
    wait_until(lambda: member(api, ruleset, n, other)["playing"] == 2, "the other bot at two tables",  # type: ignore[index]
               explain=worker.output)
    assert {m["id"] for m in ladder_matches(api, leaving)} == before
    wait_until(lambda: all(m["status"] == "FINISHED" for m in ladder_matches(api, leaving)),
               "the matches in play when it left finished", timeout=90, explain=worker.output)
    api.data(LEAVE, {"r": ruleset, "p": n}, other_token)


def test_bad_input_is_refused_and_changes_nothing(ladder_api: tuple[Api, Process]) -> None:
    api, _ = ladder_api
    token, bot_id = api.register()
    assert api.error_code(JOIN, {"r": "WIZARD", "p": 3}) == "UNAUTHENTICATED"
    body = api.gql(JOIN, {"r": "WIZARD", "p": 9}, token)
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT" and "WIZARD with 9 players" in body["errors"][0]["message"]
    assert api.error_code(LADDER, {"r": "WIZARD", "p": 1}) == "BAD_INPUT"
    assert api.error_code(f"{{ ladder(ruleset: WIZARD, players: 3, first: 0) {{ {MEMBERSHIP} }} }}") == "BAD_INPUT"
    assert api.data(MY_LADDERS, token=token)["me"]["ladders"] == []
    # REST: the same rules, and joining twice is one membership
    headers = {"Authorization": f"Bearer {token}"}
    refused = api.http.post("/api/ladders/WIZARD/x/join", headers=headers)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "BAD_INPUT", refused.text
    assert api.http.post("/api/ladders/CHESS/4/join", headers=headers).status_code == 400
    first = api.http.post("/api/ladders/WIZARD_JUNIOR_CLASSIC/5/join", headers=headers)
    assert first.status_code == 200, first.text
    again = api.http.post("/api/ladders/WIZARD_JUNIOR_CLASSIC/5/join", headers=headers).json()
    assert again["state"] == "ACTIVE" and again["joinedAt"] == first.json()["joinedAt"]
    listed = api.http.get("/api/ladders/WIZARD_JUNIOR_CLASSIC/5").json()
    assert [r["bot"]["id"] for r in listed].count(bot_id) == 1
    assert api.http.post("/api/ladders/WIZARD_JUNIOR_CLASSIC/5/leave", headers=headers).json()["state"] == "LEFT"
    # a retired bot cannot join
    api.data("mutation { retireBot { id } }", token=token)
    assert api.error_code(JOIN, {"r": "WIZARD", "p": 4}, token) == "FORBIDDEN"
    assert api.data(MY_LADDERS, token=token)["me"]["ladders"] == []


def test_a_bot_that_retires_leaves_its_ladders_at_the_next_pass(ladder_api: tuple[Api, Process]) -> None:
    api, worker = ladder_api
    token, bot_id = api.register()
    api.data(JOIN, {"r": "WIZARD_JUNIOR_CLASSIC", "p": 6}, token)  # (too few to fill a table: it waits)
    assert member(api, "WIZARD_JUNIOR_CLASSIC", 6, bot_id)["state"] == "ACTIVE"  # type: ignore[index]
    api.data("mutation { retireBot { id } }", token=token)
    wait_until(lambda: member(api, "WIZARD_JUNIOR_CLASSIC", 6, bot_id) is None, "the retired bot off the ladder",
               explain=worker.output)
    assert api.data(MY_LADDERS, token=token)["me"]["ladders"] == []


def test_a_table_a_dead_pass_stored_but_never_started_is_started_by_the_next_or_dropped_when_old(
    ladder_api: tuple[Api, Process], ladder_redis: dict[str, str]
) -> None:
    api, worker = ladder_api
    bots = [api.register() for _ in range(3)]
    api.data(JOIN, {"r": "WIZARD_JUNIOR", "p": 6}, bots[0][0])  # (too few to fill a table: the passes seat it nowhere)
    ids = [bot_id for _, bot_id in bots]
    seats = [{"id": b, "name": b, "house": None} for b in ids]
    seats += [{"id": f"house-{k.lower()}", "name": k, "house": k} for k in ("HEURISTIC", "RANDOM", "SEARCH")]

    async def a_pass_dies_after_storing_its_tables() -> None:
        redis = open_async(ladder_redis["REDIS_URL"], max_connections=4, timeout=5, client_name="test")
        try:
            store = LadderStore(redis)
            token = await pass_lock(store, "WIZARD_JUNIOR:6")
            for table_id, age_ms in (("young", 0), ("old", 120_000)):
                table = {"seats": seats, "seed": f"seed-{table_id}", "duplicate": False,
                         "created": int(time.time() * 1000) - age_ms, "homed": True}
                assert await store.store_table("WIZARD_JUNIOR:6", token, table_id, table, 1, ids, ids, 10)
        finally:
            await let_go(store)
            await redis.aclose()

    asyncio.run(a_pass_dies_after_storing_its_tables())
    wait_until(lambda: api.data("query($m: ID!) { match(id: $m) { id } }", {"m": homed_match_id("ladder-wizard-junior-6-young-0")})["match"],
               "the next pass creating the young table's first match", explain=worker.output)
    wait_until(lambda: member(api, "WIZARD_JUNIOR", 6, ids[0])["playing"] == 1,  # type: ignore[index]
               "the old table dropped", explain=worker.output)
    assert api.data("query($m: ID!) { match(id: $m) { id } }", {"m": homed_match_id("ladder-wizard-junior-6-old-0")})["match"] is None


@pytest.fixture(scope="module")
def roomy_ladder_api(
    start_api: Any, start_worker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Api, Process]]:
    """An API and a worker on another Redis of this module's, whose cap leaves a bot room for a
    whole duplicate set of 3 matches (so that the pairing deals them)."""
    for own in own_redis(tmp_path_factory.mktemp("roomy-ladder-redis")):
        env = {**own, **LADDER_ENV, "ARENA_LADDER_MAX_MATCHES": "3", "ARENA_LADDER_MOVE_TIMEOUT_MS": "3000",
               "ARENA_LADDER_DUPLICATE_SETS": "true",
               "ARENA_LADDER_PAUSE_AFTER_TIMEOUTS": "3"}
        api, worker = start_api(**env), start_worker(**env)
        yield api, worker
        worker.stop()
        api.process.stop()


def test_a_duplicate_set_is_played_match_after_match_with_the_seats_rotated_and_then_published(
    roomy_ladder_api: tuple[Api, Process], players: Callable[..., Process]
) -> None:
    api, worker = roomy_ladder_api
    token, bot_id = api.register()
    runner = players(api.base, token, "--ladder", "WIZARD_JUNIOR:3")
    explain = lambda: worker.output() + runner.output()  # noqa: E731
    first_set = wait_until(lambda: len(done := [m for m in ladder_matches(api, bot_id) if m["status"] == "FINISHED"])
                           >= 3 and done, "a whole duplicate set played", timeout=120, explain=explain)
    by_table: dict[str, list[str]] = {}
    for m in first_set:
        table, turn, _ = m["id"].rsplit("-", 2)  # <table>-<turn>-<the suffix that homes it>
        by_table.setdefault(table, []).append(turn)
    table = next(t for t, turns in by_table.items() if sorted(turns) == ["0", "1", "2"])
    for turn in range(3):  # the set's last match settled, its matches are published
        wait_until(lambda: api.http.get(f"/api/matches/{homed_match_id(f'{table}-{turn}')}/record").status_code == 200,  # noqa: B023
                   f"the record of the set's match {turn}, once the set has ended", explain=explain)
    seated = []
    seeds = set()
    for turn in range(3):
        match = api.data("query($m: ID!) { match(id: $m) { rated seed seats { bot { id } houseBot } } }",
                         {"m": homed_match_id(f"{table}-{turn}")})["match"]
        assert match["rated"]
        seeds.add(match["seed"])
        seated.append([s["bot"]["id"] if s["bot"] else s["houseBot"] for s in match["seats"]])
    assert len(seeds) == 1 and None not in seeds, "one deal for the whole set"
    assert seated[1] == seated[0][1:] + seated[0][:1] and seated[2] == seated[1][1:] + seated[1][:1]
    board = api.data(LEADERBOARD, {"r": "WIZARD_JUNIOR", "m": "ELO"})["leaderboard"]
    assert next(r["games"] for r in board if r["bot"]["id"] == bot_id) >= 3


def test_a_rating_for_the_pairing_takes_the_best_known_with_its_own_doubt() -> None:
    elo, fit = StoredRating(1620.0, 3, 90.0), StoredRating(1580.0, 3, 40.0)
    assert ladder_standing(None, None) == (1500.0, elo_deviation_after(0))
    assert ladder_standing(None, elo) == (1620.0, 90.0)
    assert ladder_standing(fit, elo) == (1580.0, 40.0)  # the fit, when it rated the bot, with the fit's doubt
    # kept before deviations were: the one its games give
    assert ladder_standing(None, StoredRating(1620.0, 3, None)) == (1620.0, elo_deviation_after(3))


def test_the_house_bots_of_every_ladder_are_named_comma_separated_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARENA_LADDER_HOUSE_BOTS", "search, heuristic,search")
    assert house_kinds(Settings().ladder_house_bots) == ["SEARCH", "HEURISTIC"]
    monkeypatch.setenv("ARENA_LADDER_HOUSE_BOTS", "")
    assert house_kinds(Settings().ladder_house_bots) == []
    monkeypatch.setenv("ARENA_LADDER_HOUSE_BOTS", "HEURISTIC,STOCKFISH")
    with pytest.raises(ValueError, match="not STOCKFISH"):
        house_kinds(Settings().ladder_house_bots)


@pytest.mark.skipif(shutil.which("node") is None, reason="the JavaScript starter needs node (apt-get install nodejs)")
def test_the_javascript_stdin_stdout_bot_plays_a_ladder_match(
    ladder_api: tuple[Api, Process], players: Callable[..., Process]
) -> None:
    """``wizard-arena play --cmd "node examples/line_bot.mjs" --ladder WIZARD:3``: the program
    in another language joins the ladder, is paired by the worker, plays a rated ladder match
    to its end, and its own record shows what it wrote to stderr with each of its moves."""
    api, worker = ladder_api
    token, bot_id = api.register()
    runner = players(api.base, token, "--ladder", "WIZARD:3", bot=("--cmd", "node examples/line_bot.mjs"))
    explain = lambda: worker.output() + runner.output()  # noqa: E731

    def finished() -> dict[str, Any] | None:
        return next((m for m in ladder_matches(api, bot_id) if m["status"] == "FINISHED"), None)

    match = wait_until(finished, "a finished ladder match of the JavaScript bot", timeout=120, explain=explain)
    assert match["rated"] and match["createdBy"] == "ladder"
    [seat] = [i for i, s in enumerate(match["seats"]) if s["bot"] and s["bot"]["id"] == bot_id]
    response = api.http.get(f"/api/matches/{match['id']}/record", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    record = response.json()
    made = [note.get("debug") for move, note in zip(record["moves"], record["moveNotes"], strict=True)
            if move["seat"] == seat and not note.get("byServer")]
    assert made, "the program made moves of its own in the ladder match"
    assert all(text and text.startswith("turn round ") for text in made), made
    wait_until(lambda: any(row["bot"]["id"] == bot_id and row["games"] >= 1 for row in api.data(
        LEADERBOARD, {"r": "WIZARD", "m": "ELO"})["leaderboard"]), "the ladder match settled: the bot rated",
        timeout=60, explain=explain)


def test_an_old_unstarted_table_whose_first_match_was_made_is_kept_in_play(services: Any) -> None:
    """A pass that died after creating a table's first match but before marking it started,
    finished by a pass over a minute later: the table stays in play (its bots' cap counting the
    match still played), only its unstarted mark goes."""
    ladder, table_id = "WIZARD:3", f"made{os.getpid()}{time.time_ns()}"
    ids = [f"ladder-made-{table_id}-{i}" for i in range(3)]
    table = {"seats": [{"id": b, "name": b, "house": None} for b in ids], "seed": "made",
             "duplicate": False, "created": int(time.time() * 1000) - 120_000}

    async def run() -> None:
        try:
            store = services.ladders.store
            token = await pass_lock(store, ladder)
            assert await store.store_table(ladder, token, table_id, table, 1, ids, ids, 10)
            await services.ladders._start(ladder, table_id, table, 0)  # (then the pass died)
            await services.ladders._finish_unstarted(ladder, {table_id: table})
            await store.unlock(ladder, token)
            assert await store.table(ladder, table_id) is not None
            assert table_id not in await store.unstarted(ladder)
            assert [f.playing for f in await store.facts(ladder, ids)] == [1, 1, 1]
            await store.drop_table(ladder, table_id, ids)  # (tidy: no other test meets it)
        finally:
            await let_go(services.ladders.store)
            await services.close()

    asyncio.run(run())


def test_a_bots_ladders_count_its_matches_per_ladder_without_reading_any_ladders_tables(services: Any) -> None:
    """``bot { ladders { playing } }`` for each bot of a long list must not read every table of
    each of its ladders: the matches a bot plays are counted per ladder as its tables are
    stored and ended (the cap's count, across ladders, moving with them)."""
    suffix = f"{os.getpid()}{time.time_ns()}"
    ids = [f"ladder-count-{suffix}-{i}" for i in range(3)]
    seats = [{"id": b, "name": b, "house": None} for b in ids]

    async def run() -> None:
        try:
            store, ladders = services.ladders.store, services.ladders
            for ladder in ("WIZARD:3", "WIZARD_JUNIOR:3"):
                await store.join(ladder, ids[0])
            tables = [("WIZARD:3", f"a{suffix}", True), ("WIZARD:3", f"b{suffix}", False),
                      ("WIZARD_JUNIOR:3", f"c{suffix}", False)]
            for ladder, table_id, duplicate in tables:
                table = {"seats": seats, "seed": "s", "duplicate": duplicate, "created": 0}
                token = await pass_lock(store, ladder)
                assert await store.store_table(ladder, token, table_id, table, 3 if duplicate else 1, ids, ids, 10)
                await store.unlock(ladder, token)
                await store.started(ladder, table_id)

            async def no_tables(ladder: str) -> dict[str, Any]:
                raise AssertionError(f"read every table of {ladder}")

            store.tables = no_tables
            rows = await ladders.memberships(ids[0], "counted")
            assert [(m.ruleset, m.playing) for m in rows] == [("WIZARD", 4), ("WIZARD_JUNIOR", 1)]
            assert (await ladders.membership(ids[1], "counted", "WIZARD", 3)).playing == 4
            assert [f.playing for f in await store.facts("WIZARD:3", ids)] == [5, 5, 5]  # (the cap's: all ladders)
            assert await store.end_table("WIZARD:3", f"a{suffix}", dict.fromkeys(ids, False), 0, "")
            assert not await store.end_table("WIZARD:3", f"a{suffix}", dict.fromkeys(ids, False), 0, "")  # (once)
            await store.drop_table("WIZARD_JUNIOR:3", f"c{suffix}", ids)
            rows = await ladders.memberships(ids[0], "counted")
            assert [(m.ruleset, m.playing) for m in rows] == [("WIZARD", 1), ("WIZARD_JUNIOR", 0)]
            assert [f.playing for f in await store.facts("WIZARD:3", ids)] == [1, 1, 1]
            await store.drop_table("WIZARD:3", f"b{suffix}", ids)
            for ladder in ("WIZARD:3", "WIZARD_JUNIOR:3"):
                await store.leave(ladder, ids[0])
        finally:
            await let_go(services.ladders.store)
            await services.close()

    asyncio.run(run())


def test_a_table_is_one_match_unless_duplicate_sets_are_asked_for_even_with_room_for_them(
    services: Any, redis_url: str
) -> None:
    """With room under the cap for a whole set, the pairing would deal a duplicate set; the
    same bots would then play every rotation of one deal, and a bot that remembers its cards
    would know its opponents' hands: unless ARENA_LADDER_DUPLICATE_SETS, a table is one match."""
    from service.domain.ladders import LadderService

    ladder = "WIZARD_JUNIOR_CLASSIC:5"
    settings = Settings(REDIS_URL=redis_url, ladder_max_matches=10, ladder_house_bots=[])
    assert settings.ladder_duplicate_sets is False and settings.ladder_max_matches == 10

    async def run() -> None:
        store = services.ladders.store
        ladders = LadderService(store, services.matches, services.ratings, settings)
        token = await store.lock(ladder, 30)  # (a worker's pass of this Redis leaves the ladder to this test)
        assert token is not None
        try:
            ids = [(await services.bots.register(f"dup{time.time_ns() % 10**9}x{i}", address=f"dup-{i}"))[1]["id"] for i in range(5)]
            for bot_id in ids:
                await store.join(ladder, bot_id)
            assert await ladders._pair(ladder, token) >= 1
            mine = [t for t in (await store.tables(ladder)).values() if {s["id"] for s in t["seats"]} == set(ids)]
            assert len(mine) == 1 and mine[0]["duplicate"] is False
            for bot_id in ids:
                await store.leave(ladder, bot_id)
        finally:
            await store.unlock(ladder, token)
            await services.close()

    asyncio.run(run())


def test_the_meetings_a_pass_reads_are_those_of_the_bots_asked_about_with_each_other(services: Any) -> None:
    suffix = f"{os.getpid()}{time.time_ns()}"
    a, b, c, d = (f"meet-{suffix}-{x}" for x in "abcd")
    ladder = "WIZARD_JUNIOR_CLASSIC:6"

    async def run() -> None:
        try:
            store = services.ladders.store
            token = await pass_lock(store, ladder)
            for table_id, bots in ((f"t1{suffix}", [a, b, c]), (f"t2{suffix}", [a, b, d])):
                table = {"seats": [{"id": x, "name": x, "house": None} for x in bots], "seed": "s",
                         "duplicate": False, "created": 0}
                assert await store.store_table(ladder, token, table_id, table, 1, bots, bots, 10)
                await store.drop_table(ladder, table_id, bots)
            await store.unlock(ladder, token)
            assert await store.meetings_among(ladder, [b, a, d, a]) == {
                frozenset((a, b)): 2, frozenset((a, d)): 1, frozenset((b, d)): 1}
            assert await store.meetings_among(ladder, [c]) == {}
        finally:
            await let_go(services.ladders.store)
            await services.close()

    asyncio.run(run())


def test_a_bot_retired_or_paused_after_the_pass_read_it_is_seated_at_no_new_table(services: Any) -> None:
    """Between a pass's read of its members and the store of a table, a bot may retire or be
    paused (by another ladder's table ending): the script that stores the table checks both,
    so the table is not stored and nothing is counted."""
    ladder = "WIZARD:3"

    async def run() -> None:
        try:
            store = services.ladders.store
            ids = []
            for i in range(3):
                _, bot = await services.bots.register(f"late-{os.getpid()}-{time.time_ns()}-{i}",
                                                      address=f"late-{time.time_ns()}")
                ids.append(bot["id"])
            table = {"seats": [{"id": b, "name": b, "house": None} for b in ids], "seed": "late",
                     "duplicate": False, "created": int(time.time() * 1000)}
            token = await pass_lock(store, ladder)
            await services.bots.bots.retire(ids[0])
            # (the retired bot seated last: the places reserved before it are released)
            refused = [f"retired{time.time_ns()}", f"paused{time.time_ns()}"]
            assert not await store.store_table(ladder, token, refused[0], table, 1, ids, ids[::-1], 10)
            await services.redis.hset(bot_ladder_state_key(ids[1]), mapping={"paused": 1, "reason": "test"})
            assert not await store.store_table(ladder, token, refused[1], table, 1, ids[1:], ids[:0:-1], 10)
            assert await held(store, ladder, ids) == [(0, ())] * 3
            assert await store.meetings_among(ladder, ids) == {}
            assert not set(refused) & (set(await store.pending(ladder)) | set(await store.tables(ladder)))
            table_id = f"fine{time.time_ns()}"  # (the third, alone with the fourth seat's house bots, is fine)
            assert await store.store_table(ladder, token, table_id, table, 1, ids[2:], ids[2:], 10)
            await store.drop_table(ladder, table_id, ids[2:])
            await store.unlock(ladder, token)
        finally:
            await let_go(services.ladders.store)
            await services.close()

    asyncio.run(run())


def test_a_pass_that_dies_while_seating_a_table_holds_no_place_past_the_next_pass(services: Any, redis_url: str) -> None:
    """A table's bots' places are reserved in their own slots before the table is stored in the
    ladder's: a pass that dies in between leaves the table pending, and the next pass releases
    the places (the cap counts them no longer); a pass whose lock lapsed stores nothing and
    holds nothing; a place whose table is neither in play nor pending (reserved by a pass that
    lost its lock after the next one cleaned up) is released by the next pass that reads its bot."""
    from service.domain.ladders import LadderService

    ladder = "WIZARD_JUNIOR_CLASSIC:3"
    settings = Settings(REDIS_URL=redis_url, ladder_max_matches=2, ladder_house_bots=[])

    async def run() -> None:
        try:
            store = services.ladders.store
            ladders = LadderService(store, services.matches, services.ratings, settings)
            ids = [(await services.bots.register(f"dies{time.time_ns() % 10**9}x{i}", address=f"dies-{i}"))[1]["id"]
                   for i in range(3)]
            table = {"seats": [{"id": b, "name": b, "house": None} for b in ids], "seed": "dies",
                     "duplicate": False, "created": int(time.time() * 1000)}

            async def dies(*args: Any, **kwargs: Any) -> Any:
                raise ConnectionError("the pass dies here")

            token = await pass_lock(store, ladder)
            stores_tables, store._store_table = store._store_table, dies  # type: ignore[method-assign]
            with pytest.raises(ConnectionError):
                await store.store_table(ladder, token, "died", table, 2, ids, ids, 2)
            store._store_table = stores_tables  # type: ignore[method-assign]
            assert await held(store, ladder, ids) == [(2, ("died",))] * 3
            assert "died" in await store.pending(ladder)
            # the cap holds meanwhile: no other table seats them
            assert not await store.store_table(ladder, token, "another", table, 1, ids, ids, 2)
            await store.unlock(ladder, token)

            # the next pass (no member to seat: the bots never joined) releases the places
            assert await ladders.pair(ladder) == 0
            assert await held(store, ladder, ids) == [(0, ())] * 3
            assert not {"died", "another"} & (set(await store.pending(ladder)) | set(await store.tables(ladder)))

            # a pass whose lock lapsed: nothing stored, nothing held
            token = await pass_lock(store, ladder)
            await store.unlock(ladder, token)
            with pytest.raises(LockLost):
                await store.store_table(ladder, token, "late", table, 1, ids, ids, 2)
            assert [f.playing for f in await store.facts(ladder, ids)] == [0, 0, 0]

            # a stray place of a member, its table nowhere: released by the next pass
            await store.join(ladder, ids[0])
            token = await pass_lock(store, ladder)
            await store._reserve_place(keys=[bot_ladder_state_key(ids[0]), bot_key(ids[0])],
                                       args=[ladder_seat_field(ladder, "stray"), 1, 2, f"playing:{ladder}"])
            await store.unlock(ladder, token)
            assert await held(store, ladder, ids[:1]) == [(1, ("stray",))]
            assert await ladders.pair(ladder) == 0  # (one member: no table)
            assert await held(store, ladder, ids[:1]) == [(0, ())]
            await store.leave(ladder, ids[0])
        finally:
            await let_go(services.ladders.store)
            await services.close()

    asyncio.run(run())


def test_a_join_or_leave_that_died_half_way_shows_no_member_on_the_ladder(services: Any) -> None:
    """The ladder's list is written first on joining and removed last on leaving; a bot is a
    member when its own record says so: a name on the list without it is neither listed nor
    paired."""
    ladder, ruleset, players = "WIZARD_JUNIOR:5", "WIZARD_JUNIOR", 5

    async def run() -> None:
        try:
            ladders = services.ladders
            _, bot = await services.bots.register(f"half{time.time_ns() % 10**9}", address="half")
            await services.redis.zadd(ladder_members_key(ladder), {bot["id"]: 1})  # (the join died here)
            listed = await ladders.members(ruleset, players, 1000)
            assert bot["id"] not in {m.bot_id for m in listed}
            assert (await ladders.membership(bot["id"], bot["name"], ruleset, players)).state.value == "LEFT"
            await ladders.join(Caller(bot["id"], bot["name"]), ruleset, players)
            assert bot["id"] in {m.bot_id for m in await ladders.members(ruleset, players, 1000)}
            await ladders.leave(Caller(bot["id"], bot["name"]), ruleset, players)
            assert bot["id"] not in {m.bot_id for m in await ladders.members(ruleset, players, 1000)}
        finally:
            await let_go(services.ladders.store)
            await services.close()

    asyncio.run(run())


def test_a_ladder_table_stored_before_matches_had_homes_keeps_its_matches_ids() -> None:
    """A table in play across the upgrade that homed match ids: its record has no ``homed``, so
    its matches are found (and its duplicate set's next made) under the ids it began with."""
    table = {"seats": [], "seed": "s", "duplicate": True, "created": 0}
    assert [ladder_match_id("WIZARD:3", "7ab", table, turn) for turn in (0, 1)] == [
        "ladder-wizard-3-7ab-0", "ladder-wizard-3-7ab-1"]
    assert ladder_match_id("WIZARD:3", "7ab", {**table, "homed": True}, 1) == homed_match_id("ladder-wizard-3-7ab-1")
