"""The seed commitment over the API: ``seedHash`` is SHA-256(salt ":" seed) with a salt the
server draws and reveals only with the seed at the end, so a seed the creator chose cannot be
found from the hash; a chosen seed shows as chosen to everyone and is never rated; matches
stored before salts keep their hash and still verify. And ``deals`` that stack no round are
refused, so ``stacked`` is true only for a match whose deals were really stacked."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
from typing import Any

import pytest

from sdk.replay import ReplayError, verify_record
from service.model.live_match import MatchSettings
from tests.service.arena_client import REPO
from wizard import MatchConfig, new_match
from wizard.record import state_to_bytes

FIELDS = "id status stacked rated seedChosen seedHash seed salt"
MATCH = "query($m: ID!) { match(id: $m) { " + FIELDS + " } }"
CREATE = "mutation($i: CreateMatchInput!) { createMatch(input: $i) { " + FIELDS + " } }"
DECK = [f"{s}{r}" for s in "BGRY" for r in range(1, 14)] + ["W"] * 4 + ["J"] * 4


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def create(api: Any, token: str, **spec: Any) -> dict[str, Any]:
    return api.data(CREATE, {"i": spec}, token)["createMatch"]  # type: ignore[no-any-return]


def views(api: Any, match_id: str, tokens: list[str | None]) -> list[dict[str, Any]]:
    """The match as each caller sees it, over GraphQL and over REST."""
    out = []
    for token in tokens:
        out.append(api.data(MATCH, {"m": match_id}, token)["match"])
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        out.append(api.http.get(f"/api/matches/{match_id}", headers=headers).json())
    return out


def play_with_house_bots(api: Any, token: str, match_id: str) -> dict[str, Any]:
    """Seat the caller and house bots in a WAITING match and play it to the end."""
    players = api.data("query($m: ID!) { match(id: $m) { players } }", {"m": match_id})["match"]["players"]
    api.join(token, match_id, 0)
    for _ in range(players - 1):
        api.add_house_bot(token, match_id, "HEURISTIC")
    final = api.play_out(token, match_id)
    assert final["status"] == "FINISHED"
    return final


def replay(api: Any, match_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wizard_arena", "replay", match_id, "--url", api.base, "--quiet"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )


def match_keys(redis_client: Any) -> set[bytes]:
    return set(redis_client.scan_iter(match="{m:*}:match", count=1000))


def match_count(redis_client: Any) -> int:
    return len(match_keys(redis_client))


# ----------------------------------------------------------------------------- chosen seeds


def test_a_chosen_seed_is_not_published_as_its_plain_hash_and_verifies_at_the_end(api):
    creator, _ = api.register()
    joiner, _ = api.register()
    first = create(api, creator, ruleset="WIZARD_JUNIOR", players=3, seed="1234")
    second = create(api, creator, ruleset="WIZARD_JUNIOR", players=3, seed="1234")
    # the dictionary attack of issue 11: "1234" hashes to 03ac6742…; the published hash is not that
    assert first["seedHash"] != sha256("1234") and second["seedHash"] != sha256("1234")
    assert first["seedHash"] != second["seedHash"]  # each match its own salt
    match_id = first["id"]
    api.join(joiner, match_id, 1)
    for view in views(api, match_id, [creator, joiner, None]):
        assert view["seedChosen"] is True, view  # everyone, the joiner above all, sees the seed was chosen
        assert view["seed"] is None and view["salt"] is None, view  # neither before the end
        assert view["seedHash"] == first["seedHash"]

    api.add_house_bot(creator, match_id, "RANDOM")
    api.add_house_bot(creator, match_id, "HEURISTIC")
    assert api.play_out(joiner, match_id)["status"] == "FINISHED"
    for view in views(api, match_id, [creator, joiner, None]):
        assert view["status"] == "FINISHED" and view["seed"] == "1234"
        assert view["salt"] is not None and len(view["salt"]) == 32 and int(view["salt"], 16) >= 0
        assert sha256(f"{view['salt']}:1234") == view["seedHash"] == first["seedHash"]

    record = api.http.get(f"/api/matches/{match_id}/record").json()
    assert record["seedChosen"] is True and record["seed"] == "1234"
    assert record["seedHash"] == first["seedHash"] == sha256(f"{record['salt']}:1234")
    run = replay(api, match_id)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "verified: seed matches seedHash, replay reproduces the recorded result\n"
    with pytest.raises(ReplayError, match="seed check failed"):
        verify_record({**record, "salt": "0" * 32})


def test_a_server_drawn_seed_is_not_marked_chosen_and_is_salted_too(api):
    token, _ = api.register()
    match = create(api, token, ruleset="WIZARD_JUNIOR", players=3, rated=True)
    assert match["seedChosen"] is False and match["rated"] is True and match["salt"] is None
    final_id = match["id"]
    play_with_house_bots(api, token, final_id)
    finished = api.data(MATCH, {"m": final_id})["match"]
    assert sha256(f"{finished['salt']}:{finished['seed']}") == match["seedHash"]
    record = api.http.get(f"/api/matches/{final_id}/record").json()
    assert record["seedChosen"] is False


def test_a_chosen_seed_is_never_rated(api):
    token, _ = api.register()
    body = api.gql(CREATE, {"i": {"players": 3, "seed": "mine", "rated": True}}, token)
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT" and "rated" in body["errors"][0]["message"]
    # and no path can make such a match: settings that rate a chosen seed or stacked deals do not exist
    config = MatchConfig.create("WIZARD", 3)
    for chosen, stacked in ((True, False), (False, True)):
        with pytest.raises(ValueError, match="never rated"):
            MatchSettings(config, 10_000, True, stacked, "someone", 0, seed_chosen=chosen)
    assert MatchSettings(config, 10_000, True, False, "someone", 0).seed_chosen is False


def test_a_rated_match_from_a_chosen_seed_is_refused_and_nothing_is_created(api, redis_client):
    token, _ = api.register()
    before = match_keys(redis_client)
    body = api.gql(CREATE, {"i": {"players": 3, "rated": True, "seed": "known-to-me"}}, token)
    assert body.get("errors") and body.get("data") is None, body
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT", body
    assert "seed" in body["errors"][0]["message"]
    assert match_keys(redis_client) == before  # nothing was created
    # either alone is fine: a rated match the server deals, an unrated one from a given seed
    rated = create(api, token, players=3, rated=True)
    seeded = create(api, token, players=3, seed="known-to-me")
    assert rated["rated"] is True and seeded["rated"] is False


# ----------------------------------------------------------------------------- stored before salts


def as_format_1(state_bytes: bytes) -> bytes:
    """The bytes an engine from before salts wrote for an unsalted state: format 1 has no
    salt field after the seed."""
    salt_at = 10 + struct.unpack_from("<H", state_bytes, 8)[0]
    assert state_bytes[:4] == b"WZS\x02" and state_bytes[salt_at : salt_at + 2] == b"\x00\x00"
    return b"WZS\x01" + state_bytes[4:salt_at] + state_bytes[salt_at + 2 :]


def test_a_match_stored_before_salts_keeps_its_hash_and_still_verifies(api, redis_client):
    """A WAITING match as the service stored it before salts (state format 1, settings without
    seedChosen, and `deals: [[]]` then said stacked) reads, plays and replays."""
    token, _ = api.register()
    seed = "from-before-salts"
    match_id = create(api, token, ruleset="WIZARD_JUNIOR", players=3, seed=seed)["id"]
    key = f"{{m:{match_id}}}:match"
    config = MatchConfig.create("WIZARD_JUNIOR", 3, deals=[[]])
    settings = json.loads(redis_client.hget(key, "settings"))
    del settings["seedChosen"]
    settings["stacked"] = True
    redis_client.hset(key, mapping={
        "state": as_format_1(state_to_bytes(new_match(config, seed))), "settings": json.dumps(settings),
    })

    for view in views(api, match_id, [token, None]):
        assert view["seedHash"] == sha256(seed), view  # the hash it published then
        assert view["seedChosen"] is True  # unrated and no tournament's: the server cannot tell, so it warns
        assert view["stacked"] is False  # no round was stacked
    play_with_house_bots(api, token, match_id)
    record = api.http.get(f"/api/matches/{match_id}/record").json()
    assert record["seedHash"] == sha256(seed) and record["salt"] is None and record["seed"] == seed
    run = replay(api, match_id)
    assert run.returncode == 0, run.stderr


def test_settings_stored_before_seed_chosen_say_what_the_server_knows():
    config = MatchConfig.create("WIZARD", 4)
    base = {"moveTimeoutMs": 1000, "stacked": False, "createdBy": "b", "createdAt": 0}
    assert MatchSettings.from_json(json.dumps({**base, "rated": True}), config).seed_chosen is False
    assert MatchSettings.from_json(json.dumps({**base, "rated": False, "tournament": "t1"}), config).seed_chosen is False
    assert MatchSettings.from_json(json.dumps({**base, "rated": False}), config).seed_chosen is True
    for chosen in (True, False):
        settings = MatchSettings(config, 1000, False, False, "b", 0, seed_chosen=chosen)
        assert MatchSettings.from_json(settings.to_json(), config).seed_chosen is chosen


# ----------------------------------------------------------------------------- deals that stack nothing


@pytest.mark.parametrize("deals", [[], [[]], [[], [], []]], ids=["no-round", "one-empty-round", "empty-rounds"])
def test_deals_that_stack_no_round_are_refused(api, redis_client, deals):
    token, _ = api.register()
    before = match_count(redis_client)
    body = api.gql(CREATE, {"i": {"players": 3, "deals": deals}}, token)
    error = body["errors"][0]
    assert body["data"] is None and error["extensions"]["code"] == "BAD_INPUT"
    assert "deals stacks no round" in error["message"] and "leave deals out" in error["message"]
    assert match_count(redis_client) == before  # nothing was created


def test_stacked_is_true_only_when_a_round_really_was_stacked(api):
    token, _ = api.register()
    assert create(api, token, players=3)["stacked"] is False
    assert create(api, token, players=3, firstDealer=0, deals=[[], DECK])["stacked"] is True
    assert create(api, token, players=3, firstDealer=0, deals=[DECK, []])["stacked"] is True
