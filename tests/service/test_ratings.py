"""Ratings, settled by a real `wizard-arena worker`: every rated finished match moves Elo
exactly once (whatever runs its settlement how often), unrated and stacked matches move
nothing, the leaderboards (ELO, and FITTED after a tournament or refitRatings; a refit still
waiting in the queue absorbs further asks) and Bot.ratingHistory.

The Redis server is shared with every other test: the checks look at this module's own
(fresh) bots and matches, never at the whole leaderboard's contents."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import redis
from rq import Queue

from ranking.ratings import INITIAL_DEVIATION, INITIAL_RATING, elo_deviation_after, elo_update
from service.domain.ratings import RatingMethod
from service.model.live_match import LiveMatch, SeatHolder
from service.store.clock import now_ms
from service.store.keys import (
    FIT_CLAIMS,
    elo_ratings_key,
    fitted_ratings_key,
    history_key,
    leaderboard_key,
    match_home_key,
    rating_names_key,
    rating_results_key,
    ratings_applied_key,
)
from service.store.redis_client import queue_url
from tests.service.arena_client import REPO
from tests.service.conftest import first_action, live_match
from tests.service.test_tournaments import Player, check_standings, consenting, create, get, wait_status, wait_until
from worker import jobs

RULESET = "WIZARD_JUNIOR"
HISTORY = "query($b: ID!, $r: Ruleset!) { bot(id: $b) { ratings { ruleset rating games } ratingHistory(ruleset: $r) { rating matchId at } } }"
BOARD = """query($r: Ruleset!, $f: Int, $o: Int, $m: RatingMethod) {
  leaderboard(ruleset: $r, first: $f, offset: $o, method: $m) { rank bot { id name } rating games method } }"""
REFIT = "mutation($r: Ruleset!) { refitRatings(ruleset: $r) }"


@pytest.fixture(scope="module")
def worker(start_worker: Any) -> Iterator[Any]:
    """This module's own worker (settlement jobs, the clock)."""
    process = start_worker()
    yield process
    process.stop()


# ---------------------------------------------------------------------- helpers


def bot_ratings(api: Any, bot_id: str, ruleset: str = RULESET) -> dict[str, Any]:
    return api.data(HISTORY, {"b": bot_id, "r": ruleset})["bot"]  # type: ignore[no-any-return]


def board(api: Any, ruleset: str = RULESET, first: int = 500, offset: int = 0, method: str = "ELO") -> list[dict[str, Any]]:
    return api.data(BOARD, {"r": ruleset, "f": first, "o": offset, "m": method})["leaderboard"]  # type: ignore[no-any-return]


def start_matches(api: Any, tokens: list[str], count: int, rated: bool = True, **spec: Any) -> list[str]:
    """``count`` matches of the given bots and one house HEURISTIC each (they start at once)."""
    ids = []
    for _ in range(count):
        match_id = api.create_match(tokens[0], ruleset=RULESET, players=len(tokens) + 1, rated=rated, **spec)
        for token in tokens:
            api.join(token, match_id)
        api.add_house_bot(tokens[0], match_id, "HEURISTIC")
        ids.append(match_id)
    return ids


def wait_finished(api: Any, match_ids: list[str]) -> list[dict[str, Any]]:
    return wait_until(
        lambda: all(api.match(i)["status"] == "FINISHED" for i in match_ids) and [api.match(i) for i in match_ids],
        f"matches {match_ids} to finish",
    )


def wait_settled(redis_client: Any, match_ids: list[str]) -> None:
    """An ended match sits in the settlement queue until its settlement job has run."""
    wait_until(
        lambda: all(redis_client.zscore(match_home_key(m, "unsettled"), m) is None for m in match_ids),
        f"the settlement of {match_ids}",
    )


def stored_history(redis_client: Any, identity: str, ruleset: str = RULESET) -> list[dict[str, Any]]:
    return [json.loads(h) for h in redis_client.lrange(history_key(identity, ruleset), 0, -1)]


def results_of(redis_client: Any, match_ids: set[str], ruleset: str = RULESET) -> Counter:
    """How often each match is in the ruleset's list of rated results (the fit's input)."""
    rows = (json.loads(r) for r in redis_client.lrange(rating_results_key(ruleset), 0, -1))
    return Counter(r["matchId"] for r in rows if r["matchId"] in match_ids)


def rating_before(history: list[dict[str, Any]], match_id: str) -> float:
    ids = [h["matchId"] for h in history]
    assert ids.count(match_id) == 1, (match_id, ids)
    at = ids.index(match_id)
    return INITIAL_RATING if at == 0 else float(history[at - 1]["rating"])


def rating_after(history: list[dict[str, Any]], match_id: str) -> float:
    [entry] = [h for h in history if h["matchId"] == match_id]
    return float(entry["rating"])


def run_jobs(redis_url: str, code: str) -> None:
    """Run worker jobs (worker.jobs.*) in a fresh process on the test Redis, as RQ would."""
    env = {**os.environ, "REDIS_URL": redis_url}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


# ---------------------------------------------------------------------- refits asked for (in this process)
# First of the module's tests: this test plays the workers' clock, and no worker's clock may
# claim its requests first (the module's worker starts with the next test).


def test_a_refit_waiting_in_the_queue_absorbs_further_asks(services, redis_client):
    """refitRatings (or a tournament's end) while a refit of the same ruleset still waits in
    the queue adds no job: the waiting one reads the history as it is when it runs. What the
    workers' clock queues is what claim_fit_requests answers."""
    ruleset = f"RF_{secrets.token_hex(3).upper()}"  # a name no real refit uses
    queued: list[list[str]] = []

    async def work() -> None:
        ratings = services.ratings
        try:
            await ratings.request_fit(ruleset)
            await ratings.request_fit(ruleset)
            queued.append([r for r in await ratings.ratings.claim_fit_requests() if r == ruleset])  # one job
            await ratings.request_fit(ruleset)  # while it waits in the queue
            queued.append([r for r in await ratings.ratings.claim_fit_requests() if r == ruleset])  # none
            await ratings.fit(ruleset)  # the job starts: it releases the claim
            await ratings.request_fit(ruleset)
            queued.append([r for r in await ratings.ratings.claim_fit_requests() if r == ruleset])  # one more
        finally:
            await services.close()

    asyncio.run(work())
    assert queued == [[ruleset], [], [ruleset]]
    redis_client.hdel(FIT_CLAIMS, ruleset)
    redis_client.delete(leaderboard_key(ruleset, "FITTED"))


# ---------------------------------------------------------------------- exactly once


def test_every_rated_match_moves_elo_exactly_once_from_its_final_scores(api, worker, redis_client):
    (a, a_id), (b, b_id) = api.register(), api.register()
    with Player(api, a) as pa, Player(api, b) as pb:  # four at once: their settlements race
        ids = start_matches(api, [a, b], 4)
        matches = wait_finished(api, ids)
    assert pa.errors == [] and pb.errors == []
    wait_until(lambda: all(redis_client.sismember(ratings_applied_key(RULESET), m) for m in ids), "every rating change")
    assert results_of(redis_client, set(ids)) == Counter({m: 1 for m in ids})

    histories = {}
    for bot_id in (a_id, b_id):
        bot = bot_ratings(api, bot_id)
        history = bot["ratingHistory"]
        assert sorted(h["matchId"] for h in history) == sorted(ids)  # one point per match, no more
        stamps = [datetime.fromisoformat(h["at"]) for h in history]
        assert stamps == sorted(stamps)  # oldest first
        assert [r for r in bot["ratings"] if r["ruleset"] == RULESET] == [
            {"ruleset": RULESET, "rating": history[-1]["rating"], "games": 4}
        ]
        histories[bot_id] = history
    house = stored_history(redis_client, "house-heuristic")
    histories["house-heuristic"] = house
    for match in matches:  # each step is one Elo update from the ratings just before it
        seats = sorted(match["seats"], key=lambda s: s["seat"])
        identities = ["house-heuristic" if s["houseBot"] else s["bot"]["id"] for s in seats]
        before = [rating_before(histories[i], match["id"]) for i in identities]
        expected = elo_update(before, [s["score"] for s in seats])
        for identity, want in zip(identities, expected, strict=True):
            assert rating_after(histories[identity], match["id"]) == pytest.approx(want, abs=1e-6)
    entries = {e["bot"]["id"]: e for e in board(api)}
    for bot_id in (a_id, b_id):
        assert entries[bot_id]["rating"] == pytest.approx(histories[bot_id][-1]["rating"], abs=1e-6)
        assert entries[bot_id]["games"] == 4 and entries[bot_id]["method"] == "ELO"


def test_running_a_settlement_again_changes_nothing(api, worker, redis_client, redis_url):
    (a, a_id), (b, b_id) = api.register(), api.register()
    with Player(api, a), Player(api, b):
        [match_id] = start_matches(api, [a, b], 1)
        wait_finished(api, [match_id])
    wait_until(lambda: redis_client.sismember(ratings_applied_key(RULESET), match_id), "the rating change")
    wait_settled(redis_client, [match_id])

    def snapshot() -> Any:
        return (
            [bot_ratings(api, bot_id) for bot_id in (a_id, b_id)],
            [e for e in board(api) if e["bot"]["id"] in (a_id, b_id)],
            results_of(redis_client, {match_id}),
            stored_history(redis_client, "house-heuristic"),
        )

    before = snapshot()
    assert [len(bot["ratingHistory"]) for bot in before[0]] == [1, 1]
    # the job itself, twice, in a fresh process ...
    run_jobs(redis_url, f"from worker.jobs import settle_match\nsettle_match({match_id!r})\nsettle_match({match_id!r})")
    assert snapshot() == before
    # ... and through RQ, run by the worker
    # (RQ's queue: on a cluster, a Redis of its own)
    queue = redis.Redis.from_url(queue_url(redis_url, os.environ.get("ARENA_QUEUE_URL")))
    try:
        job = Queue("default", connection=queue).enqueue(
            jobs.settle_match, match_id, job_id=f"again-{match_id}-{uuid.uuid4().hex[:6]}"
        )
        wait_until(lambda: job.get_status(refresh=True) in ("finished", "failed"), "the repeated settlement job")
        assert job.get_status() == "finished"
    finally:
        queue.close()
    assert snapshot() == before


def test_settling_a_finished_tournament_again_changes_nothing(api, worker, redis_client, redis_url):
    creator, _ = api.register()
    t = create(api, creator, format="ROUND_ROBIN", rounds=2, playersPerMatch=3,
               houseBots=["HEURISTIC", "RANDOM", "RANDOM", "HEURISTIC"])
    final = wait_status(api, t["id"], "FINISHED")
    ids = [m["id"] for m in final["matches"]]
    assert len(ids) == 2 * 2  # 4 entrants at tables of 3: 2 tables a round, with a house fill
    wait_until(lambda: all(redis_client.sismember(ratings_applied_key(RULESET), m) for m in ids), "every rating change")
    before = (final, results_of(redis_client, set(ids)), stored_history(redis_client, "house-random"))
    assert before[1] == Counter({m: 1 for m in ids})
    calls = "\n".join(f"settle_match({m!r})" for m in ids)
    run_jobs(redis_url, f"from worker.jobs import settle_match, advance_tournament\n{calls}\n"
                        f"advance_tournament({t['id']!r})\n{calls}")
    assert (get(api, t["id"]), results_of(redis_client, set(ids)), stored_history(redis_client, "house-random")) == before
    check_standings(final)


# ---------------------------------------------------------------------- what does not count


def test_unrated_and_stacked_matches_move_no_rating(api, worker, redis_client):
    (a, a_id), (b, b_id) = api.register(), api.register()
    deck = [f"{s}{r}" for s in "BGRY" for r in range(1, 9)] + ["W"] * 2 + ["J"] * 2  # the junior deck
    refused = api.gql(
        "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id } }",
        {"i": {"ruleset": RULESET, "players": 3, "rated": True, "deals": [deck]}}, a,
    )
    assert refused["errors"][0]["extensions"]["code"] == "BAD_INPUT"  # a stacked match is never rated
    with Player(api, a), Player(api, b):
        unrated = start_matches(api, [a, b], 1, rated=False)
        stacked = start_matches(api, [a, b], 1, rated=False, deals=[list(reversed(deck))])
        matches = wait_finished(api, unrated + stacked)
    assert [m["rated"] for m in matches] == [False, False] and [m["stacked"] for m in matches] == [False, True]
    creator, _ = api.register()
    friendly = create(api, creator, format="ROUND_ROBIN", rounds=1, playersPerMatch=3, rated=False,
                      houseBots=["HEURISTIC", "RANDOM", "HEURISTIC"])
    friendly = wait_status(api, friendly["id"], "FINISHED")
    assert friendly["rated"] is False and all(m["rated"] is False for m in friendly["matches"])
    ids = unrated + stacked + [m["id"] for m in friendly["matches"]]
    wait_settled(redis_client, ids)

    for bot_id in (a_id, b_id):
        bot = bot_ratings(api, bot_id)
        assert bot["ratings"] == [] and bot["ratingHistory"] == []
        assert bot_id not in {e["bot"]["id"] for e in board(api)}
    assert not any(redis_client.sismember(ratings_applied_key(RULESET), m) for m in ids)
    assert results_of(redis_client, set(ids)) == Counter()
    for identity in ("house-heuristic", "house-random"):
        assert not {h["matchId"] for h in stored_history(redis_client, identity)} & set(ids)


# ---------------------------------------------------------------------- leaderboards


def check_board(entries: list[dict[str, Any]], method: str, offset: int = 0) -> None:
    ratings = [e["rating"] for e in entries]
    assert ratings == sorted(ratings, reverse=True)  # highest first
    assert [e["rank"] for e in entries] == list(range(offset + 1, offset + 1 + len(entries)))
    assert all(e["method"] == method and e["games"] >= 1 and e["bot"]["name"] for e in entries)
    assert len({e["bot"]["id"] for e in entries}) == len(entries)


def test_the_elo_leaderboard_is_ordered_ranked_and_paged(api, worker, redis_client):
    tokens = [api.register() for _ in range(2)]
    with Player(api, tokens[0][0]), Player(api, tokens[1][0]):
        ids = start_matches(api, [t for t, _ in tokens], 1)
        wait_finished(api, ids)
    wait_until(lambda: redis_client.sismember(ratings_applied_key(RULESET), ids[0]), "the rating change")

    whole = board(api)
    check_board(whole, "ELO")
    assert {bot_id for _, bot_id in tokens} <= {e["bot"]["id"] for e in whole}
    assert {"house-heuristic"} <= {e["bot"]["id"] for e in whole}
    named = {e["bot"]["id"]: e["bot"]["name"] for e in whole}
    assert named["house-heuristic"] == "House Heuristic"
    assert len(whole) >= 3
    pages = board(api, first=2) + board(api, first=2, offset=2) + board(api, first=2, offset=4)
    assert pages == whole[:6]
    check_board(board(api, first=1, offset=2), "ELO", offset=2)
    assert board(api, first=5, offset=len(whole) + 10) == []
    for first, offset in ((0, 0), (501, 0), (5, -1)):
        assert api.error_code(BOARD, {"r": RULESET, "f": first, "o": offset}) == "BAD_INPUT"


def test_the_fitted_leaderboard_after_a_tournament_and_after_refit(api, worker, redis_client):
    ruleset = "WIZARD_JUNIOR_CLASSIC"
    creator, _ = api.register()
    entrants = [api.register() for _ in range(2)]
    for token, _ in entrants:
        consenting(api, token)
    with Player(api, entrants[0][0]), Player(api, entrants[1][0]):
        t = create(api, creator, ruleset=ruleset, format="ROUND_ROBIN", rounds=2, playersPerMatch=4,
                   bots=[bot_id for _, bot_id in entrants], houseBots=["HEURISTIC", "RANDOM"])
        wait_status(api, t["id"], "FINISHED")

    def fitted(wanted: set[str], games: int, rs: str) -> list[dict[str, Any]] | None:
        entries = board(api, rs, method="FITTED")
        found = {e["bot"]["id"]: e for e in entries if e["bot"]["id"] in wanted}
        return entries if len(found) == len(wanted) and all(e["games"] == games for e in found.values()) else None

    ids = {bot_id for _, bot_id in entrants}
    entries = wait_until(lambda: fitted(ids, 2, ruleset), "the fit after the tournament")  # the fit job ran
    check_board(entries, "FITTED")
    if len(entries) < 500:  # the whole fitted field: centred on the initial rating
        assert sum(e["rating"] for e in entries) / len(entries) == pytest.approx(INITIAL_RATING, abs=1e-6)

    # a rated match outside any tournament: in the fit once refitRatings has run
    (a, a_id), (b, b_id) = api.register(), api.register()
    with Player(api, a), Player(api, b):
        match_ids = start_matches(api, [a, b], 1)
        wait_finished(api, match_ids)
    wait_until(lambda: redis_client.sismember(ratings_applied_key(RULESET), match_ids[0]), "the rating change")
    assert api.error_code(REFIT, {"r": RULESET}) == "UNAUTHENTICATED"
    assert api.data(REFIT, {"r": RULESET}, a)["refitRatings"] is True
    entries = wait_until(lambda: fitted({a_id, b_id}, 1, RULESET), "the refit")
    check_board(entries, "FITTED")


# ---------------------------------------------------------------------- doubt: deviations and provisional marks

DOUBT = """query($b: ID!, $m: RatingMethod!) { bot(id: $b) { ratings(method: $m) { ruleset rating games deviation provisional } } }"""
DOUBT_BOARD = """query($r: Ruleset!, $m: RatingMethod!, $p: Boolean!) {
  leaderboard(ruleset: $r, first: 500, method: $m, provisional: $p) { rank bot { id name } rating games method deviation provisional } }"""


def doubt(api: Any, bot_id: str, method: str) -> list[dict[str, Any]]:
    return api.data(DOUBT, {"b": bot_id, "m": method})["bot"]["ratings"]  # type: ignore[no-any-return]


def doubt_board(api: Any, method: str, provisional: bool = True, ruleset: str = RULESET) -> list[dict[str, Any]]:
    return api.data(DOUBT_BOARD, {"r": ruleset, "m": method, "p": provisional})["leaderboard"]  # type: ignore[no-any-return]


def test_a_rated_match_gives_both_methods_a_deviation_and_a_provisional_mark(api, worker, redis_client):
    (a, a_id), (b, b_id) = api.register(), api.register()
    deviations = []
    with Player(api, a), Player(api, b):
        for _ in range(2):  # one after the other: each narrows the deviation
            ids = start_matches(api, [a, b], 1)
            wait_finished(api, ids)
            wait_until(lambda: redis_client.sismember(ratings_applied_key(RULESET), ids[0]), "the rating change")  # noqa: B023
            [elo] = doubt(api, a_id, "ELO")
            deviations.append(elo["deviation"])
    assert elo["ruleset"] == RULESET and elo["games"] == 2 and elo["provisional"] is True  # 2 < 15 games
    assert INITIAL_DEVIATION > deviations[0] > deviations[1] > 0
    # kept beside the rating, in the same write
    stored = json.loads(redis_client.hget(elo_ratings_key(RULESET), a_id))
    assert stored == {"rating": pytest.approx(elo["rating"]), "games": 2, "deviation": pytest.approx(elo["deviation"])}
    entries = {e["bot"]["id"]: e for e in doubt_board(api, "ELO")}
    assert entries[a_id]["rating"] == pytest.approx(elo["rating"])  # the board's score: the same, all digits kept
    assert {k: entries[a_id][k] for k in ("games", "deviation", "provisional")} == {
        k: elo[k] for k in ("games", "deviation", "provisional")
    }

    # FITTED, once refitted: the fit's own deviation, the same provisional rule
    api.data(REFIT, {"r": RULESET}, a)
    [fitted] = wait_until(lambda: [r for r in doubt(api, a_id, "FITTED") if r["games"] == 2], "a's fitted rating")
    assert fitted["ruleset"] == RULESET and fitted["provisional"] is True and 0 < fitted["deviation"] < INITIAL_DEVIATION
    fitted_entries = {e["bot"]["id"]: e for e in doubt_board(api, "FITTED")}
    assert fitted_entries[a_id]["deviation"] == pytest.approx(fitted["deviation"])
    assert fitted_entries[a_id]["provisional"] is True and fitted_entries[a_id]["method"] == "FITTED"
    assert doubt(api, b_id, "ELO")[0]["provisional"] is True


def plant_old_rating(redis_client: Any, bot_id: str, name: str, rating: float, games: int) -> None:
    """A rating as kept before deviations were: no deviation beside it (ELO and FITTED)."""
    redis_client.hset(elo_ratings_key(RULESET), bot_id, json.dumps({"rating": rating, "games": games}))
    redis_client.zadd(leaderboard_key(RULESET, "ELO"), {bot_id: rating})
    redis_client.hset(rating_names_key(RULESET), bot_id, name)
    redis_client.zadd(leaderboard_key(RULESET, "FITTED"), {bot_id: rating})
    redis_client.hset(fitted_ratings_key(RULESET), bot_id, games)


def test_ratings_kept_before_deviations_read_with_one_from_their_games(api, worker, redis_client):
    old_token, old_id = api.register()
    plant_old_rating(redis_client, old_id, "old timer", 1612.5, 40)
    for method in ("ELO", "FITTED"):
        [rating] = doubt(api, old_id, method)
        assert rating == {"ruleset": RULESET, "rating": 1612.5, "games": 40,
                          "deviation": pytest.approx(elo_deviation_after(40)), "provisional": False}
        [entry] = [e for e in doubt_board(api, method) if e["bot"]["id"] == old_id]
        assert entry["deviation"] == pytest.approx(elo_deviation_after(40)) and entry["provisional"] is False
    # its next rated match starts from that deviation and keeps one from then on
    (b, _) = api.register()
    with Player(api, old_token), Player(api, b):
        [match_id] = start_matches(api, [old_token, b], 1)
        wait_finished(api, [match_id])
    wait_until(lambda: redis_client.sismember(ratings_applied_key(RULESET), match_id), "the rating change")
    stored = json.loads(redis_client.hget(elo_ratings_key(RULESET), old_id))
    assert stored["games"] == 41 and 0 < stored["deviation"] < elo_deviation_after(40) + 1


def test_provisional_false_leaves_provisional_bots_out_and_ranks_the_rest(api, worker, redis_client):
    (a, a_id), (b, b_id) = api.register(), api.register()
    with Player(api, a), Player(api, b):
        ids = start_matches(api, [a, b], 1)
        wait_finished(api, ids)
    wait_until(lambda: redis_client.sismember(ratings_applied_key(RULESET), ids[0]), "the rating change")
    settled = []
    for i, rating in enumerate((1900.0, 1100.0)):  # established bots above and below the new ones
        _, bot_id = api.register()
        plant_old_rating(redis_client, bot_id, f"settled {i}", rating, 30)
        settled.append(bot_id)

    for method in ("ELO", "FITTED"):
        whole = doubt_board(api, method)
        shown = doubt_board(api, method, provisional=False)
        established = [e for e in whole if not e["provisional"]]
        assert [e["bot"]["id"] for e in shown] == [e["bot"]["id"] for e in established]
        assert [e["rank"] for e in shown] == list(range(1, len(shown) + 1))  # counted among those shown
        assert all(e["games"] >= 15 and not e["provisional"] for e in shown)
        assert set(settled) <= {e["bot"]["id"] for e in shown}
        if method == "ELO":
            assert {a_id, b_id} <= {e["bot"]["id"] for e in whole} and not {a_id, b_id} & {e["bot"]["id"] for e in shown}
    # paged: the same list, a slice at a time
    shown = doubt_board(api, "ELO", False)
    pages = []
    for offset in range(0, len(shown) + 2, 2):
        pages += api.data(
            "query($r: Ruleset!, $o: Int!) { leaderboard(ruleset: $r, first: 2, offset: $o, provisional: false) "
            "{ rank bot { id } } }", {"r": RULESET, "o": offset},
        )["leaderboard"]
    assert [(e["rank"], e["bot"]["id"]) for e in pages] == [(e["rank"], e["bot"]["id"]) for e in shown]
    # read from the top, so only so deep: deeper is refused with what to do, not read
    deep = "query($o: Int!) { leaderboard(ruleset: WIZARD, offset: $o, provisional: false) { rank } }"
    assert api.error_code(deep, {"o": 10_001}) == "BAD_INPUT"
    assert "provisional: true" in api.gql(deep, {"o": 10_001})["errors"][0]["message"]
    assert api.data(deep, {"o": 10_000})["leaderboard"] == []

    # REST: the same board, and the web page
    rest = api.http.get(f"/api/leaderboard/{RULESET}", params={"provisional": "false"}).json()
    assert [e["bot"]["id"] for e in rest] == [e["bot"]["id"] for e in shown]
    assert all("deviation" in e and e["provisional"] is False for e in rest)
    assert api.http.get(f"/api/leaderboard/{RULESET}", params={"provisional": "maybe"}).status_code == 400
    html = api.http.get(f"/leaderboard/{RULESET}").text
    row = html[html.index(f'href="/bots/{a_id}"'):]
    row = row[:row.index("</tr>")]
    entry = next(e for e in doubt_board(api, "ELO") if e["bot"]["id"] == a_id)
    assert "provisional</span>" in row and f"± {round(entry['deviation'])}<" in row
    hidden = api.http.get(f"/leaderboard/{RULESET}", params={"provisional": "false"}).text
    assert f'href="/bots/{a_id}"' not in hidden and f'href="/bots/{settled[0]}"' in hidden
    assert f"/leaderboard/{RULESET}?method=ELO&amp;provisional=false" in html  # the toggle


def played_in_memory(bots: list[str]) -> LiveMatch:
    """A match of ``bots`` played to its end in memory (never stored: what settlement rates)."""
    match = live_match(players=len(bots), ruleset=RULESET)
    for seat, bot in enumerate(bots):
        match.join(seat, SeatHolder(bot, f"name of {bot}", None), now_ms())
    while not match.ended:
        seat, action = first_action(match)
        match.play(seat, action, bots[seat], now_ms())
    return match


def test_matches_racing_to_move_the_same_bots_are_each_applied_once_and_read_back(services):
    """Two matches of the same bots, each settled twice at once: each change applied once (one
    script in the ruleset's slot, retried when another match's change got in first), and every
    read of them (ratings, histories, changes for the archive, results, the refit) finds them."""
    bots = [f"race-{uuid.uuid4().hex[:10]}-{i}" for i in range(3)]
    matches = [played_in_memory(bots) for _ in range(2)]

    async def run() -> None:
        ratings = services.ratings
        try:
            await asyncio.gather(*(ratings.apply_elo(m) for m in matches + matches))
            ids = {m.id for m in matches}
            histories = await ratings.histories([(b, RULESET, 10) for b in bots])
            assert [sorted(h["matchId"] for h in rows) for rows in histories] == [sorted(ids)] * 3
            assert [[(r["ruleset"], r["games"]) for r in rows] for rows in await ratings.current(bots)] == [[(RULESET, 2)]] * 3
            changes = await ratings.changes(matches)
            assert [sorted(c["bot"] for c in changed or []) for changed in changes] == [sorted(bots)] * 2
            assert Counter(r["matchId"] for r in await ratings.ratings.results(RULESET) if r["matchId"] in ids) == Counter(
                {m: 1 for m in ids})
            await ratings.fit(RULESET)
            assert [[r["ruleset"] for r in rows] for rows in await ratings.fitted(bots)] == [[RULESET]] * 3
            board = await ratings.leaderboard(RULESET, RatingMethod.FITTED, 1000, 0)
            assert {row["id"] for row in board} >= set(bots) and {row["name"] for row in board} >= {f"name of {b}" for b in bots}
        finally:
            await services.close()

    asyncio.run(run())
