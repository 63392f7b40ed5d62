"""Subscriptions over a real WebSocket (graphql-transport-ws): matchUpdates, myTurns, the
token in connection_init, the init timeout, the cap on operations, the refused legacy
protocol."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import pytest

from tests.service.arena_client import first_legal
from tests.service.ws_client import Closed, Completed, GraphQLWS, OperationError, play_along

VIEW = """
id version status phase round toAct awaiting mySeat hand seed
legalMoves { bid card trump }
seats { seat bid timeouts hand }
currentTrick { seat card }
"""
MATCH_UPDATES = "subscription($m: ID!) { matchUpdates(matchId: $m) { " + VIEW + " } }"
MY_TURNS = "subscription { myTurns { " + VIEW + " } }"


@pytest.fixture(scope="module")
def limited_api(start_api: Any) -> Any:
    """An API process with a 1 s connection_init timeout and 2 operations per connection."""
    return start_api(ARENA_WS_INIT_TIMEOUT_SECONDS="1", ARENA_WS_MAX_OPERATIONS="2")


def house_match(api: Any, token: str, houses: int = 2, **spec: Any) -> str:
    """A match of ``houses`` house bots and one free seat (WIZARD_JUNIOR: short matches)."""
    spec.setdefault("ruleset", "WIZARD_JUNIOR")
    spec.setdefault("moveTimeoutMs", 60_000)
    match_id = api.create_match(token, players=houses + 1, **spec)
    for _ in range(houses):
        api.add_house_bot(token, match_id, "RANDOM")
    return match_id


def play_to_the_end(api: Any, token: str, match_id: str) -> dict[str, Any]:
    """Play the bot's moves (first legal ones) through awaitTurn until the match is over."""
    while True:
        turn = api.data(
            "query($m: ID!) { awaitTurn(matchId: $m, timeoutMs: 10000) { status version legalMoves { bid card trump } } }",
            {"m": match_id}, token,
        )["awaitTurn"]
        if turn is None:  # the match is over (awaitTurn answers at once) or stalled (fails below)
            match = api.match(match_id, token)
            assert match["status"] == "FINISHED", match
            return match
        body = api.submit(token, match_id, first_legal(turn), turn["version"])
        assert not body.get("errors"), body


def collect_until_complete(ws: GraphQLWS, op: str, field: str, timeout: float = 30) -> list[dict[str, Any]]:
    """Every result of the operation until it completes (each within ``timeout``)."""
    seen = []
    while True:
        try:
            seen.append(ws.data(op, field, timeout))
        except Completed:
            return seen


# ------------------------------------------------------------------ matchUpdates
def test_match_updates_yields_every_version_to_a_seated_bot_and_completes_at_the_end(api):
    token, _ = api.register()
    match_id = house_match(api, token, houses=5)  # 5 house bots: bursts of fast moves
    with GraphQLWS(api.ws_url) as ws:
        ws.init(token)
        op = ws.subscribe(MATCH_UPDATES, {"m": match_id})
        first = ws.data(op, "matchUpdates")
        assert first["status"] == "WAITING" and first["version"] == api.match(match_id)["version"]
        assert first["mySeat"] is None  # not seated yet

        seat = api.join(token, match_id)["mySeat"]
        views = play_along(ws, op, first, api, token, match_id, seat)

    versions = [v["version"] for v in views]
    assert versions == list(range(first["version"], first["version"] + len(views))), "a version was skipped"
    final = views[-1]
    assert final["status"] == "FINISHED" and final["seed"] is not None
    assert final["version"] == api.match(match_id)["version"]
    active = [v for v in views if v["status"] == "ACTIVE"]
    assert len(active) > 100
    for view in views[views.index(active[0]):]:  # the seated bot's own view: its hand, nobody else's
        assert view["mySeat"] == seat
        assert view["hand"] is not None and view["seats"][seat]["hand"] == view["hand"]
        assert all(s["hand"] is None for s in view["seats"] if s["seat"] != seat)
    assert any(view["hand"] for view in active)


def test_a_spectator_subscription_never_shows_a_card_of_a_live_match(api):
    token, _ = api.register()
    outsider, _ = api.register()
    match_id = house_match(api, token, houses=3)
    with GraphQLWS(api.ws_url) as anonymous, GraphQLWS(api.ws_url) as other_bot:
        anonymous.init()
        other_bot.init(outsider)
        ops = [(anonymous, anonymous.subscribe(MATCH_UPDATES, {"m": match_id})),
               (other_bot, other_bot.subscribe(MATCH_UPDATES, {"m": match_id}))]
        for ws, op in ops:  # subscribed before the match starts
            assert ws.data(op, "matchUpdates")["status"] == "WAITING"
        api.join(token, match_id)
        player = threading.Thread(target=play_to_the_end, args=(api, token, match_id), daemon=True)
        player.start()
        for ws, op in ops:
            views = collect_until_complete(ws, op, "matchUpdates")
            assert views[-1]["status"] == "FINISHED" and views[-1]["seed"] is not None
            live = [v for v in views if v["status"] != "FINISHED"]
            assert len(live) > 50
            for view in live:
                assert view["mySeat"] is None and view["hand"] is None and view["legalMoves"] == []
                assert all(s["hand"] is None for s in view["seats"]), view
                assert view["seed"] is None
            # ... while the public part of the play is there to see
            assert any(v["currentTrick"] for v in live)
        player.join(10)
        assert not player.is_alive()


def test_match_updates_of_an_unknown_match_is_not_found(api):
    with GraphQLWS(api.ws_url) as ws:
        ws.init()
        op = ws.subscribe(MATCH_UPDATES, {"m": "no-such-match"})
        payload = ws.next(op)
    assert payload["data"] is None
    assert [e["extensions"]["code"] for e in payload["errors"]] == ["NOT_FOUND"]


# ------------------------------------------------------------------ myTurns
def test_my_turns_yields_every_turn_in_every_match_and_plays_matches_to_the_end(api):
    token, _ = api.register()
    with GraphQLWS(api.ws_url) as ws:
        ws.init(token)
        op = ws.subscribe(MY_TURNS)
        # Matches joined after subscribing: two at once.
        matches = [house_match(api, token, houses=2), house_match(api, token, houses=3)]
        seats = {m: api.join(token, m)["mySeat"] for m in matches}
        status = dict.fromkeys(matches, "ACTIVE")
        turns: dict[str, list[int]] = {m: [] for m in matches}
        while any(s == "ACTIVE" for s in status.values()):
            turn = ws.data(op, "myTurns", timeout=10)
            match_id = turn["id"]
            assert match_id in status and status[match_id] == "ACTIVE", turn
            assert turn["mySeat"] == seats[match_id] and seats[match_id] in turn["awaiting"]
            assert turn["legalMoves"] and turn["hand"] is not None
            assert not turns[match_id] or turn["version"] > turns[match_id][-1]  # each state once
            turns[match_id].append(turn["version"])
            body = api.submit(token, match_id, first_legal(turn), turn["version"])
            assert not body.get("errors"), body  # the view was current: nobody else could move
            after = body["data"]["submitMove"]
            last_card = after["round"] == after["rounds"] and after["phase"] == "PLAY" and after["hand"] == []
            status[match_id] = "DONE" if after["status"] != "ACTIVE" or last_card else "ACTIVE"
    for match_id in matches:
        # awaitTurn answers null as soon as the match is over (the house bots may play last).
        assert api.data(
            "query($m: ID!) { awaitTurn(matchId: $m, timeoutMs: 10000) { id } }", {"m": match_id}, token
        )["awaitTurn"] is None
        match = api.match(match_id, token)
        assert match["status"] == "FINISHED" and match["seats"][seats[match_id]]["timeouts"] == 0
        assert len(turns[match_id]) > 20


def test_my_turns_without_a_token_is_unauthenticated_but_match_updates_works(api):
    token, _ = api.register()
    match_id = api.create_match(token)
    with GraphQLWS(api.ws_url) as ws:
        ws.init()  # no token: a spectator's connection
        updates = ws.subscribe(MATCH_UPDATES, {"m": match_id})
        assert ws.data(updates, "matchUpdates")["id"] == match_id
        turns = ws.subscribe(MY_TURNS)
        message = ws.message(turns)
        errors = message["payload"] if message["type"] == "error" else message["payload"].get("errors")
        assert errors and errors[0]["extensions"]["code"] == "UNAUTHENTICATED", message
        if message["type"] == "next":
            assert message["payload"]["data"] is None
            assert ws.message(turns)["type"] == "complete"


# ------------------------------------------------------------------ connection rules
def test_a_bad_token_in_connection_init_closes_the_connection_with_4403(api):
    with GraphQLWS(api.ws_url) as ws:
        ws.send({"type": "connection_init", "payload": {"token": "not-a-token"}})
        closed = ws.wait_closed()
    assert closed.code == 4403


def test_a_token_that_is_not_a_string_closes_the_connection_with_4403(api):
    with GraphQLWS(api.ws_url) as ws:
        ws.send({"type": "connection_init", "payload": {"token": 12345}})
        assert ws.wait_closed().code == 4403


def test_the_token_in_connection_init_authenticates_my_turns(api):
    token, _ = api.register()
    match_id = house_match(api, token)
    with GraphQLWS(api.ws_url) as ws:
        ack = ws.init(token)
        assert ack["type"] == "connection_ack"
        op = ws.subscribe(MY_TURNS)
        seat = api.join(token, match_id)["mySeat"]
        turn = ws.data(op, "myTurns")
        assert turn["id"] == match_id and turn["mySeat"] == seat


def test_a_connection_without_connection_init_is_closed_with_4408(limited_api):
    with GraphQLWS(limited_api.ws_url) as ws:
        started = time.monotonic()
        closed = ws.wait_closed(timeout=10)
    assert closed.code == 4408
    assert 0.8 <= time.monotonic() - started < 5


def test_a_connection_that_inits_in_time_stays_open(limited_api):
    token, _ = limited_api.register()
    match_id = limited_api.create_match(token)
    with GraphQLWS(limited_api.ws_url) as ws:
        ws.init(token)
        op = ws.subscribe(MATCH_UPDATES, {"m": match_id})
        ws.data(op, "matchUpdates")
        with pytest.raises(TimeoutError):  # past the init timeout: nothing happens, no close
            ws.message(op, timeout=1.5)
        again = ws.subscribe(MATCH_UPDATES, {"m": match_id})
        assert ws.data(again, "matchUpdates")["id"] == match_id


def test_a_third_concurrent_operation_is_refused_with_the_cap_at_two(limited_api):
    token, _ = limited_api.register()
    match_id = limited_api.create_match(token)
    with GraphQLWS(limited_api.ws_url) as ws:
        ws.init(token)
        first = ws.subscribe(MATCH_UPDATES, {"m": match_id})
        second = ws.subscribe(MATCH_UPDATES, {"m": match_id})
        for op in (first, second):
            assert ws.data(op, "matchUpdates")["id"] == match_id
        third = ws.subscribe(MATCH_UPDATES, {"m": match_id})
        with pytest.raises(OperationError) as refused:
            ws.next(third)
        assert refused.value.codes == ["LIMIT_EXCEEDED"]
        # The cap counts operations at once: completing one makes room for another.
        ws.complete(first)
        fourth = ws.subscribe(MATCH_UPDATES, {"m": match_id})
        assert ws.data(fourth, "matchUpdates")["id"] == match_id


def test_the_legacy_graphql_ws_protocol_is_refused(api):
    with GraphQLWS(api.ws_url, subprotocols=("graphql-ws",)) as ws:
        assert ws.ws.subprotocol is None  # not agreed to
        with pytest.raises(Closed) as closed:
            ws.init(timeout=5)  # never acknowledged
    assert closed.value.code == 4406


def test_subscriptions_end_with_their_connection(start_api):
    """A subscription whose client has gone waits no more: nothing is left that could hold a
    Redis connection, or the server's shutdown, while its match stays quiet."""
    own = start_api()
    token, _ = own.register()
    match_id = own.create_match(token)  # never started: nothing will ever wake its waiters
    for _ in range(12):
        with GraphQLWS(own.ws_url) as ws:
            ws.init(token)
            updates = ws.subscribe(MATCH_UPDATES, {"m": match_id})
            ws.subscribe(MY_TURNS)
            ws.data(updates, "matchUpdates")
    own.close()
    own.process.popen.terminate()
    own.process.popen.wait(timeout=8)  # a graceful stop waits for every connection's tasks
    assert own.process.popen.returncode in (0, -signal.SIGTERM)  # uvicorn re-raises the signal
