"""Races: many requests released at the same instant (threads behind a barrier, each with a
connection opened beforehand) against one match. Every change is a compare-and-set on the
match's version (and its latest event id: a snapshot from before a failover, at the right
version, is refused), so identical moves apply once, simultaneous bids are all kept, and
seats are taken once each. And a tournament's entrants joining at once are all kept."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from service.model.live_match import MatchStatus
from service.store.clock import now_ms
from service.store.keys import events_key, match_home_key, match_key
from service.store.matches import MatchStore
from service.store.redis_client import open_async
from service.store.script_line import ScriptLine
from tests.service.conftest import first_action
from tests.service.test_tournaments import CANCEL as CANCEL_TOURNAMENT
from tests.service.test_tournaments import CREATE as CREATE_TOURNAMENT
from tests.service.test_tournaments import GET as GET_TOURNAMENT
from tests.service.test_tournaments import JOIN as JOIN_TOURNAMENT

SUBMIT = (
    "mutation($m: ID!, $mv: MoveInput!, $v: Int) "
    "{ submitMove(matchId: $m, move: $mv, expectedVersion: $v) { id version mySeat phase } }"
)
JOIN = "mutation($m: ID!, $s: Int) { joinMatch(matchId: $m, seat: $s) { id version mySeat status } }"
VIEW = """query($m: ID!) { match(id: $m) {
  version status phase round toAct awaiting mySeat legalMoves { bid card trump }
  seats { seat bot { id } houseBot bid }
  roundResults { round seats { seat bid tricks points } }
} }"""
LONG_TIMEOUT = 600_000  # no deadline falls due while a test runs, whatever worker is about


def events(redis_client: Any, match_id: str) -> int:
    return int(redis_client.xlen(f"{{m:{match_id}}}:events"))


def at_once(api: Any, calls: Sequence[tuple[str, dict[str, Any], str | None]]) -> list[dict[str, Any]]:
    """Send each (query, variables, token) from its own thread and connection, all released
    together; the responses in the order of ``calls``."""
    barrier = threading.Barrier(len(calls))
    results: list[dict[str, Any] | BaseException | None] = [None] * len(calls)

    def run(i: int, query: str, variables: dict[str, Any], token: str | None) -> None:
        try:
            with httpx.Client(base_url=api.base, timeout=30) as client:
                assert client.get("/healthz").status_code == 200  # the connection is open now
                auth = {"Authorization": f"Bearer {token}"} if token else {}
                barrier.wait(timeout=30)
                response = client.post("/graphql", json={"query": query, "variables": variables}, headers=auth)
                assert response.status_code == 200, response.text
                results[i] = response.json()
        except BaseException as error:  # noqa: BLE001 - reported below
            barrier.abort()
            results[i] = error

    threads = [threading.Thread(target=run, args=(i, *call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results  # type: ignore[return-value]


def error_code(body: dict[str, Any]) -> str | None:
    return body["errors"][0]["extensions"]["code"] if body.get("errors") else None


def seat_bots(api: Any, players: int, **spec: Any) -> tuple[str, list[str]]:
    """A live match of registered bots, seat ``i`` held by ``tokens[i]``."""
    tokens = [api.register()[0] for _ in range(players)]
    match_id = api.create_match(tokens[0], players=players, moveTimeoutMs=LONG_TIMEOUT, **spec)
    for seat, token in enumerate(tokens):
        api.join(token, match_id, seat)
    return match_id, tokens


def view(api: Any, match_id: str, token: str | None = None) -> dict[str, Any]:
    return api.data(VIEW, {"m": match_id}, token)["match"]  # type: ignore[no-any-return]


def move_of(legal: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in legal.items() if v is not None}


def settle_trump(api: Any, match_id: str, tokens: Sequence[str]) -> dict[str, Any]:
    """If a Wizard was turned, let the dealer name trump; the match as the bidding begins."""
    match = view(api, match_id)
    if match["phase"] == "CHOOSE_TRUMP":
        dealer = match["toAct"]
        legal = view(api, match_id, tokens[dealer])["legalMoves"][0]
        assert not api.submit(tokens[dealer], match_id, move_of(legal)).get("errors")
        match = view(api, match_id)
    assert match["phase"] == "BID", match
    return match


# ----------------------------------------------------------------------------- one move, many times


def test_identical_moves_with_one_expected_version_apply_exactly_once(api, redis_client):
    match_id, tokens = seat_bots(api, 4, seed="race-expected", firstDealer=0)
    match = settle_trump(api, match_id, tokens)
    actor = tokens[match["toAct"]]
    move = move_of(view(api, match_id, actor)["legalMoves"][0])
    version, logged = match["version"], events(redis_client, match_id)

    answers = at_once(api, [(SUBMIT, {"m": match_id, "mv": move, "v": version}, actor)] * 40)

    codes = Counter(error_code(a) for a in answers)
    assert codes == {None: 1, "STALE_VERSION": 39}, codes
    winner = next(a for a in answers if not a.get("errors"))["data"]["submitMove"]
    assert winner["version"] == version + 1
    for answer in answers:
        if answer.get("errors"):
            assert answer["data"] is None
            assert "read it again" in answer["errors"][0]["message"]
    assert view(api, match_id)["version"] == version + 1
    assert events(redis_client, match_id) == logged + 1


def test_identical_moves_without_expected_version_apply_exactly_once(api, redis_client):
    match_id, tokens = seat_bots(api, 4, seed="race-plain", firstDealer=1)
    match = settle_trump(api, match_id, tokens)
    actor = tokens[match["toAct"]]
    move = move_of(view(api, match_id, actor)["legalMoves"][0])
    version, logged = match["version"], events(redis_client, match_id)

    answers = at_once(api, [(SUBMIT, {"m": match_id, "mv": move}, actor)] * 40)

    codes = Counter(error_code(a) for a in answers)
    assert codes[None] == 1, codes
    assert set(codes) - {None} <= {"NOT_YOUR_TURN", "ILLEGAL_MOVE", "STALE_VERSION"}, codes
    assert sum(codes.values()) == 40
    after = view(api, match_id)
    assert after["version"] == version + 1
    assert after["toAct"] != match["toAct"]
    assert events(redis_client, match_id) == logged + 1


def test_identical_card_plays_apply_exactly_once(api, redis_client):
    """The same race in the PLAY phase, over the REST mirror's move endpoint too."""
    match_id, tokens = seat_bots(api, 3, seed="race-cards", firstDealer=2)
    match = settle_trump(api, match_id, tokens)
    while match["phase"] == "BID":
        actor = tokens[match["toAct"]]
        assert not api.submit(actor, match_id, {"bid": 0}).get("errors")
        match = view(api, match_id)
    assert match["phase"] == "PLAY"
    actor = tokens[match["toAct"]]
    card = move_of(view(api, match_id, actor)["legalMoves"][0])
    version, logged = match["version"], events(redis_client, match_id)

    barrier = threading.Barrier(40)
    statuses: list[int] = []

    def rest_play() -> None:
        with httpx.Client(base_url=api.base, timeout=30) as client:
            client.get("/healthz")
            barrier.wait(timeout=30)
            response = client.post(
                f"/api/matches/{match_id}/moves", json=card, headers={"Authorization": f"Bearer {actor}"}
            )
            assert "Traceback" not in response.text
            statuses.append(response.status_code)

    threads = [threading.Thread(target=rest_play) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(statuses) == 40
    assert statuses.count(200) == 1, statuses
    assert set(statuses) - {200} <= {409, 422}, statuses
    assert view(api, match_id)["version"] == version + 1
    assert events(redis_client, match_id) == logged + 1


# ----------------------------------------------------------------------------- simultaneous bids


@pytest.mark.parametrize("variant", ["HIDDEN_BIDS", "SECRET_BIDS"])
def test_simultaneous_bids_are_all_kept(api, redis_client, variant):
    players = 6
    match_id, tokens = seat_bots(api, players, variants=[variant], seed=f"bids-{variant}", firstDealer=0)
    match = settle_trump(api, match_id, tokens)
    assert match["toAct"] is None and sorted(match["awaiting"]) == list(range(players))
    version, logged = match["version"], events(redis_client, match_id)
    bids = [seat % 2 for seat in range(players)]  # round 1: 0 or 1 tricks

    answers = at_once(api, [(SUBMIT, {"m": match_id, "mv": {"bid": bids[s]}}, tokens[s]) for s in range(players)])

    assert [error_code(a) for a in answers] == [None] * players, answers
    assert events(redis_client, match_id) == logged + players
    after = view(api, match_id)
    assert after["version"] == version + players
    assert after["phase"] == "PLAY"
    for seat, token in enumerate(tokens):
        mine = view(api, match_id, token)
        shown = [s["bid"] for s in mine["seats"]]
        if variant == "HIDDEN_BIDS":  # all shown once all are in
            assert shown == bids
        else:  # SECRET_BIDS: each seat sees its own until the round ends
            assert shown == [bids[s] if s == seat else None for s in range(players)]

    # play round 1's single trick; its result lists every bid as made
    while view(api, match_id)["round"] == 1:
        now = view(api, match_id)
        actor = tokens[now["toAct"]]
        legal = view(api, match_id, actor)["legalMoves"][0]
        assert not api.submit(actor, match_id, move_of(legal)).get("errors")
    results = view(api, match_id)["roundResults"]
    assert [r["round"] for r in results] == [1]
    assert [s["bid"] for s in sorted(results[0]["seats"], key=lambda s: s["seat"])] == bids


# ----------------------------------------------------------------------------- seats


def test_concurrent_joins_seat_each_bot_exactly_once(api, redis_client):
    players = 6
    creator, _ = api.register()
    match_id = api.create_match(creator, players=players, moveTimeoutMs=LONG_TIMEOUT)
    bots = [api.register() for _ in range(players)]
    logged = events(redis_client, match_id)

    answers = at_once(api, [(JOIN, {"m": match_id}, token) for token, _ in bots])

    assert [error_code(a) for a in answers] == [None] * players, answers
    assert sorted(a["data"]["joinMatch"]["mySeat"] for a in answers) == list(range(players))
    match = view(api, match_id)
    assert match["status"] == "ACTIVE"
    assert match["version"] == 1 + players
    assert events(redis_client, match_id) == logged + players
    seated = Counter(seat["bot"]["id"] for seat in match["seats"])
    assert seated == Counter(bot_id for _, bot_id in bots)
    for (token, _), answer in zip(bots, answers, strict=True):
        assert view(api, match_id, token)["mySeat"] == answer["data"]["joinMatch"]["mySeat"]


@pytest.mark.parametrize("racers", [2, 12])
def test_bots_racing_for_one_seat(api, redis_client, racers):
    creator, _ = api.register()
    match_id = api.create_match(creator, players=3, moveTimeoutMs=LONG_TIMEOUT)
    bots = [api.register() for _ in range(racers)]
    logged = events(redis_client, match_id)

    answers = at_once(api, [(JOIN, {"m": match_id, "s": 1}, token) for token, _ in bots])

    codes = [error_code(a) for a in answers]
    assert codes.count(None) == 1, answers
    assert codes.count("BAD_INPUT") == racers - 1, answers
    for answer in answers:
        if answer.get("errors"):
            assert "seat 1 is taken" in answer["errors"][0]["message"]
            assert "free seats: [0, 2]" in answer["errors"][0]["message"]
    winner = bots[codes.index(None)][1]
    match = view(api, match_id)
    assert [s["bot"] and s["bot"]["id"] for s in match["seats"]] == [None, winner, None]
    assert match["status"] == "WAITING" and match["version"] == 2
    assert events(redis_client, match_id) == logged + 1


def test_one_bot_joining_many_times_at_once_gets_one_seat(api, redis_client):
    creator, _ = api.register()
    match_id = api.create_match(creator, players=4, moveTimeoutMs=LONG_TIMEOUT)
    token, bot_id = api.register()
    logged = events(redis_client, match_id)

    answers = at_once(api, [(JOIN, {"m": match_id}, token)] * 10)

    # a join is idempotent: every one of them answers the one seat the bot got
    assert [error_code(a) for a in answers] == [None] * 10, answers
    assert len({a["data"]["joinMatch"]["mySeat"] for a in answers}) == 1
    seats = [s["bot"]["id"] for s in view(api, match_id)["seats"] if s["bot"]]
    assert seats == [bot_id]
    assert events(redis_client, match_id) == logged + 1


def test_house_bots_added_at_once_fill_distinct_seats(api, redis_client):
    """addHouseBot races too: five calls for three free seats fill each seat once; the rest
    are told the match is no longer waiting (or that no seat is free)."""
    creator, creator_id = api.register()
    match_id = api.create_match(creator, players=4, moveTimeoutMs=LONG_TIMEOUT)
    api.join(creator, match_id, 0)  # the house bots stop at the creator's first turn
    add = "mutation($m: ID!) { addHouseBot(matchId: $m, kind: RANDOM) { id } }"

    answers = at_once(api, [(add, {"m": match_id}, creator)] * 5)

    codes = Counter(error_code(a) for a in answers)
    assert codes[None] == 3, answers
    assert set(codes) - {None} <= {"MATCH_NOT_ACTIVE", "BAD_INPUT"}, codes
    seats = view(api, match_id)["seats"]
    assert seats[0]["bot"]["id"] == creator_id
    assert [s["houseBot"] for s in seats] == [None, "RANDOM", "RANDOM", "RANDOM"]
    log = redis_client.xrange(f"{{m:{match_id}}}:events")
    joins = [entry for _, entry in log if b'"t":"join"' in entry[b"e"]]
    assert len(joins) == 4
    assert [int(entry[b"v"]) for _, entry in log] == list(range(1, len(log) + 1))


# ----------------------------------------------------------------------------- a tournament's entrants


def test_bots_joining_a_tournament_at_the_same_instant_are_all_kept_each_once(api):
    creator, _ = api.register()
    starts = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    t = api.data(CREATE_TOURNAMENT, {"i": {"name": "crowd", "format": "ROUND_ROBIN", "rounds": 1,
                                           "playersPerMatch": 4, "startsAt": starts}}, creator)["createTournament"]
    bots = [api.register() for _ in range(8)]
    try:
        answers = at_once(api, [(JOIN_TOURNAMENT, {"t": t["id"]}, token) for token, _ in bots])

        for answer in answers:
            assert answer is not None and not answer.get("errors"), answer
        entrants = [e["id"] for e in api.data(GET_TOURNAMENT, {"t": t["id"]})["tournament"]["entrants"]]
        assert sorted(entrants) == sorted(bot_id for _, bot_id in bots)  # all of them, each once
    finally:
        api.data(CANCEL_TOURNAMENT, {"t": t["id"]}, creator)


# ----------------------------------------------------------------------------- the event id guard


def test_a_commit_with_a_stale_event_id_is_refused_even_at_the_right_version(api, redis_url, redis_client):
    match_id, _ = seat_bots(api, 3)  # registered bots only: nothing moves unless this test moves it

    def stored() -> tuple[Any, ...]:
        return (*redis_client.hmget(match_key(match_id), "version", "state", "live", "eid"),
                redis_client.xlen(events_key(match_id)), redis_client.zscore(match_home_key(match_id, "deadlines"), match_id))

    async def work() -> None:
        client = open_async(redis_url, max_connections=16, timeout=10, client_name="test")
        scripts = ScriptLine(client)
        store = MatchStore(client, scripts)
        try:
            loaded = await store.load(match_id)
            assert loaded is not None
            match = loaded.match
            assert match.status is MatchStatus.ACTIVE and match.event_id == loaded.event_id
            before = stored()
            # a snapshot as if from before a failover: same version, but another latest event
            first_event = (await client.xrange(events_key(match_id), count=1))[0][0]
            assert first_event != loaded.event_id
            match.event_id = first_event
            seat, action = first_action(match)
            event = match.play(seat, action, "bot", now_ms())
            assert match.version == int(before[0]) + 1  # the version alone would let it through
            assert await store.commit(match, event) is False
            assert stored() == before  # nothing changed: version, state, event stream, deadline
            # the same move from the stored snapshot commits
            fresh = (await store.load(match_id)).match  # type: ignore[union-attr]
            event = fresh.play(seat, action, "bot", now_ms())
            assert await store.commit(fresh, event) is True
            after = stored()
            assert int(after[0]) == int(before[0]) + 1 and after[4] == before[4] + 1
            assert fresh.event_id == after[3]
        finally:
            await scripts.close()
            await client.aclose()

    try:
        asyncio.run(work())
    finally:
        redis_client.zrem(match_home_key(match_id, "deadlines"), match_id)  # nobody will play it on
