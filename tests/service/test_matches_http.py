"""Matches over GraphQL-over-HTTP: createMatch and every input field, joinMatch,
addHouseBot, the start, submitMove and its errors, what each caller may see (spectators,
seats, HIDDEN_BIDS / SECRET_BIDS / CLAIRVOYANCE), and matches against house bots.

Known hands come from stacked deals (RULES.md: card ``k`` of a round's deck goes to seat
``(dealer + 1 + k) mod n``; card ``r * n`` is turned up)."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.engine.conftest import stacked
from tests.service.arena_client import MATCH_FIELDS, Frozen, first_legal
from wizard import MatchConfig, new_match

CREATE = "mutation($i: CreateMatchInput!) { createMatch(input: $i) { " + MATCH_FIELDS + " } }"
JOIN = "mutation($m: ID!, $s: Int) { joinMatch(matchId: $m, seat: $s) { " + MATCH_FIELDS + " } }"
ADD_HOUSE = "mutation($m: ID!, $k: HouseBotKind!) { addHouseBot(matchId: $m, kind: $k) { " + MATCH_FIELDS + " } }"
AWAIT = "query($m: ID, $t: Int) { awaitTurn(matchId: $m, timeoutMs: $t) { " + MATCH_FIELDS + " } }"

CARD = re.compile(r"(?:[BGRY](?:1[0-3]|[1-9])|W|J)")


# ----------------------------------------------------------------------------- helpers


# A 3-player script, first dealer 2: round 1 seat 0 bids and leads first, seat 1 wins the
# trick; round 2 is dealt by seat 0, seat 1 leads, seat 2 must follow red.
HANDS_1 = [["R5"], ["R7"], ["B3"]]
HANDS_2 = [["R9", "B1"], ["R2", "G5"], ["R3", "Y4"]]
DEALS = [stacked(HANDS_1, "G2", dealer=2), stacked(HANDS_2, "J", dealer=0)]


def cards_in(document: Any) -> list[str]:
    """Every string in a JSON document that is a card code."""
    if isinstance(document, dict):
        return [c for v in document.values() for c in cards_in(v)]
    if isinstance(document, list):
        return [c for v in document for c in cards_in(v)]
    if isinstance(document, str) and CARD.fullmatch(document):
        return [document]
    return []


def create(api: Any, token: str, **spec: Any) -> dict[str, Any]:
    return api.data(CREATE, {"i": spec}, token)["createMatch"]  # type: ignore[no-any-return]


def error(body: dict[str, Any]) -> dict[str, Any]:
    assert body.get("errors"), body
    assert body.get("data") is None or not any(body["data"].values()), body
    return body["errors"][0]  # type: ignore[no-any-return]


def code(body: dict[str, Any]) -> str:
    return error(body)["extensions"]["code"]  # type: ignore[no-any-return]


def create_code(api: Any, token: str, **spec: Any) -> str:
    return code(api.gql(CREATE, {"i": spec}, token))


def seated_match(api: Any, players: int = 3, **spec: Any) -> tuple[str, list[str]]:
    """A started match of registered bots only: (match id, token of each seat)."""
    tokens = [api.register()[0] for _ in range(players)]
    match_id = create(api, tokens[0], players=players, **spec)["id"]
    for seat, token in enumerate(tokens):
        api.join(token, match_id, seat)
    return match_id, tokens


def scripted(api: Any, **spec: Any) -> tuple[str, list[str]]:
    spec.setdefault("deals", DEALS)
    spec.setdefault("firstDealer", 2)
    return seated_match(api, 3, **spec)


def move(api: Any, token: str, match_id: str, mv: dict[str, Any], expected: int | None = None) -> dict[str, Any]:
    body = api.submit(token, match_id, mv, expected)
    assert not body.get("errors"), body
    return body["data"]["submitMove"]  # type: ignore[no-any-return]


def parse_time(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    assert value.utcoffset() == timedelta(0), text
    return value


# ----------------------------------------------------------------------------- createMatch


def test_create_match_defaults(api):
    token, bot_id = api.register()
    match = create(api, token, players=3)
    assert match["ruleset"] == "WIZARD"
    assert match["variants"] == []
    assert match["moveTimeoutMs"] == 10_000
    assert match["rated"] is False
    assert match["stacked"] is False and match["seedChosen"] is False
    assert match["players"] == 3 and match["rounds"] == 20 and match["round"] == 1
    assert match["status"] == "WAITING" and match["version"] == 1
    assert match["createdBy"] == bot_id
    # the creator is not seated by creating
    assert match["mySeat"] is None and match["hand"] is None and match["legalMoves"] == []
    assert [s["seat"] for s in match["seats"]] == [0, 1, 2]
    assert all(s["bot"] is None and s["hand"] is None and s["bid"] is None for s in match["seats"])
    assert match["toAct"] is None and match["awaiting"] == [] and match["deadline"] is None
    assert match["seed"] is None and re.fullmatch(r"[0-9a-f]{64}", match["seedHash"])
    assert match["winners"] is None and match["roundResults"] == []
    assert abs(parse_time(match["createdAt"]) - datetime.now(UTC)) < timedelta(minutes=5)
    assert api.match(match["id"], token) == match


def test_create_match_needs_a_token(api):
    assert code(api.gql(CREATE, {"i": {"players": 3}})) == "UNAUTHENTICATED"


@pytest.mark.parametrize(
    "ruleset,players,rounds",
    [
        ("WIZARD", 3, 20), ("WIZARD", 4, 15), ("WIZARD", 5, 12), ("WIZARD", 6, 10),
        ("WIZARD_JUNIOR", 3, 8), ("WIZARD_JUNIOR", 4, 8), ("WIZARD_JUNIOR", 5, 7), ("WIZARD_JUNIOR", 6, 6),
        ("WIZARD_JUNIOR_CLASSIC", 3, 12), ("WIZARD_JUNIOR_CLASSIC", 4, 9),
        ("WIZARD_JUNIOR_CLASSIC", 5, 7), ("WIZARD_JUNIOR_CLASSIC", 6, 6),
    ],
)
def test_rulesets_and_players(api, ruleset, players, rounds):
    token, _ = api.register()
    match = create(api, token, ruleset=ruleset, players=players)
    assert (match["ruleset"], match["players"], match["rounds"]) == (ruleset, players, rounds)
    assert len(match["seats"]) == players


@pytest.mark.parametrize("players", [-1, 0, 1, 2, 7, 100])
def test_players_out_of_range_are_refused(api, players):
    token, _ = api.register()
    assert create_code(api, token, players=players) == "BAD_INPUT"


def test_unknown_ruleset_and_variant_are_refused(api):
    token, _ = api.register()
    assert create_code(api, token, players=3, ruleset="POKER") == "BAD_INPUT"
    assert create_code(api, token, players=3, variants=["NO_SUCH_VARIANT"]) == "BAD_INPUT"


@pytest.mark.parametrize(
    "ruleset,players,variants",
    [
        ("WIZARD", 4, ["PLUS_MINUS_ONE"]),
        ("WIZARD", 3, ["HIDDEN_BIDS"]),
        ("WIZARD", 5, ["SECRET_BIDS", "CLAIRVOYANCE"]),
        ("WIZARD", 4, ["SINGLE_SUIT"]),
        ("WIZARD_JUNIOR_CLASSIC", 5, ["PLUS_MINUS_ONE", "CLAIRVOYANCE"]),
    ],
)
def test_variants_are_kept(api, ruleset, players, variants):
    token, _ = api.register()
    match = create(api, token, ruleset=ruleset, players=players, variants=variants)
    assert sorted(match["variants"]) == sorted(variants)
    if "SINGLE_SUIT" in variants:
        assert match["rounds"] == 12


@pytest.mark.parametrize(
    "ruleset,players,variants",
    [
        ("WIZARD", 4, ["HIDDEN_BIDS", "SECRET_BIDS"]),
        ("WIZARD", 4, ["PLUS_MINUS_ONE", "HIDDEN_BIDS"]),
        ("WIZARD", 4, ["PLUS_MINUS_ONE", "SECRET_BIDS"]),
        ("WIZARD", 5, ["SINGLE_SUIT"]),
        ("WIZARD", 6, ["SINGLE_SUIT"]),
        ("WIZARD_JUNIOR", 4, ["SINGLE_SUIT"]),
        ("WIZARD_JUNIOR_CLASSIC", 3, ["SINGLE_SUIT"]),
    ],
)
def test_variant_combinations_that_make_no_sense_are_refused(api, ruleset, players, variants):
    token, _ = api.register()
    body = api.gql(CREATE, {"i": {"ruleset": ruleset, "players": players, "variants": variants}}, token)
    assert code(body) == "BAD_INPUT"
    assert error(body)["message"]


def test_move_timeout(api):
    token, _ = api.register()
    assert create(api, token, players=3, moveTimeoutMs=1234)["moveTimeoutMs"] == 1234
    for bad in (0, -1, -10_000, 2_000_000_000):
        assert create_code(api, token, players=3, moveTimeoutMs=bad) == "BAD_INPUT", bad


def test_rated(api):
    token, _ = api.register()
    assert create(api, token, players=3, rated=True)["rated"] is True
    assert create(api, token, players=3, rated=False)["rated"] is False


def test_a_stacked_match_is_never_rated(api):
    token, _ = api.register()
    body = api.gql(CREATE, {"i": {"players": 3, "rated": True, "deals": DEALS}}, token)
    assert code(body) == "BAD_INPUT"
    assert "rated" in error(body)["message"]
    match = create(api, token, players=3, deals=DEALS)
    assert match["stacked"] is True and match["rated"] is False


def test_same_seed_same_deals(api):
    seed = "same-seed-" + os.urandom(4).hex()
    matches = []
    for _ in range(2):
        match_id, tokens = seated_match(api, 3, seed=seed)
        matches.append([api.match(match_id, t) for t in tokens])
    first, second = matches
    assert first[0]["id"] != second[0]["id"]
    # each match hashes the seed with a salt of its own: the hash gives no seed away
    assert first[0]["seedHash"] != second[0]["seedHash"]
    assert hashlib.sha256(seed.encode()).hexdigest() not in (first[0]["seedHash"], second[0]["seedHash"])
    assert first[0]["seed"] is None and first[0]["salt"] is None  # not before the end
    assert first[0]["seedChosen"] is True
    assert first[0]["dealer"] == second[0]["dealer"]
    assert first[0]["trumpCard"] == second[0]["trumpCard"]
    assert [v["hand"] for v in first] == [v["hand"] for v in second]
    # the deal is the documented one: anyone can re-run it from the seed
    state = new_match(MatchConfig.create("WIZARD", 3), seed)
    assert state.dealer == first[0]["dealer"]
    assert [list(state.view(s).hand) for s in range(3)] == [v["hand"] for v in first]
    assert state.view(None).trump_card == first[0]["trumpCard"]


def test_without_a_seed_each_match_gets_its_own(api):
    token, _ = api.register()
    hashes = {create(api, token, players=3)["seedHash"] for _ in range(3)}
    assert len(hashes) == 3
    other = create(api, token, players=3, seed="x" + os.urandom(4).hex())
    assert other["seedHash"] not in hashes


def test_bad_seeds_are_refused(api):
    token, _ = api.register()
    assert create_code(api, token, players=3, seed="") == "BAD_INPUT"
    assert create_code(api, token, players=3, seed="x" * 5000) == "BAD_INPUT"


@pytest.mark.parametrize("dealer", [0, 1, 2, 3])
def test_first_dealer(api, dealer):
    match_id, tokens = seated_match(api, 4, firstDealer=dealer)
    match = api.match(match_id, tokens[0])
    assert match["dealer"] == dealer
    if match["phase"] == "BID":
        assert match["toAct"] == (dealer + 1) % 4  # left of the dealer bids first
    else:  # a Wizard was turned: the dealer names trump first
        assert match["phase"] == "CHOOSE_TRUMP" and match["toAct"] == dealer


@pytest.mark.parametrize("dealer", [-1, 3, 4, 1000])
def test_first_dealer_out_of_range_is_refused(api, dealer):
    token, _ = api.register()
    assert create_code(api, token, players=3, firstDealer=dealer) == "BAD_INPUT"


def test_stacked_deals_deal_the_given_hands(api):
    match_id, tokens = scripted(api)
    views = [api.match(match_id, t) for t in tokens]
    assert [v["hand"] for v in views] == HANDS_1
    assert views[0]["trumpCard"] == "G2" and views[0]["trumpSuit"] == "GREEN"
    assert views[0]["stacked"] is True
    # play round 1; round 2 is stacked too
    for seat, bid in ((0, 0), (1, 1), (2, 0)):
        move(api, tokens[seat], match_id, {"bid": bid})
    for seat, card in ((0, "R5"), (1, "R7"), (2, "B3")):
        move(api, tokens[seat], match_id, {"card": card})
    views = [api.match(match_id, t) for t in tokens]
    assert views[0]["round"] == 2 and views[0]["dealer"] == 0
    assert [sorted(v["hand"]) for v in views] == [sorted(h) for h in HANDS_2]
    assert views[0]["trumpCard"] == "J" and views[0]["trumpSuit"] is None


def test_a_partly_stacked_match_shuffles_the_other_rounds_from_the_seed(api):
    seed = "partly-" + os.urandom(4).hex()
    match_id, tokens = seated_match(api, 3, deals=[[], DEALS[1]], firstDealer=2, seed=seed)
    state = new_match(MatchConfig.create("WIZARD", 3, first_dealer=2), seed)
    assert [api.match(match_id, t)["hand"] for t in tokens] == [list(state.view(s).hand) for s in range(3)]


@pytest.mark.parametrize(
    "deals",
    [
        [["R5", "R7"]],  # not the whole deck
        [DEALS[0][:-1] + ["R5"]],  # a card twice, one missing
        [DEALS[0][:-1] + ["X9"]],  # not a card
        [[c.lower() for c in DEALS[0]]],
        [DEALS[0]] * 21,  # more rounds than the match has
    ],
    ids=["short", "duplicate", "unknown-card", "lower-case", "too-many-rounds"],
)
def test_bad_stacked_deals_are_refused(api, deals):
    token, _ = api.register()
    body = api.gql(CREATE, {"i": {"players": 3, "firstDealer": 2, "deals": deals}}, token)
    assert code(body) == "BAD_INPUT"
    assert error(body)["message"]


# ----------------------------------------------------------------------------- joinMatch


def test_join_match(api):
    creator, _ = api.register()
    bots = [api.register() for _ in range(5)]
    match_id = create(api, creator, players=3)["id"]
    frozen = Frozen(api, match_id, [creator])

    joined = api.join(bots[0][0], match_id, 2)
    assert joined["mySeat"] == 2 and joined["version"] == 2 and joined["status"] == "WAITING"
    assert joined["seats"][2]["bot"]["id"] == bots[0][1]
    assert joined["hand"] is None  # no cards before the start

    joined = api.join(bots[1][0], match_id)  # the lowest free seat
    assert joined["mySeat"] == 0 and joined["version"] == 3

    frozen = Frozen(api, match_id, [bots[0][0], bots[1][0]])
    refusals = [
        (bots[2][0], 2, "BAD_INPUT"),  # taken
        (bots[2][0], 0, "BAD_INPUT"),  # taken
        (bots[2][0], 3, "BAD_INPUT"),  # no such seat
        (bots[2][0], -1, "BAD_INPUT"),
        (bots[0][0], 1, "BAD_INPUT"),  # seated in seat 2 already: another seat is refused
    ]
    for token, seat, expected in refusals:
        body = api.gql(JOIN, {"m": match_id, "s": seat}, token)
        assert code(body) == expected, (seat, body)
        frozen.check()
    for seat in (None, 2):  # joining again is answered with the seat it has, and changes nothing
        assert api.join(bots[0][0], match_id, seat) == frozen.views[0]
        frozen.check()
    assert code(api.gql(JOIN, {"m": "no-such-match", "s": None}, bots[2][0])) == "NOT_FOUND"
    assert code(api.gql(JOIN, {"m": match_id, "s": None})) == "UNAUTHENTICATED"
    frozen.check()

    joined = api.join(bots[2][0], match_id)
    assert joined["mySeat"] == 1 and joined["status"] == "ACTIVE" and joined["version"] == 4

    frozen = Frozen(api, match_id, [b[0] for b in bots[:3]])
    for seat in (None, 0, 1):
        assert code(api.gql(JOIN, {"m": match_id, "s": seat}, bots[3][0])) == "MATCH_NOT_ACTIVE"
    frozen.check()


# ----------------------------------------------------------------------------- addHouseBot


def test_add_house_bot(api):
    creator, _ = api.register()
    stranger, _ = api.register()
    player, player_id = api.register()
    match_id = create(api, creator, players=4)["id"]

    added = api.data(ADD_HOUSE, {"m": match_id, "k": "RANDOM"}, creator)["addHouseBot"]
    assert added["version"] == 2 and added["status"] == "WAITING"
    assert added["seats"][0]["houseBot"] == "RANDOM" and added["seats"][0]["bot"]["name"]
    assert added["mySeat"] is None  # the creator is still not seated

    frozen = Frozen(api, match_id, [creator])
    body = api.gql(ADD_HOUSE, {"m": match_id, "k": "HEURISTIC"}, stranger)
    assert code(body) == "FORBIDDEN"
    frozen.check()
    assert code(api.gql(ADD_HOUSE, {"m": match_id, "k": "HEURISTIC"})) == "UNAUTHENTICATED"
    assert code(api.gql(ADD_HOUSE, {"m": match_id, "k": "GENIUS"}, creator)) == "BAD_INPUT"
    assert code(api.gql(ADD_HOUSE, {"m": "no-such-match", "k": "RANDOM"}, creator)) == "NOT_FOUND"
    frozen.check()

    api.join(player, match_id, 3)
    # a bot seated in the match may add house bots too
    added = api.data(ADD_HOUSE, {"m": match_id, "k": "HEURISTIC"}, player)["addHouseBot"]
    assert added["seats"][1]["houseBot"] == "HEURISTIC" and added["mySeat"] == 3
    added = api.data(ADD_HOUSE, {"m": match_id, "k": "RANDOM"}, creator)["addHouseBot"]
    assert added["status"] == "ACTIVE"
    assert [s["houseBot"] for s in added["seats"]] == ["RANDOM", "HEURISTIC", "RANDOM", None]
    assert added["seats"][3]["bot"]["id"] == player_id
    assert all(s["bot"] is not None for s in added["seats"])
    # full: no more seats, for anyone
    assert code(api.gql(ADD_HOUSE, {"m": match_id, "k": "RANDOM"}, creator)) == "MATCH_NOT_ACTIVE"
    assert code(api.gql(ADD_HOUSE, {"m": match_id, "k": "RANDOM"}, player)) == "MATCH_NOT_ACTIVE"
    assert api.match(match_id, player)["mySeat"] == 3


# ----------------------------------------------------------------------------- the start


def test_the_match_starts_when_the_last_seat_fills(api):
    tokens = [api.register()[0] for _ in range(3)]
    match = create(api, tokens[0], players=3, deals=DEALS, firstDealer=2, moveTimeoutMs=60_000)
    match_id, version = match["id"], match["version"]
    for seat, token in enumerate(tokens):
        before = datetime.now(UTC)
        joined = api.join(token, match_id, seat)
        after = datetime.now(UTC)
        assert joined["version"] == version + 1
        version = joined["version"]
        if seat < 2:
            assert joined["status"] == "WAITING" and joined["deadline"] is None
            assert joined["phase"] == "BID" and joined["hand"] is None and joined["legalMoves"] == []
            assert joined["toAct"] is None and joined["awaiting"] == []
    assert joined["status"] == "ACTIVE"
    assert joined["hand"] == ["B3"] and joined["mySeat"] == 2
    assert joined["toAct"] == 0 and joined["awaiting"] == [0] and joined["legalMoves"] == []
    deadline = parse_time(joined["deadline"])
    slack = timedelta(seconds=1)
    assert before - slack + timedelta(seconds=60) <= deadline <= after + slack + timedelta(seconds=60)
    first = api.match(match_id, tokens[0])
    assert first["legalMoves"] == [{"bid": 0, "card": None, "trump": None}, {"bid": 1, "card": None, "trump": None}]

    # every move is one change: the version grows by one each time
    for seat, mv in ((0, {"bid": 0}), (1, {"bid": 1}), (2, {"bid": 0}), (0, {"card": "R5"})):
        answer = move(api, tokens[seat], match_id, mv)
        assert answer["version"] == version + 1
        version = answer["version"]
        assert parse_time(answer["deadline"]) >= deadline
        deadline = parse_time(answer["deadline"])


# ----------------------------------------------------------------------------- submitMove


def test_the_answer_to_a_move_is_the_movers_view_after_it(api):
    match_id, tokens = scripted(api)
    before = api.match(match_id, tokens[0])
    answer = move(api, tokens[0], match_id, {"bid": 1}, before["version"])
    assert answer == api.match(match_id, tokens[0])
    assert answer["version"] == before["version"] + 1
    assert answer["mySeat"] == 0 and answer["hand"] == ["R5"]
    assert answer["seats"][0]["bid"] == 1 and answer["legalMoves"] == []
    assert answer["toAct"] == 1 and answer["movesMade"] == 1
    assert all(s["hand"] is None for s in answer["seats"][1:])


def test_a_stale_expected_version_is_refused(api):
    match_id, tokens = scripted(api)
    frozen = Frozen(api, match_id, tokens)
    version = frozen.views[0]["version"]
    for stale in (version - 1, version + 1, 0, -5, 10**6):
        body = api.submit(tokens[0], match_id, {"bid": 1}, stale)
        assert code(body) == "STALE_VERSION", body
        assert str(version) in error(body)["message"]
        frozen.check()
    assert move(api, tokens[0], match_id, {"bid": 1}, version)["version"] == version + 1
    # the old version is stale now
    frozen = Frozen(api, match_id, tokens)
    assert code(api.submit(tokens[1], match_id, {"bid": 0}, version)) == "STALE_VERSION"
    frozen.check()


def test_an_illegal_card_is_refused_with_the_legal_moves(api):
    match_id, tokens = scripted(api)
    for seat, bid in ((0, 0), (1, 1), (2, 0)):
        move(api, tokens[seat], match_id, {"bid": bid})
    for seat, card in ((0, "R5"), (1, "R7"), (2, "B3")):
        move(api, tokens[seat], match_id, {"card": card})
    for seat, bid in ((1, 0), (2, 0), (0, 0)):
        move(api, tokens[seat], match_id, {"bid": bid})
    move(api, tokens[1], match_id, {"card": "R2"})  # seat 1 leads red in round 2
    frozen = Frozen(api, match_id, tokens)
    assert frozen.views[2]["hand"] == ["R3", "Y4"]
    for mv in ({"card": "Y4"}, {"card": "G5"}, {"card": "W"}, {"bid": 1}, {"trump": "RED"}):
        body = api.submit(tokens[2], match_id, mv)
        err = error(body)
        assert err["extensions"]["code"] == "ILLEGAL_MOVE", body
        assert err["extensions"]["legalMoves"] == [{"bid": None, "card": "R3", "trump": None}]
        assert "R3" in err["message"]
        frozen.check()
    answer = move(api, tokens[2], match_id, {"card": "R3"})
    assert answer["currentTrick"] == [{"seat": 1, "card": "R2"}, {"seat": 2, "card": "R3"}]
    assert answer["hand"] == ["Y4"]


def test_an_illegal_bid_is_refused_with_the_legal_moves(api):
    match_id, tokens = scripted(api)
    frozen = Frozen(api, match_id, tokens)
    for mv in ({"bid": 2}, {"bid": -1}, {"bid": 20}, {"card": "R5"}, {"card": "R7"}, {"trump": "BLUE"}):
        err = error(api.submit(tokens[0], match_id, mv))
        assert err["extensions"]["code"] == "ILLEGAL_MOVE", (mv, err)
        assert err["extensions"]["legalMoves"] == [{"bid": b, "card": None, "trump": None} for b in (0, 1)]
        assert "bid 0" in err["message"] and "bid 1" in err["message"]
        frozen.check()


@pytest.mark.parametrize(
    "mv",
    [{}, {"bid": 1, "card": "R5"}, {"bid": 0, "trump": "RED"}, {"card": "X1"}, {"card": ""}, {"card": "r5"},
     {"bid": 2**31}, {"bid": "1"}, {"trump": "PURPLE"}, {"colour": "RED"}],
    ids=["none", "bid+card", "bid+trump", "no-card", "empty-card", "lower-card", "huge-bid", "string-bid",
         "no-suit", "unknown-field"],
)
def test_malformed_moves_are_refused(api, mv):
    match_id, tokens = scripted(api)
    frozen = Frozen(api, match_id, tokens)
    assert code(api.submit(tokens[0], match_id, mv)) == "BAD_INPUT"
    frozen.check()


def test_not_your_turn(api):
    match_id, tokens = scripted(api)
    frozen = Frozen(api, match_id, tokens)
    for seat in (1, 2):
        for mv in ({"bid": 0}, {"card": HANDS_1[seat][0]}):
            err = error(api.submit(tokens[seat], match_id, mv))
            assert err["extensions"]["code"] == "NOT_YOUR_TURN", err
            assert err["message"]
            frozen.check()


def test_moves_before_the_start_are_refused(api):
    tokens = [api.register()[0] for _ in range(2)]
    match_id = create(api, tokens[0], players=3, deals=DEALS, firstDealer=2)["id"]
    for seat, token in enumerate(tokens):
        api.join(token, match_id, seat)
    frozen = Frozen(api, match_id, tokens)
    for token in tokens:
        for mv in ({"bid": 0}, {"card": "R5"}):
            assert code(api.submit(token, match_id, mv)) == "MATCH_NOT_ACTIVE"
            frozen.check()
    # an unknown match
    assert code(api.submit(tokens[0], "no-such-match", {"bid": 0})) == "NOT_FOUND"
    assert code(api.submit(tokens[0], "x" * 100, {"bid": 0})) == "NOT_FOUND"


def test_moves_after_the_end_are_refused(api):
    token, _ = api.register()
    match_id = create(api, token, ruleset="WIZARD_JUNIOR", players=6)["id"]
    for _ in range(5):
        api.add_house_bot(token, match_id, "RANDOM")
    api.join(token, match_id)
    final = api.play_out(token, match_id)
    assert final["status"] == "FINISHED"
    frozen = Frozen(api, match_id, [token])
    for mv in ({"bid": 0}, {"card": "W"}, {"trump": "RED"}):
        assert code(api.submit(token, match_id, mv)) == "MATCH_NOT_ACTIVE"
        assert code(api.submit(token, match_id, mv, final["version"])) == "MATCH_NOT_ACTIVE"
        frozen.check()
    # nothing more to wait for
    assert api.data(AWAIT, {"m": match_id, "t": 50}, token)["awaitTurn"] is None


def test_await_turn(api):
    match_id, tokens = scripted(api)
    turn = api.data(AWAIT, {"m": match_id, "t": 10_000}, tokens[0])["awaitTurn"]
    assert turn == api.match(match_id, tokens[0])
    assert api.data(AWAIT, {"m": None, "t": 10_000}, tokens[0])["awaitTurn"] == turn
    assert api.data(AWAIT, {"m": match_id, "t": 100}, tokens[1])["awaitTurn"] is None
    assert code(api.gql(AWAIT, {"m": match_id, "t": -1}, tokens[0])) == "BAD_INPUT"
    assert code(api.gql(AWAIT, {"m": "no-such-match", "t": 0}, tokens[0])) == "NOT_FOUND"


# ----------------------------------------------------------------------------- views


def test_a_spectator_of_a_live_match_sees_no_card(api):
    match_id, tokens = scripted(api)
    outsider, _ = api.register()
    for viewer in (None, outsider):
        view = api.match(match_id, viewer)
        assert view["status"] == "ACTIVE"
        assert view["mySeat"] is None and view["hand"] is None and view["legalMoves"] == []
        assert all(s["hand"] is None for s in view["seats"])
        assert view["seed"] is None
        assert cards_in(view) == ["G2"]  # only the turned card is public
    move(api, tokens[0], match_id, {"bid": 0})
    move(api, tokens[1], match_id, {"bid": 0})
    move(api, tokens[2], match_id, {"bid": 0})
    move(api, tokens[0], match_id, {"card": "R5"})
    view = api.match(match_id)
    assert sorted(cards_in(view)) == ["G2", "R5"]
    assert view["currentTrick"] == [{"seat": 0, "card": "R5"}]
    # nothing a spectator can ask reveals more
    body = api.gql("query($m: ID!) { awaitTurn(matchId: $m, timeoutMs: 0) { hand } }", {"m": match_id})
    assert code(body) == "UNAUTHENTICATED"


def test_nobody_sees_cards_before_the_start(api):
    tokens = [api.register()[0] for _ in range(2)]
    match_id = create(api, tokens[0], players=3, deals=DEALS, firstDealer=2)["id"]
    for seat, token in enumerate(tokens):
        api.join(token, match_id, seat)
    for token in (*tokens, None):
        view = api.match(match_id, token)
        assert view["hand"] is None and all(s["hand"] is None for s in view["seats"])
        assert cards_in(view) == [view["trumpCard"]], view  # at most the turned card, which is public
        assert view["legalMoves"] == []


def test_a_seated_bot_sees_its_own_hand_only(api):
    match_id, tokens = scripted(api)
    for seat, token in enumerate(tokens):
        view = api.match(match_id, token)
        assert view["mySeat"] == seat
        assert view["hand"] == HANDS_1[seat]
        assert view["seats"][seat]["hand"] == HANDS_1[seat]
        assert all(s["hand"] is None for s in view["seats"] if s["seat"] != seat)
        assert sorted(cards_in(view)) == sorted([*HANDS_1[seat], *HANDS_1[seat], "G2"])
        assert view["seed"] is None


def test_after_the_end_anyone_sees_the_seed(api):
    token, _ = api.register()
    seed = "revealed-" + os.urandom(4).hex()
    match_id = create(api, token, ruleset="WIZARD_JUNIOR", players=6, seed=seed)["id"]
    for _ in range(5):
        api.add_house_bot(token, match_id, "HEURISTIC")
    api.join(token, match_id)
    live = api.match(match_id)
    assert live["seed"] is None and live["salt"] is None
    api.play_out(token, match_id)
    for viewer in (None, token):
        view = api.match(match_id, viewer)
        assert view["status"] == "FINISHED"
        assert view["seed"] == seed
        hashed = f"{view['salt']}:{view['seed']}"
        assert hashlib.sha256(hashed.encode()).hexdigest() == view["seedHash"] == live["seedHash"]


def bid_views(api: Any, match_id: str, tokens: Sequence[str]) -> list[list[int | None]]:
    """Each viewer's (the seats', then a spectator's) list of the seats' bids."""
    return [[s["bid"] for s in api.match(match_id, t)["seats"]] for t in (*tokens, None)]


def test_hidden_bids_are_shown_once_every_bid_is_in(api):
    match_id, tokens = scripted(api, variants=["HIDDEN_BIDS"])
    view = api.match(match_id, tokens[1])
    assert view["toAct"] is None and view["awaiting"] == [0, 1, 2]
    # bids are simultaneous: any order, each seat may bid now
    for token in tokens:
        assert [m["bid"] for m in api.match(match_id, token)["legalMoves"]] == [0, 1]
    move(api, tokens[2], match_id, {"bid": 0})
    assert bid_views(api, match_id, tokens) == [
        [None, None, None], [None, None, None], [None, None, 0], [None, None, None],
    ]
    frozen = Frozen(api, match_id, tokens)  # one bid each: a second one is refused
    assert code(api.submit(tokens[2], match_id, {"bid": 1})) == "NOT_YOUR_TURN"
    frozen.check()
    assert api.match(match_id)["awaiting"] == [0, 1]
    move(api, tokens[0], match_id, {"bid": 1})
    assert bid_views(api, match_id, tokens) == [
        [1, None, None], [None, None, None], [None, None, 0], [None, None, None],
    ]
    answer = move(api, tokens[1], match_id, {"bid": 1})
    assert [s["bid"] for s in answer["seats"]] == [1, 1, 0]
    assert bid_views(api, match_id, tokens) == [[1, 1, 0]] * 4
    assert answer["phase"] == "PLAY" and answer["toAct"] == 0


def test_secret_bids_stay_hidden_until_the_round_is_over(api):
    match_id, tokens = scripted(api, variants=["SECRET_BIDS"])
    move(api, tokens[1], match_id, {"bid": 1})
    move(api, tokens[2], match_id, {"bid": 0})
    move(api, tokens[0], match_id, {"bid": 1})
    hidden = [[1, None, None], [None, 1, None], [None, None, 0], [None, None, None]]
    assert bid_views(api, match_id, tokens) == hidden  # every bid is in, still hidden
    assert api.match(match_id)["phase"] == "PLAY"
    move(api, tokens[0], match_id, {"card": "R5"})
    move(api, tokens[1], match_id, {"card": "R7"})
    assert bid_views(api, match_id, tokens) == hidden
    assert api.match(match_id)["roundResults"] == []
    move(api, tokens[2], match_id, {"card": "B3"})  # the round's last trick is done
    expected = [
        {"seat": 0, "bid": 1, "tricks": 0, "points": -10},
        {"seat": 1, "bid": 1, "tricks": 1, "points": 30},
        {"seat": 2, "bid": 0, "tricks": 0, "points": 20},
    ]
    for token in (*tokens, None):
        view = api.match(match_id, token)
        assert view["round"] == 2
        assert view["roundResults"] == [{"round": 1, "seats": expected}]
        assert [s["score"] for s in view["seats"]] == [-10, 30, 20]
    # round 2's bids are secret again
    move(api, tokens[1], match_id, {"bid": 2})
    assert bid_views(api, match_id, tokens) == [
        [None, None, None], [None, 2, None], [None, None, None], [None, None, None],
    ]


def test_clairvoyance_round_one(api):
    match_id, tokens = scripted(api, variants=["CLAIRVOYANCE"])
    for seat, token in enumerate(tokens):
        view = api.match(match_id, token)
        assert view["hand"] is None
        assert view["seats"][seat]["hand"] is None
        for other in range(3):
            if other != seat:
                assert view["seats"][other]["hand"] == HANDS_1[other]
        # the own card is nowhere in the answer
        assert sorted(cards_in(view)) == sorted([*(c for o in range(3) if o != seat for c in HANDS_1[o]), "G2"])
    spectator = api.match(match_id)
    assert all(s["hand"] is None for s in spectator["seats"]) and cards_in(spectator) == ["G2"]
    # bids as usual, in turn; the server plays the single cards
    move(api, tokens[0], match_id, {"bid": 0})
    move(api, tokens[1], match_id, {"bid": 1})
    answer = move(api, tokens[2], match_id, {"bid": 0})
    assert answer["round"] == 2
    assert answer["lastTrick"] == {
        "leader": 0, "plays": [{"seat": 0, "card": "R5"}, {"seat": 1, "card": "R7"}, {"seat": 2, "card": "B3"}],
        "winner": 1,
    }
    assert answer["roundResults"][0]["seats"][1] == {"seat": 1, "bid": 1, "tricks": 1, "points": 30}
    # round 2: as usual, each seat sees its own hand only
    for seat, token in enumerate(tokens):
        view = api.match(match_id, token)
        assert sorted(view["hand"]) == sorted(HANDS_2[seat])
        assert all(s["hand"] is None for s in view["seats"] if s["seat"] != seat)


# ----------------------------------------------------------------------------- against house bots


def test_house_bots_play_promptly(api):
    token, _ = api.register()
    match_id = create(api, token, players=4, moveTimeoutMs=60_000, firstDealer=0)["id"]
    api.join(token, match_id, 0)  # seat 0 deals round 1: the house bots move first
    for kind in ("RANDOM", "HEURISTIC", "RANDOM"):
        api.add_house_bot(token, match_id, kind)
    for _ in range(6):
        turn = api.data(AWAIT, {"m": match_id, "t": 20_000}, token)["awaitTurn"]
        # no worker runs here: only the house bots' own prompt play makes it our turn
        assert turn is not None
        assert turn["mySeat"] == 0 and 0 in turn["awaiting"] and turn["legalMoves"]
        assert all(s["timeouts"] == 0 for s in turn["seats"])
        answer = move(api, token, match_id, first_legal(turn), turn["version"])
        assert answer["version"] == turn["version"] + 1


def test_a_match_against_house_bots_runs_to_its_end(api):
    token, bot_id = api.register()
    match_id = create(api, token, ruleset="WIZARD_JUNIOR", players=6)["id"]
    for kind in ("HEURISTIC", "RANDOM", "HEURISTIC", "RANDOM", "HEURISTIC"):
        api.add_house_bot(token, match_id, kind)
    api.join(token, match_id)
    final = api.play_out(token, match_id)
    assert final["status"] == "FINISHED" and final["phase"] == "FINISHED"
    assert final["seats"][5]["bot"]["id"] == bot_id
    assert final["toAct"] is None and final["awaiting"] == [] and final["deadline"] is None
    assert final["legalMoves"] == []
    scores = [s["score"] for s in final["seats"]]
    assert final["winners"] == [s for s in range(6) if scores[s] == max(scores)]
    results = final["roundResults"]
    assert [r["round"] for r in results] == list(range(1, final["rounds"] + 1)) == list(range(1, 7))
    for r in results:
        assert [s["seat"] for s in r["seats"]] == list(range(6))
        assert sum(s["tricks"] for s in r["seats"]) == r["round"]  # round r has r tricks
        for s in r["seats"]:
            assert 0 <= s["bid"] <= r["round"]
            # chips: exact bid scores the bid, bid 0 and won 0 scores 1, else nothing
            expected = (s["bid"] or 1) if s["bid"] == s["tricks"] else 0
            assert s["points"] == expected, r
    for seat in range(6):
        assert sum(r["seats"][seat]["points"] for r in results) == scores[seat]
        assert final["seats"][seat]["timeouts"] == 0
    assert api.match(match_id) == {**final, "mySeat": None, "legalMoves": [], "hand": None,
                                   "seats": [{**s, "hand": None} for s in final["seats"]]}
