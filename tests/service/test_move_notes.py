"""Each move's notes in a finished match's record (``moveNotes``, beside the engine's
``moves``): ``byServer`` for a move the server made for a seat past its deadline, ``thinkMs``
from when the seat had to act to its move; in ``GET /api/matches/{id}/record`` and in the
archive's export alike. A match whose moves began before notes were kept has none."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from service.domain.matches import full_record
from service.model.live_match import LiveMatch
from service.store.clock import now_ms
from tests.service.arena_client import wait_until
from tests.service.conftest import first_action, house, live_match
from wizard import MatchRecord
from wizard.record import state_to_bytes

TIMEOUT = 3_000
TURN = "query($m: ID, $t: Int) { awaitTurn(matchId: $m, timeoutMs: $t) { version legalMoves { bid card trump } } }"
SEATS = "query($m: ID!) { match(id: $m) { status seats { timeouts } } }"


@pytest.fixture(scope="module")
def worker(start_worker: Any) -> Any:
    process = start_worker()
    yield process
    process.stop()


def test_the_record_notes_the_servers_moves_and_each_think_time(api, worker):
    token, bot_id = api.register()
    match_id = api.create_match(token, players=3, ruleset="WIZARD_JUNIOR", moveTimeoutMs=TIMEOUT, firstDealer=0)
    api.add_house_bot(token, match_id, "HEURISTIC")
    api.add_house_bot(token, match_id, "RANDOM")
    api.join(token, match_id, 2)
    # the bot lets its first turn pass: the server moves for it at the deadline
    assert api.data(TURN, {"m": match_id, "t": 20_000}, token)["awaitTurn"] is not None
    wait_until(lambda: api.data(SEATS, {"m": match_id})["match"]["seats"][2]["timeouts"] == 1, "the fallback move")
    final = api.play_out(token, match_id)
    assert final["status"] == "FINISHED"
    record = api.http.get(f"/api/matches/{match_id}/record").json()
    notes = record["moveNotes"]
    assert len(notes) == len(record["moves"])
    assert all(set(n) == {"byServer", "thinkMs"} and isinstance(n["thinkMs"], int) and n["thinkMs"] >= 0 for n in notes)
    by_server = [i for i, n in enumerate(notes) if n["byServer"]]
    assert sum(record["timeouts"]) == len(by_server) == 1
    first_of_bot = next(i for i, m in enumerate(record["moves"]) if m["seat"] == 2)
    assert by_server == [first_of_bot]
    assert notes[first_of_bot]["thinkMs"] >= TIMEOUT  # it had the whole move timeout
    assert MatchRecord.from_dict(record).replay().is_finished  # the engine reads the published record as ever
    # the archive keeps the same notes (the export reads it)
    exported = wait_until(
        lambda: [r for r in _export(api, bot_id) if r["matchId"] == match_id], "the match in the archive", timeout=60
    )
    assert exported[0]["moveNotes"] == notes


def _export(api: Any, bot_id: str) -> list[dict[str, Any]]:
    response = api.http.get(f"/api/bots/{bot_id}/records")
    return [orjson.loads(line) for line in response.text.splitlines()] if response.status_code == 200 else []


def test_a_match_from_before_notes_were_kept_has_none():
    """A match stored by a server that kept no notes reads on (no ``moveNotes`` in its record),
    and one that began then and ends now gets none either: notes for part of it would lie."""
    match = live_match(players=3, ruleset="WIZARD_JUNIOR")
    for seat in range(3):
        match.join(seat, house(seat), now_ms())
    for _ in range(5):
        seat, action = first_action(match)
        match.play(seat, action, "house", now_ms())
    live = orjson.loads(match.live_json())
    for key in ("seen", "think", "fallbacks"):
        del live[key]
    old: LiveMatch = LiveMatch.from_stored(
        match.id, match.version, match.settings.to_json().encode(), state_to_bytes(match.state), orjson.dumps(live)
    )
    assert old.think_ms is None and old.seen == [match.version] * 3  # an older version is stale, as it was
    while not old.ended:
        seat, action = first_action(old)
        old.play(seat, action, "house", now_ms())
    record = full_record(old, None)
    assert "moveNotes" not in record
    assert MatchRecord.from_dict(record).replay().is_finished


def test_notes_follow_the_events_in_every_process():
    """A follower applying the events holds the same notes as the writer."""
    writer = live_match(players=3, ruleset="WIZARD_JUNIOR")
    follower = writer.copy()
    for seat in range(3):
        follower.apply_event(writer.join(seat, house(seat), now_ms()))
    while not writer.ended:
        seat, action = first_action(writer)
        follower.apply_event(writer.play(seat, action, "timeout" if seat == 1 else "house", now_ms()))
    assert follower.think_ms == writer.think_ms and follower.fallbacks == writer.fallbacks and follower.seen == writer.seen
    assert len(full_record(follower, None)["moveNotes"]) == follower.state.moves_made


def test_debug_text_follows_the_events_and_is_stored_with_the_match():
    """A move's debug text rides on its event (a follower holds the same), is kept in the
    match's stored form, and never enters the published record."""
    writer = live_match(players=3, ruleset="WIZARD_JUNIOR")
    follower = writer.copy()
    for seat in range(3):
        follower.apply_event(writer.join(seat, house(seat), now_ms()))
    for n in range(6):
        seat, action = first_action(writer)
        follower.apply_event(writer.play(seat, action, "bot", now_ms(), f"thought {n}" if seat == 1 else None))
    assert writer.debug and follower.debug == writer.debug
    assert {s for _, s, _ in writer.debug} == {1} and writer.debug_bytes(1) == sum(len(t) for _, _, t in writer.debug)
    stored = LiveMatch.from_stored(
        writer.id, writer.version, writer.settings.to_json().encode(), state_to_bytes(writer.state), writer.live_json()
    )
    assert stored.debug == writer.debug
    while not stored.ended:
        seat, action = first_action(stored)
        stored.play(seat, action, "house", now_ms())
    assert "thought" not in orjson.dumps(full_record(stored, None)).decode()
