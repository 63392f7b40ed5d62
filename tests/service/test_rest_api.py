"""The REST API for a bot's whole life, over plain HTTP only: a bot that never speaks GraphQL
registers, creates and joins a match, seats house bots, plays it to its end, reads its record,
its replay and the leaderboard, and runs a tournament; every /api answer, unknown routes and
methods included, is JSON in the documented error shape; and schemathesis drives every route of
the OpenAPI document (``openapi.json``, the same document ``/api/openapi.json`` serves) and
checks that no answer is a 5xx and every answer is the one the document describes."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis import checks

from tests.service.arena_client import Api, wait_until

OPENAPI_FILE = Path(__file__).resolve().parents[2] / "openapi.json"


def rest(api: Api, method: str, path: str, token: str | None = None, **kwargs: Any) -> httpx.Response:
    """One request, as a well-behaved client makes it: a 429 (which changed nothing) is sent
    again after the ``Retry-After`` it names (a bot playing house bots outruns the rate)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    while True:
        answer = api.http.request(method, path, headers=headers, **kwargs)
        if answer.status_code != 429:
            return answer
        time.sleep(answer.json()["error"]["retryAfterSeconds"])


def ok(answer: httpx.Response, status: int = 200) -> Any:
    assert answer.status_code == status, (answer.status_code, answer.text[:500])
    assert answer.headers["content-type"].startswith("application/json")
    return answer.json()


def refused(answer: httpx.Response, status: int, code: str) -> str:
    assert answer.status_code == status, (answer.status_code, answer.text[:500])
    assert answer.headers["content-type"].startswith("application/json")
    error = answer.json()["error"]
    assert error["code"] == code and error["message"], error
    return str(error["message"])


def test_a_bot_lives_on_rest_alone(api: Api) -> None:
    registered = ok(rest(api, "POST", "/api/bots", json={"name": f"rest-only-{os.urandom(3).hex()}"}), 201)
    token, me = registered["token"], registered["bot"]
    mine = ok(rest(api, "GET", "/api/me", token))
    assert mine["id"] == me["id"] and mine["invitationPolicy"] == "ASK"
    assert ok(rest(api, "PUT", "/api/me/invitation-policy", token, json={"policy": "DECLINE_ALL"})) == "DECLINE_ALL"
    assert ok(rest(api, "GET", "/api/me", token))["invitationPolicy"] == "DECLINE_ALL"
    ok(rest(api, "PUT", "/api/me/invitation-policy", token, json={"policy": "ASK"}))
    assert ok(rest(api, "GET", f"/api/bots/{me['id']}"))["name"] == me["name"]

    match = ok(rest(api, "POST", "/api/matches", token, json={"players": 3, "moveTimeoutMs": 60_000}), 201)
    assert match["status"] == "WAITING" and match["mySeat"] is None
    ok(rest(api, "POST", f"/api/matches/{match['id']}/house-bots", token, json={"kind": "RANDOM"}))
    ok(rest(api, "POST", f"/api/matches/{match['id']}/house-bots", token, json={"kind": "HEURISTIC"}))
    joined = ok(rest(api, "POST", f"/api/matches/{match['id']}/join", token, json={}))
    assert joined["status"] == "ACTIVE" and joined["mySeat"] is not None and joined["hand"]
    while True:
        turn = ok(rest(api, "GET", "/api/turns", token, params={"matchId": match["id"], "timeoutMs": 10_000}))
        if turn is None:
            break
        move = {k: v for k, v in turn["legalMoves"][0].items() if v is not None}
        ok(rest(api, "POST", f"/api/matches/{match['id']}/moves", token, json={**move, "expectedVersion": turn["version"]}))
    final = ok(rest(api, "GET", f"/api/matches/{match['id']}"))
    assert final["status"] == "FINISHED" and final["seed"]
    record = ok(rest(api, "GET", f"/api/matches/{match['id']}/record"))
    assert record["matchId"] == match["id"] and len(record["moves"]) == final["movesMade"]
    assert len(ok(rest(api, "GET", f"/api/matches/{match['id']}/replay"))["frames"]) == final["movesMade"] + 1
    board = ok(rest(api, "GET", "/api/leaderboard/WIZARD", params={"first": 5, "method": "ELO"}))
    assert isinstance(board, list) and len(board) <= 5

    # a tournament: created, listed, shown, joined (twice: the same), cancelled by its creator; a
    # house bot named in bots by its id enters at once, as houseBots do
    created = ok(rest(api, "POST", "/api/tournaments", token, json={
        "name": "rest-cup", "format": "SWISS", "rounds": 2, "playersPerMatch": 3, "rated": False,
        "startsAt": (datetime.now(UTC) + timedelta(days=1)).isoformat(), "houseBots": ["RANDOM"],
        "bots": ["house-heuristic"],
    }), 201)
    assert created["status"] == "SCHEDULED"
    assert [bot["id"] for bot in created["entrants"]] == ["house-heuristic-0", "house-random-1"]
    listed = ok(rest(api, "GET", "/api/tournaments", params={"status": "SCHEDULED", "first": 100}))
    assert created["id"] in [edge["node"]["id"] for edge in listed["edges"]]
    for _ in range(2):
        entered = ok(rest(api, "POST", f"/api/tournaments/{created['id']}/join", token))
        assert me["id"] in [bot["id"] for bot in entered["entrants"]]
    assert ok(rest(api, "GET", f"/api/tournaments/{created['id']}"))["name"] == "rest-cup"
    assert ok(rest(api, "POST", f"/api/tournaments/{created['id']}/cancel", token))["status"] == "CANCELLED"


@pytest.fixture(scope="module")
def worker(start_worker: Any) -> Iterator[Any]:
    """This module's own worker: it starts tournaments and settles matches into the archive."""
    process = start_worker()
    yield process
    process.stop()


def test_a_rest_bot_accepts_an_invitation_plays_the_tournament_and_downloads_its_records(
    api: Api, worker: Any,
) -> None:
    organiser = ok(rest(api, "POST", "/api/bots", json={"name": f"rest-organiser-{os.urandom(3).hex()}"}), 201)
    player = ok(rest(api, "POST", "/api/bots", json={"name": f"rest-player-{os.urandom(3).hex()}"}), 201)
    token, me = player["token"], player["bot"]
    created = ok(rest(api, "POST", "/api/tournaments", organiser["token"], json={
        "name": "rest-invitational", "format": "ROUND_ROBIN", "rounds": 1, "playersPerMatch": 3, "rated": False,
        "startsAt": (datetime.now(UTC) + timedelta(seconds=3)).isoformat(), "houseBots": ["RANDOM", "HEURISTIC"],
        "bots": [me["id"]], "moveTimeoutMs": 30_000,
    }), 201)
    assert me["id"] not in [bot["id"] for bot in created["entrants"]]  # invited, not entered
    # the long poll it waits for turns on tells it of the invitation; the listing has it too
    waited = ok(rest(api, "GET", "/api/turns/next", token, params={"invitations": "true", "timeoutMs": 5_000}))
    assert waited["reason"] == "INVITATION" and waited["match"] is None
    [invitation] = ok(rest(api, "GET", "/api/invitations", token, params={"status": "PENDING"}))
    assert waited["invitation"] == invitation
    assert invitation["tournament"]["id"] == created["id"] and invitation["invitedBy"]["id"] == organiser["bot"]["id"]
    for _ in range(2):  # the same answer twice is one answer
        assert ok(rest(api, "POST", f"/api/invitations/{invitation['id']}/accept", token))["status"] == "ACCEPTED"
    assert "INVITATION_ANSWERED" in rest(api, "POST", f"/api/invitations/{invitation['id']}/decline", token).text

    def tournament() -> Any:
        return ok(rest(api, "GET", f"/api/tournaments/{created['id']}"))

    wait_until(lambda: tournament()["status"] == "RUNNING", "the tournament to start")
    assert me["id"] in [bot["id"] for bot in tournament()["entrants"]]
    while tournament()["status"] == "RUNNING":
        turn = ok(rest(api, "GET", "/api/turns", token, params={"timeoutMs": 2_000}))
        if turn is not None:
            move = {k: v for k, v in turn["legalMoves"][0].items() if v is not None}
            rest(api, "POST", f"/api/matches/{turn['id']}/moves", token, json={**move, "expectedVersion": turn["version"]})
    finished = tournament()
    assert finished["status"] == "FINISHED" and [s for s in finished["standings"] if s["bot"]["id"] == me["id"]]
    [played] = finished["matches"]

    def records() -> list[Any]:
        answer = rest(api, "GET", f"/api/bots/{me['id']}/records")
        assert answer.status_code == 200, answer.text
        return [json.loads(line) for line in answer.text.splitlines()]

    [record] = wait_until(records, "the match to be settled into the archive", timeout=60)
    assert record["matchId"] == played["id"] and me["id"] in [seat and seat["id"] for seat in record["seats"]]


def test_a_rest_bot_manages_its_tokens_and_profile_and_retires(api: Api) -> None:
    registered = ok(rest(api, "POST", "/api/bots", json={"name": f"rest-keeper-{os.urandom(3).hex()}"}), 201)
    first = registered["token"]
    [only] = ok(rest(api, "GET", "/api/me/tokens", first))
    assert "last" in refused(rest(api, "DELETE", f"/api/me/tokens/{only['id']}", first), 400, "BAD_INPUT")
    grant = ok(rest(api, "POST", "/api/me/tokens", first, json={"name": "ci"}), 201)
    second = grant["token"]
    assert [t["name"] for t in ok(rest(api, "GET", "/api/me/tokens", second))] == [only["name"], "ci"]
    assert [t["id"] for t in ok(rest(api, "DELETE", f"/api/me/tokens/{only['id']}", second))] == [grant["info"]["id"]]
    refused(rest(api, "GET", "/api/me", first), 401, "UNAUTHENTICATED")  # revoked: gone at once
    described = ok(rest(api, "PATCH", "/api/me", second, json={"description": "plays on REST", "homepage": "https://x.org"}))
    assert described["description"] == "plays on REST" and described["homepage"] == "https://x.org"
    refused(rest(api, "PATCH", "/api/me", second, json={"homepage": "ftp://x"}), 400, "BAD_INPUT")
    assert ok(rest(api, "POST", "/api/me/retire", second))["retired"] is True
    refused(rest(api, "POST", "/api/matches", second, json={"players": 3}), 403, "FORBIDDEN")


def test_a_rest_bot_leaves_cancels_and_is_told_why_a_wait_ended(api: Api) -> None:
    token, _ = api.register()
    match = ok(rest(api, "POST", "/api/matches", token, json={"players": 3}), 201)
    seat = ok(rest(api, "POST", f"/api/matches/{match['id']}/join", token))["mySeat"]
    assert ok(rest(api, "POST", f"/api/matches/{match['id']}/join", token))["mySeat"] == seat  # again: the same
    assert ok(rest(api, "POST", f"/api/matches/{match['id']}/leave", token))["mySeat"] is None
    ok(rest(api, "POST", f"/api/matches/{match['id']}/join", token))
    waited = ok(rest(api, "GET", "/api/turns/next", token, params={"matchId": match["id"], "timeoutMs": 0}))
    assert waited["reason"] == "TIMED_OUT" and waited["match"]["id"] == match["id"]
    cancelled = ok(rest(api, "POST", f"/api/matches/{match['id']}/cancel", token))
    assert cancelled["status"] == "ABORTED" and cancelled["abortReason"]
    waited = ok(rest(api, "GET", "/api/turns/next", token, params={"matchId": match["id"], "timeoutMs": 5_000}))
    assert waited["reason"] == "MATCH_OVER" and waited["match"]["status"] == "ABORTED"


def test_every_api_refusal_is_json_that_says_what_to_do(api: Api) -> None:
    token, _ = api.register()
    assert "POST /api/bots" in refused(rest(api, "GET", "/api/me"), 401, "UNAUTHENTICATED")
    assert "/api/openapi.json" in refused(rest(api, "GET", "/api/nowhere"), 404, "NOT_FOUND")
    answer = rest(api, "DELETE", "/api/matches/abc")
    assert "GET" in refused(answer, 405, "METHOD_NOT_ALLOWED") and "GET" in answer.headers["allow"]
    assert "no bot with id 'nobody'" in refused(rest(api, "GET", "/api/bots/nobody"), 404, "NOT_FOUND")
    assert "no tournament" in refused(rest(api, "GET", "/api/tournaments/none"), 404, "NOT_FOUND")
    match_id = api.create_match(token, players=3)
    assert "'seat'" in refused(rest(api, "POST", f"/api/matches/{match_id}/join", token, json={"seat": "x"}), 400,
                               "BAD_INPUT")
    assert "the body's fields are seat" in refused(
        rest(api, "POST", f"/api/matches/{match_id}/join", token, json={"sit": 1}), 400, "BAD_INPUT")
    assert "JSON" in refused(rest(api, "POST", f"/api/matches/{match_id}/join", token, content=b"{nope"), 400,
                             "BAD_INPUT")
    assert "first must be a whole number" in refused(
        rest(api, "GET", "/api/leaderboard/WIZARD", params={"first": "many"}), 400, "BAD_INPUT")
    assert "the parameters are" in refused(
        rest(api, "GET", "/api/leaderboard/WIZARD", params={"top": "3"}), 400, "BAD_INPUT")
    assert "CHESS" in refused(rest(api, "GET", "/api/leaderboard/CHESS"), 400, "BAD_INPUT")
    assert "name is required" in refused(rest(api, "POST", "/api/bots", json={}), 400, "BAD_INPUT")
    assert "ruleset is required" in refused(rest(api, "GET", "/api/bots/x/rating-history"), 400, "BAD_INPUT")
    assert "ruleset must be one of WIZARD" in refused(
        rest(api, "GET", "/api/bots/x/rating-history", params={"ruleset": "CHESS"}), 400, "BAD_INPUT")
    assert "JSON object body" in refused(rest(api, "POST", "/api/matches", token), 400, "BAD_INPUT")
    # the refused joins changed nothing: nobody sits in the match
    assert all(seat["bot"] is None for seat in api.match(match_id)["seats"])


def test_the_served_document_is_the_checked_in_one_and_its_page_shows_every_route(api: Api) -> None:
    served = api.http.get("/api/openapi.json")
    assert served.status_code == 200 and served.json() == json.loads(OPENAPI_FILE.read_text())
    page = api.http.get("/api/docs")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for path, methods in served.json()["paths"].items():
        for method in methods:
            assert f'<span class="method {method.upper()}">{method.upper()}</span> <code>{path}</code>' in page.text


# ----------------------------------------------------------------------------- schemathesis

#: the long poll waits by design (up to the server's bound); the export streams NDJSON
SCHEMA = schemathesis.openapi.from_dict(json.loads(OPENAPI_FILE.read_text())).exclude(
    operation_id=["awaitTurn", "nextTurn", "botRecords"]
)


@pytest.fixture(scope="module")
def generous_api(start_api: Any) -> Api:
    """An API process that lets schemathesis register and create as much as it likes."""
    return start_api(  # type: ignore[no-any-return]
        ARENA_REGISTRATIONS_PER_ADDRESS_PER_HOUR="1000000", ARENA_RATE_LIMIT_PER_SECOND="100000",
        ARENA_RATE_LIMIT_BURST="100000",
    )


@pytest.fixture(scope="module")
def fuzz_token(generous_api: Api) -> str:
    token, _ = generous_api.register()
    return token


#: no 5xx; the status, media type, headers and body the document gives; and data the document
#: refuses (a wrong type, a missing field) refused. Not checked: that all data the document
#: admits is accepted, since the document types inputs as GraphQL does, not every rule (a name's
#: length, a player count), which answers BAD_INPUT with what is allowed.
CHECKS = [
    checks.not_a_server_error, checks.status_code_conformance, checks.content_type_conformance,
    checks.response_headers_conformance, checks.response_schema_conformance, checks.negative_data_rejection,
]


@SCHEMA.parametrize()
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_route_keeps_to_its_document(case: Any, generous_api: Api, fuzz_token: str) -> None:
    case.call_and_validate(base_url=generous_api.base, headers={"Authorization": f"Bearer {fuzz_token}"},
                           checks=CHECKS)
