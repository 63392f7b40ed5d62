"""Tournaments run by real workers (`wizard-arena worker`: RQ jobs and the clock) on the test
Redis: a round robin scheduled ahead, joining and cancelling, Swiss, arena, duplicate sets
(sealed until the whole set has been played), bad inputs (start times out of range; a time
without a zone is UTC), and a worker killed in the middle of a tournament whose every match
still counts exactly once. In this process, on the service's own classes: a round's tables
stored all at once, a match's settlement left queued while another run holds its
tournament, and a creation or an end whose process died half way, completed by the clock.

House bots as entrants (``houseBots``) make tournaments play by themselves; registered bots
play through ``awaitTurn`` (a :class:`Player` thread, or the test itself). Everything waits
on bounded polls of the tournament's state."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import secrets
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from ranking.pairing import placement_points
from service.domain.matches import Caller
from service.domain.tournaments import NewTournament
from service.model.homes import homed_match_id
from service.model.tournament import Table, TournamentStatus
from service.store.clock import now_ms
from service.store.keys import (
    ACTIVE_TOURNAMENTS,
    LISTED_TOURNAMENTS,
    UNARCHIVED_TOURNAMENTS,
    archive_claim_key,
    history_key,
    match_home_key,
    rating_results_key,
    ratings_applied_key,
    tournament_key,
    tournament_lock_key,
)
from service.store.tournaments import CREATION_GRACE_MS
from tests.service import arena_client
from tests.service.conftest import ON_CLUSTER, ended_by_its_last_commit, live_match

#: tournaments progress in the background: polls here wait longer and less often
wait_until = functools.partial(arena_client.wait_until, timeout=30.0, every=0.15)

TOURNAMENT = """
id name status format rounds durationMinutes playersPerMatch duplicate rated startsAt startedAt finishedAt
createdBy moveTimeoutMs
entrants { id name }
standings { rank bot { id name } points matches score }
matches { id status players createdAt seedHash seed rated seats { seat bot { id } houseBot score timeouts } }
"""
CREATE = "mutation($i: CreateTournamentInput!) { createTournament(input: $i) { " + TOURNAMENT + " } }"
GET = "query($t: ID!) { tournament(id: $t) { " + TOURNAMENT + " } }"
JOIN = "mutation($t: ID!) { joinTournament(tournamentId: $t) { id status entrants { id } } }"
CANCEL = "mutation($t: ID!) { cancelTournament(tournamentId: $t) { id status finishedAt matches { id } } }"
AWAIT = "query($m: ID, $t: Int) { awaitTurn(matchId: $m, timeoutMs: $t) { id version status legalMoves { bid card trump } } }"
SUBMIT = "mutation($m: ID!, $mv: MoveInput!, $v: Int) { submitMove(matchId: $m, move: $mv, expectedVersion: $v) { id } }"
HISTORY = "query($b: ID!, $r: Ruleset!) { bot(id: $b) { ratingHistory(ruleset: $r) { rating matchId at } } }"
SEALED_VIEW = """
id status phase round seed seedHash movesMade winners hand
seats { seat score bid tricks hand }
roundResults { round } completedTricks { winner } currentTrick { card } lastTrick { winner }
"""
#: what a bot may meet while playing and simply carry on after (a race with the server)
RACES = {"STALE_VERSION", "NOT_YOUR_TURN", "MATCH_NOT_ACTIVE"}


# ---------------------------------------------------------------------- helpers


class Workers:
    """This module's worker (one at a time): a test may kill it and start another."""

    def __init__(self, start: Callable[..., Any]) -> None:
        self._start = start
        self.current = start()

    def kill_everything(self) -> None:
        """SIGKILL the worker and every process under it (RQ's work-horse), as
        when its machine dies: nothing of it finishes what it was doing."""
        pid = self.current.popen.pid
        os.kill(pid, signal.SIGSTOP)  # frozen: it forks nothing new while its children are found
        for child in descendants(pid):
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.current.stop(sig_kill=True)

    def replace(self) -> None:
        self.current = self._start()

    def stop(self) -> None:
        self.current.stop()


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


@pytest.fixture(scope="module")
def worker(start_worker: Any) -> Iterator[Workers]:
    """This module's own worker (whatever other modules run); stopped after the module."""
    workers = Workers(start_worker)
    yield workers
    workers.stop()


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def ms(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp).timestamp() * 1000)


def create(api: Any, token: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("name", f"t-{os.urandom(3).hex()}")
    spec.setdefault("ruleset", "WIZARD_JUNIOR")
    return api.data(CREATE, {"i": spec}, token)["createTournament"]  # type: ignore[no-any-return]


def consenting(api: Any, token: str) -> None:
    """The bot accepts every invitation from now on: a bot named in createTournament's ``bots``
    is invited, and enters only by its own act (test_invitations.py)."""
    api.data("mutation { setInvitationPolicy(policy: ACCEPT_ALL) }", {}, token)


def get(api: Any, tid: str, token: str | None = None) -> dict[str, Any]:
    return api.data(GET, {"t": tid}, token)["tournament"]  # type: ignore[no-any-return]


def wait_status(api: Any, tid: str, status: str, timeout: float = 30.0) -> dict[str, Any]:
    return wait_until(lambda: (t := get(api, tid))["status"] == status and t, f"tournament {tid} {status}", timeout=timeout)


def move_of(match: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in match["legalMoves"][0].items() if v is not None}


def play_one(http: httpx.Client, token: str, match_id: str | None, wait_ms: int) -> tuple[dict[str, Any] | None, str | None]:
    """Wait for the bot's turn (in ``match_id`` or any match) and make its first legal move:
    (the match it moved in or None, the error code of a refused move or None)."""
    headers = {"Authorization": f"Bearer {token}"}
    body = http.post("/graphql", json={"query": AWAIT, "variables": {"m": match_id, "t": wait_ms}}, headers=headers).json()
    assert not body.get("errors"), body
    match = body["data"]["awaitTurn"]
    if match is None or not match["legalMoves"]:
        return match, None
    answer = http.post(
        "/graphql",
        json={"query": SUBMIT, "variables": {"m": match["id"], "mv": move_of(match), "v": match["version"]}},
        headers=headers,
    ).json()
    return match, (answer["errors"][0]["extensions"]["code"] if answer.get("errors") else None)


class Player(threading.Thread):
    """A registered bot that makes its first legal move whenever it has one (awaitTurn), in
    any of its matches, until stopped."""

    def __init__(self, api: Any, token: str) -> None:
        super().__init__(daemon=True)
        self.api, self.token = api, token
        self.halt = threading.Event()
        self.moves = 0
        self.errors: list[str] = []

    def run(self) -> None:
        with httpx.Client(base_url=self.api.base, timeout=30) as http:
            while not self.halt.is_set():
                try:
                    match, code = play_one(http, self.token, None, 300)
                except Exception as exc:  # noqa: BLE001 - reported by the test
                    self.errors.append(repr(exc))
                    return
                if match is not None and code is None:
                    self.moves += 1
                elif code is not None and code not in RACES:
                    self.errors.append(code)

    def __enter__(self) -> Player:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.halt.set()
        self.join(10)


def play_to_the_end(api: Any, token: str, match_id: str, timeout: float = 30.0) -> int:
    """The test itself plays the bot's every move of one match until it has ended."""
    end = time.monotonic() + timeout
    moves = 0
    while time.monotonic() < end:
        match, code = play_one(api.http, token, match_id, 1000)
        assert code is None or code in RACES, code
        moves += match is not None and code is None
        if api.match(match_id)["status"] in ("FINISHED", "ABORTED"):
            return moves
    raise AssertionError(f"match {match_id} did not end in {timeout} s")


def check_standings(t: dict[str, Any]) -> None:
    """The standings are what the matches' final scores give: placement points (n-1 for
    the first of n ... 0, ties share) summing to n(n-1)/2 a table, each match counted once
    for each entrant at it (house fill seats count for nobody), ranked by points then score."""
    entrants = [e["id"] for e in t["entrants"]]
    expected = {e: {"points": 0.0, "matches": 0, "score": 0} for e in entrants}
    seats_played = 0
    for match in t["matches"]:
        assert match["status"] == "FINISHED", match
        seats = sorted(match["seats"], key=lambda s: s["seat"])
        scores = [s["score"] for s in seats]
        points = placement_points(scores)
        n = len(seats)
        assert sum(points) == n * (n - 1) / 2
        for seat, p in zip(seats, points, strict=True):
            if seat["bot"]["id"] in expected:
                row = expected[seat["bot"]["id"]]
                row["points"] += p
                row["matches"] += 1
                row["score"] += seat["score"]
                seats_played += 1
    standings = t["standings"]
    assert sorted(r["bot"]["id"] for r in standings) == sorted(entrants)
    for row in standings:
        want = expected[row["bot"]["id"]]
        assert (row["points"], row["matches"], row["score"]) == (want["points"], want["matches"], want["score"]), row
    assert sum(r["matches"] for r in standings) == seats_played
    assert standings[0]["rank"] == 1
    for row in standings:  # rank: 1 + how many are ahead on (points, score); ties share it
        ahead = sum(1 for o in standings if (o["points"], o["score"]) > (row["points"], row["score"]))
        assert row["rank"] == 1 + ahead, standings
    assert [(-r["points"], -r["score"]) for r in standings] == sorted((-r["points"], -r["score"]) for r in standings)


def tables_by_round(t: dict[str, Any]) -> dict[int, list[list[str]]]:
    """Match ids are <tournament>-r<round>t<table>-<turn>: each round's tables (bot ids by seat)."""
    out: dict[int, list[list[str]]] = {}
    for match in t["matches"]:
        slot = match["id"].split("-")[1]
        round_number = int(slot[1:].split("t")[0])
        out.setdefault(round_number, []).append([s["bot"]["id"] for s in sorted(match["seats"], key=lambda s: s["seat"])])
    return out


# ---------------------------------------------------------------------- round robin


def test_a_round_robin_scheduled_ahead_waits_then_runs_to_the_end(api, worker):
    creator, creator_id = api.register()
    starts = datetime.now(UTC) + timedelta(seconds=2.5)
    houses = ["HEURISTIC", "RANDOM", "HEURISTIC", "RANDOM", "HEURISTIC", "RANDOM"]
    t = create(api, creator, format="ROUND_ROBIN", rounds=2, playersPerMatch=4, houseBots=houses, startsAt=iso(starts))
    tid = t["id"]
    assert t["status"] == "SCHEDULED" and t["matches"] == [] and t["createdBy"] == creator_id
    assert abs(ms(t["startsAt"]) - starts.timestamp() * 1000) < 2 and t["startedAt"] is None
    assert len(t["entrants"]) == 6 and t["rated"] is True and t["duplicate"] is False

    joiners = [api.register() for _ in range(2)]
    for token, bot_id in joiners:  # registered bots may join until the start ...
        entrants = api.data(JOIN, {"t": tid}, token)["joinTournament"]["entrants"]
        assert bot_id in [e["id"] for e in entrants]
    again = api.data(JOIN, {"t": tid}, joiners[0][0])["joinTournament"]  # joining twice enters once
    assert [e["id"] for e in again["entrants"]].count(joiners[0][1]) == 1 and len(again["entrants"]) == 8

    with Player(api, joiners[0][0]) as p1, Player(api, joiners[1][0]) as p2:
        def started() -> dict[str, Any] | None:
            view = get(api, tid)
            if time.time() < starts.timestamp():  # answered before startsAt: nothing has begun
                assert view["status"] == "SCHEDULED" and view["matches"] == [], view
            return view if view["status"] != "SCHEDULED" else None

        running = wait_until(started, "the start", timeout=15)
        assert running["status"] in ("RUNNING", "FINISHED")
        assert ms(running["startedAt"]) >= ms(running["startsAt"])
        late, _ = api.register()  # ... and not after
        assert api.error_code(JOIN, {"t": tid}, late) == "TOURNAMENT_NOT_OPEN"
        final = wait_status(api, tid, "FINISHED", timeout=40)
    assert p1.errors == [] and p2.errors == [] and p1.moves > 0 and p2.moves > 0

    assert len(final["entrants"]) == 8 and late not in [e["id"] for e in final["entrants"]]
    assert len(final["matches"]) == 2 * 2  # 2 rounds of 2 tables of 4
    assert ms(final["finishedAt"]) >= ms(final["startedAt"])
    check_standings(final)
    assert all(r["matches"] == 2 for r in final["standings"])
    assert sum(r["points"] for r in final["standings"]) == 4 * 6  # no house fill: every point is an entrant's
    for tables in tables_by_round(final).values():  # every round seats every entrant once
        assert sorted(b for table in tables for b in table) == sorted(e["id"] for e in final["entrants"])
    for match in final["matches"]:  # the registered bots moved themselves, in time
        assert match["rated"] is True
        for seat in match["seats"]:
            if seat["bot"]["id"] in {j[1] for j in joiners}:
                assert seat["timeouts"] == 0 and seat["houseBot"] is None
            else:
                assert seat["houseBot"] in ("HEURISTIC", "RANDOM")
    assert api.error_code(JOIN, {"t": tid}, late) == "TOURNAMENT_NOT_OPEN"
    assert api.error_code(CANCEL, {"t": tid}, creator) == "TOURNAMENT_OVER"  # finished: too late to cancel


def test_only_the_creator_cancels_and_a_cancelled_tournament_takes_nobody(api, worker):
    creator, _ = api.register()
    other, other_id = api.register()
    t = create(api, creator, format="SWISS", rounds=3, houseBots=["RANDOM"] * 3,
               startsAt=iso(datetime.now(UTC) + timedelta(minutes=5)))
    tid = t["id"]
    assert api.data(JOIN, {"t": tid}, other)["joinTournament"]["status"] == "SCHEDULED"
    assert api.error_code(CANCEL, {"t": tid}, other) == "FORBIDDEN"  # an entrant is not the creator
    assert api.error_code(CANCEL, {"t": tid}) == "UNAUTHENTICATED"
    assert get(api, tid)["status"] == "SCHEDULED"
    cancelled = api.data(CANCEL, {"t": tid}, creator)["cancelTournament"]
    assert cancelled["status"] == "CANCELLED" and cancelled["finishedAt"] is not None and cancelled["matches"] == []
    assert get(api, tid)["status"] == "CANCELLED"
    assert api.error_code(JOIN, {"t": tid}, api.register()[0]) == "TOURNAMENT_NOT_OPEN"
    assert api.error_code(CANCEL, {"t": tid}, creator) == "TOURNAMENT_OVER"
    assert other_id in [e["id"] for e in get(api, tid)["entrants"]]
    for code, mutation in (("NOT_FOUND", JOIN), ("NOT_FOUND", CANCEL)):
        assert api.error_code(mutation, {"t": "no-such-tournament"}, creator) == code
    assert api.data(GET, {"t": "no-such-tournament"})["tournament"] is None


def test_a_running_tournament_cancelled_by_its_creator_starts_no_more_matches(api, worker, redis_client):
    creator, _ = api.register()
    t = create(api, creator, format="ROUND_ROBIN", rounds=30, playersPerMatch=3,
               houseBots=["HEURISTIC", "RANDOM", "HEURISTIC"])
    tid = t["id"]
    wait_until(lambda: get(api, tid)["matches"], "the first match", timeout=15)
    assert api.error_code(CANCEL, {"t": tid}, api.register()[0]) == "FORBIDDEN"
    cancelled = api.data(CANCEL, {"t": tid}, creator)["cancelTournament"]
    assert cancelled["status"] == "CANCELLED"
    started = {m["id"] for m in cancelled["matches"]}

    def settled() -> dict[str, Any] | None:  # the matches under way played on, and were settled
        view = get(api, tid)
        ended = all(m["status"] == "FINISHED" for m in view["matches"])
        queued = any(redis_client.zscore(match_home_key(m["id"], "unsettled"), m["id"]) is not None for m in view["matches"])
        return view if ended and not queued else None

    view = wait_until(settled, "the matches under way to end and be settled", timeout=30)
    assert view["status"] == "CANCELLED"
    assert {m["id"] for m in view["matches"]} == started  # settling them started nothing new
    for match in view["matches"]:  # rated matches that were played out count for the ratings
        assert match["rated"] and redis_client.sismember(ratings_applied_key("WIZARD_JUNIOR"), match["id"]), match["id"]


def test_a_duplicate_set_cut_short_by_a_cancel_is_unsealed_once_its_last_match_ends(api, worker, redis_client):
    creator, _ = api.register()
    token, bot_id = api.register()
    consenting(api, token)
    t = create(api, creator, format="ROUND_ROBIN", rounds=2, playersPerMatch=3, duplicate=True,
               bots=[bot_id], houseBots=["HEURISTIC", "RANDOM"])
    tid = t["id"]
    first = wait_until(lambda: get(api, tid)["matches"], "the set's first match", timeout=15)[0]
    play_to_the_end(api, token, first["id"])
    second = wait_until(lambda: (ms := get(api, tid)["matches"]) and len(ms) > 1 and ms[1], "the second", timeout=15)
    assert api.http.get(f"/api/matches/{first['id']}/record").status_code == 409  # sealed: the set goes on
    assert api.data(CANCEL, {"t": tid}, creator)["cancelTournament"]["status"] == "CANCELLED"
    play_to_the_end(api, token, second["id"])  # the match under way plays on

    def unsealed() -> bool:
        answers = [api.http.get(f"/api/matches/{m}/record") for m in (first["id"], second["id"])]
        return all(a.status_code == 200 for a in answers)

    wait_until(unsealed, "the records of the set's matches")
    view = get(api, tid)
    assert [m["id"] for m in view["matches"]] == [first["id"], second["id"]]  # no third turn, no round 2
    assert all(m["seed"] is not None for m in view["matches"])
    for match_id in (first["id"], second["id"]):
        wait_until(lambda m=match_id: redis_client.sismember(ratings_applied_key("WIZARD_JUNIOR"), m), f"the rating of {match_id}")
    history = api.data(HISTORY, {"b": bot_id, "r": "WIZARD_JUNIOR"})["bot"]["ratingHistory"]
    assert [h["matchId"] for h in history] == [first["id"], second["id"]]


def test_an_entrant_that_never_moves_is_timed_out_and_the_tournament_still_ends(start_api, worker):
    fast = start_api(ARENA_MIN_MOVE_TIMEOUT_MS="10")
    creator, _ = fast.register()
    silent, silent_id = fast.register()
    consenting(fast, silent)  # (it accepts, then never moves)
    t = create(fast, creator, format="ROUND_ROBIN", rounds=1, playersPerMatch=3, moveTimeoutMs=20,
               bots=[silent_id], houseBots=["HEURISTIC", "RANDOM"])
    final = wait_status(fast, t["id"], "FINISHED", timeout=30)
    [match] = final["matches"]
    [seat] = [s for s in match["seats"] if s["bot"]["id"] == silent_id]
    assert seat["timeouts"] >= 8 + 36  # every bid and card of its 8 rounds made by the server
    assert all(s["timeouts"] == 0 for s in match["seats"] if s["houseBot"])
    check_standings(final)


# ---------------------------------------------------------------------- Swiss


def test_swiss_pairs_each_round_by_the_standings_so_far(api, worker):
    creator, _ = api.register()
    houses = ["HEURISTIC", "RANDOM", "RANDOM", "HEURISTIC", "RANDOM", "HEURISTIC", "RANDOM"]
    t = create(api, creator, format="SWISS", rounds=3, playersPerMatch=4, houseBots=houses)
    final = wait_status(api, t["id"], "FINISHED", timeout=40)
    assert final["format"] == "SWISS" and len(final["matches"]) == 3 * 2  # 7 entrants: 2 tables a round
    check_standings(final)
    assert sum(r["matches"] for r in final["standings"]) == 3 * 7  # the fill seat counts for nobody
    entrants = [e["id"] for e in final["entrants"]]
    rounds = tables_by_round(final)
    by_round: dict[int, list[dict[str, Any]]] = {}
    for match in final["matches"]:
        by_round.setdefault(int(match["id"].split("-")[1][1:].split("t")[0]), []).append(match)
    for r in (2, 3):  # the leaders so far at one table, the rest at the other
        points: Counter = Counter()
        score: Counter = Counter()
        for earlier in range(1, r):
            for match in by_round[earlier]:
                seats = sorted(match["seats"], key=lambda s: s["seat"])
                for seat, p in zip(seats, placement_points([s["score"] for s in seats]), strict=True):
                    points[seat["bot"]["id"]] += p
                    score[seat["bot"]["id"]] += seat["score"]
        order = sorted(entrants, key=lambda e: (-points[e], -score[e], entrants.index(e)))
        tables = [sorted(b for b in table if b in entrants) for table in rounds[r]]
        assert sorted(tables) == sorted([sorted(order[:4]), sorted(order[4:])]), (r, order, rounds[r])
        assert sorted(len(table) for table in rounds[r]) == [4, 4]  # the fill seat is a house bot's
        assert sum(1 for table in rounds[r] for b in table if b == "house-heuristic") == 1


# ---------------------------------------------------------------------- arena


def test_an_arena_keeps_making_tables_until_its_time_is_up(api, worker):
    creator, _ = api.register()
    houses = ["HEURISTIC", "RANDOM"] * 4
    t = create(api, creator, format="ARENA", durationMinutes=0.1, playersPerMatch=4, houseBots=houses)
    tid = t["id"]
    assert t["durationMinutes"] == 0.1 and t["rounds"] is None
    entrants = {e["id"] for e in t["entrants"]}

    def finished() -> dict[str, Any] | None:
        view = get(api, tid)
        active = [m for m in view["matches"] if m["status"] == "ACTIVE"]
        playing = [s["bot"]["id"] for m in active for s in m["seats"]]
        assert len(playing) == len(set(playing)) <= 8, active  # nobody at two tables at once
        return view if view["status"] == "FINISHED" else None

    final = wait_until(finished, "the arena to finish", timeout=40)
    started, ended = ms(final["startedAt"]), ms(final["finishedAt"])
    assert ended >= started + 6_000  # it ran its whole time ...
    # ... making new tables as old ones ended: 2 at once (8 entrants, 4 a table), then 2 more
    # at least (more on a fast machine: CI once had only the 4 under a load of 12 on 2 cores)
    assert len(final["matches"]) >= 2 * 2
    for match in final["matches"]:  # ... every table made before the end, and played out
        assert match["status"] == "FINISHED"
        assert ms(match["createdAt"]) < started + 6_000 + 500  # (the last decided just before the end)
        assert {s["bot"]["id"] for s in match["seats"]} <= entrants  # 8 entrants: full tables only
    check_standings(final)
    assert sum(r["matches"] for r in final["standings"]) == 4 * len(final["matches"])
    assert all(r["matches"] >= 2 for r in final["standings"])


# ---------------------------------------------------------------------- duplicate


def test_a_duplicate_set_rotates_the_seats_over_the_same_deals_and_stays_sealed_until_complete(api, worker, redis_client):
    creator, _ = api.register()
    token, bot_id = api.register()
    consenting(api, token)
    t = create(api, creator, format="ROUND_ROBIN", rounds=1, playersPerMatch=3, duplicate=True,
               bots=[bot_id], houseBots=["HEURISTIC", "RANDOM"])
    tid = t["id"]
    assert t["duplicate"] is True and t["entrants"][0]["id"] == bot_id

    def turn(n: int) -> Callable[[], dict[str, Any] | None]:
        return lambda: (ms := get(api, tid)["matches"]) and len(ms) > n and ms[n]

    first = wait_until(turn(0), "the set's first match", timeout=15)
    assert first["id"] == homed_match_id(f"{tid}-r1t0-0")
    play_to_the_end(api, token, first["id"])
    second = wait_until(turn(1), "the set's second match", timeout=15)
    assert second["seedHash"] == first["seedHash"]  # dealt alike

    # the set is unfinished: its finished match shows nothing of its play, to anyone
    for viewer in (None, token, creator):
        sealed = api.data("query($m: ID!) { match(id: $m) { " + SEALED_VIEW + " } }", {"m": first["id"]}, viewer)["match"]
        assert sealed["seed"] is None and sealed["seedHash"] == first["seedHash"]
        assert sealed["roundResults"] == [] and sealed["completedTricks"] == [] and sealed["currentTrick"] == []
        assert sealed["lastTrick"] is None and sealed["hand"] is None and sealed["winners"] is None
        assert all(s["score"] == 0 and s["bid"] is None and s["tricks"] == 0 and s["hand"] is None for s in sealed["seats"])
    rest = api.http.get(f"/api/matches/{first['id']}")
    assert rest.status_code == 200 and rest.json()["seed"] is None and rest.json()["roundResults"] == []
    record = api.http.get(f"/api/matches/{first['id']}/record")
    assert record.status_code == 409 and record.json()["error"]["code"] == "MATCH_NOT_ACTIVE"
    listed = next(m for m in get(api, tid)["matches"] if m["id"] == first["id"])
    assert listed["seed"] is None and all(s["score"] == 0 for s in listed["seats"])
    assert not redis_client.sismember(ratings_applied_key("WIZARD_JUNIOR"), first["id"])  # nor its rating change
    history = api.data(HISTORY, {"b": bot_id, "r": "WIZARD_JUNIOR"})["bot"]["ratingHistory"]
    assert history == []

    play_to_the_end(api, token, second["id"])
    third = wait_until(turn(2), "the set's third match", timeout=15)
    play_to_the_end(api, token, third["id"])
    final = wait_status(api, tid, "FINISHED", timeout=20)

    matches = final["matches"]
    assert [m["id"] for m in matches] == [homed_match_id(f"{tid}-r1t0-{n}") for n in range(3)]  # as many matches as seats
    assert len({m["seedHash"] for m in matches}) == 1
    seeds = {m["seed"] for m in matches}
    assert len(seeds) == 1 and hashlib.sha256(seeds.pop().encode()).hexdigest() == matches[0]["seedHash"]
    table = [s["bot"]["id"] for s in sorted(matches[0]["seats"], key=lambda s: s["seat"])]
    assert sorted(table, key=str) == sorted([bot_id, "house-heuristic-0", "house-random-1"], key=str)
    records = []
    for n, match in enumerate(matches):  # seats rotated: over the set everyone plays every seat's cards
        seats = [s["bot"]["id"] for s in sorted(match["seats"], key=lambda s: s["seat"])]
        assert seats == [table[(s + n) % 3] for s in range(3)]
        answer = api.http.get(f"/api/matches/{match['id']}/record")
        assert answer.status_code == 200, answer.text
        records.append(answer.json())
    assert sorted(m["seats"][0]["bot"]["id"] for m in matches) == sorted(table)
    deals = [[(r["round"], r["dealer"], r["hands"], r["trumpCard"]) for r in rec["rounds"]] for rec in records]
    assert deals[0] == deals[1] == deals[2]  # the same deals, seat by seat
    for match, record in zip(matches, records, strict=True):
        assert record["seed"] == match["seed"] and record["matchId"] == match["id"]
        assert [s["id"] for s in record["seats"]] == [s["bot"]["id"] for s in sorted(match["seats"], key=lambda s: s["seat"])]
    check_standings(final)
    assert all(r["matches"] == 3 for r in final["standings"])
    history = api.data(HISTORY, {"b": bot_id, "r": "WIZARD_JUNIOR"})["bot"]["ratingHistory"]
    assert [h["matchId"] for h in history] == [m["id"] for m in matches]  # rated once the set was complete


# ---------------------------------------------------------------------- bad input


def tournament_keys(redis_client: Any) -> set[bytes]:
    return set(redis_client.scan_iter(match="{tn:*}:tournament", count=1000))


def test_bad_tournament_inputs_are_refused_and_change_nothing(api, worker, redis_client):
    token, bot_id = api.register()
    before = tournament_keys(redis_client)
    past = iso(datetime.now(UTC) - timedelta(hours=1))
    base = {"name": "bad", "houseBots": ["RANDOM", "RANDOM"]}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"format": "KNOCKOUT", "rounds": 2}, "BAD_INPUT"),
        ({"format": "ROUND_ROBIN"}, "BAD_INPUT"),  # rounds missing
        ({"format": "SWISS"}, "BAD_INPUT"),
        ({"format": "ROUND_ROBIN", "rounds": 0}, "BAD_INPUT"),
        ({"format": "SWISS", "rounds": 201}, "BAD_INPUT"),
        ({"format": "ARENA"}, "BAD_INPUT"),  # durationMinutes missing
        ({"format": "ARENA", "durationMinutes": 0.001}, "BAD_INPUT"),
        ({"format": "ARENA", "durationMinutes": -5}, "BAD_INPUT"),
        ({"format": "ROUND_ROBIN", "rounds": 2, "startsAt": past}, "BAD_INPUT"),
        ({"format": "ROUND_ROBIN", "rounds": 2, "startsAt": "not a date"}, "BAD_INPUT"),
        ({"format": "ROUND_ROBIN", "rounds": 2, "bots": [bot_id, "no-such-bot"]}, "NOT_FOUND"),
        ({"format": "ROUND_ROBIN", "rounds": 2, "playersPerMatch": 2}, "BAD_INPUT"),
        ({"format": "ROUND_ROBIN", "rounds": 2, "playersPerMatch": 7}, "BAD_INPUT"),
        ({"format": "ROUND_ROBIN", "rounds": 2, "houseBots": ["GRANDMASTER"]}, "BAD_INPUT"),
        ({"format": "ROUND_ROBIN", "rounds": 2, "ruleset": "CHESS"}, "BAD_INPUT"),
        ({"format": "ROUND_ROBIN", "rounds": 2, "variants": ["NO_SUCH_VARIANT"]}, "BAD_INPUT"),
        ({"format": "ROUND_ROBIN", "rounds": 2, "moveTimeoutMs": 1}, "BAD_INPUT"),
        ({"format": "ROUND_ROBIN", "rounds": 2, "name": "  "}, "BAD_INPUT"),
        ({"format": "ROUND_ROBIN", "rounds": 2, "name": "x" * 81}, "BAD_INPUT"),
    ]
    for extra, code in cases:
        answer = api.gql(CREATE, {"i": {**base, **extra}}, token)
        assert answer.get("errors") and answer.get("data") is None, (extra, answer)
        error = answer["errors"][0]
        assert error["extensions"]["code"] == code, (extra, error)
        assert error["message"] and "Traceback" not in json.dumps(answer), (extra, error)
    assert api.error_code(CREATE, {"i": {**base, "format": "ROUND_ROBIN", "rounds": 2}}) == "UNAUTHENTICATED"
    assert tournament_keys(redis_client) == before  # nothing was created


@pytest.fixture(scope="module")
def api_west_of_utc(start_api: Any) -> Any:
    """An API process whose local time zone is UTC-5 (POSIX TZ, no tz database needed), so a
    time without a zone read as local time would be 5 hours off."""
    return start_api(TZ="EST5")


@pytest.mark.parametrize("starts", [
    "0001-01-01T00:00:00",  # before the epoch's range once read as local time; in the past as UTC
    "9999-12-31T23:59:59-23:00",  # past the year 9999 in UTC
    "more than a year ahead",
])
def test_create_tournament_refuses_start_times_out_of_range_as_bad_input_and_creates_nothing(
    api_west_of_utc, redis_client, starts
):
    api = api_west_of_utc
    token, _ = api.register()
    if starts == "more than a year ahead":
        starts = (datetime.now(UTC) + timedelta(days=367)).isoformat()
    base = {"name": "out of range", "format": "ROUND_ROBIN", "rounds": 1, "playersPerMatch": 3,
            "houseBots": ["RANDOM", "RANDOM", "RANDOM"]}
    before = tournament_keys(redis_client)
    body = api.gql(CREATE, {"i": {**base, "startsAt": starts}}, token)
    assert body.get("errors") and body.get("data") is None, body
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT", body
    assert "Traceback" not in json.dumps(body)
    assert tournament_keys(redis_client) == before  # no tournament was stored


def test_a_start_time_without_a_zone_is_taken_as_utc(api_west_of_utc):
    api = api_west_of_utc
    token, _ = api.register()
    starts = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    naive = starts.replace(tzinfo=None).isoformat()  # "YYYY-MM-DDTHH:MM:SS", no zone
    t = api.data(CREATE, {"i": {"name": "naive start", "format": "ROUND_ROBIN", "rounds": 1,
                                "playersPerMatch": 3, "houseBots": ["RANDOM"] * 3,
                                "startsAt": naive}}, token)["createTournament"]
    try:
        assert datetime.fromisoformat(t["startsAt"]) == starts, (naive, t["startsAt"])
    finally:
        api.data(CANCEL, {"t": t["id"]}, token)


# ---------------------------------------------------------------------- in this process: tables, settlement


def house_tournament_in_an_hour(name: str, rounds: int) -> NewTournament:
    """A round robin of three random house bots, WIZARD_JUNIOR, starting in an hour."""
    return NewTournament(name, "WIZARD_JUNIOR", players_per_match=3, rounds=rounds,
                         starts_at_ms=now_ms() + 3_600_000, move_timeout_ms=600_000, rated=False,
                         house_bots=["RANDOM", "RANDOM", "RANDOM"])


def test_settle_leaves_a_tournament_match_queued_while_another_run_holds_the_tournament(
    services, redis_client
):
    creator = Caller(f"settle-c-{secrets.token_hex(4)}", "creator")
    lock_key: list[str] = []

    async def work() -> None:
        tournaments = services.tournaments
        t = await tournaments.create(creator, house_tournament_in_an_hour("locked", rounds=1))
        assert await services.redis.exists(tournament_key(t.id))
        try:
            # an ended match of the tournament, queued for settlement by its last commit
            match = await ended_by_its_last_commit(
                services, live_match(ruleset="WIZARD_JUNIOR", tournament=t.id, match_id=t.match_ids("r1t0")[0])
            )
            assert await services.redis.zscore(match_home_key(match.id, "unsettled"), match.id) is not None

            key = tournament_lock_key(t.id)
            lock_key.append(key)
            assert redis_client.set(key, "someone-else", nx=True, px=60_000)
            await services.settlement.settle(match.id)
            assert await services.redis.zscore(match_home_key(match.id, "unsettled"), match.id) is not None  # retried later
            assert redis_client.get(key) == b"someone-else"  # their lock is left alone

            redis_client.delete(key)
            await services.settlement.settle(match.id)  # the retry, once the lock is free
            assert await services.redis.zscore(match_home_key(match.id, "unsettled"), match.id) is None
        finally:
            for key in lock_key:
                redis_client.delete(key)
            await tournaments.cancel(creator, t.id)
            await services.close()

    asyncio.run(work())


def test_tables_are_stored_all_at_once_and_an_earlier_table_wins(services):
    """A round's tables go in by one transaction (a worker dying half way can no longer
    store half a round), and a table stored by an earlier run keeps its seed and seats:
    the caller gets what Redis holds, not what it proposed."""
    tid = f"tables-{secrets.token_hex(4)}"

    async def work() -> tuple[dict[str, Any], dict[str, Any]]:
        store = services.tournaments.store
        try:
            first = await store.add_tables(tid, {"r1t0": Table([0, 1, 2], "first", 1, 1)})
            both = await store.add_tables(tid, {
                "r1t0": Table([2, 1, 0], "second", 1, 2),
                "r1t1": Table([3, 4, 5], "other", 1, 2),
            })
            return first, both
        finally:
            await services.close()

    first, both = asyncio.run(work())
    assert first["r1t0"].seed == "first"
    assert both["r1t0"] == first["r1t0"], "the table stored first is kept"
    assert both["r1t1"].seed == "other"


@pytest.mark.skipif(ON_CLUSTER, reason="a cluster never held matches made before homes")
def test_a_table_stored_before_matches_had_homes_keeps_its_matches_ids(services):
    """A server upgraded mid-tournament: a table stored before match ids were homed (no
    ``homed`` in its record) names its matches by their old ids, so the tournament still finds
    them (and never makes them again under new ids); a table made now is homed."""
    creator = Caller(f"upgrade-c-{secrets.token_hex(4)}", "creator")

    async def work() -> None:
        tournaments = services.tournaments
        t = await tournaments.create(creator, house_tournament_in_an_hour("upgraded", rounds=2))
        try:
            old = Table.from_dict({"table": [0, 1, 2], "seed": "old", "round": 1, "created": 1})  # as stored then
            await tournaments.store.add_tables(t.id, {"r1t0": old})
            await tournaments.store.add_tables(t.id, {"r2t0": Table([2, 0, 1], "new", 2, 2)})
            t = await tournaments.get(t.id)
            assert t.match_ids("r1t0") == [f"{t.id}-r1t0-0"]
            assert t.match_ids("r2t0") == [homed_match_id(f"{t.id}-r2t0-0")]
            for match_id in t.all_match_ids():
                await ended_by_its_last_commit(
                    services, live_match(ruleset="WIZARD_JUNIOR", tournament=t.id, match_id=match_id)
                )
            assert [m.id for m in await tournaments.matches_of(t, 10, 0)] == t.all_match_ids()
        finally:
            await tournaments.cancel(creator, t.id)
            await services.close()

    asyncio.run(work())


async def _dies(*args: Any, **kwargs: Any) -> None:
    raise ConnectionError("the process dies here")


def test_a_tournament_whose_creating_process_died_half_way_is_completed_by_the_clock(services):
    """The tournament is stored, due at once, and its process dies before it is listed for its
    invited bot and among all tournaments: the clock's look lists it and makes it due at its
    start. (Its lock is held here meanwhile, so that no worker's clock looks first.)"""
    creator = Caller(secrets.token_hex(8), "creator")
    seen: dict[str, Any] = {}

    async def work() -> None:
        svc, store = services.tournaments, services.tournaments.store
        save_new, list_it = store.save_new, store._list

        async def save_new_dying_half_way(t: Any, invitations: Any) -> None:
            seen["tid"], seen["token"] = t.id, await store.lock(t.id, seconds=60)
            store._list = _dies
            try:
                await save_new(t, invitations)
            finally:
                store._list = list_it

        store.save_new = save_new_dying_half_way
        try:
            _, invitee = await services.bots.register(f"cut-short-{secrets.token_hex(4)}", address="cut-short")
            spec = NewTournament("cut short", "WIZARD_JUNIOR", players_per_match=3, rounds=1, rated=False,
                                 starts_at_ms=now_ms() + 3_600_000, bots=[invitee["id"]], house_bots=["RANDOM"] * 2)
            with pytest.raises(ConnectionError):
                await svc.create(creator, spec)
            tid = seen["tid"]
            seen["half"] = (tid in await svc.due(), await services.redis.zscore(LISTED_TOURNAMENTS, tid),
                            await store.invited_to(invitee["id"], 10))
            await svc._advance(tid)  # the clock's look (its lock is held here)
            t = await store.load(tid)
            assert t is not None
            seen["after"] = (tid in await svc.due(), await services.redis.zscore(ACTIVE_TOURNAMENTS, tid),
                             t.spec.starts_at_ms, await services.redis.zscore(LISTED_TOURNAMENTS, tid) is not None,
                             await store.invited_to(invitee["id"], 10))
            await store.unlock(tid, seen["token"])
            await svc.cancel(creator, tid)
        finally:
            store.save_new = save_new
            await services.close()

    asyncio.run(work())
    assert seen["half"] == (True, None, [])
    due, active_at, starts, listed, invited = seen["after"]
    assert not due and active_at == starts and listed and invited == [seen["tid"]]


def test_the_clock_drops_an_active_tournament_never_stored_once_its_creation_grace_is_past(services, redis_client):
    ghost, fresh = f"ghost-{secrets.token_hex(4)}", f"fresh-{secrets.token_hex(4)}"

    async def work() -> None:
        svc = services.tournaments
        tokens = {tid: await svc.store.lock(tid, seconds=60) for tid in (ghost, fresh)}  # (no worker looks first)
        try:
            redis_client.zadd(ACTIVE_TOURNAMENTS, {ghost: now_ms() - CREATION_GRACE_MS - 1_000, fresh: now_ms()})
            await svc._advance(ghost)
            await svc._advance(fresh)  # (it may be being stored right now)
        finally:
            for tid, token in tokens.items():
                await svc.store.unlock(tid, token or "")
            await services.close()

    try:
        asyncio.run(work())
        assert redis_client.zscore(ACTIVE_TOURNAMENTS, ghost) is None
        assert redis_client.zscore(ACTIVE_TOURNAMENTS, fresh) is not None
    finally:
        redis_client.zrem(ACTIVE_TOURNAMENTS, ghost, fresh)


def test_a_tournament_whose_process_died_after_ending_it_is_queued_for_the_archive_by_the_clock(
    services, redis_client
):
    """The status is CANCELLED, and the process dies before the tournament leaves the active
    ones for those the archive awaits: the clock's look moves it. (Its lock and archive claim
    are held here, so that no worker's clock or archiving looks first.)"""
    creator = Caller(secrets.token_hex(8), "creator")

    async def work() -> tuple[Any, ...]:
        svc, store = services.tournaments, services.tournaments.store
        spec = NewTournament("ended", "WIZARD_JUNIOR", players_per_match=3, rounds=1, rated=False,
                             starts_at_ms=now_ms() + 3_600_000, house_bots=["RANDOM"] * 3)
        t = await svc.create(creator, spec)
        token = await store.lock(t.id, seconds=60)
        redis_client.set(archive_claim_key(t.id), "held by the test", ex=60)
        unlist = store.unlist_ended
        try:
            store.unlist_ended = _dies
            with pytest.raises(ConnectionError):
                await store.move_status(t.id, TournamentStatus.SCHEDULED, TournamentStatus.CANCELLED, "finished")
            store.unlist_ended = unlist
            ended = await store.load(t.id)
            assert ended is not None
            half = (ended.status, t.id in await svc.due(), await services.redis.zscore(UNARCHIVED_TOURNAMENTS, t.id))
            await svc._advance(t.id)  # the clock's look (its lock is held here)
            return half, (await services.redis.zscore(ACTIVE_TOURNAMENTS, t.id),
                          await services.redis.zscore(UNARCHIVED_TOURNAMENTS, t.id) is not None)
        finally:
            store.unlist_ended = unlist
            await store.unlock(t.id, token or "")
            redis_client.delete(archive_claim_key(t.id))
            await services.close()

    half, after = asyncio.run(work())
    assert half == (TournamentStatus.CANCELLED, True, None)  # ended, due at once, not yet awaited by the archive
    assert after == (None, True)


# ---------------------------------------------------------------------- a worker dies


def test_a_tournament_survives_its_worker_killed_midway_and_counts_every_match_once(api, worker, redis_client):
    creator, _ = api.register()
    houses = ["HEURISTIC", "RANDOM"] * 4
    t = create(api, creator, format="ROUND_ROBIN", rounds=3, playersPerMatch=4, ruleset="WIZARD",
               houseBots=houses, duplicate=False, moveTimeoutMs=300)
    tid = t["id"]

    def midway() -> dict[str, Any] | None:
        view = get(api, tid)
        assert view["status"] != "FINISHED", "the tournament finished before the worker could be killed"
        ended = sum(m["status"] == "FINISHED" for m in view["matches"])
        return view if ended >= 1 else None

    seen = wait_until(midway, "the first matches to end", timeout=30, every=0.05)
    worker.kill_everything()

    worker.replace()
    assert seen["status"] == "RUNNING"
    assert sum(m["status"] == "FINISHED" for m in seen["matches"]) < 6

    final = wait_status(api, tid, "FINISHED", timeout=60)
    matches = final["matches"]
    assert len(matches) == 3 * 2 and len({m["id"] for m in matches}) == 6
    check_standings(final)
    assert sum(r["matches"] for r in final["standings"]) == 8 * 3  # every entrant-seat played, once
    assert all(r["matches"] == 3 for r in final["standings"])
    assert sum(r["points"] for r in final["standings"]) == 6 * 6

    ids = {m["id"] for m in matches}
    wait_until(lambda: all(redis_client.sismember(ratings_applied_key("WIZARD"), m) for m in ids), "every rating change")
    results = [json.loads(r) for r in redis_client.lrange(rating_results_key("WIZARD"), 0, -1)]
    counted = Counter(r["matchId"] for r in results if r["matchId"] in ids)
    assert counted == Counter({m: 1 for m in ids})  # each match rated exactly once
    for identity in ("house-heuristic", "house-random"):  # in each rating history at most once
        history = Counter(
            json.loads(h)["matchId"] for h in redis_client.lrange(history_key(identity, "WIZARD"), 0, -1)
        )
        for match in matches:
            kinds = {s["houseBot"].lower() for s in match["seats"]}
            assert history[match["id"]] == (1 if identity.removeprefix("house-") in kinds else 0), (identity, match)
