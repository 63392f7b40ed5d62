"""The SEARCH house bot on the server: ``addHouseBot(kind: SEARCH)`` seats it, it plays its
moves (in the API's and the workers' search processes, off the event loop) to the end of
the match, and the API answers other requests promptly while it thinks; tournaments take it
as an entrant."""

from __future__ import annotations

import time
from typing import Any

from tests.service.arena_client import MATCH_FIELDS
from tests.service.test_tournaments import create, wait_status

CREATE = "mutation($i: CreateMatchInput!) { createMatch(input: $i) { " + MATCH_FIELDS + " } }"


def test_search_house_bots_play_a_match_to_its_end(start_api: Any) -> None:
    api = start_api(ARENA_SEARCH_SECONDS="0.05", ARENA_SEARCH_PROCESSES="2")
    token, _ = api.register()
    match_id = api.data(CREATE, {"i": {"players": 3, "ruleset": "WIZARD_JUNIOR", "variants": ["HIDDEN_BIDS"]}}, token)[
        "createMatch"
    ]["id"]
    api.add_house_bot(token, match_id, "SEARCH")
    api.add_house_bot(token, match_id, "SEARCH")
    api.join(token, match_id)
    seats = api.match(match_id)["seats"]
    assert [s["houseBot"] for s in seats] == ["SEARCH", "SEARCH", None]
    # while the house bots think, a read of the match is answered well within a move's search
    slowest = 0.0
    for _ in range(20):
        start = time.perf_counter()
        api.match(match_id)
        slowest = max(slowest, time.perf_counter() - start)
    final = api.play_out(token, match_id)
    assert final["status"] == "FINISHED"
    assert len(final["roundResults"]) == 8
    assert slowest < 1.0, slowest


def test_a_tournament_of_search_house_bots_runs_to_its_end(start_api: Any, start_worker: Any) -> None:
    """The workers start a tournament's matches, so they make its house bots' first moves:
    SEARCH entrants play in the worker's search processes as well as in the API's."""
    api = start_api(ARENA_SEARCH_SECONDS="0.02")
    worker = start_worker(ARENA_SEARCH_SECONDS="0.02")
    try:
        creator, _ = api.register()
        t = create(api, creator, format="ROUND_ROBIN", rounds=1, playersPerMatch=3, houseBots=["SEARCH"] * 3)
        final = wait_status(api, t["id"], "FINISHED", timeout=120)
    finally:
        worker.stop()
    [match] = final["matches"]
    assert [seat["houseBot"] for seat in match["seats"]] == ["SEARCH"] * 3
    assert all(seat["timeouts"] == 0 for seat in match["seats"])
    assert len(final["standings"]) == 3
