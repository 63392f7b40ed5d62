"""The REST mirror: GET /api/matches/{id} is GraphQL's `match` field for field, POST
/api/matches/{id}/moves makes moves with JSON errors, GET /api/turns is awaitTurn's
long-poll, GET /api/matches/{id}/record publishes a finished match's replayable record."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from typing import Any

import httpx

from service.store.keys import bot_channel
from tests.engine.conftest import stacked
from tests.service.arena_client import MATCH_FIELDS, Frozen, first_legal, wait_for_subscription
from wizard import MatchRecord

CREATE = "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id version } }"
AWAIT = "query($m: ID, $t: Int) { awaitTurn(matchId: $m, timeoutMs: $t) { " + MATCH_FIELDS + " } }"


# ----------------------------------------------------------------------------- helpers


# First dealer 0 turns a Wizard: seat 0 names trump, then seats 1, 2, 0 bid; seat 1 leads.
HANDS_1 = [["R5"], ["R7"], ["B3"]]
HANDS_2 = [["R9", "B1"], ["R2", "G5"], ["R3", "Y4"]]
DEALS = [stacked(HANDS_1, "W", dealer=0), stacked(HANDS_2, "G2", dealer=1)]


def headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def rest_match(api: Any, match_id: str, token: str | None = None) -> httpx.Response:
    return api.http.get(f"/api/matches/{match_id}", headers=headers(token))  # type: ignore[no-any-return]


def rest_move(api: Any, match_id: str, body: Any, token: str | None) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return api.http.post(  # type: ignore[no-any-return]
        f"/api/matches/{match_id}/moves", content=content,
        headers={**headers(token), "Content-Type": "application/json"},
    )


def rest_turns(api: Any, token: str | None, **params: Any) -> httpx.Response:
    return api.http.get("/api/turns", params=params, headers=headers(token))  # type: ignore[no-any-return]


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    return without_time_left(response.json())


def without_time_left(body: Any) -> Any:
    """A Match without ``timeLeftMs`` (checked for its range): a reading of the server's clock,
    which differs between two answers about the same version."""
    if isinstance(body, dict) and "timeLeftMs" in body:
        left = body.pop("timeLeftMs")
        assert left is None or 0 <= left <= body["moveTimeoutMs"], body
    return body


def refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Check the error's wire form: a 4xx and ``{"error": {"code", "message", ...}}``."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert error["code"] == code, body
    assert isinstance(error["message"], str) and error["message"], body
    assert "Traceback" not in response.text
    return error  # type: ignore[no-any-return]


def seated_match(api: Any, players: int = 3, **spec: Any) -> tuple[str, list[str]]:
    tokens = [api.register()[0] for _ in range(players)]
    match_id = api.data(CREATE, {"i": {"players": players, **spec}}, tokens[0])["createMatch"]["id"]
    for seat, token in enumerate(tokens):
        api.join(token, match_id, seat)
    return match_id, tokens


def scripted(api: Any, **spec: Any) -> tuple[str, list[str]]:
    return seated_match(api, 3, deals=DEALS, firstDealer=0, **spec)


def house_match(api: Any, token: str, **spec: Any) -> str:
    """A 6-seat WIZARD_JUNIOR match (6 short rounds): five house bots and the caller."""
    match_id = api.data(CREATE, {"i": {"ruleset": "WIZARD_JUNIOR", "players": 6, **spec}}, token)["createMatch"]["id"]
    for kind in ("RANDOM", "HEURISTIC", "RANDOM", "HEURISTIC", "RANDOM"):
        api.add_house_bot(token, match_id, kind)
    api.join(token, match_id)
    return match_id  # type: ignore[no-any-return]


def play_out_rest(api: Any, token: str, match_id: str) -> dict[str, Any]:
    """Play the caller's moves over REST only (long-poll, then move) until the match ends."""
    while True:
        turn = ok(rest_turns(api, token, matchId=match_id, timeoutMs=10_000))
        if turn is None:
            final = ok(rest_match(api, match_id, token))
            assert final["status"] == "FINISHED", "the house bots did not move"
            return final  # type: ignore[no-any-return]
        body = {**first_legal(turn), "expectedVersion": turn["version"]}
        answer = ok(rest_move(api, match_id, body, token))
        assert answer["version"] == turn["version"] + 1
        if answer["status"] == "FINISHED":
            return answer  # type: ignore[no-any-return]


_TYPE = "kind name ofType { kind name ofType { kind name ofType { kind name } } }"


def full_selection(api: Any, type_name: str) -> str:
    """A selection of every field of an object type (recursively), leaving out fields with
    arguments and a Bot's fields but its id and name, which the REST mirror does not carry."""
    fields = api.data(
        "query($n: String!) { __type(name: $n) { fields { name args { name } type { " + _TYPE + " } } } }",
        {"n": type_name},
    )["__type"]["fields"]
    parts = []
    for field in fields:
        if field["args"] or (type_name == "Bot" and field["name"] not in ("id", "name")):
            continue
        kind = field["type"]
        while kind["kind"] in ("NON_NULL", "LIST"):
            kind = kind["ofType"]
        if kind["kind"] == "OBJECT":
            parts.append(f"{field['name']} {{ {full_selection(api, kind['name'])} }}")
        else:
            parts.append(field["name"])
    return " ".join(parts)


def same_everywhere(api: Any, match_id: str, tokens: Sequence[str | None], selection: str) -> None:
    """For each caller, REST's match equals GraphQL's, with MATCH_FIELDS and with every field."""
    for token in tokens:
        graphql = api.match(match_id, token)
        every = api.data("query($m: ID!) { match(id: $m) { " + selection + " } }", {"m": match_id}, token)["match"]
        rest = ok(rest_match(api, match_id, token))
        every = without_time_left(every)
        assert graphql["version"] == rest["version"]
        assert rest == graphql
        assert rest == every
        for seat in rest["seats"]:
            assert seat["bot"] is None or set(seat["bot"]) == {"id", "name"}


# ----------------------------------------------------------------------------- GET /api/matches/{id}


def test_get_match_equals_graphql_field_for_field(api):
    selection = full_selection(api, "Match")
    tokens = [api.register()[0] for _ in range(3)]
    outsider, _ = api.register()
    callers = [*tokens, outsider, None]
    match_id = api.data(CREATE, {"i": {"players": 3, "deals": DEALS, "firstDealer": 0}}, tokens[0])["createMatch"]["id"]
    same_everywhere(api, match_id, callers, selection)  # WAITING, empty
    api.join(tokens[0], match_id, 0)
    same_everywhere(api, match_id, callers, selection)  # WAITING, one seat taken
    api.join(tokens[1], match_id, 1)
    api.join(tokens[2], match_id, 2)
    same_everywhere(api, match_id, callers, selection)  # CHOOSE_TRUMP
    assert api.match(match_id, tokens[0])["phase"] == "CHOOSE_TRUMP"
    for seat, move in ((0, {"trump": "RED"}), (1, {"bid": 1}), (2, {"bid": 0}), (0, {"bid": 0})):
        assert not api.submit(tokens[seat], match_id, move).get("errors")
    same_everywhere(api, match_id, callers, selection)  # PLAY
    for seat, card in ((1, "R7"), (2, "B3"), (0, "R5")):
        assert not api.submit(tokens[seat], match_id, {"card": card}).get("errors")
    for seat, bid in ((2, 1), (0, 1), (1, 0)):
        assert not api.submit(tokens[seat], match_id, {"bid": bid}).get("errors")
    assert not api.submit(tokens[2], match_id, {"card": "R3"}).get("errors")
    view = api.match(match_id, tokens[0])
    assert view["round"] == 2 and view["lastTrick"] and view["roundResults"] and view["currentTrick"]
    same_everywhere(api, match_id, callers, selection)  # mid-trick, round 2


def test_get_match_after_the_end_equals_graphql(api):
    token, _ = api.register()
    match_id = house_match(api, token)
    final = play_out_rest(api, token, match_id)
    assert final["status"] == "FINISHED" and final["seed"] and final["winners"]
    same_everywhere(api, match_id, [token, None], full_selection(api, "Match"))


def test_get_match_errors(api):
    token, _ = api.register()
    for match_id in ("no-such-match", "0" * 16, "x" * 200):
        refused(rest_match(api, match_id, token), 404, "NOT_FOUND")
        refused(rest_match(api, match_id), 404, "NOT_FOUND")
    match_id = api.create_match(token, players=3)
    refused(rest_match(api, match_id, "not-a-token"), 401, "UNAUTHENTICATED")
    response = api.http.get(f"/api/matches/{match_id}", headers={"Authorization": f"Basic {token}"})
    refused(response, 401, "UNAUTHENTICATED")


# ----------------------------------------------------------------------------- POST /api/matches/{id}/moves


def test_post_moves_of_every_kind(api):
    match_id, tokens = scripted(api)
    version = api.match(match_id)["version"]
    script = [
        (0, {"trump": "BLUE"}),
        (1, {"bid": 1}),
        (2, {"bid": 0}),
        (0, {"bid": 0}),
        (1, {"card": "R7"}),
        (2, {"card": "B3"}),  # blue is trump: seat 2 trumps the red lead
        (0, {"card": "R5"}),
    ]
    for seat, move in script:
        answer = ok(rest_move(api, match_id, {**move, "expectedVersion": version}, tokens[seat]))
        assert answer["version"] == version + 1
        version = answer["version"]
        assert answer["mySeat"] == seat
        assert answer == ok(rest_match(api, match_id, tokens[seat]))  # the mover's view after the move
        assert answer == api.match(match_id, tokens[seat])
        if "trump" in move:
            assert answer["trumpSuit"] == "BLUE" and answer["phase"] == "BID"
        if "bid" in move:
            assert answer["seats"][seat]["bid"] == move["bid"]
    assert answer["round"] == 2
    assert answer["lastTrick"] == {
        "leader": 1, "winner": 2,
        "plays": [{"seat": 1, "card": "R7"}, {"seat": 2, "card": "B3"}, {"seat": 0, "card": "R5"}],
    }
    assert [s["points"] for s in answer["roundResults"][0]["seats"]] == [20, -10, -10]
    # expectedVersion is optional
    assert ok(rest_move(api, match_id, {"bid": 0}, tokens[2]))["version"] == version + 1


def test_post_move_errors(api):
    match_id, tokens = scripted(api)
    outsider, _ = api.register()
    frozen = Frozen(api, match_id, tokens)
    version = frozen.views[0]["version"]
    dealer = tokens[0]  # CHOOSE_TRUMP: the dealer's move
    cases: list[tuple[Any, str | None, int, str]] = [
        (b"{not json", dealer, 400, "BAD_INPUT"),
        (b"", dealer, 400, "BAD_INPUT"),
        (b"\xff\xfe{}", dealer, 400, "BAD_INPUT"),
        (b'{"trump": "BLUE"', dealer, 400, "BAD_INPUT"),
        ([{"trump": "BLUE"}], dealer, 400, "BAD_INPUT"),
        (2, dealer, 400, "BAD_INPUT"),
        ("BLUE", dealer, 400, "BAD_INPUT"),
        (None, dealer, 400, "BAD_INPUT"),
        ({}, dealer, 400, "BAD_INPUT"),
        ({"expectedVersion": version}, dealer, 400, "BAD_INPUT"),
        ({"trump": "BLUE", "bid": 0}, dealer, 400, "BAD_INPUT"),
        ({"trump": "BLUE", "card": "R5"}, dealer, 400, "BAD_INPUT"),
        ({"bid": 0, "card": "R5"}, dealer, 400, "BAD_INPUT"),
        ({"colour": "BLUE"}, dealer, 400, "BAD_INPUT"),
        ({"trump": "BLUE", "extra": 1}, dealer, 400, "BAD_INPUT"),
        ({"trump": None}, dealer, 400, "BAD_INPUT"),
        ({"trump": "PURPLE"}, dealer, 400, "BAD_INPUT"),
        ({"trump": "blue"}, dealer, 400, "BAD_INPUT"),
        ({"trump": ["BLUE"]}, dealer, 400, "BAD_INPUT"),
        ({"bid": "1"}, dealer, 400, "BAD_INPUT"),
        ({"bid": True}, dealer, 400, "BAD_INPUT"),
        ({"bid": 1.5}, dealer, 400, "BAD_INPUT"),
        ({"card": 7}, dealer, 400, "BAD_INPUT"),
        ({"card": "X9"}, dealer, 400, "BAD_INPUT"),
        ({"trump": "BLUE", "expectedVersion": "1"}, dealer, 400, "BAD_INPUT"),
        ({"trump": "BLUE", "expectedVersion": True}, dealer, 400, "BAD_INPUT"),
        ({"trump": "BLUE", "expectedVersion": 1.0}, dealer, 400, "BAD_INPUT"),
        ({"trump": "BLUE", "expectedVersion": version - 1}, dealer, 409, "STALE_VERSION"),
        ({"trump": "BLUE", "expectedVersion": version + 1}, dealer, 409, "STALE_VERSION"),
        ({"trump": "BLUE"}, None, 401, "UNAUTHENTICATED"),
        ({"trump": "BLUE"}, "not-a-token", 401, "UNAUTHENTICATED"),
        ({"trump": "BLUE"}, outsider, 403, "FORBIDDEN"),
        ({"trump": "BLUE"}, tokens[1], 409, "NOT_YOUR_TURN"),
        ({"bid": 0}, tokens[2], 409, "NOT_YOUR_TURN"),
        ({"bid": 0}, dealer, 422, "ILLEGAL_MOVE"),
        ({"card": "R5"}, dealer, 422, "ILLEGAL_MOVE"),
    ]
    for body, token, status, code in cases:
        error = refused(rest_move(api, match_id, body, token), status, code)
        if code == "ILLEGAL_MOVE":
            assert error["legalMoves"] == [{"bid": None, "card": None, "trump": s} for s in ("BLUE", "GREEN", "RED", "YELLOW")]
            assert all(s in error["message"] for s in ("BLUE", "GREEN", "RED", "YELLOW"))
        frozen.check()
    refused(rest_move(api, "no-such-match", {"trump": "BLUE"}, dealer), 404, "NOT_FOUND")
    too_big = json.dumps({"trump": "BLUE", "pad": "x" * 200_000}).encode()
    refused(rest_move(api, match_id, too_big, dealer), 413, "LIMIT_EXCEEDED")
    frozen.check()
    # after all that, the move is still the dealer's to make
    assert ok(rest_move(api, match_id, {"trump": "BLUE", "expectedVersion": version}, dealer))["version"] == version + 1


def test_post_move_before_the_start(api):
    tokens = [api.register()[0] for _ in range(2)]
    match_id = api.data(CREATE, {"i": {"players": 3}}, tokens[0])["createMatch"]["id"]
    api.join(tokens[0], match_id, 0)
    frozen = Frozen(api, match_id, tokens)
    refused(rest_move(api, match_id, {"bid": 0}, tokens[0]), 409, "MATCH_NOT_ACTIVE")
    refused(rest_move(api, match_id, {"bid": 0}, tokens[1]), 403, "FORBIDDEN")
    frozen.check()


# ----------------------------------------------------------------------------- GET /api/turns


def test_turns_answers_at_once_when_it_is_your_turn(api):
    match_id, tokens = scripted(api)
    view = ok(rest_turns(api, tokens[0], matchId=match_id, timeoutMs=10_000))
    assert view is not None and view == ok(rest_match(api, match_id, tokens[0]))
    assert view["legalMoves"] and view["mySeat"] == 0
    # without matchId: any of the caller's matches (this bot has only this one)
    assert ok(rest_turns(api, tokens[0], timeoutMs=10_000)) == view


def test_turns_without_a_match_answers_for_any_of_the_callers_matches(api):
    me, _ = api.register()
    others = [api.register()[0] for _ in range(4)]
    waiting_id = api.data(CREATE, {"i": {"players": 3, "deals": DEALS, "firstDealer": 0}}, me)["createMatch"]["id"]
    for seat, token in enumerate((others[0], me, others[1])):  # seat 1: not my turn (seat 0 names trump)
        api.join(token, waiting_id, seat)
    mine_id = api.data(CREATE, {"i": {"players": 3, "deals": DEALS, "firstDealer": 0}}, me)["createMatch"]["id"]
    for seat, token in enumerate((me, others[2], others[3])):  # seat 0: my turn
        api.join(token, mine_id, seat)
    view = ok(rest_turns(api, me, timeoutMs=10_000))
    assert view is not None and view["id"] == mine_id and view["mySeat"] == 0
    assert ok(rest_turns(api, me, matchId=waiting_id, timeoutMs=100)) is None


def test_turns_is_null_after_the_timeout_when_it_is_not_your_turn(api):
    match_id, tokens = scripted(api)
    response = rest_turns(api, tokens[1], matchId=match_id, timeoutMs=200)
    assert ok(response) is None and response.text.strip() == "null"
    assert ok(rest_turns(api, tokens[2], timeoutMs=0)) is None
    lonely, _ = api.register()  # a bot in no match at all
    assert ok(rest_turns(api, lonely, timeoutMs=100)) is None


def test_turns_wakes_when_it_becomes_your_turn(api):
    match_id, tokens = scripted(api)
    answers: list[Any] = []

    def poll() -> None:
        with httpx.Client(base_url=api.base, timeout=60) as client:
            answers.append(ok(client.get(
                "/api/turns", params={"matchId": match_id, "timeoutMs": 30_000}, headers=headers(tokens[1]),
            )))

    waiter = threading.Thread(target=poll)
    waiter.start()
    moved = ok(rest_move(api, match_id, {"trump": "GREEN"}, tokens[0]))
    waiter.join(60)
    assert not waiter.is_alive()
    [view] = answers
    assert view is not None, "the long-poll did not wake up for the new turn"
    assert view["version"] == moved["version"] and view["mySeat"] == 1
    assert view["legalMoves"] == [{"bid": 0, "card": None, "trump": None}, {"bid": 1, "card": None, "trump": None}]


def test_turns_without_a_match_wakes_when_the_caller_is_seated_in_a_new_one(api, redis_client):
    me, my_id = api.register()
    others = [api.register()[0] for _ in range(2)]
    answers: list[Any] = []

    def poll() -> None:
        with httpx.Client(base_url=api.base, timeout=60) as client:
            answers.append(ok(client.get("/api/turns", params={"timeoutMs": 30_000}, headers=headers(me))))

    waiter = threading.Thread(target=poll)
    waiter.start()
    # wait until the long-poll follows the bot (it has no match yet), so that the new seat
    # must wake it: no sleeping, the server's subscription is the event
    wait_for_subscription(redis_client, bot_channel(my_id))
    match_id = api.data(CREATE, {"i": {"players": 3, "deals": DEALS, "firstDealer": 0}}, me)["createMatch"]["id"]
    api.join(others[0], match_id, 1)
    api.join(others[1], match_id, 2)
    api.join(me, match_id, 0)  # the last seat: the match starts, seat 0 names trump
    waiter.join(60)
    assert not waiter.is_alive()
    [view] = answers
    assert view is not None, "the long-poll did not wake up for the new match"
    assert view["id"] == match_id and view["mySeat"] == 0 and view["phase"] == "CHOOSE_TRUMP"


def test_turns_errors(api):
    match_id, tokens = scripted(api)
    outsider, _ = api.register()
    for bad in ("abc", "-1", "1.5", "", "1e3", "0x10"):
        error = refused(rest_turns(api, tokens[0], matchId=match_id, timeoutMs=bad), 400, "BAD_INPUT")
        assert "timeoutMs" in error["message"]
    refused(rest_turns(api, None, matchId=match_id, timeoutMs=0), 401, "UNAUTHENTICATED")
    refused(rest_turns(api, "not-a-token", timeoutMs=0), 401, "UNAUTHENTICATED")
    refused(rest_turns(api, outsider, matchId=match_id, timeoutMs=0), 403, "FORBIDDEN")
    refused(rest_turns(api, tokens[0], matchId="no-such-match", timeoutMs=0), 404, "NOT_FOUND")


# ----------------------------------------------------------------------------- GET /api/matches/{id}/record


def test_no_record_before_the_end(api):
    token, _ = api.register()
    match_id = api.create_match(token, players=3)
    refused(api.http.get(f"/api/matches/{match_id}/record"), 409, "MATCH_NOT_ACTIVE")
    match_id, tokens = scripted(api)
    for caller in (tokens[0], None):
        refused(api.http.get(f"/api/matches/{match_id}/record", headers=headers(caller)), 409, "MATCH_NOT_ACTIVE")
    refused(api.http.get("/api/matches/no-such-match/record"), 404, "NOT_FOUND")


def check_record(api: Any, match_id: str, final: dict[str, Any]) -> dict[str, Any]:
    record = ok(api.http.get(f"/api/matches/{match_id}/record"))  # public: no token needed
    assert hashlib.sha256(f"{record['salt']}:{record['seed']}".encode()).hexdigest() == final["seedHash"]
    assert record["seed"] == final["seed"] and record["salt"] == final["salt"]
    scores = tuple(s["score"] for s in final["seats"])
    assert tuple(record["scores"]) == scores
    replayed = MatchRecord.from_dict(record).replay()
    assert replayed.is_finished
    assert replayed.scores == scores
    assert list(replayed.outcome.winners) == final["winners"]
    # the record's moves are the match's: every seat's move, in order
    assert len(record["moves"]) == final["movesMade"]
    return record  # type: ignore[no-any-return]


def test_the_record_of_a_finished_match_replays_to_its_scores(api):
    token, _ = api.register()
    seed = "record-" + os.urandom(4).hex()
    match_id = house_match(api, token, seed=seed)
    final = play_out_rest(api, token, match_id)
    record = check_record(api, match_id, final)
    assert record["seed"] == seed
    # the same record for everyone
    assert ok(api.http.get(f"/api/matches/{match_id}/record", headers=headers(token))) == record


def test_the_record_of_a_stacked_match_replays(api):
    token, _ = api.register()
    hands = [["G1"], ["G2"], ["G3"], ["G4"], ["G5"], ["W"]]
    deals = [stacked(hands, "Y8", dealer=5, deck="JUNIOR")]
    match_id = house_match(api, token, deals=deals, firstDealer=5)
    assert ok(rest_match(api, match_id, token))["hand"] == ["W"]
    final = play_out_rest(api, token, match_id)
    record = check_record(api, match_id, final)
    assert record["config"]["deals"][0] == deals[0]
    assert final["roundResults"][0]["seats"][5]["tricks"] == 1  # the Wizard took round 1
