"""Bots and authentication over real HTTP: registerBot, the token (random, shown once, kept
only as a hash), `me` and `bot`, Authorization headers, closed registration, and a token
acting only for its own bot's seats."""

from __future__ import annotations

import base64
import hashlib
import os
import re
from typing import Any

import pytest

from tests.service.arena_client import MATCH_FIELDS

REGISTER = "mutation($n: String!, $s: String) { registerBot(name: $n, secret: $s) { token bot { id name } } }"
ME = "{ me { id name } }"
BOT = "query($id: ID!) { bot(id: $id) { id name ratings { ruleset rating games } } }"
CREATE = "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id version status createdBy } }"
SUBMIT = (
    "mutation($m: ID!, $mv: MoveInput!) { submitMove(matchId: $m, move: $mv) { " + MATCH_FIELDS + " } }"
)
MATCH = "query($m: ID!) { match(id: $m) { " + MATCH_FIELDS + " } }"


def unique(prefix: str = "bot") -> str:
    return f"{prefix}-{os.urandom(5).hex()}"


def register(api: Any, name: str, secret: str | None = None) -> dict[str, Any]:
    return api.data(REGISTER, {"n": name, "s": secret})["registerBot"]  # type: ignore[no-any-return]


def register_error(api: Any, name: str, secret: str | None = None) -> dict[str, Any]:
    body = api.gql(REGISTER, {"n": name, "s": secret})
    assert body.get("errors"), body
    assert body.get("data") is None, body
    return body["errors"][0]  # type: ignore[no-any-return]


def raw_gql(api: Any, query: str, variables: dict[str, Any] | None = None, headers: dict[str, str] | None = None) -> Any:
    """The HTTP response of a GraphQL request with exactly the given headers."""
    return api.http.post("/graphql", json={"query": query, "variables": variables or {}}, headers=headers or {})


# ----------------------------------------------------------------------------- registerBot


def test_register_gives_a_fresh_random_token_and_the_bot(api):
    names = [unique() for _ in range(5)]
    regs = [register(api, n) for n in names]
    tokens = [r["token"] for r in regs]
    assert [r["bot"]["name"] for r in regs] == names
    assert len({r["bot"]["id"] for r in regs}) == 5
    assert len(set(tokens)) == 5
    for token in tokens:
        # URL-safe characters only (it goes into a header), at least 256 bits of randomness
        body = token.removeprefix("wza_")
        assert re.fullmatch(r"[A-Za-z0-9_-]+", body), token
        assert len(body) * 6 >= 256, token
        assert len(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))) >= 32
        assert not any(n in token for n in names)
    # no two tokens share a long common prefix of their random parts
    bodies = [t.removeprefix("wza_") for t in tokens]
    assert len({b[:8] for b in bodies}) == 5


def test_the_token_authenticates_its_bot(api):
    name = unique()
    reg = register(api, name)
    assert api.data(ME, token=reg["token"])["me"] == {"id": reg["bot"]["id"], "name": name}


def test_names_are_unique_case_insensitively(api):
    name = unique("Case-Bot")
    first = register(api, name)
    for other in (name.lower(), name.upper(), name.swapcase(), f"  {name.upper()}  "):
        error = register_error(api, other)
        assert error["extensions"]["code"] == "BAD_INPUT"
        assert "taken" in error["message"]
    # the first bot is untouched
    assert api.data(ME, token=first["token"])["me"]["name"] == name


def test_names_are_compared_after_unicode_normalisation_and_case_folding(api):
    tag = os.urandom(3).hex()
    register(api, f"Caf\u00e9-{tag}")  # é composed
    assert register_error(api, f"Cafe\u0301-{tag}")["extensions"]["code"] == "BAD_INPUT"  # é decomposed
    assert register_error(api, f"CAF\u00c9-{tag}")["extensions"]["code"] == "BAD_INPUT"
    register(api, f"Stra\u00dfe-{tag}")  # ß folds to ss
    assert register_error(api, f"STRASSE-{tag}")["extensions"]["code"] == "BAD_INPUT"


def test_no_operation_hands_out_a_token_again(api):
    fields = api.data('{ __type(name: "Bot") { fields { name } } }')["__type"]["fields"]
    # a bot's tokens are listed (to itself) as TokenInfo, which holds no secret
    assert [f["name"] for f in fields if "token" in f["name"].lower() or "secret" in f["name"].lower()] == ["tokens"]
    info = api.data('{ __type(name: "TokenInfo") { fields { name } } }')["__type"]["fields"]
    assert {f["name"] for f in info} == {"id", "name", "createdAt", "lastUsedAt"}


def test_names_are_trimmed(api):
    name = unique("trim")
    reg = register(api, f"  \t{name} \n ")
    assert reg["bot"]["name"] == name
    assert api.data(BOT, {"id": reg["bot"]["id"]})["bot"]["name"] == name
    assert register_error(api, name)["extensions"]["code"] == "BAD_INPUT"


def test_the_longest_name_allowed_is_accepted(api):
    name = unique("long")
    name = name + "x" * (40 - len(name))
    assert register(api, name)["bot"]["name"] == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "   ",
        "\t\n",
        "n" * 41,
        "bad\nname",
        "bad\x00name",
        "bad\x07name",
        "bad\u200bname",  # zero-width space: not printable
        "bad\u202ename",  # right-to-left override
        "bad\x7fname",
    ],
    ids=["empty", "spaces", "whitespace", "too-long", "newline", "nul", "bell", "zwsp", "rlo", "del"],
)
def test_bad_names_are_refused_and_nothing_is_registered(api, redis_client, name):
    # make each name unique so a refusal is about the name's form, not about it being taken
    if name.strip() and len(name) <= 40:
        name = name + os.urandom(3).hex()
    error = register_error(api, name)
    assert error["extensions"]["code"] == "BAD_INPUT"
    assert error["message"]
    if name.strip():
        assert not redis_client.exists(f"botname:{name.strip().casefold()}")


def test_a_name_must_be_a_string(api):
    body = api.gql("mutation { registerBot(name: 42) { token } }")
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT"


def test_the_token_is_kept_only_as_a_hash(api, redis_client):
    name = unique("hashed")
    reg = register(api, name)
    token = reg["token"]
    # use the token, so every key a request with it touches (rate buckets, ...) exists
    assert api.data(ME, token=token)["me"]["name"] == name
    api.data(CREATE, {"i": {"players": 3}}, token)

    blobs: list[bytes] = []
    for key in redis_client.scan_iter(count=1000):
        blobs.append(key)
        kind = redis_client.type(key).decode()
        if kind == "string":
            blobs.append(redis_client.get(key) or b"")
        elif kind == "hash":
            for k, v in redis_client.hgetall(key).items():
                blobs += [k, v]
        elif kind == "set":
            blobs += list(redis_client.smembers(key))
        elif kind == "zset":
            blobs += [m for m, _ in redis_client.zrange(key, 0, -1, withscores=True)]
        elif kind == "list":
            blobs += list(redis_client.lrange(key, 0, -1))
        elif kind == "stream":
            for _id, fields in redis_client.xrange(key):
                for k, v in fields.items():
                    blobs += [k, v]
    everything = b"\n".join(blobs)
    random_part = token.removeprefix("wza_").encode()
    assert token.encode() not in everything
    assert random_part not in everything
    # nor any long piece of it
    for start in range(0, len(random_part) - 16, 8):
        assert random_part[start : start + 16] not in everything
    # the check above can see what is stored: the hash is there, and so is the bot
    assert hashlib.sha256(token.encode()).hexdigest().encode() in everything
    assert reg["bot"]["id"].encode() in everything


# ----------------------------------------------------------------------------- me and bot


def test_me_is_null_without_a_token(api):
    assert api.data(ME) == {"me": None}


def test_bot_by_id(api):
    name = unique()
    reg = register(api, name)
    bot_id = reg["bot"]["id"]
    # public: no token needed, and the same for anyone
    assert api.data(BOT, {"id": bot_id})["bot"] == {"id": bot_id, "name": name, "ratings": []}
    other = register(api, unique())
    assert api.data(BOT, {"id": bot_id}, other["token"])["bot"]["name"] == name


@pytest.mark.parametrize("bot_id", ["nope", "0" * 16, "", "x" * 65, "x" * 5000, "house-nobody", "{b:x}"])
def test_an_unknown_bot_is_null(api, bot_id):
    assert api.data(BOT, {"id": bot_id}) == {"bot": None}


# ----------------------------------------------------------------------------- Authorization


def bad_headers(token: str) -> list[dict[str, str]]:
    return [
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": f"Bearer {token}x"},
        {"Authorization": f"Bearer {token[:-1]}"},
        {"Authorization": f"Bearer {token.upper()}"},
        {"Authorization": "Bearer " + "a" * 300},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer    x"},
        {"Authorization": f"Basic {token}"},
        {"Authorization": f"Token {token}"},
        {"Authorization": token},
        {"Authorization": f"Bearer {token} extra"},
        {"Authorization": f"Bearer{token}"},
    ]


def test_bad_authorization_headers_are_unauthenticated(api):
    reg = register(api, unique())
    for headers in bad_headers(reg["token"]):
        for query, variables in ((ME, None), (CREATE, {"i": {"players": 3}})):
            response = raw_gql(api, query, variables, headers)
            body = response.json()
            assert body.get("errors"), (headers, body)
            assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED", (headers, body)
            assert not (body.get("data") or {}).get("me"), (headers, body)
            assert not (body.get("data") or {}).get("createMatch"), (headers, body)
            assert "Traceback" not in response.text
    # the good header still works after all that
    response = raw_gql(api, ME, headers={"Authorization": f"Bearer {reg['token']}"})
    assert response.json()["data"]["me"]["id"] == reg["bot"]["id"]


def test_the_bearer_scheme_is_case_insensitive(api):
    reg = register(api, unique())
    for scheme in ("bearer", "BEARER", "Bearer"):
        response = raw_gql(api, ME, headers={"Authorization": f"{scheme} {reg['token']}"})
        assert response.json()["data"]["me"]["id"] == reg["bot"]["id"]


def test_operations_of_a_bot_need_a_token(api):
    token, _ = api.register()
    match_id = api.create_match(token, players=3)
    before = api.match(match_id)
    operations = [
        (CREATE, {"i": {"players": 3}}),
        ("mutation($m: ID!) { joinMatch(matchId: $m) { id } }", {"m": match_id}),
        ("mutation($m: ID!) { addHouseBot(matchId: $m, kind: RANDOM) { id } }", {"m": match_id}),
        (SUBMIT, {"m": match_id, "mv": {"bid": 0}}),
        ("query($m: ID!) { awaitTurn(matchId: $m, timeoutMs: 0) { id } }", {"m": match_id}),
        ("{ awaitTurn(timeoutMs: 0) { id } }", None),
    ]
    for query, variables in operations:
        body = api.gql(query, variables)
        assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED", (query, body)
    assert api.match(match_id) == before


# ----------------------------------------------------------------------------- closed registration


@pytest.fixture(scope="module")
def closed_api(start_api):
    return start_api(ARENA_REGISTRATION_SECRET="s3cret")


def test_closed_registration_needs_the_secret(closed_api, redis_client):
    name = unique("closed")
    for secret in (None, "", "wrong", "S3CRET", "s3cret ", "s3cre"):
        error = register_error(closed_api, name, secret)
        assert error["extensions"]["code"] == "FORBIDDEN", secret
        assert "s3cret" not in error["message"]
        assert not redis_client.exists(f"botname:{name.casefold()}")
    reg = register(closed_api, name, "s3cret")
    assert reg["bot"]["name"] == name
    assert closed_api.data(ME, token=reg["token"])["me"] == {"id": reg["bot"]["id"], "name": name}


def test_closed_registration_refuses_before_looking_at_the_name(closed_api):
    # a bad name without the secret is FORBIDDEN, not BAD_INPUT: nothing is told to strangers
    assert register_error(closed_api, "")["extensions"]["code"] == "FORBIDDEN"
    assert register_error(closed_api, "", "s3cret")["extensions"]["code"] == "BAD_INPUT"
    # nor whether a name is taken
    name = unique("taken")
    register(closed_api, name, "s3cret")
    assert register_error(closed_api, name)["extensions"]["code"] == "FORBIDDEN"
    assert register_error(closed_api, name, "s3cret")["extensions"]["code"] == "BAD_INPUT"


# ----------------------------------------------------------------------------- a token acts for its own seats


def test_a_token_moves_only_for_its_own_seat(api):
    tokens = [api.register()[0] for _ in range(3)]
    outsider, _ = api.register()
    # firstDealer 2: seat 0 bids first (the seed turns no Wizard, so the dealer names no trump)
    match_id = api.create_match(tokens[0], players=3, firstDealer=2, seed="own-seat")
    for seat, token in enumerate(tokens):
        api.join(token, match_id, seat)
    views = [api.match(match_id, t) for t in tokens]
    assert views[0]["toAct"] == 0 and views[0]["status"] == "ACTIVE"
    spectator = api.match(match_id)

    def unchanged() -> None:
        assert [api.match(match_id, t) for t in tokens] == views
        assert api.match(match_id) == spectator

    # a bot that does not sit in the match cannot move in it, in any form
    for move in ({"bid": 0}, {"bid": 1}, {"card": views[0]["hand"][0]}, {"trump": "RED"}):
        body = api.gql(SUBMIT, {"m": match_id, "mv": move}, outsider)
        assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN", body
        assert body.get("data") is None
        unchanged()
    body = api.gql("query($m: ID!) { awaitTurn(matchId: $m, timeoutMs: 0) { id } }", {"m": match_id}, outsider)
    assert body["errors"][0]["extensions"]["code"] == "FORBIDDEN"
    # the outsider sees the match as a spectator, with no cards
    outside_view = api.match(match_id, outsider)
    assert outside_view["mySeat"] is None and outside_view["hand"] is None
    assert all(s["hand"] is None for s in outside_view["seats"])
    assert outside_view["legalMoves"] == []
    # a seated bot cannot move for the seat to act: its move is its own seat's, not its turn
    for token in tokens[1:]:
        body = api.gql(SUBMIT, {"m": match_id, "mv": {"bid": 0}}, token)
        assert body["errors"][0]["extensions"]["code"] == "NOT_YOUR_TURN", body
        unchanged()
    # the seat to act can
    body = api.gql(SUBMIT, {"m": match_id, "mv": {"bid": 1}}, tokens[0])
    assert not body.get("errors"), body
    assert body["data"]["submitMove"]["version"] == views[0]["version"] + 1
    assert body["data"]["submitMove"]["seats"][0]["bid"] == 1
