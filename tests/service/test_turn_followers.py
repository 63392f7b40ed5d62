"""awaitTurn follows a match by applying its events to the copy it read (rather than reading
the whole match again on every change): what it answers must be exactly what the match
query, read from Redis, shows the same bot at the same version."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import orjson
import pytest

from service.domain.matches import Caller, MatchService, NewMatch, WaitEnd
from service.model.live_match import LiveMatch
from service.store.clock import now_ms
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
            match = await _started(matches, callers)
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


def test_a_move_this_process_commits_becomes_the_feeds_match_without_applying_it_again(api, services):
    """Redis writes a commit's message before the commit's answer, so this process usually
    hears its own move before it knows the move committed: recognised as its own, the match the
    move was made on becomes the feed's (no copy, no event applied again), and waits see the
    move. (The commit's answer is kept from the feed here, so only the message can move it.)"""
    bots = [api.register() for _ in range(3)]
    callers = [Caller(bot_id, "bot") for _, bot_id in bots]
    matches = services.matches
    feed = matches.feed
    feed.committed = lambda match: None  # type: ignore[method-assign]

    async def work() -> list[bool]:
        try:
            match = await _started(matches, callers)
            taken = []
            for _ in range(6):
                seat = match.awaiting()[0]
                turn = await matches.next_turn(callers[seat], match.id, 0)  # followed: the feed keeps the match
                assert turn.reason is WaitEnd.YOUR_TURN and turn.match is not None
                moved = await matches.submit_move(callers[seat], match.id, match.view(seat).legal_moves[0])
                following = callers[moved.awaiting()[0]]
                heard = await matches.next_turn(following, match.id, 5_000)  # once the move's message is heard
                assert heard.reason is WaitEnd.YOUR_TURN and heard.match is not None
                assert heard.match.version == moved.version
                taken.append(heard.match is moved)
                match = moved
            return taken
        finally:
            await services.close()

    assert all(asyncio.run(work()))


def test_a_commit_this_process_lost_is_not_taken_for_the_move_that_won(api, services):
    """This process commits a move at the version another process has just taken with another
    move (its commit will be refused): the winner's message must move the feed's match by the
    winner's move, not to the loser's match."""
    from wizard import state_to_bytes

    bots = [api.register() for _ in range(3)]
    callers = [Caller(bot_id, "bot") for _, bot_id in bots]
    matches = services.matches
    feed = matches.feed

    async def work() -> None:
        try:
            match = await _started(matches, callers)
            seat = match.awaiting()[0]
            turn = await matches.next_turn(callers[seat], match.id, 0)  # followed: the feed keeps the match
            assert turn.match is not None
            winner, loser = turn.match.copy(), turn.match.copy()
            actions = winner.state.legal_actions(seat)
            assert len(actions) > 1
            event = winner.play(seat, actions[0], "bot", now_ms())
            losing = loser.play(seat, actions[1], "bot", now_ms())
            feed.committing(loser, orjson.dumps(losing))  # this process's move, about to be refused
            assert await matches.matches.commit(winner, event)  # another process's, first
            heard = await matches.next_turn(callers[winner.awaiting()[0]], match.id, 5_000)
            assert heard.match is not None and heard.match is not loser
            stored = (await matches.matches.load(match.id)).match
            assert heard.match.version == stored.version == winner.version
            assert state_to_bytes(heard.match.state) == state_to_bytes(stored.state)
        finally:
            await services.close()

    asyncio.run(work())


async def _started(matches: MatchService, callers: list[Caller]) -> LiveMatch:
    """A Wizard Junior match of ``callers``' bots, every seat taken (so it has started)."""
    match = await matches.create(callers[0], NewMatch(ruleset="WIZARD_JUNIOR", players=len(callers), first_dealer=2,
                                                      move_timeout_ms=600_000))
    for seat, caller in enumerate(callers):
        match = await matches.join(caller, match.id, seat)
    return match
