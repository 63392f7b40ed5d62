"""Two `wizard-arena serve` processes on one Redis: whatever one process does, the waiters of
the other (subscriptions, awaitTurn, GET /api/turns, myTurns) see it at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from service.store.keys import bot_channel, match_channel
from tests.service.arena_client import first_legal, wait_for_subscription
from tests.service.ws_client import GraphQLWS, play_along

VIEW = "id version status phase awaiting toAct mySeat hand legalMoves { bid card trump }"
AWAIT_TURN = "query($m: ID, $t: Int) { awaitTurn(matchId: $m, timeoutMs: $t) { " + VIEW + " } }"
POLL_MS = 20_000


@pytest.fixture(scope="module")
def other_api(start_api: Any) -> Any:
    """A second API process on the same Redis as ``api``."""
    return start_api()


class Background:
    """Runs ``call`` in a thread; ``result()`` is its answer and when it came."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._call = call
        self._answer: Any = None
        self._error: BaseException | None = None
        self.answered_at = 0.0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._answer = self._call()
        except BaseException as error:  # noqa: BLE001 - re-raised in result()
            self._error = error
        self.answered_at = time.monotonic()

    def result(self, timeout: float) -> Any:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "no answer in time"
        if self._error is not None:
            raise self._error
        return self._answer


def three_bots(api: Any) -> tuple[str, list[str]]:
    """A started 3-player match of three registered bots (seats 0, 1, 2 by token), dealer 0,
    at the first bid (seat 1's): no worker can time anyone out (60 s moves)."""
    tokens = [api.register()[0] for _ in range(3)]
    match_id = api.create_match(tokens[0], players=3, firstDealer=0, moveTimeoutMs=60_000, seed="two-processes")
    for seat, token in enumerate(tokens):
        match = api.join(token, match_id, seat)
    if match["phase"] == "CHOOSE_TRUMP":  # the dealer chooses when a Wizard is turned up
        assert not api.submit(tokens[0], match_id, first_legal(api.match(match_id, tokens[0]))).get("errors")
        match = api.match(match_id)
    assert match["phase"] == "BID" and match["toAct"] == 1, match
    return match_id, tokens


def test_match_updates_on_one_process_sees_every_move_made_through_the_other(api, other_api):
    token, _ = api.register()
    match_id = api.create_match(token, players=3, ruleset="WIZARD_JUNIOR", moveTimeoutMs=60_000)
    with GraphQLWS(api.ws_url) as ws:
        ws.init(token)
        op = ws.subscribe("subscription($m: ID!) { matchUpdates(matchId: $m) { " + VIEW + " } }", {"m": match_id})
        first = ws.data(op, "matchUpdates")
        # Everything from here on happens through the other process: seats, house bots, moves.
        for _ in range(2):
            other_api.add_house_bot(token, match_id, "HEURISTIC")
        seat = other_api.join(token, match_id)["mySeat"]
        views = play_along(ws, op, first, other_api, token, match_id, seat)
    versions = [v["version"] for v in views]
    assert versions == list(range(first["version"], first["version"] + len(views)))
    assert views[-1]["status"] == "FINISHED" and len(views) > 100
    assert views[-1]["version"] == other_api.match(match_id)["version"] == api.match(match_id)["version"]


def test_await_turn_on_one_process_wakes_for_a_move_made_on_the_other(api, other_api, redis_client):
    match_id, tokens = three_bots(api)
    started = time.monotonic()
    with httpx.Client(base_url=api.base, timeout=60) as http:
        poll = Background(lambda: http.post(
            "/graphql", json={"query": AWAIT_TURN, "variables": {"m": match_id, "t": POLL_MS}},
            headers={"Authorization": f"Bearer {tokens[2]}"},
        ).json())
        wait_for_subscription(redis_client, match_channel(match_id))  # seat 2's poll waits in the first process
        moved = other_api.submit(tokens[1], match_id, {"bid": 0})
        assert not moved.get("errors"), moved
        moved_at = time.monotonic()
        answer = poll.result(timeout=POLL_MS / 1000)
    assert not answer.get("errors"), answer
    turn = answer["data"]["awaitTurn"]
    assert turn is not None and turn["id"] == match_id
    assert turn["version"] == moved["data"]["submitMove"]["version"]
    assert turn["mySeat"] == 2 and turn["awaiting"] == [2] and turn["legalMoves"] and turn["hand"]
    assert poll.answered_at >= moved_at - 0.5  # it waited for the move ...
    assert poll.answered_at - started < 5  # ... and woke well before its timeout


def test_get_api_turns_on_one_process_wakes_for_a_move_made_on_the_other(api, other_api, redis_client):
    match_id, tokens = three_bots(other_api)
    assert not api.submit(tokens[1], match_id, {"bid": 1}).get("errors")  # now seat 2, then seat 0
    started = time.monotonic()
    with httpx.Client(base_url=other_api.base, timeout=60) as http:
        poll = Background(lambda: http.get(
            "/api/turns", params={"matchId": match_id, "timeoutMs": POLL_MS},
            headers={"Authorization": f"Bearer {tokens[0]}"},
        ))
        wait_for_subscription(redis_client, match_channel(match_id))  # seat 0's poll waits in the second process
        moved = api.submit(tokens[2], match_id, {"bid": 0})
        assert not moved.get("errors"), moved
        response = poll.result(timeout=POLL_MS / 1000)
    assert response.status_code == 200, response.text
    turn = response.json()
    assert turn["id"] == match_id and turn["version"] == moved["data"]["submitMove"]["version"]
    assert turn["mySeat"] == 0 and turn["awaiting"] == [0] and turn["phase"] == "BID"
    assert turn["legalMoves"] and turn["hand"]
    assert time.monotonic() - started < 5


def test_my_turns_on_one_process_sees_a_match_joined_through_the_other(api, other_api):
    token, _ = api.register()
    first_match = api.create_match(token, players=3, ruleset="WIZARD_JUNIOR", moveTimeoutMs=60_000)
    for _ in range(2):
        api.add_house_bot(token, first_match, "RANDOM")
    with GraphQLWS(api.ws_url) as ws:
        ws.init(token)
        op = ws.subscribe("subscription { myTurns { " + VIEW + " } }")
        api.join(token, first_match)
        assert ws.data(op, "myTurns")["id"] == first_match  # the subscription is under way
        # A match created and joined through the other process, house bots playing there.
        second = other_api.create_match(token, players=4, ruleset="WIZARD_JUNIOR", moveTimeoutMs=60_000)
        for _ in range(3):
            other_api.add_house_bot(token, second, "HEURISTIC")
        seat = other_api.join(token, second)["mySeat"]
        turn = ws.data(op, "myTurns", timeout=10)
        assert turn["id"] == second and turn["mySeat"] == seat and seat in turn["awaiting"]
        assert turn["legalMoves"] and turn["hand"] is not None
        # And the moves there keep coming through: one move on the other process, the next turn here.
        moved = other_api.submit(token, second, first_legal(turn), turn["version"])
        assert not moved.get("errors"), moved
        again = ws.data(op, "myTurns", timeout=10)
        assert again["id"] == second and again["version"] > turn["version"]


def test_await_turn_in_any_match_wakes_when_the_bot_joins_a_match_on_the_other(api, other_api, redis_client):
    token, bot_id = api.register()
    match_id = other_api.create_match(token, players=3, ruleset="WIZARD_JUNIOR", moveTimeoutMs=60_000)
    for _ in range(2):
        other_api.add_house_bot(token, match_id, "RANDOM")
    started = time.monotonic()
    with httpx.Client(base_url=api.base, timeout=60) as http:
        poll = Background(lambda: http.post(
            "/graphql", json={"query": AWAIT_TURN, "variables": {"m": None, "t": POLL_MS}},
            headers={"Authorization": f"Bearer {token}"},
        ).json())
        wait_for_subscription(redis_client, bot_channel(bot_id))  # waiting on the bot's matches (none yet)
        seat = other_api.join(token, match_id)["mySeat"]  # the last seat: the match starts
        answer = poll.result(timeout=POLL_MS / 1000)
    assert not answer.get("errors"), answer
    turn = answer["data"]["awaitTurn"]
    assert turn is not None and turn["id"] == match_id and turn["mySeat"] == seat and seat in turn["awaiting"]
    assert time.monotonic() - started < 5
