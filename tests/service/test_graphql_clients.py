"""Standard GraphQL clients, as a new user would run them, against a real `serve`: the
reference client of graphql-transport-ws (`graphql-ws` on node) and Python's `gql` each play a
match to its end through subscriptions, every WebSocket message is a text frame, and the
GraphQL-over-HTTP spec's own server audit (`graphql-http`) finds nothing to fault.

(GraphiQL's page in a real browser: test_graphiql_page.py.)"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from gql import Client, GraphQLRequest
from gql.transport.exceptions import TransportQueryError
from gql.transport.websockets import WebsocketsTransport
from websockets.sync.client import connect

from tests.clients import node
from tests.service.arena_client import Api
from tests.service.ws_client import PROTOCOL

UPDATES = """subscription ($m: ID!) { matchUpdates(matchId: $m) {
  id version status phase mySeat awaiting winners seats { seat score timeouts } } }"""
TURNS = "subscription { myTurns { id version legalMoves { bid card trump } } }"
MOVE = """mutation ($m: ID!, $move: MoveInput!, $v: Int) {
  submitMove(matchId: $m, move: $move, expectedVersion: $v) { version } }"""


def seated_match(api: Api) -> tuple[str, str, int]:
    """A new bot seated in a new, started match for three with two house bots: (token, match
    id, seat). Its deadline is a minute, so only the client under test moves for the seat."""
    token, _ = api.register()
    match_id = api.create_match(token, players=3, moveTimeoutMs=60_000)
    api.add_house_bot(token, match_id, "RANDOM")
    api.add_house_bot(token, match_id, "HEURISTIC")
    joined = api.join(token, match_id)
    assert joined["status"] == "ACTIVE", joined
    return token, match_id, joined["mySeat"]


def check_played_to_the_end(api: Api, token: str, match_id: str, seat: int, views: list[dict[str, Any]],
                            moves: int) -> None:
    """The client saw the match through to its end, in order, and made every move of its seat."""
    final = api.match(match_id, token)
    assert final["status"] == "FINISHED"
    assert views and all(view["id"] == match_id and view["mySeat"] == seat for view in views)
    versions = [view["version"] for view in views]
    assert versions == sorted(set(versions)), "views out of order or repeated"
    assert views[-1]["version"] == final["version"] and views[-1]["status"] == "FINISHED"
    assert views[-1]["winners"] == final["winners"]
    assert final["seats"][seat]["timeouts"] == 0, "the server had to move for the client's seat"
    # every move of the seat in the match's record is one the client made
    record = api.http.get(f"/api/matches/{match_id}/record").json()
    assert moves == sum(1 for move in record["moves"] if move["seat"] == seat) > 0


# ----------------------------------------------------------------------------- frames


def test_every_websocket_message_is_a_text_frame(api: Api) -> None:
    """The protocol's messages are JSON text: ack, pong, next, complete and error arrive as
    text frames (a client that refuses binary ones, as graphql-ws and gql do, gets them all)."""
    token, _ = api.register()
    with connect(api.ws_url, subprotocols=[PROTOCOL], proxy=None, open_timeout=10) as ws:  # type: ignore[list-item]
        frames: list[str | bytes] = []

        def exchange(message: dict[str, Any], answers: int) -> list[dict[str, Any]]:
            ws.send(json.dumps(message))
            received = [ws.recv(timeout=10) for _ in range(answers)]
            frames.extend(received)
            return [json.loads(frame) for frame in received]

        assert exchange({"type": "connection_init", "payload": {"token": token}}, 1)[0]["type"] == "connection_ack"
        assert exchange({"type": "ping"}, 1)[0]["type"] == "pong"
        answers = exchange({"id": "1", "type": "subscribe", "payload": {"query": "{ me { name } }"}}, 2)
        assert [a["type"] for a in answers] == ["next", "complete"] and answers[0]["payload"]["data"]["me"]["name"]
        refused = exchange({"id": "2", "type": "subscribe", "payload": {"query": "subscription { nope }"}}, 1)[0]
        assert refused["type"] == "error" and refused["payload"][0]["extensions"]["code"] == "BAD_INPUT"
    assert [type(frame) for frame in frames] == [str] * len(frames), "binary frames sent"


# ----------------------------------------------------------------------------- graphql-ws (node)


def test_graphql_ws_on_node_plays_a_match_to_its_end(api: Api) -> None:
    token, match_id, seat = seated_match(api)
    [outcome] = node.run("play.mjs", api.ws_url, token, match_id)
    assert outcome["failure"] is None and outcome["refused"] == [], outcome
    check_played_to_the_end(api, token, match_id, seat, outcome["views"], len(outcome["moves"]))


# ----------------------------------------------------------------------------- gql (Python)


async def play_with_gql(url: str, token: str, match_id: str) -> tuple[list[dict[str, Any]], int]:
    """gql's WebSocket transport as its documentation has it (the token in init_payload):
    matchUpdates followed to its end, a move on the same connection whenever myTurns says one
    is due. Every view seen and the number of moves made."""
    views: list[dict[str, Any]] = []
    moves = 0
    transport = WebsocketsTransport(url=url, init_payload={"token": token})
    async with Client(transport=transport) as session:

        async def play() -> None:
            nonlocal moves
            async for data in session.subscribe(GraphQLRequest(TURNS)):
                turn = data["myTurns"]
                if turn["id"] != match_id:
                    continue
                move = {k: v for k, v in turn["legalMoves"][0].items() if v is not None}
                # counted as it is sent: when it ends the match, the follower may see the end
                # (and this task be cancelled) before the answer comes back; a refused move
                # fails the test as gql's error
                moves += 1
                await session.execute(GraphQLRequest(MOVE, variable_values={"m": match_id, "move": move, "v": turn["version"]}))

        async def follow() -> None:
            async for data in session.subscribe(GraphQLRequest(UPDATES, variable_values={"m": match_id})):
                views.append(data["matchUpdates"])

        follower, player = asyncio.create_task(follow()), asyncio.create_task(play())
        done, _ = await asyncio.wait({follower, player}, return_when=asyncio.FIRST_COMPLETED)
        player.cancel()
        if player in done:
            player.result()  # its error, if it failed
            raise AssertionError("myTurns ended before the match did")
        follower.result()
    return views, moves


def test_python_gql_plays_a_match_to_its_end(api: Api) -> None:
    token, match_id, seat = seated_match(api)
    views, moves = asyncio.run(asyncio.wait_for(play_with_gql(api.ws_url, token, match_id), 120))
    check_played_to_the_end(api, token, match_id, seat, views, moves)


def test_gql_gets_a_refused_operation_as_its_error(api: Api) -> None:
    """An error the server answers comes out of gql as gql's own error, with the API's code."""

    async def refused() -> TransportQueryError:
        async with Client(transport=WebsocketsTransport(url=api.ws_url)) as session:  # no token
            try:
                await session.execute(GraphQLRequest("mutation { createMatch(input: {players: 3}) { id } }"))
            except TransportQueryError as error:
                return error
        raise AssertionError("a match was created without a token")

    error = asyncio.run(asyncio.wait_for(refused(), 30))
    assert error.errors and error.errors[0]["extensions"]["code"] == "UNAUTHENTICATED", error.errors


# ----------------------------------------------------------------------------- graphql-http audit


def test_the_graphql_over_http_audit_finds_nothing_to_fault(api: Api) -> None:
    results = node.run("audit.mjs", f"{api.base}/graphql")
    assert len(results) >= 50, results  # the whole audit ran
    faulted = [r for r in results if r["status"] in ("error", "warn")]
    assert faulted == [], json.dumps(faulted, indent=1)
    # the MAY items (GET, form-encoded GET) are done too
    assert [r for r in results if r["status"] != "ok"] == []
