"""`wizard-arena replay FILE`: a record played by the engine verifies (seed against seedHash,
moves, result, dealt hands) and is shown round by round; a tampered or malformed record
fails with the failed check named. And the text renderer of live views that `watch` shares:
a seat sees its hand, a spectator sees no card of a live hand."""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sdk.render import render_round, render_view, seat_labels
from sdk.replay import ReplayError, load_record, played_rounds, render_record, verify_record
from tests.sdk.http_stub import Answer, http_stub
from wizard import HeuristicBot, MatchConfig, MatchRecord, Move, Phase, RandomBot, new_match, seed_hash
from wizard.bots import play_match
from wizard.record import record_of

REPO = Path(__file__).resolve().parents[2]
NAMES = ["ann", "bob", "house-random", "house-random"]


def played_record(
    ruleset: str = "WIZARD", players: int = 4, variants: tuple[str, ...] = (), seed: str = "replay-1",
    salt: str | None = None,
) -> dict[str, Any]:
    """A finished match between house bots, as the record endpoint publishes it."""
    config = MatchConfig.create(ruleset, players, variants)
    bots = [HeuristicBot() if s % 2 == 0 else RandomBot() for s in range(players)]
    state = play_match(config, seed, bots, random.Random(5), salt)
    data = record_of(state).to_dict()
    assert state.outcome is not None
    data.update(
        seedHash=seed_hash(seed, salt), winners=list(state.outcome.winners), matchId="m-1",
        seats=[{"id": f"b{s}", "name": NAMES[s % len(NAMES)], "house": None} for s in range(players)],
    )
    return data


@pytest.fixture(scope="module")
def record() -> dict[str, Any]:
    return played_record()


def replay(tmp_path: Path, data: Any, *options: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "record.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return subprocess.run(
        [sys.executable, "-m", "wizard_arena", "replay", str(path), *options],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )


def refused(tmp_path: Path, data: Any, check: str) -> str:
    """The failure message of a record that must not verify; it names ``check``."""
    run = replay(tmp_path, data)
    assert run.returncode != 0, run.stdout
    assert "verified" not in run.stdout
    assert f"{check} check failed" in run.stderr, run.stderr
    return run.stderr


# ----------------------------------------------------------------------------- verified


def test_a_played_record_verifies_and_shows_every_round(tmp_path, record):
    run = replay(tmp_path, record)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert out.rstrip().splitlines()[-1] == "verified: seed matches seedHash, replay reproduces the recorded result"
    labels = seat_labels(4, NAMES)
    assert labels == ["ann", "bob", "house-random#2", "house-random#3"]
    rounds = record["rounds"]
    assert len(rounds) == 15
    for r in rounds:
        header = f"round {r['round']}/15 | dealer {labels[r['dealer']]} | trump "
        assert header in out, header
        for seat, hand in enumerate(r["hands"]):
            assert re.search(rf"^    {re.escape(labels[seat])} +{re.escape(' '.join(hand))}$", out, re.M), (r["round"], seat)
    # every trick of every round, each with a winner, then the final result
    assert len(re.findall(r"^  trick \d+: .* -> \S+$", out, re.M)) == sum(range(1, 16))
    assert f"final scores: {', '.join(f'{labels[s]} {x}' for s, x in enumerate(record['scores']))}" in out
    assert f"winners: {', '.join(labels[s] for s in record['winners'])}" in out


def test_a_dealers_trump_choice_is_shown(tmp_path, record):
    wizard_turned = [r["round"] for r in record["rounds"] if r["trumpCard"] == "W"]
    assert wizard_turned, "pick a seed whose match turns a Wizard"
    out = replay(tmp_path, record).stdout
    for r in wizard_turned:
        assert re.search(rf"^round {r}/15 \| .* \| trump W, dealer chose (BLUE|GREEN|RED|YELLOW)$", out, re.M)


def test_quiet_prints_only_the_verdict(tmp_path, record):
    run = replay(tmp_path, record, "--quiet")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "verified: seed matches seedHash, replay reproduces the recorded result\n"


def test_a_record_without_seed_hash_verifies_but_says_the_seed_was_not_checked(tmp_path, record):
    data = {k: v for k, v in record.items() if k not in ("seedHash", "seats", "winners", "matchId")}
    run = replay(tmp_path, data, "--quiet")
    assert run.returncode == 0, run.stderr
    assert "seed could not be checked" in run.stdout


@pytest.mark.parametrize(
    ("ruleset", "players", "variants"),
    [("WIZARD", 3, ("CLAIRVOYANCE", "SECRET_BIDS")), ("WIZARD", 4, ("HIDDEN_BIDS", "SINGLE_SUIT")),
     ("WIZARD_JUNIOR_CLASSIC", 5, ("PLUS_MINUS_ONE",))],
)
def test_every_round_of_a_variant_match_adds_up(ruleset, players, variants):
    data = played_record(ruleset, players, variants)
    report = verify_record(data)
    config = report.record.config
    assert [p.round for p in report.rounds] == list(range(1, config.rounds + 1))
    totals = [0] * players
    for played in report.rounds:  # the clairvoyant round 1, played by the server, too
        assert len(played.tricks) == config.hand_size(played.round)
        taken = [sum(t.winner == s for t in played.tricks) for s in range(players)]
        assert taken == [r.tricks for r in played.result.seats]
        totals = [t + r.points for t, r in zip(totals, played.result.seats, strict=True)]
        assert list(played.totals) == totals
    assert tuple(totals) == report.scores == tuple(data["scores"])


# ----------------------------------------------------------------------------- refused


def test_a_tampered_seed_fails_the_seed_check(tmp_path, record):
    refused(tmp_path, {**record, "seed": record["seed"] + "x"}, "seed")


def test_a_wrong_seed_hash_fails_the_seed_check(tmp_path, record):
    message = refused(tmp_path, {**record, "seedHash": seed_hash("another seed")}, "seed")
    assert seed_hash("another seed") in message and seed_hash(record["seed"]) in message  # expected vs got


SALT = "c0ffee" * 5 + "00"


@pytest.fixture(scope="module")
def salted() -> dict[str, Any]:
    return played_record(seed="1234", salt=SALT)


def test_a_salted_record_verifies_against_the_salted_hash(tmp_path, salted):
    assert salted["salt"] == SALT and salted["format"] == 2
    assert salted["seedHash"] == hashlib.sha256(f"{SALT}:1234".encode()).hexdigest() != seed_hash("1234")
    run = replay(tmp_path, salted)
    assert run.returncode == 0, run.stderr
    assert run.stdout.rstrip().splitlines()[-1] == "verified: seed matches seedHash, replay reproduces the recorded result"
    assert f"seed 1234 | salt {SALT}" in run.stdout


def test_a_tampered_salt_fails_the_seed_check(tmp_path, salted):
    other = "0" * len(SALT)
    message = refused(tmp_path, {**salted, "salt": other}, "seed")
    assert seed_hash("1234", other) in message and salted["seedHash"] in message  # expected vs got
    refused(tmp_path, {**salted, "salt": None}, "seed")  # the salt dropped: the bare seed's hash
    refused(tmp_path, {k: v for k, v in salted.items() if k != "salt"}, "seed")
    refused(tmp_path, {**salted, "salt": 7}, "seed")
    assert "record check failed" in refused(tmp_path, {**salted, "salt": "not:hex"}, "seed")


def test_a_tampered_seed_of_a_salted_record_fails_the_seed_check(tmp_path, salted):
    refused(tmp_path, {**salted, "seed": "1235"}, "seed")


def test_a_record_from_before_salts_still_verifies(tmp_path, record):
    old = {**{k: v for k, v in record.items() if k != "salt"}, "format": 1}
    run = replay(tmp_path, old, "--quiet")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "verified: seed matches seedHash, replay reproduces the recorded result\n"
    assert "record check failed" in refused(tmp_path, {**old, "salt": SALT, "seedHash": seed_hash(old["seed"], SALT)}, "record")


def test_a_tampered_move_fails(tmp_path, record):
    data = copy.deepcopy(record)
    first_card = next(i for i, m in enumerate(data["moves"]) if "card" in m)
    data["moves"][first_card]["card"] = "Y13" if data["moves"][first_card]["card"] != "Y13" else "Y12"
    refused(tmp_path, data, "moves")
    # a different legal bid replays, and ends elsewhere
    data = copy.deepcopy(record)
    data["moves"][0]["bid"] = 1 - data["moves"][0]["bid"]  # round 1: bids are 0 or 1
    refused(tmp_path, data, "result")


def test_tampered_scores_fail_the_result_check(tmp_path, record):
    scores = [record["scores"][0] + 10, *record["scores"][1:]]
    message = refused(tmp_path, {**record, "scores": scores}, "result")
    assert str(scores) in message and str(record["scores"]) in message


def test_tampered_winners_and_hands_fail_their_checks(record):
    other = [s for s in range(4) if s not in record["winners"]]
    with pytest.raises(ReplayError, match="winners check failed"):
        verify_record({**record, "winners": other[:1]})
    rounds = copy.deepcopy(record["rounds"])
    rounds[2]["hands"][0], rounds[2]["hands"][1] = rounds[2]["hands"][1], rounds[2]["hands"][0]
    with pytest.raises(ReplayError, match="dealt hands check failed"):
        verify_record({**record, "rounds": rounds})


def test_an_unfinished_or_malformed_record_is_refused(tmp_path, record):
    refused(tmp_path, {**record, "moves": record["moves"][:-3]}, "result")
    refused(tmp_path, {**record, "scores": None}, "result")
    refused(tmp_path, {k: v for k, v in record.items() if k != "config"}, "record")
    refused(tmp_path, [record], "record")
    run = replay(tmp_path, "{not json")
    assert run.returncode != 0 and "cannot read a record from" in run.stderr
    missing = subprocess.run(
        [sys.executable, "-m", "wizard_arena", "replay", str(tmp_path / "missing.json")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert missing.returncode != 0 and "no file" in missing.stderr


def test_a_match_id_is_fetched_and_its_published_seed_hash_asked_for_when_the_record_lacks_it(record):
    bare = {k: v for k, v in record.items() if k != "seedHash"}
    asked = []

    def server(method: str, path: str) -> Answer:
        asked.append(path)
        if path == "/graphql":
            return 200, {"data": {"match": {"seedHash": record["seedHash"]}}}, {}
        if path == "/api/matches/m-1/record":
            return 200, bare, {}
        return 409, {"error": {"code": "MATCH_NOT_ACTIVE", "message": "match m-2 is ACTIVE"}}, {}

    with http_stub(server) as url:  # an older server: its records have no seedHash
        assert load_record("m-1", url + "/") == record
        assert asked == ["/api/matches/m-1/record", "/graphql"]
        with pytest.raises(ValueError, match=r"the server refused \(MATCH_NOT_ACTIVE\): match m-2 is ACTIVE"):
            load_record("m-2", url)


# ----------------------------------------------------------------------------- render_view


def mid_trick(variants: tuple[str, ...] = ()):
    """A 4-seat match in round 3, one card on the table."""
    state = new_match(MatchConfig.create("WIZARD", 4, variants), "render")
    rng = random.Random(2)
    while not (state.round == 3 and state.phase is Phase.PLAY and state.view(None).current_trick):
        seat = state.awaiting()[0]
        state.apply(seat, rng.choice(state.legal_moves(seat)))
    return state


def test_render_view_shows_a_seat_its_hand_and_a_spectator_no_card():
    state = mid_trick()
    spectator = render_view(state.view(None), NAMES)
    to_act = state.to_act
    assert to_act is not None
    seat_text = render_view(state.view(to_act), NAMES)
    hand = state.view(to_act).hand
    assert hand and f"your hand: {' '.join(hand)}" in seat_text
    assert "round 3/15 | PLAY | dealer " in spectator and f"to act: {seat_table_name(to_act)}" in spectator
    assert "(you)" in seat_text and "(you)" not in spectator
    assert "hand" not in spectator
    held = {c for s in range(4) for c in state.view(s).hand or () if c not in ("W", "J")}
    assert not held & set(re.findall(r"[BGRY]\d+", spectator)), "a spectator saw a card of a live hand"
    played = state.view(None).current_trick[0]
    assert f"trick: {seat_table_name(played.seat)} {played.card}" in spectator
    assert "last trick: " in spectator  # round 2's last, until round 3's first is done
    for s in state.view(None).seats:
        assert re.search(rf"^ *>? *{re.escape(seat_table_name(s.seat))} +{s.score} +{s.bid} +{s.tricks}$", spectator, re.M)


def seat_table_name(seat: int) -> str:
    return seat_labels(4, NAMES)[seat]


def test_render_view_hides_bids_the_viewer_may_not_see():
    state = new_match(MatchConfig.create("WIZARD", 4, ("HIDDEN_BIDS",)), "render-hidden")
    state.apply(0, Move(bid=1))
    text = render_view(state.view(1))
    rows = {m[0]: m[1] for m in re.findall(r"^ *>? *(seat \d)(?: \(you\))? +-?\d+ +(\S+) +\d+$", text, re.M)}
    assert rows == {"seat 0": "?", "seat 1": "-", "seat 2": "-", "seat 3": "-"}
    assert "waiting for: seat 1, seat 2, seat 3" in text
    assert re.search(r"^ *seat 0 \(you\) +0 +1 +0$", render_view(state.view(0)), re.M)  # its own bid


def test_render_view_in_a_clairvoyant_round_shows_the_others_cards():
    state = new_match(MatchConfig.create("WIZARD", 3, ("CLAIRVOYANCE",)), "render-cv")
    view = state.view(0)
    text = render_view(view)
    assert "your hand" not in text
    for s in (1, 2):
        assert f"seat {s}'s hand: {view.seats[s].hand[0]}" in text  # type: ignore[index]


def test_replay_prints_each_round_as_render_round_makes_it(record):
    report = verify_record(record)
    assert report.rounds == tuple(played_rounds(MatchRecord.from_dict(record)))
    text = render_record(report)
    for played in report.rounds:
        assert render_round(played, NAMES) in text
