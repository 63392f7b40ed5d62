"""``expectedVersion`` as a bot uses it: a move is refused with STALE_VERSION only when
something its seat sees changed after the version it read (``currentVersion`` in the
error says where the match is). Under HIDDEN_BIDS and SECRET_BIDS the other seats' hidden
bids move the version without changing what a seat sees, so a bot that reads and then bids
is never refused; a card played, or bids it can see (open bidding, or hidden bids being
revealed), still make its version stale.

RULES.md has no open simultaneous bids: open bids are made one seat after the other, and
every one of them is visible, so there every change makes an older version stale."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.service.arena_client import first_legal

LONG = 600_000  # no deadline falls due while a test runs
SUBMIT = (
    "mutation($m: ID!, $mv: MoveInput!, $v: Int) "
    "{ submitMove(matchId: $m, move: $mv, expectedVersion: $v) { version status } }"
)
TURN = "query($m: ID, $t: Int) { awaitTurn(matchId: $m, timeoutMs: $t) { version legalMoves { bid card trump } } }"
VIEW = "query($m: ID!) { match(id: $m) { version status phase toAct awaiting legalMoves { bid card trump } } }"


def table(api: Any, variants: list[str], players: int = 3, ruleset: str = "WIZARD_JUNIOR") -> tuple[str, list[str]]:
    """A started match of registered bots (tokens by seat), first dealer the last seat, dealt
    from a seed whose first turned card is no Wizard: bidding starts at once (a drawn seed
    sometimes had the dealer choose trump first)."""
    tokens = [api.register()[0] for _ in range(players)]
    match_id = api.create_match(
        tokens[0], players=players, ruleset=ruleset, variants=variants, moveTimeoutMs=LONG, firstDealer=players - 1,
        seed="expected-version",
    )
    for seat, token in enumerate(tokens):
        api.join(token, match_id, seat)
    assert view(api, match_id, tokens[0])["phase"] == "BID"
    return match_id, tokens


def view(api: Any, match_id: str, token: str) -> dict[str, Any]:
    return api.data(VIEW, {"m": match_id}, token)["match"]  # type: ignore[no-any-return]


def stale(body: dict[str, Any], current: int) -> None:
    assert body.get("errors"), body
    error = body["errors"][0]
    assert error["extensions"]["code"] == "STALE_VERSION", body
    assert error["extensions"]["currentVersion"] == current, body
    assert "read it again" in error["message"]


@pytest.mark.parametrize("variant", ["HIDDEN_BIDS", "SECRET_BIDS"])
def test_bids_made_with_the_version_each_bot_read_are_all_taken(api, variant):
    match_id, tokens = table(api, [variant])
    read = [view(api, match_id, t) for t in tokens]  # everyone reads first
    assert len({v["version"] for v in read}) == 1 and read[0]["awaiting"] == [0, 1, 2]
    for seat in (1, 0):  # two hidden bids: the version moves, what the third seat sees does not
        body = api.submit(tokens[seat], match_id, first_legal(read[seat]), read[seat]["version"])
        assert not body.get("errors"), body
    assert view(api, match_id, tokens[2])["version"] == read[2]["version"] + 2
    body = api.submit(tokens[2], match_id, first_legal(read[2]), read[2]["version"])
    assert not body.get("errors"), body
    assert body["data"]["submitMove"]["version"] == read[2]["version"] + 3


@pytest.mark.parametrize("variant", ["HIDDEN_BIDS", "SECRET_BIDS"])
def test_a_bot_that_reads_then_moves_is_never_refused_in_a_whole_match(api, variant):
    """Every seat a bot in a thread of its own: wait for the turn, move with the version read.
    The bids of a round are read and sent at the same moments, so their commits race."""
    match_id, tokens = table(api, [variant])

    def bot(token: str) -> tuple[int, list[dict[str, Any]]]:
        moves, refusals = 0, []
        with httpx.Client(base_url=api.base, timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
            while True:
                turn = http.post("/graphql", json={"query": TURN, "variables": {"m": match_id, "t": 20_000}}).json()
                turn = turn["data"]["awaitTurn"]
                if turn is None:  # the match is over (a bounded wait: no move is left to anyone)
                    return moves, refusals
                body = http.post("/graphql", json={"query": SUBMIT, "variables": {
                    "m": match_id, "mv": first_legal(turn), "v": turn["version"]}}).json()
                if body.get("errors"):
                    refusals.append(body["errors"][0])
                else:
                    moves += 1

    with ThreadPoolExecutor(len(tokens)) as pool:
        results = list(pool.map(bot, tokens))
    assert [refusals for _, refusals in results] == [[], [], []]
    final = view(api, match_id, tokens[0])
    assert final["status"] == "FINISHED"
    assert sum(moves for moves, _ in results) == final["version"] - len(tokens) - 1  # create, joins, then moves


@pytest.mark.parametrize("variant", ["HIDDEN_BIDS", "SECRET_BIDS"])
def test_a_card_played_makes_the_version_stale(api, variant):
    match_id, tokens = table(api, [variant])
    for seat in range(3):
        assert not api.submit(tokens[seat], match_id, {"bid": 0}).get("errors")
    leader = view(api, match_id, tokens[0])
    assert leader["phase"] == "PLAY" and leader["toAct"] == 0
    second = view(api, match_id, tokens[1])  # read before the lead
    assert not api.submit(tokens[0], match_id, first_legal(leader), leader["version"]).get("errors")
    now = view(api, match_id, tokens[1])
    assert now["toAct"] == 1
    stale(api.submit(tokens[1], match_id, first_legal(now), second["version"]), now["version"])
    assert view(api, match_id, tokens[1])["version"] == now["version"]  # refused: nothing changed
    assert not api.submit(tokens[1], match_id, first_legal(now), now["version"]).get("errors")


def test_hidden_bids_revealed_make_the_version_stale(api):
    """The last hidden bid shows every bid (and starts the play): a seat that read before it
    reads again."""
    match_id, tokens = table(api, ["HIDDEN_BIDS"])
    assert not api.submit(tokens[0], match_id, {"bid": 0}).get("errors")
    before = view(api, match_id, tokens[0])  # seat 0 has bid: it waits for the others
    assert before["legalMoves"] == []
    assert not api.submit(tokens[1], match_id, {"bid": 1}).get("errors")
    assert view(api, match_id, tokens[0])["version"] == before["version"] + 1
    assert not api.submit(tokens[2], match_id, {"bid": 0}).get("errors")
    now = view(api, match_id, tokens[0])
    assert now["phase"] == "PLAY" and now["toAct"] == 0
    stale(api.submit(tokens[0], match_id, first_legal(now), before["version"]), now["version"])
    assert not api.submit(tokens[0], match_id, first_legal(now), now["version"]).get("errors")


def test_open_bids_are_seen_so_each_makes_the_version_stale(api):
    match_id, tokens = table(api, [])
    first = view(api, match_id, tokens[0])
    assert first["toAct"] == 0
    second = view(api, match_id, tokens[1])  # read before seat 0 bids
    assert not api.submit(tokens[0], match_id, {"bid": 1}, first["version"]).get("errors")
    now = view(api, match_id, tokens[1])
    stale(api.submit(tokens[1], match_id, first_legal(now), second["version"]), now["version"])
    # over REST too: the error body carries the version to read again from
    response = api.http.post(
        f"/api/matches/{match_id}/moves", json={**first_legal(now), "expectedVersion": second["version"]},
        headers={"Authorization": f"Bearer {tokens[1]}"},
    )
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "STALE_VERSION"
    assert response.json()["error"]["currentVersion"] == now["version"]


def test_a_version_the_match_has_not_reached_is_stale(api):
    match_id, tokens = table(api, ["HIDDEN_BIDS"])
    now = view(api, match_id, tokens[0])
    for version in (now["version"] + 1, 10**6):
        stale(api.submit(tokens[0], match_id, first_legal(now), version), now["version"])
