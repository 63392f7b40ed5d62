"""The listing pages over plain HTTP (``/``, ``/leaderboard/{ruleset}``, ``/bots/{id}``,
``/tournaments``, ``/tournaments/{id}``): each answers an HTML page under the pages'
Content-Security-Policy showing what the API says (the same bots, results, ratings, standings),
an unknown id or ruleset answers an error page with its code and message, and a bot's name is
text, never markup. In this process: the rating chart (``rating_chart``) and a tournament's
matches by round (``Tournament.rounds``).

The module's bots play rated matches, a one-round tournament, and leave one match under way;
another tournament waits, scheduled a day ahead (cancelled at the end). The Redis server and
the database are shared with every other test module: checks look at this module's own bots,
matches and tournaments."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from html import escape
from typing import Any

import httpx
import pytest
import redis

from service.api.pages.frame import CONTENT_SECURITY_POLICY
from service.api.pages.listing_pages import LEADERBOARD_PAGE, rating_chart
from service.model.homes import homed_match_id
from service.model.tournament import Table, Tournament, TournamentFormat, TournamentSpec, TournamentStatus
from tests.service.arena_client import wait_until
from tests.service.browser import PHONE, chromium_page, keep_screenshot
from tests.service.test_ratings import RULESET, start_matches, wait_finished, wait_settled
from tests.service.test_tournaments import CANCEL, Player, consenting, create, get, iso, wait_status

RATED_MATCHES = 2
STATS = """query($b: ID!, $r: Ruleset!) { bot(id: $b) {
  stats(ruleset: $r) { matches meanScore meanPlace bidAccuracy timeouts }
  ratings { ruleset rating games deviation provisional } } }"""
BOARD = "query($r: Ruleset!) { leaderboard(ruleset: $r, first: 500) { rank bot { id } rating deviation provisional } }"
FITTED_BOARD = "query($r: Ruleset!) { leaderboard(ruleset: $r, method: FITTED, first: 500) { rank bot { id } rating } }"
STANDINGS = "query($t: ID!) { tournament(id: $t) { standings { rank bot { id name } points } } }"
SCORES = "query($m: ID!) { match(id: $m) { status seats { bot { id } score } winners } }"


@pytest.fixture(scope="module")
def worker(start_worker: Any) -> Iterator[Any]:
    """This module's own worker (settlement, tournaments)."""
    process = start_worker()
    yield process
    process.stop()


@dataclass
class Played:
    a: str
    a_id: str
    #: a's name, markup that must show as text
    a_name: str
    b: str
    b_id: str
    b_name: str
    rated: list[str]  # WIZARD_JUNIOR, finished, settled
    tournament: dict[str, Any]  # finished: one round, a, b and a house RANDOM entrant
    scheduled: dict[str, Any]  # a day ahead
    active: str  # a, b and a house HEURISTIC; nobody moves


@pytest.fixture(scope="module")
def played(api: Any, worker: Any, redis_url: str) -> Iterator[Played]:
    redis_client = redis.Redis.from_url(redis_url)
    suffix = os.urandom(3).hex()
    a_name, b_name = f"<b>esc-{suffix}</b> & co", f"pages-{suffix}"
    (a, a_id), (b, b_id) = api.register(a_name), api.register(b_name)
    consenting(api, b)  # a names itself and b in its tournament: b enters by accepting
    with Player(api, a), Player(api, b):
        rated = start_matches(api, [a, b], RATED_MATCHES, rated=True)
        wait_finished(api, rated)
        tournament = create(api, a, format="ROUND_ROBIN", rounds=1, playersPerMatch=3, rated=False,
                            bots=[a_id, b_id], houseBots=["RANDOM"])
        tournament = wait_status(api, tournament["id"], "FINISHED")
    wait_settled(redis_client, rated + [m["id"] for m in tournament["matches"]])
    [active] = start_matches(api, [a, b], 1, rated=False, moveTimeoutMs=600_000)
    scheduled = create(api, a, format="SWISS", rounds=2, startsAt=iso(datetime.now(UTC) + timedelta(days=1)))
    redis_client.close()
    yield Played(a, a_id, a_name, b, b_id, b_name, rated, tournament, scheduled, active)
    api.data(CANCEL, {"t": scheduled["id"]}, a)


def page(api: Any, path: str, status: int = 200) -> str:
    """The page at ``path``: an HTML page under the pages' policy, answered with ``status``."""
    response: httpx.Response = api.http.get(path)
    assert response.status_code == status, (path, response.status_code, response.text[:500])
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "<b>esc-" not in response.text  # a name is never markup
    return response.text


def error_page(api: Any, path: str, status: int, code: str) -> str:
    html = page(api, path, status)
    assert f"<h1>{code}</h1>" in html
    return html


def table_of(html: str, kind: str) -> str:
    """The page's one ``<table class="list {kind}">``."""
    [table] = re.findall(rf'<table class="list {kind}">.*?</table>', html, re.S)
    return table


def row_of(html: str, needle: str) -> str:
    """The table row that holds ``needle``."""
    rows = [r for r in re.findall(r"<tr>.*?</tr>", html, re.S) if needle in r]
    assert len(rows) == 1, (needle, rows)
    return rows[0]


# ---------------------------------------------------------------------- pages


def test_home_shows_live_matches_tournaments_and_leaderboards(api, played):
    html = page(api, "/")
    assert '<meta http-equiv="refresh" content="15">' in html
    live = row_of(html, f'href="/matches/{played.active}"')
    assert f'href="/bots/{played.a_id}">{escape(played.a_name)}</a>' in live
    assert f'href="/bots/{played.b_id}">{played.b_name}</a>' in live
    assert 'title="heuristic house bot">House Heuristic' in live and "/bots/house" not in live
    assert f">{RULESET}<" in live and "unrated" in live and "1/" in live
    upcoming = row_of(html, f'href="/tournaments/{played.scheduled["id"]}"')
    assert "SWISS" in upcoming and 'class="tag SCHEDULED"' in upcoming
    assert f'href="/tournaments/{played.tournament["id"]}"' not in html  # finished: not on the home page
    for ruleset in ("WIZARD", "WIZARD_JUNIOR", "WIZARD_JUNIOR_CLASSIC"):
        assert f'href="/leaderboard/{ruleset}"' in html
    assert 'href="/bots/house-heuristic"' not in html


def test_a_leaderboard_page_ranks_bots_with_tabs_and_pages(api, played):
    board = api.data(BOARD, {"r": RULESET})["leaderboard"]
    [entry] = [e for e in board if e["bot"]["id"] == played.a_id]
    offset = (entry["rank"] - 1) // LEADERBOARD_PAGE * LEADERBOARD_PAGE
    html = page(api, f"/leaderboard/{RULESET}?offset={offset}" if offset else f"/leaderboard/{RULESET}")
    row = row_of(html, f'href="/bots/{played.a_id}"')
    assert f">{entry['rank']}<" in row and f">{round(entry['rating'])}<" in row
    assert f">± {round(entry['deviation'])}<" in row
    assert ('class="tag provisional"' in row) is entry["provisional"] is True  # a few rated matches only
    assert f'<a href="/leaderboard/{RULESET}?method=ELO&amp;provisional=false">' in html
    established = page(api, f"/leaderboard/{RULESET}?provisional=false")
    assert f'href="/bots/{played.a_id}"' not in established and 'class="tag provisional"' not in established
    assert "Provisional bots are left out" in established
    assert 'href="/leaderboard/WIZARD?method=ELO&amp;provisional=false"' in established  # the tabs keep it
    assert f'class="current" aria-current="page">{RULESET}<' in html
    assert 'class="current" aria-current="page">ELO<' in html
    # the fitted ratings, once the worker has refitted the ruleset with the module's rated matches
    api.data("mutation($r: Ruleset!) { refitRatings(ruleset: $r) }", {"r": RULESET}, played.a)
    fitted_board = wait_until(lambda: [e for e in api.data(FITTED_BOARD, {"r": RULESET})["leaderboard"]
                                       if e["bot"]["id"] == played.a_id], "a's fitted rating")
    [fitted_entry] = fitted_board
    fitted_offset = (fitted_entry["rank"] - 1) // LEADERBOARD_PAGE * LEADERBOARD_PAGE
    fitted = page(api, f"/leaderboard/{RULESET}?method=FITTED&offset={fitted_offset}")
    assert 'class="current" aria-current="page">FITTED<' in fitted
    fitted_row = row_of(fitted, f'href="/bots/{played.a_id}"')
    assert f">{fitted_entry['rank']}<" in fitted_row and f">{round(fitted_entry['rating'])}<" in fitted_row

    far = page(api, f"/leaderboard/{RULESET}?offset=1000000")
    assert 'class="empty"' in far and 'rel="prev"' in far and 'rel="next"' not in far

    redirect = api.http.get("/leaderboard", follow_redirects=False)
    assert redirect.status_code == 302 and redirect.headers["location"] == "/leaderboard/WIZARD"


@pytest.mark.parametrize(("path", "says"), [
    ("/leaderboard/CHESS", "ruleset must be one of WIZARD, WIZARD_JUNIOR, WIZARD_JUNIOR_CLASSIC, not &#39;CHESS&#39;"),
    ("/leaderboard/WIZARD?method=GLICKO", "method must be one of ELO, FITTED, not &#39;GLICKO&#39;"),
    ("/leaderboard/WIZARD?offset=-3", "offset must be a whole number"),
    ("/leaderboard/WIZARD?provisional=no", "provisional must be one of true, false, not &#39;no&#39;"),
    ("/tournaments?status=DONE", "status must be one of SCHEDULED, RUNNING, FINISHED, CANCELLED"),
    ("/tournaments?after=nonsense", "after must be a cursor this listing gave"),
    ("/tournaments?first=0", "first must be a whole number from 1 to 100, not 0"),
])
def test_bad_parameters_are_a_400_page_naming_what_is_allowed(api, path, says):
    assert says in error_page(api, path, 400, "BAD_INPUT")


def test_unknown_ids_are_a_404_page(api):
    assert "no bot with id &#39;nobody-here&#39;" in error_page(api, "/bots/nobody-here", 404, "NOT_FOUND")
    assert "no tournament with id &#39;t-none&#39;" in error_page(api, "/tournaments/t-none", 404, "NOT_FOUND")


def test_a_bot_page_shows_ratings_a_chart_per_ruleset_matches_and_stats(api, played):
    expected = api.data(STATS, {"b": played.a_id, "r": RULESET})["bot"]
    html = page(api, f"/bots/{played.a_id}")
    assert f"<h1>{escape(played.a_name)}</h1>" in html

    [rating] = expected["ratings"]
    assert rating["games"] == RATED_MATCHES
    ratings = row_of(html, f'href="/leaderboard/{RULESET}">{RULESET}</a>')
    assert f">{round(rating['rating'])}<" in ratings and f">{RATED_MATCHES}<" in ratings
    assert f">± {round(rating['deviation'])} <span class=\"tag provisional\"" in ratings  # a few matches only

    [points] = re.findall(r'<polyline class="line" points="([^"]*)"', html)
    assert len(points.split()) == RATED_MATCHES

    for match_id in played.rated + [m["id"] for m in played.tournament["matches"]] + [played.active]:
        row = row_of(html, f'href="/matches/{match_id}"')
        match = api.data(SCORES, {"m": match_id})["match"]
        if match["status"] == "FINISHED":
            scores = [s["score"] for s in match["seats"]]
            [seat] = [s for s, held in enumerate(match["seats"]) if held["bot"] and held["bot"]["id"] == played.a_id]
            place = 1 + sum(other > scores[seat] for other in scores)
            assert (place == 1) == (seat in match["winners"])
            assert f"{place} of 3</span>, {scores[seat]} points" in row and 'class="tag FINISHED"' in row
        else:
            assert 'class="tag ACTIVE"' in row

    stats = expected["stats"]
    assert stats["matches"] == RATED_MATCHES + len(played.tournament["matches"])
    figures = row_of(table_of(html, "stats"), f"<td>{RULESET}</td>")
    assert f">{stats['matches']}<" in figures and f">{stats['meanScore']:.1f}<" in figures
    assert f">{stats['meanPlace']:.2f}<" in figures and f">{stats['bidAccuracy'] * 100:.0f}%<" in figures


def test_the_tournaments_page_lists_newest_first_by_status(api, played):
    finished, scheduled = played.tournament["id"], played.scheduled["id"]
    html = page(api, "/tournaments")
    assert html.index(f'href="/tournaments/{scheduled}"') < html.index(f'href="/tournaments/{finished}"')
    assert 'class="current" aria-current="page">All<' in html
    only_scheduled = page(api, "/tournaments?status=SCHEDULED")
    assert f'href="/tournaments/{scheduled}"' in only_scheduled
    assert f'href="/tournaments/{finished}"' not in only_scheduled
    assert 'class="current" aria-current="page">Scheduled<' in only_scheduled
    assert f'href="/tournaments/{finished}"' in page(api, "/tournaments?status=FINISHED")


def test_the_tournaments_page_is_paged_by_its_cursor(api, played):
    # this module's two tournaments at least: one a page, the next one behind the cursor
    first = page(api, "/tournaments?first=1")
    [listed] = re.findall(r'href="/tournaments/([0-9a-f]+)"', first)
    found = re.search(r'href="([^"]*after=[^"]*)" rel="next"', first)
    assert found, "one tournament a page, and more than one: a next page"
    second = page(api, found.group(1).replace("&amp;", "&"))
    assert 'href="/tournaments?first=1">First page<' in second
    [following] = re.findall(r'href="/tournaments/([0-9a-f]+)"', second)
    assert following != listed
    everything = re.findall(r'href="/tournaments/([0-9a-f]+)"', page(api, "/tournaments?first=100"))
    assert everything[:2] == [listed, following]  # newest first, page after page


def test_a_tournament_page_shows_standings_rounds_and_entrants(api, played):
    t = played.tournament
    html = page(api, f"/tournaments/{t['id']}")
    assert "http-equiv" not in html  # finished: nothing left to follow
    assert 'class="tag FINISHED"' in html and "ROUND_ROBIN" in html and ">Players per match<" in html
    standings = api.data(STANDINGS, {"t": t["id"]})["tournament"]["standings"]
    rows = re.findall(r"<tr>.*?</tr>", table_of(html, "standings"), re.S)[1:]
    assert len(rows) == len(standings) == 3
    for row, standing in zip(rows, standings, strict=True):
        assert f">{standing['rank']}<" in row and f">{standing['points']:g}<" in row
        if standing["bot"]["id"] in (played.a_id, played.b_id):
            assert f'href="/bots/{standing["bot"]["id"]}"' in row
        else:
            assert standing["bot"]["name"] in row and "/bots/" not in row  # a house entrant
    assert "<h3>Round 1</h3>" in html
    for match in t["matches"]:
        assert 'class="tag FINISHED"' in row_of(html, f'href="/matches/{match["id"]}"')

    upcoming = page(api, f"/tournaments/{played.scheduled['id']}")
    assert '<meta http-equiv="refresh" content="15">' in upcoming
    assert "No match has been played yet." in upcoming and 'class="tag SCHEDULED"' in upcoming
    assert f'href="/bots/{played.a_id}">{escape(played.a_name)}</a>' not in upcoming  # not entered


def test_a_running_tournament_is_on_the_home_page_and_its_page_follows_it(api, played):
    """A tournament under way (its bots, who do not move, hold its first round's match open):
    listed as running on ``/`` and ``/tournaments``; its page reloads itself and shows the round
    being played with its live match linked."""
    running = create(api, played.a, format="ROUND_ROBIN", rounds=1, playersPerMatch=3, rated=False,
                     bots=[played.a_id, played.b_id], houseBots=["RANDOM"], moveTimeoutMs=600_000)
    try:
        running = wait_status(api, running["id"], "RUNNING")
        [match] = wait_until(lambda: (t := get(api, running["id"]))["matches"] and t["matches"], "its first match")
        home = row_of(page(api, "/"), f'href="/tournaments/{running["id"]}"')
        assert 'class="tag RUNNING"' in home and "ROUND_ROBIN" in home
        assert 'class="tag RUNNING"' in row_of(page(api, "/tournaments"), f'href="/tournaments/{running["id"]}"')
        html = page(api, f"/tournaments/{running['id']}")
        assert '<meta http-equiv="refresh" content="15">' in html and 'class="tag RUNNING"' in html
        assert "<h3>Round 1</h3>" in html
        assert 'class="tag ACTIVE"' in row_of(html, f'href="/matches/{match["id"]}"')
    finally:
        api.data(CANCEL, {"t": running["id"]}, played.a)
    cancelled = page(api, f"/tournaments/{running['id']}")
    assert 'class="tag CANCELLED"' in cancelled and "http-equiv" not in cancelled


# ---------------------------------------------------------------------- in this process


def test_the_rating_chart_draws_one_vertex_per_point_with_its_range_and_dates():
    day = 86_400_000
    start = int(datetime(2026, 3, 1, tzinfo=UTC).timestamp() * 1000)
    chart = str(rating_chart([(start, 1500.0), (start + day, 1530.4), (start + 9 * day, 1488.6)]))
    assert chart.startswith('<svg class="chart" viewBox="0 0 600 200"')
    [points] = re.findall(r'<polyline class="line" points="([^"]*)"', chart)
    vertices = [tuple(float(v) for v in p.split(",")) for p in points.split()]
    assert len(vertices) == 3
    xs, ys = [x for x, _ in vertices], [y for _, y in vertices]
    assert xs == sorted(xs) and xs[0] < xs[-1]
    assert ys[1] == min(ys) and ys[2] == max(ys)  # the highest rating is drawn highest
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", chart)
    assert texts == ["1530", "1489", "2026-03-01", "2026-03-10"]


def test_the_rating_chart_of_one_point_or_a_flat_history_and_of_none():
    one = str(rating_chart([(0, 1500.0)]))
    [points] = re.findall(r'points="([^"]*)"', one)
    assert len(points.split()) == 1 and "<circle" in one
    flat = str(rating_chart([(0, 1500.0), (1, 1500.0)]))
    assert re.findall(r"<text[^>]*>([^<]*)</text>", flat)[0] == "1500"
    assert "nan" not in flat and "inf" not in flat
    assert str(rating_chart([])) == ""
    morning = int(datetime(2026, 3, 1, 9, 5, tzinfo=UTC).timestamp() * 1000)
    one_day = str(rating_chart([(morning, 1500.0), (morning + 3_600_000, 1510.0)]))
    assert re.findall(r"<text[^>]*>([^<]*)</text>", one_day)[2:] == ["2026-03-01 09:05", "2026-03-01 10:05"]


def test_a_tournaments_matches_by_round_oldest_table_first():
    spec = TournamentSpec("t", "WIZARD", [], 3, TournamentFormat.SWISS, 2, None, 0, 1000, False, True, "c")
    t = Tournament("tid", spec, TournamentStatus.RUNNING, tables={
        "r2t0": Table([0, 1, 2], "s", 2, 20),
        "r1t1": Table([3, 4, 5], "s", 1, 10),
        "r1t0": Table([0, 1, 2], "s", 1, 10),
    })
    rounds = t.rounds()
    assert [number for number, _ in rounds] == [1, 2]
    assert rounds[1][1] == [homed_match_id(f"tid-r2t0-{turn}") for turn in range(3)]  # a duplicate set: one a seat
    assert len(rounds[0][1]) == 6
    assert t.all_match_ids() == [m for _, ids in rounds for m in ids]
    arena = Tournament("a", TournamentSpec("t", "WIZARD", [], 3, TournamentFormat.ARENA, None, 5, 0, 1000, False,
                                           False, "c"), TournamentStatus.RUNNING,
                       tables={"a0": Table([0, 1, 2], "s", None, 1), "a1": Table([3, 4, 5], "s", None, 2)})
    assert arena.rounds() == [(None, [homed_match_id("a-a0-0"), homed_match_id("a-a1-0")])]


# ---------------------------------------------------------------------- in Chromium


@pytest.mark.parametrize("viewport", [None, PHONE], ids=["desktop", "phone"])
def test_every_listing_page_loads_in_a_browser_and_fits_its_width(api, played, viewport, tmp_path):
    paths = {
        "home": "/",
        "leaderboard": f"/leaderboard/{RULESET}",
        "bot": f"/bots/{played.a_id}",
        "tournaments": "/tournaments",
        "tournament": f"/tournaments/{played.tournament['id']}",
    }
    with chromium_page(tmp_path / "profile", viewport) as browser:
        for name, path in paths.items():
            browser.goto(api.base + path)
            browser.wait_for_load_state("load")
            assert browser.title().endswith("· Wizard Arena"), path
            overflow = browser.evaluate("() => document.scrollingElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{path} is {overflow} px wider than the window"
            if name == "bot":
                assert browser.locator("svg.chart polyline.line").first.is_visible()
            if viewport is None:
                keep_screenshot(browser, name)
        assert browser.seen["problems"] == []
        assert all(u.startswith(api.base) for u in browser.seen["requests"])
