"""Consent to tournaments: a bot named in ``createTournament``'s ``bots`` is invited, and
enters only by its own act (accepting, joining, or its ACCEPT_ALL policy). Invitations
listed, accepted, declined (each idempotent, the opposite answer refused), expired at the
start; the policies; invitations on the bot's stream beside its turns; every cancellation
with its reason; a tournament that can never run refused at creation; the tournament error
codes; house bots named in ``bots`` by their ids, entered at once; ``wizard-arena play
--invitations``, which answers invitations only while it runs; and the reported wall
replayed: another author's bot named in a rated tournament with a short move timeout plays
nothing and its rating does not move.

Real API and worker processes on the test Redis; waits are bounded polls of the state."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.service.arena_client import Process
from tests.service.test_subscriptions import house_match
from tests.service.test_tournaments import CANCEL, JOIN, Player, get, wait_status, wait_until
from tests.service.ws_client import GraphQLWS

TOURNAMENT = "id status entrants { id } cancelledReason"
CREATE = "mutation($i: CreateTournamentInput!) { createTournament(input: $i) { " + TOURNAMENT + " } }"
INVITATION = """
id status reason invitedAt answeredAt invitedBy { id name }
tournament { id name ruleset format rated startsAt playersPerMatch moveTimeoutMs createdBy status }
"""
INVITATIONS = "query($s: InvitationStatus) { invitations(status: $s) { " + INVITATION + " } }"
ACCEPT = "mutation($i: ID!) { acceptInvitation(invitationId: $i) { " + INVITATION + " } }"
DECLINE = "mutation($i: ID!, $r: String) { declineInvitation(invitationId: $i, reason: $r) { " + INVITATION + " } }"
POLICY = "mutation($p: InvitationPolicy!) { setInvitationPolicy(policy: $p) }"
CANCEL_WITH_REASON = "mutation($t: ID!, $r: String) { cancelTournament(tournamentId: $t, reason: $r) { " + TOURNAMENT + " } }"
STREAM = """subscription { myTurnsAndInvitations {
  __typename
  ... on Match { id version legalMoves { bid card trump } }
  ... on Invitation { id status tournament { id name } }
} }"""
RATINGS = "query($b: ID!) { bot(id: $b) { ratings { ruleset rating games } ratingHistory(ruleset: WIZARD_JUNIOR) { matchId } } }"


@pytest.fixture(scope="module")
def worker(start_worker: Any) -> Iterator[Any]:
    process = start_worker()
    yield process
    process.stop()


def later(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat()


def create(api: Any, token: str, **spec: Any) -> dict[str, Any]:
    spec.setdefault("name", f"inv-{os.urandom(3).hex()}")
    spec.setdefault("ruleset", "WIZARD_JUNIOR")
    spec.setdefault("format", "ROUND_ROBIN")
    spec.setdefault("rounds", 1)
    spec.setdefault("playersPerMatch", 3)
    return api.data(CREATE, {"i": spec}, token)["createTournament"]  # type: ignore[no-any-return]


def invitations(api: Any, token: str, status: str | None = None) -> list[dict[str, Any]]:
    return api.data(INVITATIONS, {"s": status}, token)["invitations"]  # type: ignore[no-any-return]


def invitation_to(api: Any, token: str, tid: str) -> dict[str, Any]:
    [found] = [i for i in invitations(api, token) if i["tournament"]["id"] == tid]
    return found


def reason_of(api: Any, tid: str) -> str | None:
    return api.data("query($t: ID!) { tournament(id: $t) { cancelledReason } }", {"t": tid})["tournament"][  # type: ignore[no-any-return]
        "cancelledReason"]


def entrant_ids(api: Any, tid: str) -> list[str]:
    return [e["id"] for e in get(api, tid)["entrants"]]


# ---------------------------------------------------------------------- invited, not entered


def test_named_bots_are_invited_not_entered_and_see_their_invitation(api):
    creator, creator_id = api.register()
    guest, guest_id = api.register()
    stranger, _ = api.register()
    t = create(api, creator, bots=[creator_id, guest_id], startsAt=later(3600), moveTimeoutMs=2000, rated=True)
    assert [e["id"] for e in t["entrants"]] == [creator_id]  # naming itself is the creator's own act
    assert t["cancelledReason"] is None

    [invitation] = invitations(api, guest)
    assert invitation["id"] == f"{t['id']}-{guest_id}" and invitation["status"] == "PENDING"
    assert invitation["invitedBy"]["id"] == creator_id and invitation["answeredAt"] is None
    assert invitation["tournament"] == {
        "id": t["id"], "name": invitation["tournament"]["name"], "ruleset": "WIZARD_JUNIOR", "format": "ROUND_ROBIN",
        "rated": True, "startsAt": invitation["tournament"]["startsAt"], "playersPerMatch": 3, "moveTimeoutMs": 2000,
        "createdBy": creator_id, "status": "SCHEDULED",
    }
    assert invitations(api, guest, "DECLINED") == []
    assert invitations(api, stranger) == [] and invitations(api, creator) == []
    assert api.error_code(INVITATIONS, {}) == "UNAUTHENTICATED"
    # another bot's invitation is nobody else's to answer
    assert api.error_code(ACCEPT, {"i": invitation["id"]}, stranger) == "NOT_FOUND"
    assert api.error_code(ACCEPT, {"i": "nonsense"}, guest) == "NOT_FOUND"
    assert entrant_ids(api, t["id"]) == [creator_id]


def test_accepting_enters_the_bot_and_declining_keeps_it_out_each_once_and_final(api):
    creator, creator_id = api.register()
    (yes, yes_id), (no, no_id) = api.register(), api.register()
    t = create(api, creator, bots=[creator_id, yes_id, no_id], startsAt=later(3600))
    tid = t["id"]

    accepted = api.data(ACCEPT, {"i": f"{tid}-{yes_id}"}, yes)["acceptInvitation"]
    assert accepted["status"] == "ACCEPTED" and accepted["answeredAt"] is not None
    assert api.data(ACCEPT, {"i": f"{tid}-{yes_id}"}, yes)["acceptInvitation"] == accepted  # idempotent
    assert entrant_ids(api, tid) == [creator_id, yes_id]
    assert api.error_code(DECLINE, {"i": f"{tid}-{yes_id}"}, yes) == "INVITATION_ANSWERED"

    declined = api.data(DECLINE, {"i": f"{tid}-{no_id}", "r": "busy that night"}, no)["declineInvitation"]
    assert declined["status"] == "DECLINED" and declined["reason"] == "busy that night"
    assert api.data(DECLINE, {"i": f"{tid}-{no_id}", "r": "again"}, no)["declineInvitation"] == declined
    assert api.error_code(ACCEPT, {"i": f"{tid}-{no_id}"}, no) == "INVITATION_ANSWERED"
    assert entrant_ids(api, tid) == [creator_id, yes_id]
    assert api.error_code(DECLINE, {"i": f"{tid}-{no_id}", "r": "x" * 201}, no) == "BAD_INPUT"

    # joining stays the bot's own act: it enters, and its invitation reads ACCEPTED
    assert api.data(JOIN, {"t": tid}, no)["joinTournament"]["entrants"][-1]["id"] == no_id
    assert invitation_to(api, no, tid)["status"] == "ACCEPTED"
    assert api.data(JOIN, {"t": tid}, no)["joinTournament"]["entrants"] == [{"id": i} for i in (creator_id, yes_id, no_id)]


def test_policies_answer_at_invitation_time_and_show_on_me_only(api):
    creator, _ = api.register()
    (eager, eager_id), (shy, shy_id), (asker, asker_id) = api.register(), api.register(), api.register()
    me = "{ me { invitationPolicy } }"
    assert api.data(me, {}, asker)["me"]["invitationPolicy"] == "ASK"  # the default
    assert api.data(POLICY, {"p": "ACCEPT_ALL"}, eager)["setInvitationPolicy"] == "ACCEPT_ALL"
    assert api.data(POLICY, {"p": "DECLINE_ALL"}, shy)["setInvitationPolicy"] == "DECLINE_ALL"
    assert api.data(me, {}, eager)["me"]["invitationPolicy"] == "ACCEPT_ALL"
    assert api.data("query($b: ID!) { bot(id: $b) { invitationPolicy } }", {"b": eager_id}, creator)["bot"] == {
        "invitationPolicy": None}  # nobody else's business

    t = create(api, creator, bots=[eager_id, shy_id, asker_id], startsAt=later(3600))
    assert [e["id"] for e in t["entrants"]] == [eager_id]
    assert invitation_to(api, eager, t["id"])["status"] == "ACCEPTED"
    refused = invitation_to(api, shy, t["id"])
    assert refused["status"] == "DECLINED" and "DECLINE_ALL" in refused["reason"]
    assert invitation_to(api, asker, t["id"])["status"] == "PENDING"
    # a policy set later answers later invitations only
    api.data(POLICY, {"p": "ACCEPT_ALL"}, asker)
    assert invitation_to(api, asker, t["id"])["status"] == "PENDING"
    later_one = create(api, creator, bots=[asker_id], houseBots=["RANDOM"], startsAt=later(3600))
    assert [e["id"] for e in later_one["entrants"]] == [asker_id, "house-random-0"]
    api.data(POLICY, {"p": "ASK"}, asker)
    assert api.data(me, {}, asker)["me"]["invitationPolicy"] == "ASK"
    assert api.error_code(POLICY, {"p": "ACCEPT_ALL"}) == "UNAUTHENTICATED"


def test_a_house_bot_named_in_bots_by_its_id_enters_at_once(api):
    creator, creator_id = api.register()
    guest, guest_id = api.register()
    assert api.data("query($b: ID!) { bot(id: $b) { id } }", {"b": "house-heuristic"})["bot"] == {"id": "house-heuristic"}
    # starting now: the creator and the house bot are entered at creation, so it can run
    t = create(api, creator, bots=[creator_id, "house-heuristic", guest_id, "house-heuristic"],
               houseBots=["RANDOM"], startsAt=None)
    assert [e["id"] for e in t["entrants"]] == [creator_id, "house-heuristic-0", "house-random-1"]  # named once
    assert invitations(api, guest)[0]["status"] == "PENDING"  # the registered bot is still only invited
    assert api.data(CANCEL, {"t": t["id"]}, creator)["cancelTournament"]["status"] == "CANCELLED"
    # an id that is neither a registered bot nor a house bot's
    assert api.error_code(CREATE, {"i": {"name": "x", "format": "ROUND_ROBIN", "rounds": 1, "startsAt": later(60),
                                         "bots": ["house-nonsense"]}}, creator) == "NOT_FOUND"


# ---------------------------------------------------------------------- the start


def test_an_unanswered_invitation_expires_at_the_start_and_the_bot_is_left_out(api, worker):
    creator, creator_id = api.register()
    late, late_id = api.register()
    t = create(api, creator, bots=[creator_id, late_id], houseBots=["RANDOM"], startsAt=later(1.5),
               moveTimeoutMs=60_000)
    tid = t["id"]
    running = wait_status(api, tid, "RUNNING", timeout=15)
    assert [e["id"] for e in running["entrants"]] == [creator_id, "house-random-0"]
    assert invitation_to(api, late, tid)["status"] == "EXPIRED"
    assert invitations(api, late, "PENDING") == []
    assert api.error_code(ACCEPT, {"i": f"{tid}-{late_id}"}, late) == "TOURNAMENT_NOT_OPEN"
    assert api.error_code(DECLINE, {"i": f"{tid}-{late_id}"}, late) == "TOURNAMENT_NOT_OPEN"
    assert api.error_code(JOIN, {"t": tid}, late) == "TOURNAMENT_NOT_OPEN"
    assert entrant_ids(api, tid) == [creator_id, "house-random-0"]
    cancelled = api.data(CANCEL_WITH_REASON, {"t": tid, "r": "enough for today"}, creator)["cancelTournament"]
    assert cancelled["status"] == "CANCELLED"
    assert cancelled["cancelledReason"] == f"cancelled by its creator ({get_name(api, creator)}): enough for today"
    assert api.error_code(CANCEL, {"t": tid}, creator) == "TOURNAMENT_OVER"


def get_name(api: Any, token: str) -> str:
    return api.data("{ me { name } }", {}, token)["me"]["name"]  # type: ignore[no-any-return]


def test_too_few_entrants_at_the_start_cancels_with_the_reason(api, worker):
    creator, _ = api.register()
    (one, one_id), (two, two_id) = api.register(), api.register()
    t = create(api, creator, bots=[one_id, two_id], startsAt=later(1.5))  # allowed: they may accept in time
    api.data(DECLINE, {"i": f"{t['id']}-{two_id}"}, two)
    cancelled = wait_status(api, t["id"], "CANCELLED", timeout=15)
    assert cancelled["entrants"] == [] and cancelled["matches"] == []
    assert reason_of(api, t["id"]) == (
        "cancelled at the start: it needs at least 2 entrants and had 0 (1 invitations not accepted by the start, 1 declined)"
    )
    assert invitation_to(api, one, t["id"])["status"] == "EXPIRED"
    assert invitation_to(api, two, t["id"])["status"] == "DECLINED"
    # a plain cancel states its reason too
    other = create(api, creator, houseBots=["RANDOM", "RANDOM"], startsAt=later(3600))
    assert api.data(CANCEL, {"t": other["id"]}, creator)["cancelTournament"]["status"] == "CANCELLED"
    assert reason_of(api, other["id"]) == f"cancelled by its creator ({get_name(api, creator)})"


def test_a_tournament_that_can_never_run_is_refused_at_creation(api):
    creator, creator_id = api.register()
    guest, guest_id = api.register()
    eager, eager_id = api.register()
    api.data(POLICY, {"p": "ACCEPT_ALL"}, eager)
    # starting now, only those entered at creation can play: one is not enough
    body = api.gql(CREATE, {"i": {"name": "never", "format": "ROUND_ROBIN", "rounds": 1, "bots": [creator_id, guest_id]}},
                   creator)
    [error] = body["errors"]
    assert error["extensions"]["code"] == "TOURNAMENT_CANNOT_RUN"
    assert "later startsAt" in error["message"] and "houseBots" in error["message"]
    assert invitations(api, guest) == []  # nothing was made: no invitation sent
    assert api.error_code(CREATE, {"i": {"name": "empty", "format": "ARENA", "durationMinutes": 1}}, creator) == (
        "TOURNAMENT_CANNOT_RUN")
    # what can run is made: two entered at once (the creator and an ACCEPT_ALL bot), or a later start
    assert create(api, creator, bots=[creator_id, eager_id], startsAt=None)["status"] in ("SCHEDULED", "RUNNING")
    assert create(api, creator, bots=[guest_id], startsAt=later(60))["status"] == "SCHEDULED"


# ---------------------------------------------------------------------- the stream


def test_the_bot_stream_yields_invitations_beside_its_turns(api):
    creator, _ = api.register()
    token, bot_id = api.register()
    waiting = create(api, creator, bots=[bot_id], startsAt=later(3600), name="before")
    with GraphQLWS(api.ws_url) as ws:
        ws.init(token)
        op = ws.subscribe(STREAM)
        first = ws.data(op, "myTurnsAndInvitations")  # pending when it subscribed
        assert first == {"__typename": "Invitation", "id": f"{waiting['id']}-{bot_id}", "status": "PENDING",
                         "tournament": {"id": waiting["id"], "name": "before"}}
        fresh = create(api, creator, bots=[bot_id], startsAt=later(3600), name="after")  # told as it comes
        second = ws.data(op, "myTurnsAndInvitations")
        assert second["__typename"] == "Invitation" and second["tournament"]["id"] == fresh["id"]
        api.data(POLICY, {"p": "ACCEPT_ALL"}, token)
        entered = create(api, creator, bots=[bot_id], startsAt=later(3600), name="entered")
        third = ws.data(op, "myTurnsAndInvitations")  # told even when its policy answered
        assert (third["tournament"]["id"], third["status"]) == (entered["id"], "ACCEPTED")
        match_id = house_match(api, creator, houses=2)
        api.join(token, match_id)
        turn = ws.data(op, "myTurnsAndInvitations")  # and its turns, as myTurns yields them
        assert turn["__typename"] == "Match" and turn["id"] == match_id and turn["legalMoves"]


# ---------------------------------------------------------------------- the reported wall


def test_another_authors_bot_named_in_a_rated_tournament_plays_nothing_unless_it_accepts(api, worker):
    """The report: createTournament(bots: [another author's bot], moveTimeoutMs: 100) put a bot
    that was not even running into a rated tournament, and its rating moved on the server's
    fallback moves."""
    creator, creator_id = api.register()
    _, victim_id = api.register()  # another author's bot, not running
    with Player(api, creator):
        t = create(api, creator, bots=[creator_id, victim_id], houseBots=["RANDOM"], moveTimeoutMs=100, rated=True)
        final = wait_status(api, t["id"], "FINISHED", timeout=40)
    assert victim_id not in [e["id"] for e in final["entrants"]]
    assert final["matches"] and all(
        victim_id not in [s["bot"]["id"] for s in m["seats"] if s["bot"]] for m in final["matches"])
    assert api.data(RATINGS, {"b": victim_id})["bot"] == {"ratings": [], "ratingHistory": []}

    # a bot that accepts plays (and is rated) in the same setting
    consenting, consenting_id = api.register()
    t2 = create(api, creator, bots=[creator_id, consenting_id], houseBots=["RANDOM"], moveTimeoutMs=2000,
                startsAt=later(2))
    api.data(ACCEPT, {"i": f"{t2['id']}-{consenting_id}"}, consenting)
    with Player(api, creator), Player(api, consenting):
        played = wait_status(api, t2["id"], "FINISHED", timeout=40)
    assert consenting_id in [s["bot"]["id"] for m in played["matches"] for s in m["seats"] if s["bot"]]
    wait_until(lambda: api.data(RATINGS, {"b": consenting_id})["bot"]["ratingHistory"], "the accepting bot's rating")


# ---------------------------------------------------------------------- the SDK


def policy_of(api: Any, token: str) -> str:
    return api.data("{ me { invitationPolicy } }", {}, token)["me"]["invitationPolicy"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("transport", ["ws", "poll"])
def test_wizard_arena_play_accepts_invitations_while_it_runs_and_leaves_no_standing_policy(api, tmp_path, transport):
    creator, _ = api.register()
    token, bot_id = api.register()
    pending = create(api, creator, bots=[bot_id], startsAt=later(3600))
    player = Process(["play", "--url", api.base, "--token", token, "--transport", transport, "--invitations", "accept"],
                     dict(os.environ), tmp_path / "play.log")
    try:
        # the invitation pending when it started is accepted, and so is one that comes while it runs
        wait_until(lambda: invitation_to(api, token, pending["id"])["status"] == "ACCEPTED", "the pending one accepted")
        assert bot_id in entrant_ids(api, pending["id"])
        fresh = create(api, creator, bots=[bot_id], startsAt=later(3600))
        assert fresh["entrants"] == []  # invited: the runner answers, not a policy on the server
        wait_until(lambda: invitation_to(api, token, fresh["id"])["status"] == "ACCEPTED", "the new one accepted")
        assert bot_id in entrant_ids(api, fresh["id"])
        assert policy_of(api, token) == "ASK"
    finally:
        player.stop(sig_kill=True)  # as a crash would: nothing is left to say yes for the bot
    assert "invitation to tournament" in player.output()
    after = create(api, creator, bots=[bot_id], startsAt=later(3600))
    assert after["entrants"] == [] and invitation_to(api, token, after["id"])["status"] == "PENDING"


def test_wizard_arena_play_invitations_ask_clears_a_standing_policy(api, tmp_path):
    token, _ = api.register()
    api.data(POLICY, {"p": "ACCEPT_ALL"}, token)  # as an older runner's --invitations accept left it
    player = Process(["play", "--url", api.base, "--token", token, "--invitations", "ask"], dict(os.environ),
                     tmp_path / "play.log")
    try:
        wait_until(lambda: policy_of(api, token) == "ASK", "the standing policy cleared")
    finally:
        player.stop()
