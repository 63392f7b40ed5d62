"""Seats as a bot author meets them: joining is idempotent (a join sent again after a lost
answer finds the seat it has), leaveMatch gives a seat of a WAITING match back, and
cancelMatch lets the creator abort a WAITING match (ABORTED, abortReason says why); a
started match can be neither left nor cancelled."""

from __future__ import annotations

from typing import Any

LONG = 600_000
FIELDS = "id version status mySeat abortReason seats { seat bot { id } }"
JOIN = "mutation($m: ID!, $s: Int) { joinMatch(matchId: $m, seat: $s) { " + FIELDS + " } }"
LEAVE = "mutation($m: ID!) { leaveMatch(matchId: $m) { " + FIELDS + " } }"
CANCEL = "mutation($m: ID!) { cancelMatch(matchId: $m) { " + FIELDS + " } }"
VIEW = "query($m: ID!) { match(id: $m) { " + FIELDS + " } }"


def error(body: dict[str, Any], code: str, *fragments: str) -> None:
    assert body.get("errors"), body
    assert body["errors"][0]["extensions"]["code"] == code, body
    for fragment in fragments:
        assert fragment in body["errors"][0]["message"], body


def test_joining_again_answers_the_seat_the_bot_has(api):
    creator, _ = api.register()
    bot, bot_id = api.register()
    match_id = api.create_match(creator, players=3, moveTimeoutMs=LONG)
    first = api.data(JOIN, {"m": match_id, "s": 1}, bot)["joinMatch"]
    assert first["mySeat"] == 1
    for seat in (None, 1):  # the same answer, nothing changed (the version did not move)
        assert api.data(JOIN, {"m": match_id, "s": seat}, bot)["joinMatch"] == first
    # another seat than its own is refused: the bot learns how to change seats
    error(api.gql(JOIN, {"m": match_id, "s": 0}, bot), "BAD_INPUT", "already sit in seat 1", "leaveMatch")
    assert api.data(VIEW, {"m": match_id}, bot)["match"] == first
    # once the match has started, joining again still answers its seat
    api.add_house_bot(creator, match_id)
    api.add_house_bot(creator, match_id)
    again = api.data(JOIN, {"m": match_id, "s": None}, bot)["joinMatch"]
    assert again["status"] == "ACTIVE" and again["mySeat"] == 1 and again["seats"][1]["bot"]["id"] == bot_id


def test_leave_match_frees_the_seat_and_is_idempotent(api):
    creator, _ = api.register()
    bot, bot_id = api.register()
    match_id = api.create_match(creator, players=3, moveTimeoutMs=LONG)
    joined = api.data(JOIN, {"m": match_id, "s": 2}, bot)["joinMatch"]
    left = api.data(LEAVE, {"m": match_id}, bot)["leaveMatch"]
    assert left["version"] == joined["version"] + 1 and left["status"] == "WAITING"
    assert left["mySeat"] is None and left["seats"][2]["bot"] is None
    assert api.data(LEAVE, {"m": match_id}, bot)["leaveMatch"] == left  # again: nothing to do
    # the seat is free for anyone, the bot may sit elsewhere
    other, _ = api.register()
    assert api.data(JOIN, {"m": match_id, "s": 2}, other)["joinMatch"]["mySeat"] == 2
    assert api.data(JOIN, {"m": match_id, "s": 0}, bot)["joinMatch"]["mySeat"] == 0
    # a started match keeps its seats
    api.add_house_bot(creator, match_id)
    error(api.gql(LEAVE, {"m": match_id}, bot), "MATCH_NOT_ACTIVE", "ACTIVE", "WAITING")
    assert api.data(VIEW, {"m": match_id}, bot)["match"]["seats"][0]["bot"]["id"] == bot_id
    error(api.gql(LEAVE, {"m": "no-such-match"}, bot), "NOT_FOUND")
    error(api.gql(LEAVE, {"m": match_id}), "UNAUTHENTICATED")


def test_the_creator_cancels_a_waiting_match(api):
    creator, _ = api.register()
    bot, _ = api.register()
    match_id = api.create_match(creator, players=3, moveTimeoutMs=LONG)
    api.data(JOIN, {"m": match_id, "s": 0}, bot)
    error(api.gql(CANCEL, {"m": match_id}, bot), "FORBIDDEN", "creator")
    cancelled = api.data(CANCEL, {"m": match_id}, creator)["cancelMatch"]
    assert cancelled["status"] == "ABORTED" and cancelled["abortReason"] == "cancelled by its creator"
    assert api.data(CANCEL, {"m": match_id}, creator)["cancelMatch"] == cancelled  # again: as it is
    seen = api.data(VIEW, {"m": match_id}, bot)["match"]  # everyone sees why
    assert seen["status"] == "ABORTED" and seen["abortReason"] == "cancelled by its creator"
    error(api.gql(JOIN, {"m": match_id, "s": 1}, creator), "MATCH_NOT_ACTIVE")
    error(api.gql(LEAVE, {"m": match_id}, bot), "MATCH_NOT_ACTIVE")


def test_a_started_match_cannot_be_cancelled(api):
    creator, _ = api.register()
    match_id = api.create_match(creator, players=3, moveTimeoutMs=LONG)
    api.data(JOIN, {"m": match_id, "s": 0}, creator)
    before = api.data(VIEW, {"m": match_id}, creator)["match"]
    assert before["abortReason"] is None
    api.add_house_bot(creator, match_id)
    api.add_house_bot(creator, match_id)
    error(api.gql(CANCEL, {"m": match_id}, creator), "MATCH_NOT_ACTIVE", "only a WAITING match can be cancelled")
    after = api.data(VIEW, {"m": match_id}, creator)["match"]
    assert after["status"] == "ACTIVE" and after["abortReason"] is None
