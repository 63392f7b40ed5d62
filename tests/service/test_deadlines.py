"""Move deadlines, enforced by a real `wizard-arena worker` (its deadline sweeper): the
fallback move and the timeout mark, matches that never stall, simultaneous bids filled at the
deadline, a late move racing its timeout, a worker killed and replaced. And when a deadline
restarts (LiveMatch itself, in this process): whenever a seat must act anew, the seat that
just moved too, but not while hidden bids are still being collected."""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

import pytest

from service.model.live_match import MatchStatus, SeatHolder
from service.store.keys import CLOCK_HEARTBEATS, events_key
from service.store.redis_client import open_sync
from tests.engine.conftest import stacked
from tests.service.arena_client import first_legal, wait_until
from tests.service.conftest import TIMEOUT_MS, first_action, live_match
from tests.service.ws_client import Completed, GraphQLWS
from wizard import Move, Phase
from wizard.moves import move_of_action

VIEW = """
id version status phase round awaiting toAct mySeat deadline hand
legalMoves { bid card trump }
seats { seat bid timeouts hand }
"""
MATCH_UPDATES = "subscription($m: ID!) { matchUpdates(matchId: $m) { " + VIEW + " } }"


def clock_going(redis_url: str, since_ms: int) -> None:
    """Wait until a worker's clock has gone round since ``since_ms`` (its heartbeat): a worker
    process takes seconds to start on a busy machine, and a deadline due before it sweeps
    would be late by that."""
    client = open_sync(redis_url)
    try:
        wait_until(lambda: any(int(beat) >= since_ms for beat in client.hvals(CLOCK_HEARTBEATS)),
                   "the worker's clock to go round", timeout=60)
    finally:
        client.close()


@pytest.fixture(scope="module")
def worker(start_worker: Any, redis_url: str) -> Any:
    """This module's worker, its clock going round, stopped after it (the last test kills it
    and starts another)."""
    started = int(time.time() * 1000)
    process = start_worker(ARENA_MATCH_EVENTS_KEPT="0")  # every event kept: the tests read the whole log
    clock_going(redis_url, started)
    yield process
    process.stop()


@pytest.fixture(scope="module")
def fast_api(start_api: Any) -> Any:
    """An API that accepts very short move timeouts, for whole matches played by timeouts."""
    return start_api(ARENA_MIN_MOVE_TIMEOUT_MS="10", ARENA_MATCH_EVENTS_KEPT="0")


def events(redis_client: Any, match_id: str) -> list[dict[str, Any]]:
    """The match's event stream (its replay log), each event with its version ``v`` and the
    time Redis appended it (``at``, ms since the epoch: the stream id)."""
    out = []
    for entry_id, fields in redis_client.xrange(events_key(match_id)):
        event = json.loads(fields[b"e"])
        event["v"] = int(fields[b"v"])
        event["at"] = int(entry_id.split(b"-")[0])
        out.append(event)
    return out


def move_dict(action: int) -> dict[str, Any]:
    """An engine action as a MoveInput-like dict."""
    move = move_of_action(action)
    if move.trump is not None:
        return {"trump": move.trump.name}
    return {"bid": move.bid} if move.bid is not None else {"card": move.card}


def legal(view: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in m.items() if v is not None} for m in view["legalMoves"]]


def deadline_ms(view: dict[str, Any]) -> int:
    return int(datetime.fromisoformat(view["deadline"]).timestamp() * 1000)


def next_view(ws: GraphQLWS, op: str, timeout: float = 10) -> dict[str, Any]:
    return ws.data(op, "matchUpdates", timeout)


def test_a_seat_that_misses_its_deadline_gets_a_legal_fallback_move_and_a_timeout_mark(api, worker, redis_client):
    token, _ = api.register()
    match_id = api.create_match(token, players=3, ruleset="WIZARD_JUNIOR", firstDealer=0, moveTimeoutMs=250)
    with GraphQLWS(api.ws_url) as ws:
        ws.init(token)
        op = ws.subscribe(MATCH_UPDATES, {"m": match_id})
        next_view(ws, op)
        seat = api.join(token, match_id, 1)["mySeat"]  # the first to bid
        for _ in range(2):
            api.add_house_bot(token, match_id, "RANDOM")
        for expected_timeouts in (1, 2):  # the bot never moves: each of its turns times out
            view = next_view(ws, op)
            while not (view["status"] == "ACTIVE" and seat in view["awaiting"]):
                view = next_view(ws, op)
            assert view["seats"][seat]["timeouts"] == expected_timeouts - 1
            due = deadline_ms(view)
            assert view["legalMoves"]

            after = next_view(ws, op, timeout=5)  # the server's move, at the deadline
            noticed = time.time() * 1000
            assert after["version"] == view["version"] + 1
            assert after["seats"][seat]["timeouts"] == expected_timeouts
            [event] = [e for e in events(redis_client, match_id) if e["v"] == after["version"]]
            assert event["t"] == "move" and event["seat"] == seat and event["by"] == "timeout"
            assert event["at"] >= due and noticed >= due  # not before the deadline ...
            assert event["at"] - due < 2_000  # ... and soon after it
            assert move_dict(event["a"]) in legal(view)  # a legal move for that state
    assert api.match(match_id, token)["seats"][seat]["timeouts"] >= 2


def test_a_match_whose_bots_never_move_still_finishes(fast_api, worker, redis_client):
    tokens = [fast_api.register()[0] for _ in range(3)]
    match_id = fast_api.create_match(tokens[0], players=6, ruleset="WIZARD_JUNIOR", moveTimeoutMs=20)
    with GraphQLWS(fast_api.ws_url) as ws:
        ws.init()
        op = ws.subscribe(MATCH_UPDATES, {"m": match_id})
        next_view(ws, op)
        for token in tokens:
            fast_api.join(token, match_id)
        for kind in ("RANDOM", "HEURISTIC", "RANDOM"):
            fast_api.add_house_bot(tokens[0], match_id, kind)
        final = None
        while True:  # every step of the way within a few seconds: it never stalls
            try:
                final = next_view(ws, op, timeout=5)
            except Completed:
                break
    assert final is not None and final["status"] == "FINISHED"
    moves = [e for e in events(redis_client, match_id) if e["t"] == "move"]
    house_seats = {3, 4, 5}
    for seat in range(6):
        by = {e["by"] for e in moves if e["seat"] == seat}
        assert by == ({"house"} if seat in house_seats else {"timeout"}), (seat, by)
        made_by_timeout = sum(1 for e in moves if e["seat"] == seat and e["by"] == "timeout")
        assert final["seats"][seat]["timeouts"] == made_by_timeout
    assert final["seats"][0]["timeouts"] >= 6 + 21  # 6 rounds: a bid and 1..6 cards each


def test_under_hidden_bids_every_missing_bid_is_filled_at_the_deadline(api, worker, redis_client):
    token, _ = api.register()
    silent = [api.register()[0] for _ in range(2)]
    match_id = api.create_match(
        token, players=4, variants=["HIDDEN_BIDS"], firstDealer=0, moveTimeoutMs=600, seed="hidden-bids"
    )
    api.add_house_bot(token, match_id, "HEURISTIC")  # seat 0, the dealer: it also picks trump at once
    with GraphQLWS(api.ws_url) as ws:
        ws.init(token)
        op = ws.subscribe(MATCH_UPDATES, {"m": match_id})
        next_view(ws, op)
        for seat, other in zip((2, 3), silent, strict=True):
            api.join(other, match_id, seat)
        api.join(token, match_id, 1)
        view = next_view(ws, op)
        while not (view["phase"] == "BID" and 1 in view["awaiting"]):
            view = next_view(ws, op)
        due = deadline_ms(view)
        assert view["toAct"] is None and set(view["awaiting"]) >= {1, 2, 3}
        my_bid = first_legal(view)
        moved = api.submit(token, match_id, my_bid)
        assert not moved.get("errors"), moved
        bidding = []
        view = next_view(ws, op)
        while view["phase"] == "BID":
            bidding.append(view)
            view = next_view(ws, op, timeout=5)
        play = view
    for during in bidding:  # the deadline stays put while bids come in, and bids stay hidden
        assert deadline_ms(during) == due
        assert all(s["bid"] is None for s in during["seats"] if s["seat"] != 1)
    assert play["phase"] == "PLAY"
    assert [s["bid"] is not None for s in play["seats"]] == [True] * 4  # all shown once all are in
    assert play["seats"][1]["bid"] == my_bid["bid"]
    assert [s["timeouts"] for s in play["seats"]] == [0, 0, 1, 1]
    filled = [e for e in events(redis_client, match_id) if e["t"] == "move" and e["by"] == "timeout"]
    assert sorted(e["seat"] for e in filled[:2]) == [2, 3]
    for event in filled[:2]:
        assert move_of_action(event["a"]).bid is not None
        assert due <= event["at"] < due + 2_000


def test_a_late_move_racing_its_timeout_applies_once(api, worker, redis_client):
    token, _ = api.register()
    match_id = api.create_match(token, players=3, ruleset="WIZARD_JUNIOR", moveTimeoutMs=150)
    for _ in range(2):
        api.add_house_bot(token, match_id, "RANDOM")
    seat = api.join(token, match_id)["mySeat"]
    offsets_ms = [-8, -6, -4, -3, -2, -1, 0, 1, -5, -3, -1, 0]  # around the sweeper's moment
    outcomes = []
    for offset in offsets_ms:
        turn = api.data(
            "query($m: ID!) { awaitTurn(matchId: $m, timeoutMs: 5000) { version deadline legalMoves { bid card trump } } }",
            {"m": match_id}, token,
        )["awaitTurn"]
        assert turn is not None
        # Not a synchronisation: the test's point is to move right at the deadline, when the
        # worker's timeout fires too.
        time.sleep(max(0.0, (deadline_ms(turn) + offset) / 1000 - time.time()))
        body = api.submit(token, match_id, first_legal(turn), turn["version"])
        applied = not body.get("errors")
        if applied:
            assert body["data"]["submitMove"]["version"] == turn["version"] + 1
        else:
            assert body["errors"][0]["extensions"]["code"] == "STALE_VERSION", body
        # Exactly one move was made for that turn, by whichever came first.
        log = events(redis_client, match_id)
        turn_events = [e for e in log if e["v"] == turn["version"] + 1]
        assert len(turn_events) == 1
        [event] = turn_events
        assert event["t"] == "move" and event["seat"] == seat
        assert event["by"] == ("bot" if applied else "timeout"), (offset, body)
        outcomes.append(applied)

    match = api.match(match_id, token)
    log = [e for e in events(redis_client, match_id) if e["v"] <= match["version"]]
    mine = [e for e in log if e["t"] == "move" and e["seat"] == seat]
    assert sum(1 for e in mine if e["by"] == "bot") == sum(outcomes)
    assert sum(1 for e in mine if e["by"] == "timeout") == match["seats"][seat]["timeouts"]
    assert [e["v"] for e in log] == list(range(1, match["version"] + 1))  # one event per version


def test_matches_move_on_after_their_worker_is_killed_and_another_started(api, worker, start_worker, redis_url):
    first = worker  # the only worker running
    second = None
    try:
        token, _ = api.register()
        matches = []
        for _ in range(2):
            match_id = api.create_match(token, players=3, ruleset="WIZARD_JUNIOR", moveTimeoutMs=100)
            for _ in range(2):
                api.add_house_bot(token, match_id, "RANDOM")
            matches.append(match_id)
        with GraphQLWS(api.ws_url) as ws:
            ws.init()
            ops = {m: ws.subscribe(MATCH_UPDATES, {"m": m}) for m in matches}
            seats = {m: api.join(token, m)["mySeat"] for m in matches}

            def wait_for_timeouts(match_id: str, at_least: int) -> None:
                view = next_view(ws, ops[match_id], timeout=5)
                while view["seats"][seats[match_id]]["timeouts"] < at_least:
                    view = next_view(ws, ops[match_id], timeout=5)

            for match_id in matches:
                wait_for_timeouts(match_id, 1)  # the first worker keeps the clock
            first.stop(sig_kill=True)
            assert first.popen.returncode == -9
            counts = {m: api.match(m)["seats"][seats[m]]["timeouts"] for m in matches}
            started = int(time.time() * 1000)
            second = start_worker()
            clock_going(redis_url, started)
            for match_id in matches:
                wait_for_timeouts(match_id, counts[match_id] + 2)
        for match_id in matches:
            assert api.match(match_id)["status"] == "ACTIVE"
    finally:
        if second is not None:
            second.stop()


# ---------------------------------------------------------------------- restarting (LiveMatch, no worker)


def test_the_deadline_restarts_when_the_trick_winner_leads_the_next_trick():
    # round 2 (dealer 1) is stacked: seat 2 leads, seat 1 plays last and wins with the Wizard
    round2 = stacked([["B3", "B4"], ["W", "B5"], ["B1", "B2"]], trump="G1", dealer=1)
    match = live_match(first_dealer=0, deals=[[], round2])
    for seat in range(3):
        match.join(seat, SeatHolder(f"bot{seat}", f"Bot {seat}"), now_ms=1_000)
    assert match.status is MatchStatus.ACTIVE and match.deadline_ms == 1_000 + TIMEOUT_MS
    now = 2_000
    while match.state.round == 1 or match.state.phase is Phase.BID:  # round 1, then round 2's bids
        seat, action = first_action(match)
        match.play(seat, action, "bot", now)
        now += 100
    assert match.state.round == 2 and match.awaiting() == (2,)

    match.play(2, match.state.action_of(2, Move(card="B1")), "bot", 10_000)
    assert match.deadline_ms == 10_000 + TIMEOUT_MS  # another seat must act: restarted
    match.play(0, match.state.action_of(0, Move(card="B3")), "bot", 11_000)
    assert match.deadline_ms == 11_000 + TIMEOUT_MS
    event = match.play(1, match.state.action_of(1, Move(card="W")), "bot", 12_000)
    assert match.awaiting() == (1,) and match.state.to_act == 1  # seat 1 won the trick and leads again
    # the same seat acts again, anew: its deadline restarts (the bug kept 16_000 from seat 0's move)
    assert match.deadline_ms == 12_000 + TIMEOUT_MS
    assert event["dl"] == 12_000 + TIMEOUT_MS


def test_the_deadline_stays_while_hidden_bids_are_collected_and_restarts_for_the_last_bidder_who_leads():
    match = live_match(variants=("HIDDEN_BIDS",), first_dealer=0)  # round 1: seat 1 leads the trick
    for seat in range(3):
        match.join(seat, SeatHolder(f"bot{seat}", f"Bot {seat}"), now_ms=1_000)
    start = 1_000 + TIMEOUT_MS
    assert match.awaiting() == (0, 1, 2) and match.deadline_ms == start

    match.play(0, match.state.legal_actions(0)[0], "bot", 2_000)
    assert match.awaiting() == (1, 2) and match.deadline_ms == start  # bids still being collected
    event = match.play(2, match.state.legal_actions(2)[0], "bot", 3_000)
    assert match.awaiting() == (1,) and match.deadline_ms == start and event["dl"] == start
    assert match.state.phase is Phase.BID

    event = match.play(1, match.state.legal_actions(1)[0], "bot", 4_000)  # the last bid; seat 1 leads
    assert match.state.phase is Phase.PLAY and match.awaiting() == (1,)
    assert match.deadline_ms == 4_000 + TIMEOUT_MS and event["dl"] == 4_000 + TIMEOUT_MS


def test_the_deadline_restarts_when_the_last_hidden_bidder_is_not_the_one_to_lead():
    match = live_match(variants=("HIDDEN_BIDS",), first_dealer=0)
    for seat in range(3):
        match.join(seat, SeatHolder(f"bot{seat}", f"Bot {seat}"), now_ms=1_000)
    match.play(1, match.state.legal_actions(1)[0], "bot", 2_000)
    match.play(0, match.state.legal_actions(0)[0], "bot", 3_000)
    assert match.deadline_ms == 1_000 + TIMEOUT_MS
    match.play(2, match.state.legal_actions(2)[0], "bot", 4_000)
    assert match.awaiting() == (1,) and match.deadline_ms == 4_000 + TIMEOUT_MS
