"""Bad input of every kind. Each is answered with one of API.md's error codes and a message
that says what was wrong (and what to do), never with a 5xx or a traceback, and none of them
changes anything: the match's Redis hash, its event stream and its deadline stay as they were.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest

from service.store.keys import match_home_key

CODES = {
    "UNAUTHENTICATED", "FORBIDDEN", "NOT_FOUND", "BAD_INPUT", "NOT_YOUR_TURN", "ILLEGAL_MOVE",
    "STALE_VERSION", "MATCH_NOT_ACTIVE", "RATE_LIMITED", "LIMIT_EXCEEDED",
}
SUBMIT = (
    "mutation($m: ID!, $mv: MoveInput!, $v: Int) "
    "{ submitMove(matchId: $m, move: $mv, expectedVersion: $v) { id version } }"
)
CREATE = "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id } }"
JOIN = "mutation($m: ID!, $s: Int) { joinMatch(matchId: $m, seat: $s) { id version } }"
ADD_HOUSE = "mutation($m: ID!, $k: HouseBotKind!) { addHouseBot(matchId: $m, kind: $k) { id version } }"
VIEW = "query($m: ID!) { match(id: $m) { id version status phase toAct legalMoves { bid card trump } } }"
LONG_TIMEOUT = 600_000  # no deadline falls due while a test runs, whatever worker is about


# ----------------------------------------------------------------------------- helpers


def no_traceback(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text, text


def headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def checked(response: httpx.Response) -> httpx.Response:
    """Every answer: no server error, no traceback, JSON."""
    assert response.status_code < 500, (response.status_code, response.text)
    no_traceback(response.text)
    assert response.headers["content-type"].startswith("application/json"), response.text
    return response


def graphql_error(response: httpx.Response, code: str, *fragments: str) -> dict[str, Any]:
    """The first GraphQL error of a response, which must carry ``code`` and say ``fragments``."""
    body = checked(response).json()
    assert body.get("errors"), body
    for error in body["errors"]:
        assert error["extensions"]["code"] in CODES, error
        assert error["message"].strip(), error
    error = body["errors"][0]
    assert error["extensions"]["code"] == code, body
    for fragment in fragments:
        assert fragment.lower() in error["message"].lower(), (fragment, error["message"])
    if body.get("data") is not None:  # a failed mutation field is null
        assert all(value is None for value in body["data"].values()), body
    return error


def gql(api: Any, query: str, variables: dict[str, Any] | None = None, token: str | None = None,
        extra_headers: dict[str, str] | None = None) -> httpx.Response:
    return api.http.post(
        "/graphql", json={"query": query, "variables": variables or {}},
        headers={**headers(token), **(extra_headers or {})},
    )


def rest_error(response: httpx.Response, status: int, code: str, *fragments: str) -> dict[str, Any]:
    checked(response)
    assert response.status_code == status, (response.status_code, response.text)
    error = response.json()["error"]
    assert error["code"] == code, error
    assert error["message"].strip(), error
    for fragment in fragments:
        assert fragment.lower() in error["message"].lower(), (fragment, error["message"])
    return error


def snapshot(redis_client: Any, match_id: str) -> tuple[Any, ...]:
    """Everything Redis holds for a match: its hash, its event stream, its deadline."""
    events = f"{{m:{match_id}}}:events"
    return (
        redis_client.hgetall(f"{{m:{match_id}}}:match"),
        redis_client.xlen(events),
        redis_client.xrevrange(events, count=1),
        redis_client.zscore(match_home_key(match_id, "deadlines"), match_id),
    )


def match_count(redis_client: Any) -> int:
    return sum(1 for _ in redis_client.scan_iter(match="{m:*}:match", count=1000))


def full_deck() -> list[str]:
    return [f"{s}{r}" for s in "BGRY" for r in range(1, 14)] + ["W"] * 4 + ["J"] * 4


def stacked(hands: Sequence[Sequence[str]], trump: str, dealer: int) -> list[str]:
    """Round 1's whole deck in dealing order (RULES.md): seat ``i`` gets ``hands[i]``."""
    n = len(hands)
    order = [hands[(dealer + 1 + k) % n][k // n] for k in range(n * len(hands[0]))] + [trump]
    rest = Counter(full_deck())
    rest.subtract(order)
    for card in full_deck():
        if rest[card] > 0:
            rest[card] -= 1
            order.append(card)
    return order


class Table:
    """A live 3-seat match of registered bots: dealer 0, round 1 stacked, so seat 0 names
    trump first when a Wizard is turned and seat 1 bids first otherwise."""

    def __init__(self, api: Any, trump_card: str = "Y7") -> None:
        self.api = api
        self.tokens = [api.register()[0] for _ in range(3)]
        self.id = api.create_match(
            self.tokens[0], players=3, firstDealer=0, moveTimeoutMs=LONG_TIMEOUT,
            deals=[stacked([["R5"], ["R7"], ["B3"]], trump_card, dealer=0)],
        )
        for seat, token in enumerate(self.tokens):
            api.join(token, self.id, seat)
        self.view = self.state(self.tokens[0])
        assert self.view["status"] == "ACTIVE"

    def state(self, token: str | None = None) -> dict[str, Any]:
        return self.api.data(VIEW, {"m": self.id}, token)["match"]  # type: ignore[no-any-return]

    @property
    def actor(self) -> str:
        return self.tokens[self.view["toAct"]]

    def bystander(self) -> str:
        return self.tokens[(self.view["toAct"] + 1) % 3]

    def submit(self, move: Any, token: str | None = None, version: int | None = None, **kw: Any) -> httpx.Response:
        return gql(self.api, SUBMIT, {"m": self.id, "mv": move, "v": version}, token or self.actor, **kw)


@pytest.fixture
def table(api: Any) -> Table:
    table = Table(api)
    assert table.view["phase"] == "BID" and table.view["toAct"] == 1
    return table


@pytest.fixture
def unchanged(redis_client: Any) -> Iterator[Any]:
    """``unchanged(match_id)`` notes the match's Redis state; at the end of the test it must
    be the same (also checked on demand by calling ``unchanged.check()``)."""

    class Watch:
        def __init__(self) -> None:
            self.before: dict[str, tuple[Any, ...]] = {}

        def __call__(self, match_id: str) -> None:
            self.before[match_id] = snapshot(redis_client, match_id)

        def check(self) -> None:
            for match_id, before in self.before.items():
                assert snapshot(redis_client, match_id) == before, f"match {match_id} changed"

    watch = Watch()
    yield watch
    watch.check()


# ----------------------------------------------------------------------------- moves


@pytest.mark.parametrize(
    ("move", "code", "fragments"),
    [
        ({"bid": 5}, "ILLEGAL_MOVE", ("legal moves", "bid 0", "bid 1")),
        ({"bid": 2}, "ILLEGAL_MOVE", ("legal moves",)),
        ({"bid": -1}, "ILLEGAL_MOVE", ("legal moves",)),
        ({"card": "X9"}, "BAD_INPUT", ("not a card code",)),
        ({"card": "R14"}, "BAD_INPUT", ("not a card code",)),
        ({"card": ""}, "BAD_INPUT", ("not a card code",)),
        ({"card": "w"}, "BAD_INPUT", ("not a card code",)),
        ({"card": "R7"}, "ILLEGAL_MOVE", ("legal moves",)),  # its own card, but it is time to bid
        ({"card": "B3"}, "ILLEGAL_MOVE", ("legal moves",)),  # another seat's card
        ({"trump": "RED"}, "ILLEGAL_MOVE", ("legal moves",)),  # trump outside CHOOSE_TRUMP
        ({"bid": 1, "card": "R7"}, "BAD_INPUT", ("exactly one",)),
        ({"bid": 0, "trump": "BLUE"}, "BAD_INPUT", ("exactly one",)),
        ({}, "BAD_INPUT", ("exactly one",)),
        ({"bid": None, "card": None, "trump": None}, "BAD_INPUT", ("exactly one",)),
        ({"bid": "two"}, "BAD_INPUT", ("bid", "Int")),
        ({"bid": 1.5}, "BAD_INPUT", ("bid", "Int")),
        ({"bid": True}, "BAD_INPUT", ("bid", "Int")),
        ({"bid": 2**31}, "BAD_INPUT", ("bid", "32-bit")),
        ({"bid": -(2**40)}, "BAD_INPUT", ("bid", "32-bit")),
        ({"card": 7}, "BAD_INPUT", ("card", "String")),
        ({"card": ["R7"]}, "BAD_INPUT", ("card", "String")),
        ({"trump": "PURPLE"}, "BAD_INPUT", ("PURPLE", "Suit")),
        ({"trump": "blue"}, "BAD_INPUT", ("blue", "Suit")),
        ({"trump": 0}, "BAD_INPUT", ("Suit",)),
        ({"colour": "RED"}, "BAD_INPUT", ("colour",)),
        ("bid 1", "BAD_INPUT", ("MoveInput",)),
        ([{"bid": 1}], "BAD_INPUT", ("MoveInput",)),
        (None, "BAD_INPUT", ("MoveInput",)),
    ],
)
def test_a_bad_move_is_refused_with_a_clear_error_and_changes_nothing(table, unchanged, move, code, fragments):
    unchanged(table.id)
    error = graphql_error(table.submit(move), code, *fragments)
    if code == "ILLEGAL_MOVE":
        assert error["extensions"]["legalMoves"] == [{"bid": b, "card": None, "trump": None} for b in (0, 1)]
    # and the seat may still make its move
    unchanged.check()
    assert [m["bid"] for m in table.state(table.actor)["legalMoves"]] == [0, 1]


def test_trump_is_only_for_the_dealer_who_turned_a_wizard(api, unchanged):
    table = Table(api, trump_card="W")
    assert table.view["phase"] == "CHOOSE_TRUMP" and table.view["toAct"] == 0
    unchanged(table.id)
    error = graphql_error(table.submit({"bid": 0}), "ILLEGAL_MOVE", "legal moves", "trump")
    assert {m["trump"] for m in error["extensions"]["legalMoves"]} == {"BLUE", "GREEN", "RED", "YELLOW"}
    graphql_error(table.submit({"card": "R5"}), "ILLEGAL_MOVE", "legal moves")
    graphql_error(table.submit({"trump": "RED"}, token=table.tokens[1]), "NOT_YOUR_TURN", "seat 1", "seat(s) 0")
    graphql_error(table.submit({"trump": "MAUVE"}), "BAD_INPUT", "MAUVE")


def test_moves_out_of_turn_stale_or_from_outside_are_refused(api, table, unchanged):
    unchanged(table.id)
    version = table.view["version"]
    graphql_error(table.submit({"bid": 0}, token=table.bystander()), "NOT_YOUR_TURN", "no move to make now")
    graphql_error(table.submit({"bid": 0}, version=version - 1), "STALE_VERSION", f"version {version}", "read it again")
    graphql_error(table.submit({"bid": 0}, version=version + 1), "STALE_VERSION", "read it again")
    graphql_error(table.submit({"bid": 0}, version=-5), "STALE_VERSION")
    literal = f'mutation {{ submitMove(matchId: "{table.id}", move: {{bid: 0}}, expectedVersion: "x") {{ id }} }}'
    graphql_error(gql(api, literal, None, table.actor), "BAD_INPUT", "Int")
    stranger, _ = api.register()
    graphql_error(table.submit({"bid": 0}, token=stranger), "FORBIDDEN", "join it first")
    # a refused move is still refused after all of that: nothing was half-applied
    assert table.state(table.actor)["version"] == version


@pytest.mark.parametrize(
    ("authorization", "status", "fragments"),
    [
        (None, 200, ("Authorization: Bearer",)),
        ("Bearer wza_not-a-real-token", 200, ("not valid",)),
        ("Bearer " + "x" * 5000, 200, ("not valid",)),
        ("Bearer wza_" + "\u00e9" * 10, 200, ("not valid",)),
        ("Basic dXNlcjpwYXNz", 401, ("Bearer <token>",)),
        ("Bearer", 401, ("Bearer <token>",)),
        ("wza_token-without-scheme", 401, ("Bearer <token>",)),
    ],
)
def test_missing_and_bad_tokens_are_unauthenticated(api, table, unchanged, authorization, status, fragments):
    unchanged(table.id)
    extra = {} if authorization is None else {"Authorization": authorization.encode("utf-8")}
    response = api.http.post(
        "/graphql", json={"query": SUBMIT, "variables": {"m": table.id, "mv": {"bid": 0}}}, headers=extra
    )
    assert response.status_code == status
    graphql_error(response, "UNAUTHENTICATED", *fragments)
    rest = api.http.post(f"/api/matches/{table.id}/moves", json={"bid": 0}, headers=extra)
    rest_error(rest, 401, "UNAUTHENTICATED")


# ----------------------------------------------------------------------------- match ids


@pytest.mark.parametrize(
    "match_id",
    ["nope", "0" * 16, "x" * 64, "x" * 65, "x" * 20_000, "{m:x}:match", "../../etc/passwd", "\u00e9\u6f22\U0001f0cf", ""],
)
def test_unknown_and_overlong_match_ids_are_not_found(api, redis_client, match_id):
    token, _ = api.register()
    keys_before = match_count(redis_client)
    variables = {"m": match_id}
    graphql_error(gql(api, SUBMIT, {**variables, "mv": {"bid": 0}}, token), "NOT_FOUND", "no match")
    graphql_error(gql(api, JOIN, variables, token), "NOT_FOUND", "no match")
    graphql_error(gql(api, ADD_HOUSE, {**variables, "k": "RANDOM"}, token), "NOT_FOUND", "no match")
    await_turn = "query($m: ID) { awaitTurn(matchId: $m, timeoutMs: 0) { id } }"
    graphql_error(gql(api, await_turn, variables, token), "NOT_FOUND", "no match")
    body = checked(gql(api, VIEW, variables, token)).json()
    assert body == {"data": {"match": None}}
    if match_id and "/" not in match_id:
        path = "/api/matches/" + match_id
        rest_error(api.http.get(path, headers=headers(token)), 404, "NOT_FOUND", "no match")
        rest_error(api.http.post(path + "/moves", json={"bid": 0}, headers=headers(token)), 404, "NOT_FOUND")
        rest_error(api.http.get(path + "/record"), 404, "NOT_FOUND")
    assert match_count(redis_client) == keys_before
    assert not redis_client.exists(f"{{m:{match_id}}}:match", f"{{m:{match_id}}}:events")


# ----------------------------------------------------------------------------- seating


def test_bad_seats_and_house_bots_are_refused(api, redis_client, unchanged):
    creator, _ = api.register()
    match_id = api.create_match(creator, players=3, moveTimeoutMs=LONG_TIMEOUT)
    seated, _ = api.register()
    api.join(seated, match_id, 1)
    unchanged(match_id)
    other, _ = api.register()
    for seat in (3, 9, -1):
        graphql_error(gql(api, JOIN, {"m": match_id, "s": seat}, other), "BAD_INPUT", "seat must be from 0 to 2")
    graphql_error(gql(api, JOIN, {"m": match_id, "s": 2**31}, other), "BAD_INPUT", "32-bit")
    graphql_error(gql(api, JOIN, {"m": match_id, "s": "1"}, other), "BAD_INPUT", "Int")
    graphql_error(gql(api, JOIN, {"m": match_id, "s": 1}, other), "BAD_INPUT", "seat 1 is taken", "free seats: [0, 2]")
    graphql_error(gql(api, JOIN, {"m": match_id, "s": 0}, seated), "BAD_INPUT", "already sit in seat 1", "leaveMatch")
    graphql_error(gql(api, JOIN, {"m": match_id}), "UNAUTHENTICATED")
    graphql_error(gql(api, ADD_HOUSE, {"m": match_id, "k": "GENIUS"}, creator), "BAD_INPUT", "GENIUS", "HouseBotKind")
    graphql_error(gql(api, ADD_HOUSE, {"m": match_id, "k": "random"}, creator), "BAD_INPUT", "HouseBotKind")
    graphql_error(gql(api, ADD_HOUSE, {"m": match_id, "k": "RANDOM"}, other), "FORBIDDEN", "creator")
    graphql_error(gql(api, ADD_HOUSE, {"m": match_id, "k": "RANDOM"}), "UNAUTHENTICATED")
    # the seat moves of a waiting match are refused too
    graphql_error(gql(api, SUBMIT, {"m": match_id, "mv": {"bid": 0}}, seated), "MATCH_NOT_ACTIVE", "has not started")
    rest_error(
        api.http.post(f"/api/matches/{match_id}/moves", json={"bid": 0}, headers=headers(seated)),
        409, "MATCH_NOT_ACTIVE",
    )
    rest_error(api.http.get(f"/api/matches/{match_id}/record"), 409, "MATCH_NOT_ACTIVE", "once it has finished")


def play_to_the_end(api: Any) -> tuple[str, str]:
    """A finished match (a registered bot against house bots): (match id, the bot's token)."""
    token, _ = api.register()
    match_id = api.create_match(token, ruleset="WIZARD_JUNIOR", players=6, moveTimeoutMs=LONG_TIMEOUT)
    for _ in range(5):
        api.add_house_bot(token, match_id, "RANDOM")
    api.join(token, match_id)
    match = api.play_out(token, match_id)
    assert match["status"] == "FINISHED"
    return match_id, token


def test_a_finished_match_takes_no_more_moves_or_seats(api, unchanged):
    match_id, token = play_to_the_end(api)
    unchanged(match_id)
    for move in ({"bid": 0}, {"card": "W"}, {"trump": "RED"}):
        graphql_error(gql(api, SUBMIT, {"m": match_id, "mv": move}, token), "MATCH_NOT_ACTIVE", "no more moves")
    version = api.match(match_id)["version"]
    graphql_error(gql(api, SUBMIT, {"m": match_id, "mv": {"bid": 0}, "v": version}, token), "MATCH_NOT_ACTIVE")
    rest_error(
        api.http.post(f"/api/matches/{match_id}/moves", json={"bid": 0}, headers=headers(token)),
        409, "MATCH_NOT_ACTIVE", "no more moves",
    )
    latecomer, _ = api.register()
    graphql_error(gql(api, JOIN, {"m": match_id}, latecomer), "MATCH_NOT_ACTIVE", "FINISHED")
    graphql_error(gql(api, JOIN, {"m": match_id, "s": 0}, latecomer), "MATCH_NOT_ACTIVE", "FINISHED")
    graphql_error(gql(api, ADD_HOUSE, {"m": match_id, "k": "RANDOM"}, token), "MATCH_NOT_ACTIVE", "FINISHED")
    graphql_error(gql(api, SUBMIT, {"m": match_id, "mv": {"bid": 0}}, latecomer), "FORBIDDEN")


# ----------------------------------------------------------------------------- bots


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("n" * 41, ("41 characters", "at most 40")),
        ("n" * 20_000, ("at most 40",)),
        ("", ("empty",)),
        ("   \t ", ("empty",)),
        ("bell\u0007bot", ("printable",)),
        ("line\nbreak", ("printable",)),
        ("zero\u200bwidth", ("printable",)),
    ],
)
def test_bad_bot_names_are_refused(api, redis_client, name, fragments):
    query = "mutation($n: String!) { registerBot(name: $n) { token bot { id } } }"
    graphql_error(gql(api, query, {"n": name}), "BAD_INPUT", *fragments)
    assert not redis_client.exists("botname:" + name.strip().casefold())


def test_bot_names_of_the_wrong_type_or_taken_are_refused(api, redis_client):
    query = "mutation($n: String!) { registerBot(name: $n) { token bot { id } } }"
    graphql_error(gql(api, query, {"n": 5}), "BAD_INPUT", "String")
    graphql_error(gql(api, query, {"n": None}), "BAD_INPUT", "String!")
    graphql_error(gql(api, "mutation { registerBot { token } }"), "BAD_INPUT", "name")
    name = f"Taken-{os.urandom(4).hex()}"
    _, bot_id = api.register(name)
    owner = redis_client.get("botname:" + name.casefold())
    for again in (name, name.upper(), name.lower(), f"  {name}  "):
        graphql_error(gql(api, query, {"n": again}), "BAD_INPUT", "taken", "choose another")
    assert redis_client.get("botname:" + name.casefold()) == owner == bot_id.encode()


# ----------------------------------------------------------------------------- createMatch


@pytest.mark.parametrize(
    ("spec", "fragments"),
    [
        ({"players": 2}, ("players", "3 to 6")),
        ({"players": 7}, ("players", "3 to 6")),
        ({"players": 0}, ("players",)),
        ({"players": -4}, ("players",)),
        ({"players": "four"}, ("players", "Int")),
        ({"players": 2**31}, ("players", "32-bit")),
        ({"variants": ["HIDDEN_BIDS", "SECRET_BIDS"]}, ("HIDDEN_BIDS", "SECRET_BIDS")),
        ({"variants": ["PLUS_MINUS_ONE", "HIDDEN_BIDS"]}, ("PLUS_MINUS_ONE", "HIDDEN_BIDS")),
        ({"variants": ["PLUS_MINUS_ONE", "SECRET_BIDS"]}, ("PLUS_MINUS_ONE", "SECRET_BIDS")),
        ({"players": 5, "variants": ["SINGLE_SUIT"]}, ("SINGLE_SUIT",)),
        ({"players": 6, "variants": ["SINGLE_SUIT"]}, ("SINGLE_SUIT",)),
        ({"ruleset": "WIZARD_JUNIOR", "variants": ["SINGLE_SUIT"]}, ("SINGLE_SUIT",)),
        ({"ruleset": "WIZARD_JUNIOR_CLASSIC", "variants": ["SINGLE_SUIT"]}, ("SINGLE_SUIT",)),
        ({"variants": ["NO_SUCH_VARIANT"]}, ("NO_SUCH_VARIANT", "Variant")),
        ({"variants": "HIDDEN_BIDS,SECRET_BIDS"}, ("Variant",)),
        ({"ruleset": "CHESS"}, ("CHESS", "Ruleset")),
        ({"ruleset": "wizard"}, ("Ruleset",)),
        ({"seed": ""}, ("seed", "non-empty")),
        ({"seed": "s" * 257}, ("seed", "at most 256")),
        ({"seed": "\u00e9" * 200}, ("seed", "400 bytes")),
        ({"seed": 12345}, ("seed", "String")),
        ({"seed": ["a"]}, ("seed", "String")),
        ({"deals": [["W"]]}, ("deals[0]", "60 cards")),
        ({"deals": [full_deck()[:-1] + ["X1"]]}, ("deals[0]", "X1")),
        ({"deals": [full_deck()[:-2] + ["B1", "B1"]]}, ("deals[0]",)),
        ({"deals": [[]] * 16}, ("16 rounds", "only 15")),
        ({"deals": [full_deck()], "rated": True}, ("never rated",)),
        ({"deals": "B1 B2"}, ("deals",)),
        ({"deals": [[1, 2, 3]]}, ("deals",)),
        ({"players": 3, "variants": ["SINGLE_SUIT"], "deals": [["B1"] * 12]}, ("deals[0]",)),
        ({"moveTimeoutMs": 99}, ("moveTimeoutMs", "100 to 600000")),
        ({"moveTimeoutMs": 0}, ("moveTimeoutMs", "100 to 600000")),
        ({"moveTimeoutMs": -1}, ("moveTimeoutMs", "100 to 600000")),
        ({"moveTimeoutMs": 600_001}, ("moveTimeoutMs", "100 to 600000")),
        ({"moveTimeoutMs": 2**31}, ("moveTimeoutMs", "32-bit")),
        ({"moveTimeoutMs": 1.5}, ("moveTimeoutMs", "Int")),
        ({"firstDealer": 4}, ("firstDealer", "0 to 3")),
        ({"firstDealer": -1}, ("firstDealer", "0 to 3")),
        ({"rated": "yes"}, ("rated", "Boolean")),
        ({"bogus": 1}, ("bogus",)),
    ],
)
def test_invalid_match_configs_are_refused(api, redis_client, spec, fragments):
    token, _ = api.register()
    before = match_count(redis_client)
    graphql_error(gql(api, CREATE, {"i": {"players": 4, **spec}}, token), "BAD_INPUT", *fragments)
    assert match_count(redis_client) == before


def test_creating_a_match_needs_a_token(api, redis_client):
    before = match_count(redis_client)
    graphql_error(gql(api, CREATE, {"i": {"players": 4}}), "UNAUTHENTICATED", "Authorization: Bearer")
    graphql_error(gql(api, CREATE, {"i": {"players": 4}}, "wza_forged"), "UNAUTHENTICATED", "not valid")
    graphql_error(gql(api, CREATE, {}), "BAD_INPUT", "$i")
    assert match_count(redis_client) == before


# ----------------------------------------------------------------------------- GraphQL documents


def test_unknown_fields_arguments_and_values_get_no_suggestions(api):
    token, _ = api.register()
    cases = [
        ("{ mee { id } }", None, "mee"),
        ('{ match(id: "x") { staus } }', None, "staus"),
        ('{ match(idd: "x") { id } }', None, "idd"),
        ("query($m: Strin) { me { id } }", None, "Strin"),
        ("mutation { createMatch(input: {player: 4}) { id } }", None, "player"),
        ("mutation { createMatch(input: {ruleset: WIZZARD}) { id } }", None, "WIZZARD"),
        (CREATE, {"i": {"playrs": 4}}, "playrs"),
        (CREATE, {"i": {"variants": ["HIDEN_BIDS"]}}, "HIDEN_BIDS"),
        (SUBMIT, {"m": "x", "mv": {"trump": "BLU"}}, "BLU"),
    ]
    for query, variables, named in cases:
        response = gql(api, query, variables, token)
        for error in checked(response).json()["errors"]:
            assert "did you mean" not in error["message"].lower(), error
            assert error["extensions"]["code"] == "BAD_INPUT", error
        assert any(named in e["message"] for e in response.json()["errors"]), response.json()


def test_syntax_errors_are_bad_input(api):
    for query in ("{ me {", "mutation {", "{ me { id } } }", "query { me { id } ", "{ match(id: ) { id } }", "\u0000"):
        graphql_error(gql(api, query), "BAD_INPUT", "Syntax Error")


def test_deep_queries_alias_floods_and_token_floods_are_limits(api, table, unchanged):
    unchanged(table.id)
    nested = "{ me { " + "a { " * 12 + "b" + " }" * 12 + " } }"
    body = checked(gql(api, nested)).json()
    assert body["data"] is None
    assert "LIMIT_EXCEEDED" in {e["extensions"]["code"] for e in body["errors"]}, body
    assert any("depth" in e["message"] for e in body["errors"])
    introspection = "{ __schema { types { fields { type { fields { type { fields { type { name } } } } } } } } }"
    graphql_error(gql(api, introspection), "LIMIT_EXCEEDED", "depth")
    # 31 aliased moves: refused as a whole, not one of them runs
    aliased = " ".join(
        f'm{i}: submitMove(matchId: "{table.id}", move: {{bid: {i % 2}}}) {{ version }}' for i in range(31)
    )
    graphql_error(gql(api, "mutation { " + aliased + " }", None, table.actor), "LIMIT_EXCEEDED", "31 aliases", "30")
    reads = " ".join(f"r{i}: __typename" for i in range(200))
    graphql_error(gql(api, "{ " + reads + " }"), "LIMIT_EXCEEDED", "aliases")
    # a document of more than 4000 tokens (well under the body limit) is not parsed to its end
    padded = f'mutation {{ submitMove(matchId: "{table.id}", move: {{bid: 0}}) {{ {"version " * 4_500}}} }}'
    assert len(padded) < 60_000
    graphql_error(gql(api, padded, None, table.actor), "LIMIT_EXCEEDED", "4000 tokens")
    flood = "{ " + "__typename " * 5_000 + "}"
    graphql_error(gql(api, flood), "LIMIT_EXCEEDED", "tokens")


def test_oversized_bodies_are_refused_with_413(api, table, unchanged):
    unchanged(table.id)
    move = {"m": table.id, "mv": {"bid": 0}, "v": table.view["version"]}
    big = {"query": SUBMIT, "variables": move, "extensions": {"pad": "x" * 70_000}}
    response = api.http.post("/graphql", json=big, headers=headers(table.actor))
    assert response.status_code == 413
    graphql_error(response, "LIMIT_EXCEEDED", "65536 bytes")

    def chunks(data: bytes) -> Iterator[bytes]:  # no Content-Length: the limit holds while streaming
        for start in range(0, len(data), 4096):
            yield data[start:start + 4096]

    response = api.http.post(
        "/graphql", content=chunks(json.dumps(big).encode()),
        headers={**headers(table.actor), "content-type": "application/json"},
    )
    assert response.status_code == 413
    graphql_error(response, "LIMIT_EXCEEDED", "65536 bytes")
    padded_move = b'{"bid": 0' + b" " * 70_000 + b"}"
    path = f"/api/matches/{table.id}/moves"
    rest_error(api.http.post(path, content=padded_move, headers=headers(table.actor)), 413, "LIMIT_EXCEEDED", "bytes")
    rest_error(
        api.http.post(path, content=chunks(padded_move), headers=headers(table.actor)), 413, "LIMIT_EXCEEDED", "bytes"
    )
    # right under the limit is fine
    ok = api.http.post("/graphql", json={"query": "{ __typename }", "extensions": {"pad": "x" * 60_000}})
    assert checked(ok).json() == {"data": {"__typename": "Query"}}


@pytest.mark.parametrize(
    ("body", "content_type", "fragments"),
    [
        (b"{not json", "application/json", ("JSON",)),
        (b'{"query": "{ me { id } }"', "application/json", ("JSON",)),
        (b"\xff\xfe\x00garbage", "application/json", ("JSON",)),
        (b'"{ me { id } }"', "application/json", ("JSON object",)),
        (b"42", "application/json", ("JSON object",)),
        (b"null", "application/json", ("JSON object",)),
        (b"true", "application/json", ("JSON object",)),
        (b"[]", "application/json", ("Batching",)),
        (b'[{"query": "{ __typename }"}]', "application/json", ("Batching",)),
        (b"{}", "application/json", ("No GraphQL query",)),
        (b'{"variables": {}}', "application/json", ("No GraphQL query",)),
        (b'{"query": null}', "application/json", ("No GraphQL query",)),
        (b'{"query": ""}', "application/json", ("No GraphQL query",)),
        (b'{"query": 5}', "application/json", ("query",)),
        (b'{"query": ["{ __typename }"]}', "application/json", ("query",)),
        (b'{"query": "{ __typename }", "variables": [1]}', "application/json", ("variables",)),
        (b'{"query": "{ __typename }", "variables": "x"}', "application/json", ("variables",)),
        (b'{"query": "{ __typename }", "extensions": 5}', "application/json", ("extensions",)),
        (b'{"query": "{ __typename }", "operationName": "Nope"}', "application/json", ("Nope",)),
        (b'{"query": "{ __typename } { __typename }"}', "application/json", ("anonymous operation",)),
        (b'{"query": "{ __typename }"}', "text/plain", ("content type",)),
        (b"query={ __typename }", "application/x-www-form-urlencoded", ("content type",)),
        (b'{"query": "subscription { myTurns { id } }"}', "application/json", ("WebSocket",)),
    ],
)
def test_malformed_requests_get_a_coded_400(api, body, content_type, fragments):
    response = api.http.post("/graphql", content=body, headers={"content-type": content_type})
    checked(response)
    if response.status_code == 200:  # a document that parses but cannot run: a GraphQL error
        graphql_error(response, "BAD_INPUT", *fragments)
    else:
        assert response.status_code == 400, response.text
        error = graphql_error(response, "BAD_INPUT", *fragments)
        if "JSON" in fragments[0] or "Batching" in fragments[0] or "No GraphQL" in fragments[0]:
            assert "POST /graphql" in error["message"]  # ... and what to send instead


def test_mutations_and_subscriptions_over_get_are_refused_and_change_nothing(api):
    """Queries may come as GET (test_graphql_over_http.py); a mutation never does: 405, and
    nothing is done. A subscription needs the WebSocket."""
    name = f"via-get-{os.urandom(3).hex()}"
    mutation = {"query": f'mutation {{ registerBot(name: "{name}") {{ token }} }}'}
    for accept in ("*/*", "application/json"):
        response = api.http.get("/graphql", params=mutation, headers={"Accept": accept})
        assert response.status_code == 405 and response.headers["allow"] == "POST", response.text
        assert "data" not in response.json()
        graphql_error(response, "BAD_INPUT", "mutations", "POST /graphql")
    api.register(name)  # the name is still free: the mutation never ran
    response = api.http.get("/graphql", params={"query": "subscription { myTurns { id } }"})
    assert response.status_code == 400
    graphql_error(response, "BAD_INPUT", "WebSocket")
    response = api.http.request("PUT", "/graphql", json={"query": "{ __typename }"})
    assert response.status_code == 405
    no_traceback(response.text)


def test_await_turn_bad_input(api, table):
    token, _ = api.register()
    query = "query($m: ID, $t: Int) { awaitTurn(matchId: $m, timeoutMs: $t) { id } }"
    graphql_error(gql(api, query, {"t": -5}, token), "BAD_INPUT", "timeoutMs", ">= 0")
    graphql_error(gql(api, query, {"t": "soon"}, token), "BAD_INPUT", "Int")
    graphql_error(gql(api, query, {"m": table.id, "t": 0}, token), "FORBIDDEN", "no seat")
    graphql_error(gql(api, query, {"t": 0}), "UNAUTHENTICATED")
    rest_error(api.http.get("/api/turns", params={"timeoutMs": "soon"}, headers=headers(token)), 400, "BAD_INPUT", "timeoutMs")
    rest_error(api.http.get("/api/turns", params={"timeoutMs": "-1"}, headers=headers(token)), 400, "BAD_INPUT", "timeoutMs")
    rest_error(api.http.get("/api/turns", params={"timeoutMs": "1e3"}, headers=headers(token)), 400, "BAD_INPUT", "timeoutMs")
    rest_error(
        api.http.get("/api/turns", params={"matchId": table.id, "timeoutMs": "0"}, headers=headers(token)),
        403, "FORBIDDEN",
    )
    rest_error(api.http.get("/api/turns", params={"timeoutMs": "0"}), 401, "UNAUTHENTICATED")


# ----------------------------------------------------------------------------- REST


@pytest.mark.parametrize(
    ("body", "status", "code", "fragments"),
    [
        (b"{", 400, "BAD_INPUT", ("must be JSON",)),
        (b"", 400, "BAD_INPUT", ("must be JSON",)),
        (b"\xff\xfe", 400, "BAD_INPUT", ("must be JSON",)),
        (b"[1]", 400, "BAD_INPUT", ("JSON object",)),
        (b'"bid"', 400, "BAD_INPUT", ("JSON object",)),
        (b"null", 400, "BAD_INPUT", ("JSON object",)),
        (b"[" * 30_000 + b"]" * 30_000, 400, "BAD_INPUT", ("JSON",)),
        (b"{}", 400, "BAD_INPUT", ("exactly one",)),
        (b'{"bid": 0, "card": "R7"}', 400, "BAD_INPUT", ("exactly one",)),
        (b'{"foo": 1}', 400, "BAD_INPUT", ("unknown move field", "foo")),
        (b'{"bid": true}', 400, "BAD_INPUT", ("whole number",)),
        (b'{"bid": 1.5}', 400, "BAD_INPUT", ("whole number",)),
        (b'{"bid": "1"}', 400, "BAD_INPUT", ("whole number",)),
        (b'{"bid": NaN}', 400, "BAD_INPUT", ("whole number",)),
        (b'{"bid": 1e400}', 400, "BAD_INPUT", ("whole number",)),
        (b'{"bid": 5}', 422, "ILLEGAL_MOVE", ("legal moves",)),
        (b'{"bid": -1}', 422, "ILLEGAL_MOVE", ("legal moves",)),
        (b'{"bid": 100000000000000000000000000000}', 422, "ILLEGAL_MOVE", ("legal moves",)),
        (b'{"card": "X9"}', 400, "BAD_INPUT", ("not a card code",)),
        (b'{"card": 7}', 400, "BAD_INPUT", ("not a card code",)),
        (b'{"card": "\\ud800"}', 400, "BAD_INPUT", ("not a card code",)),
        (b'{"card": "R7"}', 422, "ILLEGAL_MOVE", ("legal moves",)),
        (b'{"trump": "RED"}', 422, "ILLEGAL_MOVE", ("legal moves",)),
        (b'{"trump": "blue"}', 400, "BAD_INPUT", ("BLUE, GREEN, RED, YELLOW",)),
        (b'{"trump": ["BLUE"]}', 400, "BAD_INPUT", ("BLUE, GREEN, RED, YELLOW",)),
        (b'{"bid": 0, "expectedVersion": "4"}', 400, "BAD_INPUT", ("expectedVersion", "whole number")),
        (b'{"bid": 0, "expectedVersion": 4.0}', 400, "BAD_INPUT", ("expectedVersion", "whole number")),
        (b'{"bid": 0, "expectedVersion": 1}', 409, "STALE_VERSION", ("read it again",)),
    ],
)
def test_bad_rest_moves_are_refused_and_change_nothing(api, table, unchanged, body, status, code, fragments):
    unchanged(table.id)
    response = api.http.post(
        f"/api/matches/{table.id}/moves", content=body,
        headers={**headers(table.actor), "content-type": "application/json"},
    )
    error = rest_error(response, status, code, *fragments)
    if code == "ILLEGAL_MOVE":
        assert error["legalMoves"] == [{"bid": b, "card": None, "trump": None} for b in (0, 1)]


def test_rest_moves_out_of_turn_or_from_outside(api, table, unchanged):
    unchanged(table.id)
    path = f"/api/matches/{table.id}/moves"
    rest_error(api.http.post(path, json={"bid": 0}, headers=headers(table.bystander())), 409, "NOT_YOUR_TURN")
    stranger, _ = api.register()
    rest_error(api.http.post(path, json={"bid": 0}, headers=headers(stranger)), 403, "FORBIDDEN", "join it first")
    rest_error(api.http.post(path, json={"bid": 0}), 401, "UNAUTHENTICATED", "Bearer")
    rest_error(api.http.get(f"/api/matches/{table.id}/record"), 409, "MATCH_NOT_ACTIVE")
    for method, route in (("DELETE", f"/api/matches/{table.id}"), ("PUT", path), ("GET", path)):
        response = api.http.request(method, route, headers=headers(table.actor))
        assert response.status_code == 405, (method, route, response.status_code)
        no_traceback(response.text)
    response = api.http.get("/api/no-such-route")
    assert response.status_code == 404
    no_traceback(response.text)


def test_a_match_stored_in_a_form_the_server_cannot_read_is_its_fault_not_the_clients(api, redis_client):
    """A corrupt stored state is no bad input: the answer is INTERNAL_ERROR (logged), with no
    detail, and other matches go on."""
    token, bot_id = api.register()
    match_id = api.create_match(token, players=3)
    redis_client.hset(f"{{m:{match_id}}}:match", "state", b"\x00not an engine state")
    body = gql(api, 'query($m: ID!) { match(id: $m) { id } }', {"m": match_id}, token).json()
    assert body["errors"][0]["extensions"]["code"] == "INTERNAL_ERROR", body
    assert "engine" not in body["errors"][0]["message"]
    response = api.http.get(f"/api/matches/{match_id}")
    assert response.status_code == 500 and response.json()["error"]["code"] == "INTERNAL_ERROR"
    other = api.create_match(token, players=3)
    assert api.match(other)["id"] == other
    # gone again, with its place among the sweeper's and its creator's matches
    redis_client.delete(f"{{m:{match_id}}}:match", f"{{m:{match_id}}}:events", f"{{b:{bot_id}}}:waiting")
    redis_client.zrem(match_home_key(match_id, "deadlines"), match_id)
