"""``wizard_arena_turn_frame_seconds``: from a commit to the turn it gives a waiting bot written
to that bot, on a real API process (its own: the histogram is the process's) with real
clients: a myTurns WebSocket, awaitTurn and ``GET /api/turns`` long polls. Each turn a wait
heard as it was committed is timed once, within the time the client saw pass between the
move that led to it and the turn; a turn that was there already as the wait began is not."""

from __future__ import annotations

import functools
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.store.keys import match_channel
from service.store.matches import MatchEvent, decode_published
from tests.service.arena_client import Api, first_legal, wait_until
from tests.service.ws_client import GraphQLWS

TURN_FRAMES = "wizard_arena_turn_frame_seconds"
MY_TURNS = "subscription { myTurns { id version legalMoves { bid card trump } } }"
AWAIT_TURN = "query($m: ID!) { awaitTurn(matchId: $m, timeoutMs: 20000) { version } }"


@pytest.fixture(scope="module")
def own_api(start_api: Any) -> Api:
    """An API process of this module's: its histogram counts only these tests' turns."""
    return start_api()  # type: ignore[no-any-return]


def _metrics(api: Api) -> dict[str, float]:
    out = {}
    for family in text_string_to_metric_families(api.http.get("/metrics").text):
        for sample in family.samples:
            via = sample.labels.get("via")
            if "le" not in sample.labels:
                out[sample.name if via is None else f"{sample.name}:{via}"] = sample.value
    return out


def timed(api: Api, via: str) -> tuple[float, float]:
    """How many turns the histogram timed ``via`` websocket or http, and their seconds summed."""
    metrics = _metrics(api)
    return metrics[f"{TURN_FRAMES}_count:{via}"], metrics[f"{TURN_FRAMES}_sum:{via}"]


def waits_open(api: Api) -> float:
    return _metrics(api)["wizard_arena_waits_open"]


def test_a_published_event_carries_its_commit_time_and_one_published_without_it_still_reads() -> None:
    """``ct`` (Redis's µs) is the commit's time, not part of the event; a message of a process
    from before it (a rolling upgrade) is read as ever, its turns not timed."""
    channel = match_channel("m1")
    timed_event = decode_published(channel, b'7|1-2|{"ct":1764331200123456,"t":"abort","why":"gone","dl":null}')
    untimed = decode_published(channel, b'7|1-2|{"t":"abort","why":"gone","dl":null}')
    assert isinstance(timed_event, MatchEvent) and isinstance(untimed, MatchEvent)
    assert timed_event.committed_at == 1764331200.123456 and untimed.committed_at is None
    assert timed_event.event == untimed.event == {"t": "abort", "why": "gone", "dl": None, "v": 7}


def test_each_my_turns_frame_a_commit_gives_is_timed_from_that_commit(own_api: Api) -> None:
    api = own_api
    token, _ = api.register()
    match_id = api.create_match(token, players=3, ruleset="WIZARD_JUNIOR", moveTimeoutMs=60_000)
    for _ in range(2):
        api.add_house_bot(token, match_id, "RANDOM")
    api.join(token, match_id)
    wait_until(lambda: api.data(AWAIT_TURN, {"m": match_id}, token)["awaitTurn"], "the bot's first turn")
    count, total = timed(api, "websocket")
    frames, waited = 0, 0.0
    with GraphQLWS(api.ws_url) as ws:
        ws.init(token)
        op = ws.subscribe(MY_TURNS)
        turn = ws.data(op, "myTurns")  # there already as the subscription began: not timed
        for _ in range(6):  # (a match of WIZARD_JUNIOR gives a seat more turns than that)
            sent = time.time()
            assert not api.submit(token, match_id, first_legal(turn), turn["version"]).get("errors")
            turn = ws.data(op, "myTurns")  # given by a commit the subscription heard: timed
            waited += time.time() - sent
            frames += 1
    wait_until(lambda: _metrics(api)["wizard_arena_websockets_open"] == 0, "the WebSocket to be closed")
    count_after, total_after = timed(api, "websocket")
    assert count_after - count == frames
    # each frame was written after the commit that led to it, which came after the move sent
    assert 0 <= total_after - total <= waited


def poll_for_turn(api: Api, token: str, match_id: str, rest: bool) -> dict[str, Any]:
    """A long poll for the bot's turn in the match: GET /api/turns, or awaitTurn."""
    if rest:
        answer = api.http.get("/api/turns", params={"matchId": match_id, "timeoutMs": 20_000},
                              headers={"Authorization": f"Bearer {token}"})
        return answer.json() or {}  # type: ignore[no-any-return]
    return api.data(AWAIT_TURN, {"m": match_id}, token)["awaitTurn"] or {}  # type: ignore[no-any-return]


def moved_on(api: Api, match_id: str, version: int) -> bool:
    return bool(api.match(match_id)["version"] > version)


def to_act_or_done(api: Api, match_id: str, seat: int, poll: Future[dict[str, Any]]) -> bool:
    return poll.done() or seat in api.match(match_id)["awaiting"]


def test_a_long_poll_open_at_the_commit_is_timed_once_its_answer_is_written(own_api: Api) -> None:
    """awaitTurn and GET /api/turns (on matchId) alternately; bot A polls while bot B moves."""
    api = own_api
    a, _ = api.register()
    b, _ = api.register()
    match_id = api.create_match(a, players=3, ruleset="WIZARD_JUNIOR", moveTimeoutMs=60_000)
    api.add_house_bot(a, match_id, "RANDOM")
    a_seat = api.join(a, match_id)["mySeat"]
    b_seat = api.join(b, match_id)["mySeat"]
    # A first poll follows the match: its process keeps the match from then on, so that a
    # poll's wait is open as soon as the process counts it (waits_open), with no read between
    assert "awaitTurn" in api.data("query($m: ID!) { awaitTurn(matchId: $m, timeoutMs: 0) { version } }",
                                   {"m": match_id}, a)
    count, total = timed(api, "http")
    polls, waited = 0, 0.0
    with ThreadPoolExecutor(1) as poller:
        while polls < 4:
            match = api.match(match_id, a)
            assert match["status"] == "ACTIVE", match
            if a_seat in match["awaiting"]:
                assert not api.submit(a, match_id, first_legal(match), match["version"]).get("errors")
                continue
            if b_seat not in match["awaiting"]:  # the house bot's: it moves by itself
                wait_until(functools.partial(moved_on, api, match_id, match["version"]), "the house bot's move")
                continue
            poll = poller.submit(poll_for_turn, api, a, match_id, polls % 2 == 1)
            wait_until(lambda: waits_open(api) == 1, "A's poll to wait")
            sent = time.time()
            while not poll.done():  # B moves (again, if it leads the next trick) until A's turn comes
                seen = api.match(match_id, b)
                if b_seat in seen["awaiting"]:
                    assert not api.submit(b, match_id, first_legal(seen), seen["version"]).get("errors")
                else:
                    wait_until(functools.partial(to_act_or_done, api, match_id, b_seat, poll), "A's turn")
            assert poll.result().get("version"), poll.result()
            waited += time.time() - sent
            polls += 1
    count_after, total_after = timed(api, "http")
    assert count_after - count == polls
    assert 0 <= total_after - total <= waited
