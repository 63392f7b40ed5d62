"""Listings (service.domain.listings): matches and tournaments newest first, live ones (Redis)
and archived ones (PostgreSQL, their Redis keys gone) in one cursor-paged list; each filter;
Bot.matches and Bot.stats; the REST mirror; no list shows a seat's hand to anyone else; bad
cursors, pages and filters refused with BAD_INPUT.

The Redis server and the database are shared with every other test module: each check looks
at this module's own bots and tournament (filter.botId, filter.tournamentId)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from service.store.keys import match_key
from service.store.redis_client import open_sync
from tests.service.test_ratings import RULESET, start_matches, wait_finished, wait_settled
from tests.service.test_tournaments import Player, create, wait_status, wait_until

NODE = """id status ruleset rated createdAt mySeat hand
  seats { seat bot { id } score bid tricks timeouts hand }
  roundResults { round seats { seat bid tricks points } }"""
LIGHT = "id status createdAt mySeat hand seats { seat hand }"  # a page of 100 full Matches costs over the limit
MATCHES = """query($f: MatchFilter, $n: Int, $a: String) {
  matches(filter: $f, first: $n, after: $a) { edges { cursor node { """ + NODE + """ } } pageInfo { hasNextPage endCursor } } }"""
MATCHES_LIGHT = MATCHES.replace(NODE, LIGHT)
BOT_MATCHES = """query($b: ID!, $f: MatchFilter, $n: Int, $a: String) { bot(id: $b) {
  matches(filter: $f, first: $n, after: $a) { edges { cursor node { """ + NODE + """ } } pageInfo { hasNextPage endCursor } } } }"""
STATS = """query($b: ID!, $r: Ruleset!) { bot(id: $b) {
  stats(ruleset: $r) { ruleset matches rounds meanScore meanPlace bidAccuracy timeouts } } }"""
TOURNAMENTS = """query($s: TournamentStatus, $n: Int, $a: String) {
  tournaments(status: $s, first: $n, after: $a) { edges { cursor node { id status } } pageInfo { hasNextPage endCursor } } }"""


@pytest.fixture(scope="module")
def worker(start_worker: Any) -> Iterator[Any]:
    """A worker that lets an archived match's keys go at once (no grace period)."""
    process = start_worker(ARENA_ARCHIVE_GRACE_SECONDS="0")
    yield process
    process.stop()


@dataclass
class Played:
    a: str
    a_id: str
    b: str
    b_id: str
    finished: list[str]  # rated, then one unrated; archived, gone from Redis
    active: str  # a, b and a house bot; nobody moves
    waiting: str  # a seated, two seats free, under WIZARD


@pytest.fixture(scope="module")
def played(api: Any, worker: Any, redis_url: str) -> Iterator[Played]:
    redis_client = open_sync(redis_url)
    (a, a_id), (b, b_id) = api.register(), api.register()
    with Player(api, a), Player(api, b):
        finished = start_matches(api, [a, b], 3, rated=True) + start_matches(api, [a, b], 1, rated=False)
        wait_finished(api, finished)
    wait_settled(redis_client, finished)
    wait_until(lambda: not any(redis_client.exists(match_key(m)) for m in finished), "the keys to expire")
    [active] = start_matches(api, [a, b], 1, rated=False, moveTimeoutMs=600_000)
    waiting = api.create_match(a, ruleset="WIZARD", players=3)
    api.join(a, waiting)
    redis_client.close()
    yield Played(a, a_id, b, b_id, finished, active, waiting)


def page(api: Any, query: str, variables: dict[str, Any], token: str | None = None, key: str = "matches") -> dict[str, Any]:
    data = api.data(query, variables, token)
    return data["bot"][key] if "bot" in data else data[key]  # type: ignore[no-any-return]


def every(api: Any, query: str, variables: dict[str, Any], token: str | None = None, first: int = 2,
          key: str = "matches") -> list[dict[str, Any]]:
    """Every node of a listing, page by page of ``first``, following the cursors."""
    nodes: list[dict[str, Any]] = []
    after = None
    for _ in range(1000):
        answer = page(api, query, {**variables, "n": first, "a": after}, token, key)
        assert len(answer["edges"]) <= first
        nodes += [e["node"] for e in answer["edges"]]
        if answer["edges"]:
            assert answer["pageInfo"]["endCursor"] == answer["edges"][-1]["cursor"]
        if not answer["pageInfo"]["hasNextPage"]:
            return nodes
        after = answer["pageInfo"]["endCursor"]
    raise AssertionError("the listing never ended")


def newest_first(nodes: list[dict[str, Any]]) -> bool:
    keys = [(n["createdAt"], n["id"]) for n in nodes]
    return keys == sorted(keys, reverse=True)


def test_live_and_archived_matches_are_one_list_newest_first_paged_to_the_end(api, played, redis_client):
    nodes = every(api, MATCHES, {"f": {"botId": played.a_id}}, played.a)
    ids = [n["id"] for n in nodes]
    assert sorted(ids) == sorted([*played.finished, played.active, played.waiting])
    assert newest_first(nodes)
    assert ids[:2] == [played.waiting, played.active]  # created last
    assert not redis_client.exists(match_key(played.finished[0]))  # from the archive
    assert {n["status"] for n in nodes} == {"FINISHED", "ACTIVE", "WAITING"}
    # one page of everything answers the same, and says nothing follows
    whole = page(api, MATCHES_LIGHT, {"f": {"botId": played.a_id}, "n": 100}, played.a)
    assert [e["node"]["id"] for e in whole["edges"]] == ids and not whole["pageInfo"]["hasNextPage"]
    # the unfiltered listing holds them too, in the same order
    everything = every(api, MATCHES_LIGHT, {}, None, first=100)
    assert newest_first(everything)
    assert [i for i in (n["id"] for n in everything) if i in set(ids)] == ids


def test_each_filter_keeps_what_it_says(api, played):
    def listed(**where: Any) -> list[str]:
        return [n["id"] for n in every(api, MATCHES, {"f": {"botId": played.a_id, **where}}, first=3)]

    assert sorted(listed(status="FINISHED")) == sorted(played.finished)
    assert listed(status="ACTIVE") == [played.active]
    assert listed(status="WAITING") == [played.waiting]
    assert listed(status="ABORTED") == []
    assert listed(ruleset="WIZARD") == [played.waiting]
    assert sorted(listed(ruleset=RULESET)) == sorted([*played.finished, played.active])
    assert sorted(listed(rated=True)) == sorted(played.finished[:3])
    assert sorted(listed(rated=False)) == sorted([played.finished[3], played.active, played.waiting])
    # botId: b sits in all but the waiting match
    b_ids = [n["id"] for n in every(api, MATCHES, {"f": {"botId": played.b_id}})]
    assert sorted(b_ids) == sorted([*played.finished, played.active])
    # Bot.matches is the same list with botId fixed
    assert every(api, BOT_MATCHES, {"b": played.a_id, "f": {"status": "FINISHED"}}, played.a) == every(
        api, MATCHES, {"f": {"botId": played.a_id, "status": "FINISHED"}}, played.a
    )
    assert api.error_code(BOT_MATCHES, {"b": played.a_id, "f": {"botId": played.b_id}}) == "BAD_INPUT"


def test_a_tournament_is_listed_with_its_matches(api, worker, played, redis_client):
    t = create(api, played.a, format="ROUND_ROBIN", rounds=1, playersPerMatch=3, houseBots=["RANDOM"] * 3)
    listed = [e["node"] for e in page(api, TOURNAMENTS, {"n": 100}, key="tournaments")["edges"]]
    assert t["id"] in [n["id"] for n in listed]
    done = wait_status(api, t["id"], "FINISHED")
    match_ids = [m["id"] for m in api.data("query($t: ID!) { tournament(id: $t) { matches { id } } }",
                                           {"t": t["id"]})["tournament"]["matches"]]
    assert match_ids
    wait_settled(redis_client, match_ids)
    in_listing = [n["id"] for n in every(api, MATCHES, {"f": {"tournamentId": t["id"]}})]
    assert sorted(in_listing) == sorted(match_ids)
    finished = every(api, TOURNAMENTS, {"s": "FINISHED"}, key="tournaments", first=5)
    assert done["id"] in [n["id"] for n in finished] and {n["status"] for n in finished} == {"FINISHED"}
    assert t["id"] not in [n["id"] for n in every(api, TOURNAMENTS, {"s": "SCHEDULED"}, key="tournaments", first=50)]


def test_bot_stats_are_the_figures_of_the_matches_it_played(api, played):
    views = [api.match(m) for m in played.finished]
    for bot_id in (played.a_id, played.b_id):
        scores, places, timeouts, rounds, exact = [], [], 0, 0, 0
        for view in views:
            [seat] = [s for s in view["seats"] if s["bot"] and s["bot"]["id"] == bot_id]
            scores.append(seat["score"])
            places.append(1 + sum(s["score"] > seat["score"] for s in view["seats"]))
            timeouts += seat["timeouts"]
            for result in view["roundResults"]:
                [mine] = [s for s in result["seats"] if s["seat"] == seat["seat"]]
                rounds += 1
                exact += mine["bid"] == mine["tricks"]
        stats = api.data(STATS, {"b": bot_id, "r": RULESET})["bot"]["stats"]
        assert stats["matches"] == len(views) and stats["rounds"] == rounds and stats["timeouts"] == timeouts
        assert stats["meanScore"] == pytest.approx(sum(scores) / len(scores))
        assert stats["meanPlace"] == pytest.approx(sum(places) / len(places))
        assert stats["bidAccuracy"] == pytest.approx(exact / rounds)
        rest = api.http.get(f"/api/bots/{bot_id}/stats", params={"ruleset": RULESET}).json()
        assert rest == {**stats, "ruleset": RULESET}
    none = api.data(STATS, {"b": played.a_id, "r": "WIZARD"})["bot"]["stats"]
    assert none == {"ruleset": "WIZARD", "matches": 0, "rounds": 0, "meanScore": None, "meanPlace": None,
                    "bidAccuracy": None, "timeouts": 0}


def test_no_listing_shows_a_hand_but_the_callers_own(api, played):
    c, _ = api.register()
    seat_of = {m: {s["bot"]["id"]: s["seat"] for s in api.match(m)["seats"] if s["bot"]} for m in
               [*played.finished, played.active, played.waiting]}
    for token, bot_id in ((played.a, played.a_id), (played.b, played.b_id), (c, None), (None, None)):
        listings = [
            every(api, MATCHES, {"f": {"botId": played.a_id}}, token, first=10),
            every(api, BOT_MATCHES, {"b": played.a_id}, token, first=3),
            every(api, MATCHES_LIGHT, {"f": {"botId": played.b_id}}, token, first=100),
        ]
        rest = api.http.get("/api/matches", params={"botId": played.a_id, "first": 100},
                            headers={"Authorization": f"Bearer {token}"} if token else {}).json()
        listings.append([e["node"] for e in rest["edges"]])
        for nodes in listings:
            assert nodes
            for node in nodes:
                mine = seat_of[node["id"]].get(bot_id) if bot_id else None
                assert node["mySeat"] == mine
                live = node["status"] in ("ACTIVE", "WAITING")
                for seat in node["seats"]:
                    if seat["seat"] != mine and live:
                        assert seat["hand"] is None, (token, node["id"], seat)
                if mine is None:
                    assert node["hand"] is None
                elif node["id"] == played.active:
                    assert node["hand"]  # its own cards, dealt


def test_the_rest_listing_mirrors_graphql(api, played):
    graphql = page(api, MATCHES, {"f": {"botId": played.a_id, "rated": True}, "n": 2}, played.a)
    rest = api.http.get("/api/matches", params={"botId": played.a_id, "rated": "true", "first": 2},
                        headers={"Authorization": f"Bearer {played.a}"})
    assert rest.status_code == 200
    body = rest.json()
    assert [e["cursor"] for e in body["edges"]] == [e["cursor"] for e in graphql["edges"]]
    assert body["pageInfo"] == graphql["pageInfo"] and body["pageInfo"]["hasNextPage"]
    more = api.http.get("/api/matches", params={"botId": played.a_id, "rated": "true", "after": body["pageInfo"]["endCursor"]}).json()
    assert [e["node"]["id"] for e in body["edges"] + more["edges"]] == [
        n["id"] for n in every(api, MATCHES, {"f": {"botId": played.a_id, "rated": True}})
    ]


@pytest.mark.parametrize(
    ("variables", "says"),
    [
        ({"n": 0}, "first must be a whole number from 1 to 100"),
        ({"n": 101}, "first must be a whole number from 1 to 100"),
        ({"a": "not a cursor"}, "after must be a cursor"),
        ({"a": base64.urlsafe_b64encode(b"soon:abc").decode()}, "after must be a cursor"),
        ({"a": base64.urlsafe_b64encode(b"123").decode()}, "after must be a cursor"),
        ({"f": {"status": "LOST"}}, "LOST"),
        ({"f": {"colour": "RED"}}, "colour"),
    ],
)
def test_bad_pages_and_filters_are_bad_input_that_says_what_is_allowed(api, variables, says):
    body = api.gql(MATCHES_LIGHT, variables)
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT", body
    assert says in body["errors"][0]["message"]
    tournaments = api.gql(TOURNAMENTS, {k: v for k, v in variables.items() if k != "f"} or {"s": "LOST"})
    assert tournaments["errors"][0]["extensions"]["code"] == "BAD_INPUT"


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"first": "0"}, "from 1 to 100"),
        ({"first": "many"}, "from 1 to 100"),
        ({"after": "xyz"}, "after must be a cursor"),
        ({"status": "LOST"}, "status must be one of WAITING, ACTIVE, FINISHED, ABORTED"),
        ({"ruleset": "CHESS"}, "ruleset must be one of"),
        ({"rated": "maybe"}, "rated must be true or false"),
        ({"colour": "RED"}, "the parameters are status, botId, tournamentId, ruleset, rated, first, after"),
    ],
)
def test_bad_rest_listings_are_400_bad_input(api, params, says):
    response = api.http.get("/api/matches", params=params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "BAD_INPUT" and says in error["message"], error
    stats = api.http.get("/api/bots/nobody/stats", params={"ruleset": "CHESS"})
    assert stats.status_code in (400, 404)
