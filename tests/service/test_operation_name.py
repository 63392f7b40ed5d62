"""Which operation of a document runs (the GraphQL spec's GetOperation): the one
operationName names, or the only one. A document of several operations without
operationName, or an operationName the document does not have, is refused with BAD_INPUT,
over HTTP and over the WebSocket alike, and runs nothing."""

from __future__ import annotations

import os
from typing import Any

import pytest

from tests.service.ws_client import GraphQLWS, OperationError

TWO_QUERIES = "query A { __typename } query B { me { id } }"


def post(api: Any, query: str, operation_name: str | None = None, token: str | None = None) -> Any:
    body: dict[str, Any] = {"query": query}
    if operation_name is not None:
        body["operationName"] = operation_name
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return api.http.post("/graphql", json=body, headers=headers)


def refused(response: Any, *fragments: str) -> str:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body.get("data") is None and len(body["errors"]) == 1, body
    error = body["errors"][0]
    assert error["extensions"]["code"] == "BAD_INPUT", error
    for fragment in fragments:
        assert fragment in error["message"], error["message"]
    return error["message"]  # type: ignore[no-any-return]


def registers(name: str) -> str:
    return f'mutation Register {{ registerBot(name: "{name}") {{ bot {{ id }} }} }}'


def test_several_operations_without_operation_name_are_refused_and_none_runs(api):
    assert refused(post(api, TWO_QUERIES), "this document has 2 operations: name one with operationName")
    name = f"never-{os.urandom(4).hex()}"
    refused(post(api, f"{registers(name)} query A {{ __typename }} query B {{ __typename }}"), "has 3 operations")
    api.register(name)  # the mutation of the refused document did not run: the name is free


def test_an_unknown_operation_name_is_refused(api):
    message = refused(post(api, TWO_QUERIES, "C"), "no operation named 'C'", "operationName")
    assert "A, B" in message  # the names it does have
    refused(post(api, "{ __typename }", "A"), "no operation named 'A'")
    refused(post(api, "fragment F on Query { __typename }"), "this document has no operation")


def test_the_named_operation_runs_or_the_only_one(api):
    assert post(api, TWO_QUERIES, "A").json() == {"data": {"__typename": "Query"}}
    assert post(api, TWO_QUERIES, "B").json() == {"data": {"me": None}}
    assert post(api, "query Only { __typename }").json() == {"data": {"__typename": "Query"}}
    name = f"named-{os.urandom(4).hex()}"
    answer = post(api, f"query A {{ __typename }} {registers(name)}", "Register").json()
    assert answer["data"]["registerBot"]["bot"]["id"]


def ws_operation(ws: GraphQLWS, query: str, operation_name: str | None = None) -> str:
    op_id = f"op-{os.urandom(3).hex()}"
    payload: dict[str, Any] = {"query": query}
    if operation_name is not None:
        payload["operationName"] = operation_name
    ws.send({"id": op_id, "type": "subscribe", "payload": payload})
    return op_id


@pytest.mark.parametrize(
    ("query", "operation_name", "fragment"),
    [
        (TWO_QUERIES, None, "this document has 2 operations: name one with operationName"),
        ("subscription A { myTurns { id } } subscription B { myTurns { id } }", None, "has 2 operations"),
        (TWO_QUERIES, "C", "no operation named 'C'"),
        ("subscription S { myTurns { id } }", "T", "no operation named 'T'"),
    ],
    ids=["two-queries", "two-subscriptions", "unknown-query", "unknown-subscription"],
)
def test_over_the_websocket_the_same_refusals_and_the_connection_stays_open(api, query, operation_name, fragment):
    token, _ = api.register()
    with GraphQLWS(api.ws_url) as ws:
        ws.init(token)
        op = ws_operation(ws, query, operation_name)
        with pytest.raises(OperationError) as caught:
            ws.next(op)
        assert caught.value.codes == ["BAD_INPUT"]
        assert fragment in caught.value.errors[0]["message"]
        # the connection goes on: the named operation runs
        named = ws_operation(ws, TWO_QUERIES, "B")
        assert ws.data(named, "me")["id"]
