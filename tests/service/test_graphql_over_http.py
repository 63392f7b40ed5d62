"""GraphQL over HTTP as its spec has it, next to the answers existing clients rely on:
`application/graphql-response+json` for clients that ask for it (requests that never ran get
a 4xx and no `data`), `application/json` exactly as before for everyone else; queries over GET
(public ones cacheable for a few seconds, a bot's own never stored), mutations never.

(The spec's own audit, run with the `graphql-http` package: test_graphql_clients.py.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.service.arena_client import Api

GRAPHQL_RESPONSE = "application/graphql-response+json"
JSON = "application/json"
ALIASES = "{ " + " ".join(f"a{i}: __typename" for i in range(40)) + " }"


def post(api: Api, body: dict[str, Any], accept: str | None = GRAPHQL_RESPONSE, token: str | None = None) -> httpx.Response:
    request = api.http.build_request("POST", "/graphql", json=body)
    if accept is None:
        del request.headers["accept"]
    else:
        request.headers["accept"] = accept
    if token:
        request.headers["authorization"] = f"Bearer {token}"
    return api.http.send(request)


def media(response: httpx.Response) -> str:
    return response.headers["content-type"].split(";")[0]


@pytest.mark.parametrize(("accept", "expected"), [
    (None, JSON),
    ("*/*", JSON),
    ("application/*", JSON),
    (JSON, JSON),
    (GRAPHQL_RESPONSE, GRAPHQL_RESPONSE),
    (f"{GRAPHQL_RESPONSE}; charset=utf-8", GRAPHQL_RESPONSE),
    (f"{GRAPHQL_RESPONSE}, {JSON};q=0.9", GRAPHQL_RESPONSE),  # what graphql-http's client sends
    (f"{JSON}, {GRAPHQL_RESPONSE}", GRAPHQL_RESPONSE),
    (f"{JSON}, {GRAPHQL_RESPONSE};q=0.5", JSON),
    (f"{GRAPHQL_RESPONSE};q=0, */*", JSON),
    (f"text/html, {GRAPHQL_RESPONSE};q=0.1", GRAPHQL_RESPONSE),
])
def test_the_media_type_follows_accept(api: Api, accept: str | None, expected: str) -> None:
    response = post(api, {"query": "{ __typename }"}, accept)
    assert response.status_code == 200
    assert media(response) == expected
    assert response.json() == {"data": {"__typename": "Query"}}


NEVER_RAN = {
    "parse": ({"query": "{"}, "BAD_INPUT", "Syntax Error"),
    "validation": ({"query": "{ nope }"}, "BAD_INPUT", "nope"),
    "variables": ({"query": "query ($id: ID!) { bot(id: $id) { id } }", "variables": {"id": None}}, "BAD_INPUT", "$id"),
    "variable type": ({"query": "query ($f: Int) { leaderboard(ruleset: WIZARD, first: $f) { rank } }",
                       "variables": {"f": "ten"}}, "BAD_INPUT", "$f"),
    "limit": ({"query": ALIASES}, "LIMIT_EXCEEDED", "aliases"),
    "operation name": ({"query": "query A { __typename } query B { __typename }", "operationName": "C"},
                       "BAD_INPUT", "C"),
}


@pytest.mark.parametrize("case", NEVER_RAN, ids=list(NEVER_RAN))
def test_requests_that_never_ran_are_400_without_data_for_graphql_response_json(api: Api, case: str) -> None:
    body, code, fragment = NEVER_RAN[case]
    response = post(api, body, GRAPHQL_RESPONSE)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == f"{GRAPHQL_RESPONSE}; charset=utf-8"
    answer = response.json()
    assert "data" not in answer, answer
    assert answer["errors"][0]["extensions"]["code"] == code and fragment in answer["errors"][0]["message"], answer


@pytest.mark.parametrize("case", [c for c in NEVER_RAN if c != "operation name"])
def test_application_json_answers_them_as_before(api: Api, case: str) -> None:
    body, code, _ = NEVER_RAN[case]
    for accept in (None, "*/*", JSON):
        response = post(api, body, accept)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == JSON
        # as before: no caching headers (CORS's Vary: Origin aside: an answer to a page on another
        # origin carries Access-Control-Allow-Origin, one without an Origin does not)
        assert "cache-control" not in response.headers and response.headers.get("vary") in (None, "Origin")
        answer = response.json()
        assert answer["data"] is None and answer["errors"][0]["extensions"]["code"] == code, answer


def test_requests_that_ran_keep_their_data_and_200(api: Api) -> None:
    # a nullable field that failed: data with that field null
    response = post(api, {"query": "{ awaitTurn(timeoutMs: 0) { id } }"})
    assert response.status_code == 200 and media(response) == GRAPHQL_RESPONSE
    assert response.json()["data"] == {"awaitTurn": None}
    assert response.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    # a non-null root field that failed: data is null, but it is there (the operation ran)
    response = post(api, {"query": "mutation { createMatch(input: {players: 3}) { id } }"})
    assert response.status_code == 200 and media(response) == GRAPHQL_RESPONSE
    assert "data" in response.json() and response.json()["data"] is None
    assert response.json()["errors"][0]["path"] == ["createMatch"]


def test_refusals_before_graphql_use_the_asked_media_type(api: Api) -> None:
    request = api.http.build_request("POST", "/graphql", json={"query": "{ __typename }"},
                                     headers={"Accept": GRAPHQL_RESPONSE, "Authorization": "Basic abc"})
    response = api.http.send(request)
    assert response.status_code == 401 and media(response) == GRAPHQL_RESPONSE
    assert "data" not in response.json() and response.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    response = api.http.post("/graphql", content=b"{not json", headers={"Accept": GRAPHQL_RESPONSE,
                                                                          "Content-Type": JSON})
    assert response.status_code == 400 and media(response) == GRAPHQL_RESPONSE and "data" not in response.json()


# ----------------------------------------------------------------------------- GET


BOARD = "query ($r: Ruleset!) { leaderboard(ruleset: $r, first: 5) { rank bot { name } rating } }"


def test_public_queries_over_get_are_cacheable_for_a_few_seconds(api: Api) -> None:
    response = api.http.get("/graphql", params={"query": BOARD, "variables": '{"r": "WIZARD"}'})
    assert response.status_code == 200 and media(response) == JSON
    assert response.json() == api.gql(BOARD, {"r": "WIZARD"})  # the same answer as POST's
    assert response.headers["cache-control"] == "public, max-age=5"
    assert {v.strip() for v in response.headers["vary"].split(",")} == {"Accept", "Authorization", "Origin"}
    response = api.http.get("/graphql", params={"query": "{ __typename }"}, headers={"Accept": GRAPHQL_RESPONSE})
    assert media(response) == GRAPHQL_RESPONSE and response.headers["cache-control"] == "public, max-age=5"


def test_a_bots_own_queries_over_get_are_never_stored(api: Api) -> None:
    token, bot_id = api.register()
    response = api.http.get("/graphql", params={"query": "{ me { id } }"}, headers={"Authorization": f"Bearer {token}"})
    assert response.json() == {"data": {"me": {"id": bot_id}}}
    assert response.headers["cache-control"] == "no-store"
    assert "Authorization" in response.headers["vary"]
    # the long poll too
    response = api.http.get("/graphql", params={"query": "{ awaitTurn(timeoutMs: 0) { id } }"},
                            headers={"Authorization": f"Bearer {token}"})
    assert response.json() == {"data": {"awaitTurn": None}} and response.headers["cache-control"] == "no-store"


def test_failed_queries_over_get_are_never_stored(api: Api) -> None:
    for params, accept, status, fragment in (
        ({"query": "{ nope }"}, JSON, 200, "nope"),
        ({"query": "{ nope }"}, GRAPHQL_RESPONSE, 400, "nope"),
        ({"query": "{ awaitTurn(timeoutMs: 0) { id } }"}, JSON, 200, "token"),  # UNAUTHENTICATED
        ({"query": "{ __typename }", "variables": "[1"}, JSON, 400, "variables"),
        ({}, JSON, 400, "GET /graphql?query="),  # and says how to ask
    ):
        response = api.http.get("/graphql", params=params, headers={"Accept": accept})
        assert response.status_code == status, (params, response.text)
        assert fragment in response.json()["errors"][0]["message"], response.text
        assert response.headers["cache-control"] == "no-store", params
