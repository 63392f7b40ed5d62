"""awaitTurn follows a match by applying its events to the copy it read (rather than reading
the whole match again on every change): what it answers must be exactly what the match
query, read from Redis, shows the same bot at the same version."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from service.domain.matches import Caller, NewMatch, WaitEnd
from service.model.live_match import LiveMatch
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


def test_the_bot_that_moved_is_not_handed_the_turn_it_has_just_played(api, services, redis_client):
    """A bot moves, then asks for its next turn before this process has heard its move's own
    message (held back here, as a busy event loop may): the feed's copy of the match is past it
    already (the writer moved it), so the answer is never the version before the move, whose
    turn the bot has just played."""
    bots = [api.register() for _ in range(3)]
    callers = [Caller(bot_id, "bot") for _, bot_id in bots]
    matches = services.matches
    feed = matches.feed
    deliver, held = feed._deliver, []

    def held_back(name: bytes, data: bytes) -> None:  # the messages come late, as on a busy loop
        held.append((name, data))

    async def your_turn(caller: Caller, match_id: str) -> LiveMatch | None:
        """The match if it is the caller's turn there now (a wait of 0 ms), else None."""
        wait = await matches.next_turn(caller, match_id, 0)
        return wait.match if wait.reason is WaitEnd.YOUR_TURN else None

    async def work() -> list[tuple[int, int | None]]:
        try:
            match = await matches.create(callers[0], NewMatch(ruleset="WIZARD_JUNIOR", players=3, first_dealer=2,
                                                              move_timeout_ms=600_000))
            for seat, caller in enumerate(callers):
                match = await matches.join(caller, match.id, seat)
            seen = []
            for _ in range(12):  # the first moves, each seat's in turn
                seat = match.awaiting()[0]
                caller = callers[seat]
                turn = await your_turn(caller, match.id)  # followed now: the feed keeps the match
                assert turn is not None and turn.version == match.version
                feed._deliver = held_back  # type: ignore[method-assign]
                moved = await matches.submit_move(caller, match.id, match.view(seat).legal_moves[0])
                again = await your_turn(caller, match.id)  # before the move's message is heard
                seen.append((moved.version, None if again is None else again.version))
                feed._deliver = deliver  # type: ignore[method-assign]
                for message in held:
                    deliver(*message)
                held.clear()
                match = moved
            return seen
        finally:
            await services.close()

    for moved, again in asyncio.run(work()):
        assert again is None or again >= moved, (moved, again)
