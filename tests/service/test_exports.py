"""Exports (``GET /api/bots/{id}/records``): a bot's finished matches as NDJSON, one record a
line exactly as ``GET /api/matches/{id}/record`` answers it, newest first, filtered by time
and ruleset, streamed from the archive in constant memory however many there are."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from sqlalchemy import text

from service.store.archive import Archive
from tests.service.test_ratings import RULESET, start_matches, wait_finished, wait_settled
from tests.service.test_tournaments import Player

MATCH_COLUMNS = (
    "status, ruleset, players, rated, tournament_id, created_ms, ended_ms, seed, scores, winners, rating_changes, "
    "version, settings, state, live, event_id, sealed, archived_ms"
)


@pytest.fixture(scope="module")
def worker(start_worker: Any) -> Iterator[Any]:
    process = start_worker()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def played(api: Any, worker: Any, redis_client_module: Any) -> dict[str, Any]:
    """Two finished, archived matches of bots a and b: their ids (oldest first) and records."""
    (a, a_id), (b, b_id) = api.register(), api.register()
    with Player(api, a), Player(api, b):
        ids = [start_matches(api, [a, b], 1, rated=False)[0] for _ in range(2)]
        wait_finished(api, ids)
    wait_settled(redis_client_module, ids)
    records = {i: api.http.get(f"/api/matches/{i}/record").json() for i in ids}
    return {"a": a_id, "b": b_id, "ids": ids, "records": records}


@pytest.fixture(scope="module")
def redis_client_module(redis_url: str) -> Iterator[Any]:
    import redis

    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def export(api: Any, bot_id: str, **params: Any) -> list[dict[str, Any]]:
    response = api.http.get(f"/api/bots/{bot_id}/records", params=params)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


def refused(api: Any, bot_id: str, status: int, code: str, **params: Any) -> str:
    response = api.http.get(f"/api/bots/{bot_id}/records", params=params)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    return error["message"]  # type: ignore[no-any-return]


def test_a_bots_records_are_its_matches_records_newest_first(api, played):
    newest_first = [played["records"][i] for i in reversed(played["ids"])]
    assert export(api, played["a"]) == newest_first
    assert export(api, played["b"]) == newest_first
    assert export(api, played["a"], ruleset=RULESET) == newest_first
    other = next(r for r in ("WIZARD", "WIZARD_JUNIOR") if r != RULESET)
    assert export(api, played["a"], ruleset=other) == []
    assert export(api, played["a"], since="2100-01-01T00:00:00Z") == []
    assert export(api, played["a"], until="2000-01-01") == []
    assert export(api, played["a"], since="0", until=str(2**50)) == newest_first
    _, fresh = api.register()
    assert export(api, fresh) == []


def test_bad_input_says_what_is_allowed(api, played):
    assert "ISO 8601" in refused(api, played["a"], 400, "BAD_INPUT", since="yesterday")
    assert "ISO 8601" in refused(api, played["a"], 400, "BAD_INPUT", until="2026-13-01")
    assert "WIZARD" in refused(api, played["a"], 400, "BAD_INPUT", ruleset="CHESS")
    assert "before" in refused(api, played["a"], 400, "BAD_INPUT", since="2000", until="1000")
    assert "since, until and ruleset" in refused(api, played["a"], 400, "BAD_INPUT", limit="5")
    assert "no bot" in refused(api, "no-such-bot", 404, "NOT_FOUND")


def test_without_an_archive_the_export_says_so(start_api, played):
    bare = start_api(DATABASE_URL="")
    assert "DATABASE_URL" in refused(bare, played["a"], 404, "NOT_FOUND")


def copy_matches(database_url: str, template: str, bot_id: str, count: int) -> None:
    """``count`` archived copies of the match ``template`` (new ids, the bot in seat 0, one ms apart)."""

    async def insert() -> None:
        archive = Archive(database_url)
        try:
            async with archive.engine.begin() as connection:
                await connection.execute(text(f"""
                    INSERT INTO matches (id, record, {MATCH_COLUMNS})
                    SELECT :prefix || g, jsonb_set(record, '{{matchId}}', to_jsonb(:prefix || g)), {MATCH_COLUMNS}
                    FROM matches, generate_series(1, :count) AS g WHERE id = :template
                """), {"prefix": f"x-{bot_id}-", "count": count, "template": template})
                await connection.execute(text("""
                    INSERT INTO match_seats (match_id, seat, bot_id, bot_name, house, score, place, timeouts,
                                             created_ms, ruleset)
                    SELECT :prefix || g, 0, :bot, 'copy', NULL, 0, 1, 0, m.created_ms + g, m.ruleset
                    FROM matches m, generate_series(1, :count) AS g WHERE m.id = :template
                """), {"prefix": f"x-{bot_id}-", "count": count, "template": template, "bot": bot_id})
        finally:
            await archive.close()

    asyncio.run(insert())


def rss_growth_while_streaming(api: Any, bot_id: str) -> tuple[int, int]:
    """(lines, the serve process's largest RSS growth while they streamed, in bytes)."""
    process = psutil.Process(api.process.popen.pid)

    def rss() -> int:
        return process.memory_info().rss + sum(c.memory_info().rss for c in process.children(recursive=True))

    before = peak = rss()
    lines = 0
    with api.http.stream("GET", f"/api/bots/{bot_id}/records") as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line:
                lines += 1
                if lines % 250 == 0:
                    peak = max(peak, rss())
    return lines, max(peak, rss()) - before


def test_ten_thousand_records_stream_in_constant_memory(start_api, played, database_url):
    exporter = start_api()
    template = played["ids"][0]
    size = len(json.dumps(played["records"][template]))
    (_, small), (_, large) = exporter.register(), exporter.register()
    copy_matches(database_url, template, small, 1_000)
    copy_matches(database_url, template, large, 10_000)

    lines, grown_small = rss_growth_while_streaming(exporter, small)
    assert lines == 1_000
    lines, grown_large = rss_growth_while_streaming(exporter, large)
    assert lines == 10_000
    print(f"RSS growth: 1,000 records {grown_small} B, 10,000 records {grown_large} B, a record {size} B")
    # holding the 10,000 records would take 10,000 × size bytes (hundreds of MB); streaming
    # them takes what streaming 1,000 took, give or take the allocator's noise
    assert grown_large < grown_small + 16 * 2**20, (grown_small, grown_large, size)
    # and the 9,000 records more cost less than a tenth of their size (the growth both exports
    # share, ~8 MB of a first streaming's buffers and allocator pools, is not theirs)
    assert grown_large - grown_small < 9_000 * size / 10, (grown_small, grown_large, size)

    first = export(exporter, large, since=str(2**50))
    assert first == []
    newest = exporter.http.get(f"/api/bots/{large}/records").text.splitlines()[0]
    assert json.loads(newest)["matchId"] == f"x-{large}-10000"


def test_a_nul_in_another_seats_debug_text_does_not_break_a_bots_own_export(api, played, database_url):
    """A program may write a NUL to its stderr; its match's stored form keeps it (``\\u0000``,
    which Postgres's jsonb refuses). The export of another bot of that match, with its token,
    still answers, with that bot's own debug text and not the other seat's."""
    token, bot_id = api.register()
    copy_matches(database_url, played["ids"][0], bot_id, 1)
    match_id = f"x-{bot_id}-1"

    async def add_debug() -> None:
        archive = Archive(database_url)
        try:
            async with archive.engine.begin() as connection:
                live = (await connection.execute(text("SELECT live FROM matches WHERE id = :id"), {"id": match_id})).scalar()
                data = json.loads(live)
                data["debug"] = [[0, 0, "mine"], [1, 1, "theirs \u0000 nul"]]
                await connection.execute(text("UPDATE matches SET live = :live WHERE id = :id"),
                                         {"live": json.dumps(data), "id": match_id})
        finally:
            await archive.close()

    asyncio.run(add_debug())
    response = api.http.get(f"/api/bots/{bot_id}/records", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    [mine] = [json.loads(line) for line in response.text.splitlines()]
    assert [n.get("debug") for n in mine["moveNotes"][:2]] == ["mine", None]
