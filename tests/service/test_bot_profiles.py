"""A bot's profile over real HTTP: updateBot (description, homepage: checked), retireBot (no
new matches, tournaments or tokens; reads and its matches under way go on; marked on Bot),
and house bots found by bot(id:) like any bot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

PROFILE = "{ me { id description homepage retired retiredAt createdAt house houseKind } }"
UPDATE = "mutation($i: UpdateBotInput!) { updateBot(input: $i) { id description homepage } }"
BOT = "query($id: ID!) { bot(id: $id) { id name description homepage retired retiredAt house houseKind ratings { ruleset } } }"
RETIRE = "mutation { retireBot { id retired retiredAt } }"


def test_update_bot_sets_what_others_see_and_leaves_out_fields_alone(api):
    token, bot_id = api.register()
    fresh = api.data(PROFILE, token=token)["me"]
    assert fresh["description"] is None and fresh["homepage"] is None and fresh["createdAt"] is not None
    assert fresh["house"] is False and fresh["retired"] is False
    api.data(UPDATE, {"i": {"description": "Bids by Monte Carlo.", "homepage": "https://example.org/bot"}}, token)
    api.data(UPDATE, {"i": {"description": "Bids by sampling."}}, token)  # homepage left out: kept
    seen = api.data(BOT, {"id": bot_id})["bot"]  # public, no token
    assert seen["description"] == "Bids by sampling." and seen["homepage"] == "https://example.org/bot"
    api.data(UPDATE, {"i": {"homepage": ""}}, token)  # empty: cleared
    assert api.data(BOT, {"id": bot_id})["bot"]["homepage"] is None


@pytest.mark.parametrize("given", [
    {"homepage": "javascript:alert(1)"}, {"homepage": "ftp://example.org"}, {"homepage": "https://"},
    {"homepage": "example.org"}, {"homepage": "https://exa mple.org"}, {"homepage": "https://x.org/" + "a" * 300},
    {"description": "x" * 501}, {"description": "bell\x07"},
])
def test_update_bot_refuses_what_is_not_a_description_or_an_http_url(api, given):
    token, bot_id = api.register()
    body = api.gql(UPDATE, {"i": given}, token)
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT", body
    assert api.data(BOT, {"id": bot_id})["bot"]["homepage"] is None


def test_update_bot_needs_a_token(api):
    assert api.error_code(UPDATE, {"i": {"description": "x"}}) == "UNAUTHENTICATED"


def test_a_retired_bot_keeps_its_name_and_matches_but_takes_part_in_nothing_new(api):
    token, bot_id = api.register()
    host, host_id = api.register()
    match_id = api.create_match(host, players=3, moveTimeoutMs=60_000)
    later = api.create_match(host, players=3, moveTimeoutMs=60_000)
    api.join(token, match_id)
    retired = api.data(RETIRE, token=token)["retireBot"]
    assert retired == {"id": bot_id, "retired": True, "retiredAt": retired["retiredAt"]} and retired["retiredAt"]
    assert api.data(RETIRE, token=token)["retireBot"]["retiredAt"] == retired["retiredAt"]  # once, for good

    assert api.error_code("mutation($m: ID!) { joinMatch(matchId: $m) { id } }", {"m": later}, token) == "FORBIDDEN"
    assert api.error_code("mutation { createMatch(input: {players: 3}) { id } }", token=token) == "FORBIDDEN"
    assert api.error_code('mutation { createToken(name: "more") { token } }', token=token) == "FORBIDDEN"
    tournament = {"name": "t", "ruleset": "WIZARD", "variants": [], "playersPerMatch": 3, "format": "ROUND_ROBIN",
                  "rounds": 1, "bots": [bot_id], "startsAt": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}
    create = "mutation($i: CreateTournamentInput!) { createTournament(input: $i) { id } }"
    assert api.error_code(create, {"i": tournament}, host) == "FORBIDDEN"  # cannot be entered by another
    tournament["bots"] = []
    tid = api.data(create, {"i": tournament}, host)["createTournament"]["id"]
    assert api.error_code("mutation($t: ID!) { joinTournament(tournamentId: $t) { id } }", {"t": tid}, token) == "FORBIDDEN"
    api.data("mutation($t: ID!) { cancelTournament(tournamentId: $t) { id } }", {"t": tid}, host)

    # still itself: reads, and the match it sat in before retiring plays on with it
    assert api.data(PROFILE, token=token)["me"]["retired"] is True
    seen = api.data(BOT, {"id": bot_id})["bot"]
    assert seen["retired"] is True and seen["retiredAt"] == retired["retiredAt"]
    api.add_house_bot(host, match_id, "RANDOM")
    api.add_house_bot(host, match_id, "RANDOM")
    final = api.play_out(token, match_id)
    assert final["status"] == "FINISHED" and final["mySeat"] is not None
    assert host_id


@pytest.mark.parametrize("kind", ["RANDOM", "HEURISTIC"])
def test_house_bots_are_bots_like_others(api, kind):
    bot_id = f"house-{kind.lower()}"
    seen = api.data(BOT, {"id": bot_id})["bot"]
    assert seen["id"] == bot_id and seen["name"] == f"House {kind.title()}"
    assert seen["house"] is True and seen["houseKind"] == kind and seen["retired"] is False
    assert isinstance(seen["ratings"], list)
    token, _ = api.register()
    match_id = api.create_match(token, players=3)
    seats = api.add_house_bot(token, match_id, kind)
    seat = api.match(match_id)["seats"][0]["bot"]
    assert seats and seat["id"] == bot_id
    house = api.data("query($m: ID!) { match(id: $m) { seats { bot { id house houseKind } } } }", {"m": match_id})
    assert house["match"]["seats"][0]["bot"] == {"id": bot_id, "house": True, "houseKind": kind}
    me = api.data("{ me { house houseKind } }", token=token)["me"]
    assert me == {"house": False, "houseKind": None}
