"""The archive (service.store.archive) on a real PostgreSQL: settlement writes every ended
match there once, with its seats, rounds, record and rating changes; its Redis keys then
expire, and every read of it (GraphQL, REST, the record) answers as before from the archive."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select

from service.model.live_match import LiveMatch
from service.store.archive import Archive, match_rounds, match_seats, matches
from service.store.clock import now_ms
from service.store.keys import events_key, match_key
from service.store.matches import after_event
from tests.service.conftest import first_action, house, live_match
from tests.service.test_ratings import start_matches, wait_finished, wait_settled
from tests.service.test_replay_api import replay
from tests.service.test_tournaments import Player, wait_until


@pytest.fixture(scope="module")
def worker(start_worker: Any) -> Iterator[Any]:
    """A worker that lets an archived match's keys go at once (no grace period)."""
    process = start_worker(ARENA_ARCHIVE_GRACE_SECONDS="0")
    yield process
    process.stop()


def archived(database_url: str, match_id: str) -> dict[str, Any]:
    """The match's archive rows: the match, its seats, its rounds."""

    async def read() -> dict[str, Any]:
        archive = Archive(database_url)
        try:
            async with archive.engine.connect() as connection:
                match = (await connection.execute(select(matches).where(matches.c.id == match_id))).mappings().first()
                seats = (await connection.execute(
                    select(match_seats).where(match_seats.c.match_id == match_id).order_by(match_seats.c.seat)
                )).mappings().all()
                rounds = (await connection.execute(
                    select(func.count()).select_from(match_rounds).where(match_rounds.c.match_id == match_id)
                )).scalar_one()
            return {"match": None if match is None else dict(match), "seats": [dict(s) for s in seats], "rounds": rounds}
        finally:
            await archive.close()

    return asyncio.run(read())


def test_a_finished_match_is_archived_and_read_back_alike_once_redis_lets_it_go(
    api, worker, redis_client, database_url
):
    (a, a_id), (b, b_id) = api.register(), api.register()
    with Player(api, a), Player(api, b):
        [match_id] = start_matches(api, [a, b], 1, rated=True)
        wait_finished(api, [match_id])
    live = {token: api.match(match_id, token) for token in (a, b, None)}
    record = api.http.get(f"/api/matches/{match_id}/record").json()
    rest = api.http.get(f"/api/matches/{match_id}", headers={"Authorization": f"Bearer {a}"}).json()
    wait_settled(redis_client, [match_id])
    wait_until(lambda: not redis_client.exists(match_key(match_id), events_key(match_id)), "the keys to expire")

    rows = archived(database_url, match_id)
    match = rows["match"]
    assert match["status"] == "FINISHED" and match["rated"] and match["players"] == 3
    assert match["scores"] == [s["score"] for s in sorted(live[None]["seats"], key=lambda s: s["seat"])]
    assert match["record"] == record
    assert sorted(c["bot"] for c in match["rating_changes"]) == sorted([a_id, b_id, "house-heuristic"])
    assert [s["seat"] for s in rows["seats"]] == [0, 1, 2]
    assert {s["place"] for s in rows["seats"]} >= {1}
    assert rows["rounds"] == 3 * live[None]["rounds"]

    # every read answers as it did live, now from the archive
    assert {token: api.match(match_id, token) for token in (a, b, None)} == live
    assert api.http.get(f"/api/matches/{match_id}/record").json() == record
    assert api.http.get(f"/api/matches/{match_id}", headers={"Authorization": f"Bearer {a}"}).json() == rest
    replayed = replay(api, match_id, "--quiet")  # `wizard-arena replay`, which reads the record
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_an_aborted_match_is_archived_without_a_record(start_api, worker, redis_client, database_url):
    api = start_api(ARENA_WAITING_MATCH_TTL_SECONDS="1")  # a match not full within a second is aborted
    token, _ = api.register()
    match_id = api.create_match(token, players=3, ruleset="WIZARD_JUNIOR")
    api.join(token, match_id, 0)
    wait_until(lambda: api.match(match_id)["status"] == "ABORTED", "the sweeper to abort the match")
    wait_settled(redis_client, [match_id])
    rows = archived(database_url, match_id)
    assert rows["match"]["status"] == "ABORTED" and rows["match"]["record"] is None
    assert [s["place"] for s in rows["seats"]] == [None, None, None]
    before = api.match(match_id, token)
    wait_until(lambda: not redis_client.exists(match_key(match_id)), "the keys to expire")
    assert api.match(match_id, token) == before


def test_a_live_match_keeps_only_its_latest_events_and_a_follower_past_them_reads_it_whole(services):
    """The stream keeps about ARENA_MATCH_EVENTS_KEPT events (Redis trims whole nodes); what a follower
    that missed more reads after its gap starts past its version, so it reads the match
    whole (MatchService.updates does) instead of applying events with a hole between."""
    store = services.matches.matches
    kept_setting = store.events_kept

    async def work() -> tuple[int, int, int, LiveMatch | None]:
        try:
            match = live_match(players=3, ruleset="WIZARD", timeout_ms=600_000)
            assert await store.create(match)
            for seat in range(3):
                assert await store.commit(match, match.join(seat, house(seat), now_ms()))
            first = match.copy()
            first.event_id = match.event_id
            for _ in range(3 * kept_setting):
                seat, action = first_action(match)
                assert await store.commit(match, match.play(seat, action, "house", now_ms()))
            kept = await services.redis.xlen(events_key(match.id))
            missed = await store.events_after(match.id, first.event_id)
            return kept, missed[0].version, first.version, after_event(first, missed[0])
        finally:
            await services.close()

    kept, oldest, version, applied = asyncio.run(work())
    assert kept_setting == 64 and kept_setting <= kept <= kept_setting + 100  # whole nodes of (by default) 100 entries
    assert oldest > version + 1 and applied is None  # a hole: read the match whole
