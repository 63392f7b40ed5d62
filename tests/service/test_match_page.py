"""The match page (``/matches/{id}``) and its replay (``GET /api/matches/{id}/replay``): over
HTTP, and in a real headless Chromium that follows a match played through the API to its end,
never holding a hidden card, then steps through its replay from the keyboard."""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from service.api.pages import frame
from tests.service.arena_client import AWAIT_TURN, Api, first_legal, wait_until
from tests.service.browser import PHONE, chromium_page, ink, keep_screenshot, looks_like

#: what the page's first load may transfer, all files and the replay included (issue 16)
FIRST_LOAD_BUDGET = 300 * 1024


def page_data(html: str) -> dict[str, Any]:
    """The JSON the page carries (``<script type="application/json" id="match-data">``)."""
    found = re.search(r'<script type="application/json" id="match-data">(.*?)</script>', html, re.S)
    assert found, "the page carries no match data"
    return json.loads(found[1])  # type: ignore[no-any-return]


def hidden_cards_shown(document: Any, path: str = "") -> list[str]:
    """Where a spectator's JSON holds what only a seat may see: a hand, legal moves, the seed or
    its salt before the end. (Cards anywhere else, the trump and the tricks, are public.)"""
    found: list[str] = []
    if isinstance(document, dict):
        finished = document.get("status") == "FINISHED"
        for key, value in document.items():
            if key == "hand" and value is not None:
                found.append(f"{path}.hand = {value}")
            elif key == "legalMoves" and value:
                found.append(f"{path}.legalMoves = {value}")
            elif key in ("seed", "salt") and value is not None and not finished:
                found.append(f"{path}.{key} of a live match")
            else:
                found += hidden_cards_shown(value, f"{path}.{key}")
    elif isinstance(document, list):
        for i, value in enumerate(document):
            found += hidden_cards_shown(value, f"{path}[{i}]")
    return found


def house_match(api: Api, players: int = 3, **spec: Any) -> tuple[str, str]:
    """A match of house bots only, played to its end by the server: (token, match id)."""
    token, _ = api.register()
    match_id = api.create_match(token, players=players, moveTimeoutMs=60_000, **spec)
    for kind in ["HEURISTIC", "RANDOM", "HEURISTIC", "RANDOM", "HEURISTIC", "RANDOM"][:players]:
        api.add_house_bot(token, match_id, kind)
    wait_until(lambda: api.match(match_id)["status"] == "FINISHED", "the house bots to finish the match")
    return token, match_id


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[Any]:
    with chromium_page(tmp_path / "profile") as page:
        yield page


# ----------------------------------------------------------------------------- over HTTP


def test_the_page_of_a_live_match_carries_only_the_spectators_view(api: Api) -> None:
    token, _ = api.register("Page <b>Bold</b> & Co")
    match_id = api.create_match(token, players=3, moveTimeoutMs=60_000)
    api.add_house_bot(token, match_id, "RANDOM")
    api.join(token, match_id)  # a seat whose hand the page must not hold; one seat still free
    answer = api.http.get(f"/matches/{match_id}")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    assert answer.headers["content-security-policy"] == frame.CONTENT_SECURITY_POLICY
    assert "script-src 'self'" in frame.CONTENT_SECURITY_POLICY and "unsafe-inline" not in frame.CONTENT_SECURITY_POLICY
    carried = page_data(answer.text)
    assert carried["match"] == api.http.get(f"/api/matches/{match_id}").json()  # the spectator's, field for field
    assert carried["match"]["status"] == "WAITING" and hidden_cards_shown(carried) == []
    assert "Page <b>Bold</b>" not in answer.text  # the name is text: escaped in the page and its JSON
    assert "Page \\u003cb\\u003eBold\\u003c/b\\u003e \\u0026 Co" in answer.text
    for url in re.findall(r'(?:src|href)="(/static/[^"]+)"', answer.text):
        assert "?v=" in url and api.http.get(url).status_code == 200, url


def test_an_unknown_match_is_a_page_that_says_so(api: Api) -> None:
    answer = api.http.get("/matches/nope")
    assert answer.status_code == 404 and answer.headers["content-type"].startswith("text/html")
    assert "NOT_FOUND" in answer.text and "nope" in answer.text


def test_the_replay_is_the_table_after_every_move_with_every_hand(api: Api) -> None:
    _, match_id = house_match(api, players=4, variants=["CLAIRVOYANCE"])
    record = api.http.get(f"/api/matches/{match_id}/record").json()
    answer = api.http.get(f"/api/matches/{match_id}/replay", headers={"Accept-Encoding": "identity"})
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    replay = answer.json()
    assert replay["match"] == api.http.get(f"/api/matches/{match_id}").json()
    frames = replay["frames"]
    assert len(frames) == len(record["moves"]) + 1
    assert [f["move"] for f in frames[1:]] == record["moves"] and frames[0]["move"] is None
    # every round's first frame holds the hands as dealt (round 1 clairvoyant: seen by the others)
    for dealt in record["rounds"]:
        first = next(f for f in frames if f["round"] == dealt["round"] and f["phase"] != "FINISHED")
        assert [sorted(s["hand"]) for s in first["seats"]] == [sorted(h) for h in dealt["hands"]]
        assert first["trumpCard"] == dealt["trumpCard"] and first["dealer"] == dealt["dealer"]
    last = frames[-1]
    assert last["phase"] == "FINISHED" and [s["score"] for s in last["seats"]] == record["scores"]
    assert last["results"] == len(replay["match"]["roundResults"]) == replay["match"]["rounds"]
    # served gzipped, and again only if it changed
    zipped = api.http.get(f"/api/matches/{match_id}/replay", headers={"Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip" and zipped.json() == replay
    assert int(zipped.headers["content-length"]) < len(answer.content) / 5
    again = api.http.get(f"/api/matches/{match_id}/replay", headers={"If-None-Match": answer.headers["etag"]})
    assert again.status_code == 304


def test_no_replay_before_the_end(api: Api) -> None:
    token, _ = api.register()
    match_id = api.create_match(token, players=3, moveTimeoutMs=60_000)
    answer = api.http.get(f"/api/matches/{match_id}/replay")
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "MATCH_NOT_ACTIVE"
    assert "published once it has finished" in answer.json()["error"]["message"]
    assert api.http.get("/api/matches/nope/replay").json()["error"]["code"] == "NOT_FOUND"


def test_many_asking_at_once_for_one_replay_get_the_same_answer(api: Api) -> None:
    import concurrent.futures

    _, match_id = house_match(api)
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: api.http.get(f"/api/matches/{match_id}/replay"), range(8)))
    assert {a.status_code for a in answers} == {200} and len({a.content for a in answers}) == 1
    assert len({a.headers["etag"] for a in answers}) == 1


# ----------------------------------------------------------------------------- in Chromium


def websocket_payloads(page: Any) -> list[dict[str, Any]]:
    """Every ``next`` payload the page's WebSockets receive, recorded as they arrive."""
    received: list[dict[str, Any]] = []

    def on_socket(socket: Any) -> None:
        def on_frame(payload: str | bytes) -> None:
            message = json.loads(payload)
            if message.get("type") == "next":
                received.append(message["payload"])

        socket.on("framereceived", on_frame)

    page.on("websocket", on_socket)
    return received


def test_the_page_follows_a_live_match_to_its_end_and_never_holds_a_hidden_card(api: Api, browser_page: Any) -> None:
    page = browser_page
    received = websocket_payloads(page)
    token, _ = api.register()
    match_id = api.create_match(token, players=3, moveTimeoutMs=60_000)
    api.add_house_bot(token, match_id, "RANDOM")
    api.add_house_bot(token, match_id, "HEURISTIC")
    seat = api.join(token, match_id)["mySeat"]

    page.goto(f"{api.base}/matches/{match_id}")
    page.wait_for_selector("#table[data-version]")
    assert hidden_cards_shown(page_data(page.content())) == []
    looked = False
    lag_ms: list[float] = []
    while True:
        turn = api.data(AWAIT_TURN, {"m": match_id, "t": 10_000}, token)["awaitTurn"]
        if turn is None:
            break
        # the seat's turn: nothing changes until it moves, and the page shows this very version
        page.wait_for_function("v => +document.querySelector('#table').dataset.version >= v", arg=turn["version"])
        mine = api.match(match_id, token)
        assert page.get_attribute("#table", "data-version") == str(mine["version"])
        # the page never shows the seat's hand, which this test's bot holds and the page must not
        assert page.locator(f".seat[data-seat='{seat}'] .hand .card:not(.back)").count() == 0
        assert page.locator(f".seat[data-seat='{seat}'] .hand .card.back").count() == len(mine["hand"])
        if not looked and mine["round"] >= 3 and page.locator("#last-trick .card").count():
            looked = True
            keep_screenshot(page, "match-live")
            assert_cards_drawn_in_their_colours(page, "#last-trick .card, #trump .card")
            assert page.locator(f".seat[data-seat='{seat}']").get_attribute("class") == "seat to-act"
        answer = api.submit(token, match_id, first_legal(turn), turn["version"])
        assert not answer.get("errors"), answer
        version = answer["data"]["submitMove"]["version"]
        moved = time.perf_counter()
        page.wait_for_function("v => +document.querySelector('#table').dataset.version >= v", arg=version)
        lag_ms.append((time.perf_counter() - moved) * 1000)
    assert looked, "the match never reached a trick in round 3"

    page.wait_for_selector("#status.FINISHED")
    final = api.match(match_id)
    versions = [p["data"]["matchUpdates"]["version"] for p in received]
    assert versions == sorted(set(versions)) and versions[-1] == final["version"]  # in order, none twice
    assert all(p["data"]["matchUpdates"]["status"] in ("ACTIVE", "FINISHED") for p in received)
    live = [p for p in received if p["data"]["matchUpdates"]["status"] != "FINISHED"]
    assert live and hidden_cards_shown(live) == []
    # over, it becomes its replay, at its last move, with the seed checked
    page.wait_for_selector("#replay-controls:not([hidden])")
    page.wait_for_selector("#seed[data-verified=true]")
    assert "Won by" in page.inner_text("#turn")
    assert page.seen["sockets"] == [api.ws_url]
    origin = urlsplit(api.base)
    assert [u for u in page.seen["requests"] if urlsplit(u)[:2] != origin[:2]] == []
    assert page.seen["problems"] == []
    print(f"move -> page: p50 {sorted(lag_ms)[len(lag_ms) // 2]:.1f} ms, max {max(lag_ms):.1f} ms over {len(lag_ms)} moves")


def public_cards(view: dict[str, Any]) -> set[str]:
    """The cards a spectator's view of a match shows face up in its round: the trump card, the
    trick being played, and the last trick when it is this round's (a trick has been won)."""
    shown = {view["trumpCard"]} if view.get("trumpCard") else set()
    shown |= {p["card"] for p in view.get("currentTrick") or []}
    if view.get("lastTrick") and sum(s["tricks"] or 0 for s in view["seats"]):
        shown |= {p["card"] for p in view["lastTrick"]["plays"]}
    return shown


def test_a_live_secret_bids_match_shows_no_hand_no_hidden_bid_and_counts_down(api: Api, browser_page: Any) -> None:
    """Under SECRET_BIDS, while the bot this test plays holds its cards: the page's HTML, what
    its WebSocket receives and what it draws show none of them and no bid of the round being
    played (they stay secret until its last trick), and the seat to act has a countdown."""
    page = browser_page
    received = websocket_payloads(page)
    token, _ = api.register()
    match_id = api.create_match(token, players=3, moveTimeoutMs=60_000, variants=["SECRET_BIDS"])
    api.add_house_bot(token, match_id, "RANDOM")
    api.add_house_bot(token, match_id, "HEURISTIC")
    seat = api.join(token, match_id)["mySeat"]
    page.goto(f"{api.base}/matches/{match_id}")
    page.wait_for_selector("#table[data-version]")
    checked_plays = 0
    while checked_plays < 6:  # six of the bot's plays, in rounds 2 and later: enough to see a trick or two
        turn = api.data(AWAIT_TURN, {"m": match_id, "t": 10_000}, token)["awaitTurn"]
        assert turn is not None, "the match ended or stalled before the checks were made"
        mine = api.match(match_id, token)
        page.wait_for_function("v => +document.querySelector('#table').dataset.version >= v", arg=mine["version"])
        if mine["phase"] == "PLAY" and mine["round"] >= 2:
            checked_plays += 1
            held = {c for c in mine["hand"] if c not in ("W", "J")}  # (Wizards and Jesters are alike)
            served = page_data(api.http.get(f"/matches/{match_id}").text)["match"]
            assert served["status"] == "ACTIVE" and served["version"] == mine["version"]
            assert hidden_cards_shown(served) == [] and not held & public_cards(served)
            assert all(s["bid"] is None for s in served["seats"]), served["seats"]  # secret until the round ends
            this_round = [p["data"]["matchUpdates"] for p in received]
            this_round = [v for v in this_round if v["round"] == mine["round"]]
            assert this_round and hidden_cards_shown(this_round) == []
            leaked = [(v["version"], held & public_cards(v)) for v in this_round if held & public_cards(v)]
            assert not leaked, f"the page was sent cards the bot holds: {leaked}"
            drawn = set(page.locator("#trump .card, #trick .card").evaluate_all("cs => cs.map(c => c.dataset.card)"))
            assert not held & drawn and page.locator(".seat .hand .card:not(.back)").count() == 0
            assert page.locator(".seat .v-bid").all_inner_texts() == ["–"] * 3
            assert page.locator(f".seat[data-seat='{seat}']").get_attribute("class") == "seat to-act"
            left = re.search(r"([0-9.]+) s left", page.inner_text("#turn"))
            # (counted by the server's clock as the page estimates it: within a second of the clock)
            assert left and 0 < float(left[1]) <= 61.0, page.inner_text("#turn")
        answer = api.submit(token, match_id, first_legal(turn), turn["version"])
        assert not answer.get("errors"), answer
    # a round over: its bids are public in the round table, against its tricks
    assert page.locator("#rounds tbody tr").count() >= 1 and "/" in page.inner_text("#rounds tbody tr")
    assert page.seen["problems"] == []


def assert_cards_drawn_in_their_colours(page: Any, selector: str) -> None:
    cards = page.locator(selector)
    assert cards.count() > 0
    for i in range(cards.count()):
        card = cards.nth(i)
        code = card.get_attribute("data-card")
        assert card.is_visible() and card.bounding_box()["width"] > 20, code
        if code != "J":
            colour = ink(card.screenshot())
            assert looks_like(code, colour), f"{code} is drawn in {colour}"


def test_a_finished_match_is_replayed_from_the_keyboard(api: Api, browser_page: Any) -> None:
    page = browser_page
    _, match_id = house_match(api, players=3)
    record = api.http.get(f"/api/matches/{match_id}/record").json()
    page.goto(f"{api.base}/matches/{match_id}")
    page.wait_for_selector("#seed[data-verified=true]")
    page.wait_for_load_state("networkidle")
    moved = len(record["moves"])
    assert page.get_attribute("#table", "data-frame") == str(moved)  # it opens at the end
    transferred = sum(r.sizes()["responseBodySize"] + r.sizes()["responseHeadersSize"] for r in page.seen["finished"])
    assert 0 < transferred <= FIRST_LOAD_BUDGET, f"the first load transferred {transferred} bytes"
    rows = page.locator("#rounds tbody tr")
    assert rows.count() == 20  # 3 players: 20 rounds, each with bids against tricks

    def frame_at() -> int:
        return int(page.get_attribute("#table", "data-frame"))

    def hands() -> list[list[str]]:
        return [
            page.locator(f".seat[data-seat='{s}'] .hand .card").evaluate_all("cards => cards.map(c => c.dataset.card)")
            for s in range(3)
        ]

    page.keyboard.press("Home")
    assert frame_at() == 0 and "deal of round 1" in page.inner_text("#replay-move")
    assert [sorted(h) for h in hands()] == [sorted(h) for h in record["rounds"][0]["hands"]]
    assert page.locator("#rounds tbody tr.empty, #rounds tbody td.empty").count() == 1
    page.keyboard.press("ArrowRight")
    first_move = page.inner_text("#replay-move")  # a bid, or the dealer's trump when a Wizard was turned
    assert frame_at() == 1 and (" bids " in first_move or " as trump" in first_move), first_move
    page.keyboard.press("ArrowLeft")
    assert frame_at() == 0
    page.keyboard.press("PageDown")
    assert page.input_value("#replay-round") == "2"
    assert [sorted(h) for h in hands()] == [sorted(h) for h in record["rounds"][1]["hands"]]
    keep_screenshot(page, "match-replay")
    assert_cards_drawn_in_their_colours(page, ".seat .hand .card, #trump .card")
    page.select_option("#replay-round", "5")
    assert [sorted(h) for h in hands()] == [sorted(h) for h in record["rounds"][4]["hands"]]
    page.keyboard.press("PageUp")
    assert page.input_value("#replay-round") == "4"
    # played at 8x, then paused
    page.select_option("#replay-speed", "8")
    page.locator("body").focus()
    start = frame_at()
    page.keyboard.press(" ")
    page.wait_for_function("f => +document.querySelector('#table').dataset.frame >= f + 3", arg=start)
    page.keyboard.press(" ")
    paused = frame_at()
    assert page.get_attribute("[data-step=play]", "aria-label") == "Play"
    page.wait_for_timeout(400)  # (at 8x, 100 ms a move: a running replay would have moved on)
    assert frame_at() == paused
    page.keyboard.press("End")
    assert frame_at() == moved and "Won by" in page.inner_text("#turn")
    assert page.seen["problems"] == []


def test_the_match_page_fits_a_phone(api: Api, tmp_path: Path) -> None:
    _, match_id = house_match(api, players=6)
    with chromium_page(tmp_path / "phone", PHONE) as page:
        page.goto(f"{api.base}/matches/{match_id}")
        page.wait_for_selector("#seed[data-verified=true]")
        page.keyboard.press("Home")
        page.keyboard.press("PageDown")
        overflow = page.evaluate("() => document.scrollingElement.scrollWidth - window.innerWidth")
        assert overflow <= 0, f"the page is {overflow} px wider than the phone"
        keep_screenshot(page, "match-phone")
        assert page.seen["problems"] == []


def test_the_vendored_files_are_the_pinned_ones() -> None:
    vendor = frame.FOLDER / "static" / "vendor"
    sums = dict(reversed(line.split("  ", 1)) for line in (vendor / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == {"sha256.min.js", "LICENSE.js-sha256"}
    for name, digest in sums.items():
        assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == digest, f"{name} changed: run refresh.sh"
    assert {p.name for p in vendor.iterdir()} == {*sums, "SHA256SUMS", "SOURCES"}
    assert re.search(r"^js-sha256@1\.0\.0 sha512-\S+$", (vendor / "SOURCES").read_text(), re.M)


def test_an_aborted_match_says_why(api: Api, browser_page: Any) -> None:
    token, _ = api.register()
    match_id = api.create_match(token, players=3)
    api.data("mutation($m: ID!) { cancelMatch(matchId: $m) { status } }", {"m": match_id}, token)
    browser_page.goto(f"{api.base}/matches/{match_id}")
    browser_page.wait_for_selector("#status.ABORTED")
    assert "aborted: cancelled by its creator" in browser_page.inner_text("#turn")
    assert browser_page.seen["problems"] == []
