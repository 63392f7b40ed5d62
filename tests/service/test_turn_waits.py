"""A wait for a turn that says why it ended (nextTurn: YOUR_TURN, TIMED_OUT, MATCH_OVER; on
REST the ``X-Turn-Reason`` header of ``GET /api/turns``, the body as before), and the time
a turn has left (``Match.timeLeftMs``)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

LONG = 600_000
MATCH = "id version status phase mySeat deadline timeLeftMs moveTimeoutMs legalMoves { bid card trump }"
NEXT = "query($m: ID, $t: Int) { nextTurn(matchId: $m, timeoutMs: $t) { reason match { " + MATCH + " } } }"
AWAIT = "query($m: ID, $t: Int) { awaitTurn(matchId: $m, timeoutMs: $t) { " + MATCH + " } }"
VIEW = "query($m: ID!) { match(id: $m) { " + MATCH + " } }"
CANCEL = "mutation($m: ID!) { cancelMatch(matchId: $m) { status } }"


def open_table(api: Any) -> tuple[str, list[str]]:
    """A started 3-player match of registered bots, open bids, seat 0 to bid first."""
    tokens = [api.register()[0] for _ in range(3)]
    match_id = api.create_match(
        tokens[0], players=3, ruleset="WIZARD_JUNIOR", moveTimeoutMs=LONG, firstDealer=2, seed="turn-waits",
    )
    for seat, token in enumerate(tokens):
        api.join(token, match_id, seat)
    assert api.data(VIEW, {"m": match_id}, tokens[0])["match"]["phase"] == "BID"
    return match_id, tokens


def next_turn(api: Any, token: str, match_id: str | None, timeout_ms: int) -> dict[str, Any]:
    return api.data(NEXT, {"m": match_id, "t": timeout_ms}, token)["nextTurn"]  # type: ignore[no-any-return]


def turns(api: Any, token: str, match_id: str, timeout_ms: int) -> Any:
    return api.http.get(
        "/api/turns", params={"matchId": match_id, "timeoutMs": timeout_ms}, headers={"Authorization": f"Bearer {token}"}
    )


def test_next_turn_says_it_is_your_turn(api):
    match_id, tokens = open_table(api)
    wait = next_turn(api, tokens[0], match_id, 5_000)
    assert wait["reason"] == "YOUR_TURN"
    assert wait["match"]["id"] == match_id and wait["match"]["mySeat"] == 0 and wait["match"]["legalMoves"]
    anywhere = next_turn(api, tokens[0], None, 5_000)  # any of the bot's matches
    assert anywhere["reason"] == "YOUR_TURN" and anywhere["match"]["id"] == match_id
    response = turns(api, tokens[0], match_id, 5_000)
    assert response.status_code == 200 and response.headers["X-Turn-Reason"] == "YOUR_TURN"
    assert response.json()["id"] == match_id and response.json()["legalMoves"]


def test_next_turn_says_the_time_ran_out(api):
    match_id, tokens = open_table(api)
    wait = next_turn(api, tokens[1], match_id, 100)  # seat 1 bids after seat 0
    assert wait["reason"] == "TIMED_OUT"
    assert wait["match"]["id"] == match_id and wait["match"]["legalMoves"] == []  # the match as it is
    assert next_turn(api, tokens[1], None, 100) == {"reason": "TIMED_OUT", "match": None}
    # awaitTurn and GET /api/turns answer null as they always did; the header says why
    assert api.data(AWAIT, {"m": match_id, "t": 100}, tokens[1])["awaitTurn"] is None
    response = turns(api, tokens[1], match_id, 100)
    assert response.status_code == 200 and response.json() is None
    assert response.headers["X-Turn-Reason"] == "TIMED_OUT"


def test_next_turn_says_the_match_is_over(api):
    creator, _ = api.register()
    bot, _ = api.register()
    match_id = api.create_match(creator, players=3, moveTimeoutMs=LONG)
    api.join(bot, match_id, 0)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(next_turn, api, bot, match_id, 20_000)
        # cancelled while the bot waits: the wait ends then, not at its timeout
        api.data(CANCEL, {"m": match_id}, creator)
        wait = waiting.result(timeout=15)
    assert wait["reason"] == "MATCH_OVER" and wait["match"]["status"] == "ABORTED"
    assert next_turn(api, bot, match_id, 20_000)["reason"] == "MATCH_OVER"  # at once, afterwards
    assert api.data(AWAIT, {"m": match_id, "t": 20_000}, bot)["awaitTurn"] is None
    response = turns(api, bot, match_id, 20_000)
    assert response.json() is None and response.headers["X-Turn-Reason"] == "MATCH_OVER"


def test_time_left_is_until_the_deadline_and_null_when_nobody_acts(api):
    creator, _ = api.register()
    match_id = api.create_match(creator, players=3, moveTimeoutMs=LONG, ruleset="WIZARD_JUNIOR", firstDealer=2,
                                seed="turn-waits")
    waiting = api.data(VIEW, {"m": match_id}, creator)["match"]
    assert waiting["deadline"] is None and waiting["timeLeftMs"] is None
    api.join(creator, match_id, 0)
    api.add_house_bot(creator, match_id)
    api.add_house_bot(creator, match_id)
    turn = next_turn(api, creator, match_id, 5_000)["match"]
    assert turn["deadline"] is not None and 0 < turn["timeLeftMs"] <= LONG
    deadline = datetime.fromisoformat(turn["deadline"]).timestamp() * 1000
    # the deadline less the time the answer was made at: within the time the request took
    assert abs(deadline - turn["timeLeftMs"] - datetime.now().timestamp() * 1000) < 5_000
    later = api.data(VIEW, {"m": match_id}, creator)["match"]
    assert later["deadline"] == turn["deadline"] and later["timeLeftMs"] <= turn["timeLeftMs"]
    rest = api.http.get(f"/api/matches/{match_id}", headers={"Authorization": f"Bearer {creator}"}).json()
    assert 0 < rest["timeLeftMs"] <= later["timeLeftMs"]
