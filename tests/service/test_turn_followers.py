"""awaitTurn follows a match by applying its events to the copy it read (rather than reading
the whole match again on every change): what it answers must be exactly what the match
query, read from Redis, shows the same bot at the same version."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.service.arena_client import MATCH_FIELDS, first_legal

AWAIT = "query($m: ID, $t: Int) { awaitTurn(matchId: $m, timeoutMs: $t) { " + MATCH_FIELDS + " } }"


@pytest.mark.parametrize(
    ("ruleset", "players", "variants"),
    [("WIZARD_JUNIOR", 3, []), ("WIZARD", 4, ["HIDDEN_BIDS", "CLAIRVOYANCE"])],
)
def test_turns_from_followed_events_match_the_stored_match(api, ruleset: str, players: int, variants: list[str]) -> None:
    bots = [api.register() for _ in range(players)]
    match_id = api.create_match(bots[0][0], ruleset=ruleset, players=players, variants=variants)
    for token, _ in bots:
        api.join(token, match_id)
    compared = [0] * players
    failures: list[BaseException] = []

    def play(index: int, token: str) -> None:
        try:
            while True:
                turn: dict[str, Any] | None = api.data(AWAIT, {"m": match_id, "t": 10_000}, token)["awaitTurn"]
                if turn is None:
                    assert api.match(match_id, token)["status"] == "FINISHED"
                    return
                stored = api.match(match_id, token)
                if stored["version"] == turn["version"]:  # nobody moved in between (bids may be simultaneous)
                    assert turn == stored
                    compared[index] += 1
                body = api.submit(token, match_id, first_legal(turn), turn["version"])
                if body.get("errors"):
                    assert body["errors"][0]["extensions"]["code"] == "STALE_VERSION", body
        except BaseException as error:  # noqa: BLE001 - reported by the test thread
            failures.append(error)

    threads = [threading.Thread(target=play, args=(i, token)) for i, (token, _) in enumerate(bots)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures, failures[0]
    assert not any(thread.is_alive() for thread in threads)
    assert api.match(match_id)["status"] == "FINISHED"
    assert all(count > 10 for count in compared), compared
