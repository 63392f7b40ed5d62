"""Challenges: a bot invites named bots (or anyone) to a match, which is made, every seat taken,
once enough have accepted. Declined, accepted and played to the end; an open challenge; expiry
(on reading, and by the workers' clock, which frees the challenger's creation limit); a bot
that refuses challenges; bad input refused with its code, changing nothing; racing accepts
making one match; the challenge on the challenged bot's turn stream; the REST mirror;
``wizard-arena play --challenges``, which answers them and plays their match; and, on the
service's own classes, a challenge made or cancelled by a process that dies half way,
completed by the workers' clock.

Real API and worker processes on the test Redis; waits are bounded polls of the state."""

from __future__ import annotations

import asyncio
import os
import secrets
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from service.domain.challenges import START_GRACE_MS, NewChallenge
from service.domain.matches import Caller
from service.errors import ChallengeRefused
from service.model.challenge import ChallengeAnswer, ChallengePolicy, ChallengeStatus
from service.store.clock import now_ms
from service.store.keys import CHALLENGES_DUE, bot_invited_channel, bot_waiting_key
from tests.service.arena_client import Process, wait_for_subscription, wait_until
from tests.service.test_rest_api import ok, rest
from tests.service.test_tournaments import Player

CHALLENGE = """
id status open ruleset players variants moveTimeoutMs rated createdAt expiresAt closedAt matchId
challenger { id name } bots { bot { id } answer answeredAt reason } accepted { id }
match { id status seats { bot { id } } }
"""
CREATE = "mutation($i: CreateChallengeInput!) { createChallenge(input: $i) { " + CHALLENGE + " } }"
ACCEPT = "mutation($c: ID!) { acceptChallenge(id: $c) { " + CHALLENGE + " } }"
DECLINE = "mutation($c: ID!, $r: String) { declineChallenge(id: $c, reason: $r) { " + CHALLENGE + " } }"
CANCEL = "mutation($c: ID!) { cancelChallenge(id: $c) { " + CHALLENGE + " } }"
GET = "query($c: ID!) { challenge(id: $c) { " + CHALLENGE + " } }"
LIST = "query($s: ChallengeStatus) { challenges(status: $s) { " + CHALLENGE + " } }"
POLICY = "mutation($p: ChallengePolicy!) { setChallengePolicy(policy: $p) }"
NEXT = """query($t: Int) { nextTurn(timeoutMs: $t, challenges: true) {
  reason match { id } challenge { id status challenger { id } bots { bot { id } answer } }
} }"""


@pytest.fixture(scope="module")
def worker(start_worker: Any) -> Iterator[Any]:
    process = start_worker()
    yield process
    process.stop()


def challenge(api: Any, token: str, bots: list[str], **terms: Any) -> dict[str, Any]:
    terms.setdefault("ruleset", "WIZARD_JUNIOR")
    terms.setdefault("players", 3)
    return api.data(CREATE, {"i": {"bots": bots, **terms}}, token)["createChallenge"]  # type: ignore[no-any-return]


def read(api: Any, challenge_id: str) -> dict[str, Any]:
    return api.data(GET, {"c": challenge_id})["challenge"]  # type: ignore[no-any-return]


def listed(api: Any, token: str, status: str | None = None) -> list[str]:
    return [c["id"] for c in api.data(LIST, {"s": status}, token)["challenges"]]


def involving(api: Any, token: str, bot_id: str) -> list[str]:
    """The bot's challenges it made or is named in (not those open ones of others offered to it)."""
    return [
        c["id"] for c in api.data(LIST, {"s": None}, token)["challenges"]
        if c["challenger"]["id"] == bot_id or bot_id in (r["bot"]["id"] for r in c["bots"])
    ]


def test_a_declined_challenge_then_an_accepted_one_played_to_its_end(api: Any) -> None:
    (a, a_id), (b, b_id), (c, c_id) = api.register(), api.register(), api.register()
    first = challenge(api, a, [b_id, c_id], rated=True)
    assert first["status"] == "OPEN" and not first["open"] and first["rated"]
    assert [r["bot"]["id"] for r in first["bots"]] == [b_id, c_id]
    assert {r["answer"] for r in first["bots"]} == {"PENDING"}
    assert first["id"] in listed(api, a) and first["id"] in listed(api, b, "OPEN")

    declined = api.data(DECLINE, {"c": first["id"], "r": "busy tonight"}, b)["declineChallenge"]
    # a 3-player challenge naming two: one decline leaves too few to fill the seats
    assert declined["status"] == "DECLINED" and declined["closedAt"] and declined["match"] is None
    assert declined["bots"][0]["answer"] == "DECLINED" and declined["bots"][0]["reason"] == "busy tonight"
    assert api.error_code(ACCEPT, {"c": first["id"]}, c) == "CHALLENGE_NOT_OPEN"

    second = challenge(api, a, [b_id, c_id], rated=True)
    after_b = api.data(ACCEPT, {"c": second["id"]}, b)["acceptChallenge"]
    assert after_b["status"] == "OPEN" and [x["id"] for x in after_b["accepted"]] == [b_id]
    accepted = api.data(ACCEPT, {"c": second["id"]}, c)["acceptChallenge"]
    assert accepted["status"] == "ACCEPTED" and accepted["matchId"]
    match = accepted["match"]
    assert match["status"] == "ACTIVE"  # every seat taken: it started by itself
    assert sorted(s["bot"]["id"] for s in match["seats"]) == sorted([a_id, b_id, c_id])

    with Player(api, a) as pa, Player(api, b) as pb, Player(api, c) as pc:
        wait_until(lambda: api.match(match["id"])["status"] == "FINISHED", "the challenge's match to finish", 60)
    assert not (pa.errors or pb.errors or pc.errors)
    assert read(api, second["id"])["match"]["status"] == "FINISHED"


def test_an_open_challenge_is_taken_by_any_bot_whose_policy_does_not_refuse_it(api: Any) -> None:
    (a, _), (b, b_id), (c, c_id), (d, _), (e, _) = (api.register() for _ in range(5))
    api.data(POLICY, {"p": "REFUSE_RATED"}, d)
    made = challenge(api, a, [], rated=True)
    assert made["open"] and made["bots"] == []
    assert made["id"] in listed(api, b, "OPEN")
    assert made["id"] not in listed(api, d)  # not offered to a bot that refuses it
    unrated = challenge(api, a, [])
    assert unrated["id"] in listed(api, d)

    assert api.data(ACCEPT, {"c": made["id"]}, b)["acceptChallenge"]["status"] == "OPEN"
    done = api.data(ACCEPT, {"c": made["id"]}, c)["acceptChallenge"]
    assert done["status"] == "ACCEPTED" and [x["id"] for x in done["accepted"]] == [b_id, c_id]
    assert api.error_code(ACCEPT, {"c": made["id"]}, e) == "CHALLENGE_NOT_OPEN"
    assert made["id"] not in listed(api, e)  # no longer open: not offered
    assert made["id"] in listed(api, b, "ACCEPTED")  # but listed for the bots that answered it


def test_a_challenge_expires_and_the_clock_frees_its_challengers_limit(start_api: Any, worker: Any) -> None:
    api = start_api(ARENA_CHALLENGE_TTL_SECONDS="1", ARENA_WAITING_MATCHES_PER_BOT="1")
    (a, _), (b, b_id), (_, c_id) = api.register(), api.register(), api.register()
    made = challenge(api, a, [b_id, c_id])
    # the same counter as createMatch's: one waiting match or open challenge at a time
    assert api.error_code(CREATE, {"i": {"bots": [b_id, c_id], "players": 3}}, a) == "LIMIT_EXCEEDED"
    assert api.error_code(
        "mutation { createMatch(input: {players: 3}) { id } }", None, a
    ) == "LIMIT_EXCEEDED"
    wait_until(lambda: read(api, made["id"])["status"] == "EXPIRED", "the challenge to expire", 10)
    before = read(api, made["id"])
    assert api.error_code(ACCEPT, {"c": made["id"]}, b) == "CHALLENGE_NOT_OPEN"
    assert api.error_code(CANCEL, {"c": made["id"]}, a) == "CHALLENGE_NOT_OPEN"
    assert read(api, made["id"]) == before
    # the workers' clock writes the expiry, which frees the limit
    again = wait_until(lambda: api.gql(CREATE, {"i": {"bots": [b_id, c_id], "players": 3}}, a).get("data"),
                       "the clock to free the challenger's limit", 20, 0.2, explain=worker.output)
    assert again["createChallenge"]["status"] == "OPEN"


def test_a_bot_that_refuses_challenges_cannot_be_challenged(api: Any) -> None:
    (a, a_id), (b, b_id), (c, c_id) = api.register(), api.register(), api.register()
    me = "{ me { challengePolicy } }"
    assert api.data(me, None, b)["me"]["challengePolicy"] == "ACCEPT_ANY"
    assert api.data(POLICY, {"p": "REFUSE_RATED"}, b)["setChallengePolicy"] == "REFUSE_RATED"
    assert api.data(me, None, b)["me"]["challengePolicy"] == "REFUSE_RATED"
    assert api.data("query($b: ID!) { bot(id: $b) { challengePolicy } }", {"b": b_id}, a)["bot"]["challengePolicy"] is None
    body = api.gql(CREATE, {"i": {"bots": [b_id, c_id], "players": 3, "rated": True}}, a)
    assert body["errors"][0]["extensions"]["code"] == "CHALLENGE_REFUSED"
    assert "REFUSE_RATED" in body["errors"][0]["message"]
    assert involving(api, a, a_id) == [] and involving(api, c, c_id) == []  # nothing made
    assert challenge(api, a, [b_id, c_id])["status"] == "OPEN"  # unrated: fine
    api.data(POLICY, {"p": "REFUSE_ALL"}, b)
    assert api.error_code(CREATE, {"i": {"bots": [b_id, c_id], "players": 3}}, a) == "CHALLENGE_REFUSED"
    assert len(involving(api, a, a_id)) == 1


def test_bad_input_gets_its_code_and_changes_nothing(api: Any) -> None:
    (a, a_id), (b, b_id), (c, c_id), (d, _) = (api.register() for _ in range(4))

    def create_code(**spec: Any) -> str:
        spec = {"bots": [b_id, c_id], "players": 3, **spec}
        return api.error_code(CREATE, {"i": spec}, a)

    assert create_code(bots=[b_id, "no-such-bot"]) == "NOT_FOUND"
    assert create_code(bots=[b_id, a_id]) == "BAD_INPUT"  # challenging yourself
    assert create_code(bots=[b_id, b_id]) == "BAD_INPUT"
    assert create_code(bots=[b_id]) == "BAD_INPUT"  # too few for the seats
    assert create_code(moveTimeoutMs=1) == "BAD_INPUT"  # createMatch's own check
    assert create_code(players=7) == "BAD_INPUT"
    assert api.error_code(CREATE, {"i": {"bots": [b_id, c_id], "players": 3}}) == "UNAUTHENTICATED"
    assert involving(api, a, a_id) == []

    made = challenge(api, a, [b_id, c_id])
    api.data(ACCEPT, {"c": made["id"]}, b)
    before = read(api, made["id"])
    # the same answer again (a retry after a lost reply) answers the challenge as it is
    assert api.data(ACCEPT, {"c": made["id"]}, b)["acceptChallenge"]["status"] == "OPEN"
    assert read(api, made["id"]) == before
    for query, variables, token, code in [
        (DECLINE, {"c": made["id"]}, b, "CHALLENGE_ANSWERED"),  # another answer: the first is final
        (ACCEPT, {"c": made["id"]}, d, "FORBIDDEN"),  # someone else's
        (ACCEPT, {"c": made["id"]}, a, "BAD_INPUT"),  # its own
        (CANCEL, {"c": made["id"]}, c, "FORBIDDEN"),
        (DECLINE, {"c": made["id"], "r": "x" * 201}, c, "BAD_INPUT"),
        (ACCEPT, {"c": "nope"}, c, "NOT_FOUND"),
    ]:
        assert api.error_code(query, variables, token) == code, (query, code)
    assert read(api, made["id"]) == before
    assert api.data(GET, {"c": "nope"})["challenge"] is None

    cancelled = api.data(CANCEL, {"c": made["id"]}, a)["cancelChallenge"]
    assert cancelled["status"] == "CANCELLED"
    assert api.data(CANCEL, {"c": made["id"]}, a)["cancelChallenge"] == cancelled  # idempotent
    assert api.error_code(ACCEPT, {"c": made["id"]}, c) == "CHALLENGE_NOT_OPEN"


def test_racing_accepts_make_one_match(api: Any) -> None:
    (a, a_id), *named = (api.register() for _ in range(6))
    made = challenge(api, a, [bot_id for _, bot_id in named], players=3)
    start = threading.Barrier(len(named))

    def accept(token: str) -> dict[str, Any]:
        start.wait()
        return api.gql(ACCEPT, {"c": made["id"]}, token)

    with ThreadPoolExecutor(len(named)) as pool:
        answers = list(pool.map(accept, [token for token, _ in named]))
    won = [r["data"]["acceptChallenge"] for r in answers if not r.get("errors")]
    lost = [r["errors"][0]["extensions"]["code"] for r in answers if r.get("errors")]
    assert len(won) == 2 and lost == ["CHALLENGE_NOT_OPEN"] * 3, answers
    final = read(api, made["id"])
    assert final["status"] == "ACCEPTED" and len(final["accepted"]) == 2
    seated = sorted(s["bot"]["id"] for s in final["match"]["seats"])
    assert seated == sorted([a_id, *(x["id"] for x in final["accepted"])])
    # the one match: each seated bot has it among its matches, once
    for token, bot_id in named:
        mine = api.data("{ me { matches { edges { node { id } } } } }", None, token)["me"]["matches"]["edges"]
        assert [e["node"]["id"] for e in mine] == ([final["matchId"]] if bot_id in seated else [])


def test_the_challenged_bot_sees_the_challenge_on_its_turn_stream(api: Any, redis_client: Any) -> None:
    (a, a_id), (b, b_id), (c, c_id) = api.register(), api.register(), api.register()
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(api.data, NEXT, {"t": 20_000}, b)
        wait_for_subscription(redis_client, bot_invited_channel(b_id))  # told while it waits, not found pending
        made = challenge(api, a, [b_id, c_id])
        ended = waiting.result(30)["nextTurn"]
    assert ended["reason"] == "CHALLENGE" and ended["match"] is None
    assert ended["challenge"]["id"] == made["id"] and ended["challenge"]["challenger"]["id"] == a_id
    # one pending answers at once; answered, it no longer ends the wait
    assert api.data(NEXT, {"t": 0}, b)["nextTurn"]["reason"] == "CHALLENGE"
    api.data(ACCEPT, {"c": made["id"]}, b)
    assert api.data(NEXT, {"t": 0}, b)["nextTurn"]["reason"] == "TIMED_OUT"
    waited = ok(rest(api, "GET", "/api/turns/next", c, params={"challenges": "true", "timeoutMs": 5_000}))
    assert waited["reason"] == "CHALLENGE" and waited["challenge"]["id"] == made["id"]


def test_the_rest_mirror(api: Any) -> None:
    (a, _), (b, b_id), (c, c_id) = api.register(), api.register(), api.register()
    made = ok(rest(api, "POST", "/api/challenges", a,
                   json={"bots": [b_id, c_id], "ruleset": "WIZARD_JUNIOR", "players": 3}), 201)
    assert made["status"] == "OPEN"
    assert made["id"] in [x["id"] for x in ok(rest(api, "GET", "/api/challenges", b, params={"status": "OPEN"}))]
    assert ok(rest(api, "GET", f"/api/challenges/{made['id']}"))["id"] == made["id"]
    assert rest(api, "GET", "/api/challenges/nope").status_code == 404
    declined = ok(rest(api, "POST", f"/api/challenges/{made['id']}/decline", b, json={"reason": "no"}))
    assert declined["status"] == "DECLINED" and declined["bots"][0]["reason"] == "no"
    refused = rest(api, "POST", f"/api/challenges/{made['id']}/accept", c)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "CHALLENGE_NOT_OPEN"

    other = ok(rest(api, "POST", "/api/challenges", a, json={"bots": [b_id, c_id], "players": 3}), 201)
    assert ok(rest(api, "POST", f"/api/challenges/{other['id']}/cancel", a))["status"] == "CANCELLED"
    assert ok(rest(api, "PUT", "/api/me/challenge-policy", c, json={"policy": "REFUSE_ALL"})) == "REFUSE_ALL"
    assert ok(rest(api, "GET", "/api/me", c))["challengePolicy"] == "REFUSE_ALL"
    answer = rest(api, "POST", "/api/challenges", a, json={"bots": [b_id, c_id], "players": 3})
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "CHALLENGE_REFUSED"

    ok(rest(api, "PUT", "/api/me/challenge-policy", c, json={"policy": "ACCEPT_ANY"}))
    played = ok(rest(api, "POST", "/api/challenges", a, json={"bots": [b_id, c_id], "players": 3}), 201)
    ok(rest(api, "POST", f"/api/challenges/{played['id']}/accept", b))
    accepted = ok(rest(api, "POST", f"/api/challenges/{played['id']}/accept", c))
    assert accepted["status"] == "ACCEPTED" and accepted["matchId"]


@pytest.mark.parametrize("transport", ["ws", "poll"])
def test_wizard_arena_play_answers_challenges_and_plays_their_match(api: Any, tmp_path: Path, transport: str) -> None:
    (a, _), (b, b_id), (c, c_id) = api.register(), api.register(), api.register()
    pending = challenge(api, a, [b_id, c_id])  # waiting when the runners start
    players = [
        Process(["play", "--url", api.base, "--token", token, "--transport", transport, "--challenges", answer],
                dict(os.environ), tmp_path / f"play-{answer}.log")
        for token, answer in ((b, "accept"), (c, "bot"))  # the bot's own rule: sdk.Bot accepts any
    ]
    try:
        accepted = wait_until(lambda: read(api, pending["id"])["status"] == "ACCEPTED" and read(api, pending["id"]),
                              "the runners to accept the pending challenge", 20,
                              explain=lambda: "\n".join(p.output() for p in players))
        with Player(api, a) as pa:
            wait_until(lambda: api.match(accepted["matchId"])["status"] == "FINISHED", "the match played out", 60,
                       explain=lambda: "\n".join(p.output() for p in players))
        assert not pa.errors
        # one made while they run comes on their turn stream and is answered too
        fresh = challenge(api, a, [b_id, c_id])
        wait_until(lambda: read(api, fresh["id"])["status"] == "ACCEPTED", "the runners to accept a new challenge", 20,
                   explain=lambda: "\n".join(p.output() for p in players))
    finally:
        for player in players:
            player.stop()
    assert "challenge" in players[0].output()


def test_a_match_its_accepting_process_did_not_make_is_made_by_the_clock_once(api: Any, services: Any,
                                                                                 redis_client: Any) -> None:
    """The last accept committed, and its process gone before making the match: the workers'
    clock (its sweep, run here) makes it, every seat taken; sweeping again changes nothing."""
    (a, a_id), (b, b_id), (_, c_id) = api.register(), api.register(), api.register()
    made = challenge(api, a, [b_id, c_id])
    api.data(ACCEPT, {"c": made["id"]}, b)

    async def work() -> tuple[bool, bool, int, int, int]:
        try:
            svc = services.challenges
            stored = await svc.store.load(made["id"])
            last = stored.answered(c_id, "c", ChallengeAnswer.ACCEPTED, stored.created_ms + 1, None)
            committed = await svc._commit(stored, last, c_id)  # ... and the process dies here
            unmade = await services.matches.matches.load(last.match_id_to_be) is None
            redis_client.zadd(CHALLENGES_DUE, {made["id"]: 0})  # (past the grace the clock leaves it)
            swept = await svc.sweep()
            version = (await services.matches.get(last.match_id_to_be)).version
            await svc._start(last)  # made again (a second clock, say): nothing changes
            return committed, unmade, swept, version, (await services.matches.get(last.match_id_to_be)).version
        finally:
            await services.close()

    committed, unmade, swept, version, version_after = asyncio.run(work())
    assert committed and unmade and swept >= 1 and version_after == version
    final = read(api, made["id"])
    assert final["status"] == "ACCEPTED" and final["match"]["status"] == "ACTIVE"
    assert sorted(s["bot"]["id"] for s in final["match"]["seats"]) == sorted([a_id, b_id, c_id])
    assert redis_client.zscore(CHALLENGES_DUE, made["id"]) is None  # no longer due


def test_a_policy_set_while_a_challenge_is_made_refuses_it(api: Any, services: Any) -> None:
    """The named bot sets REFUSE_ALL after the challenge's check of its policy and before the
    challenge is stored: the challenge is refused all the same, and withdrawn (none stays OPEN)."""
    (a, a_id), (_, b_id), (_, c_id) = api.register(), api.register(), api.register()

    async def work() -> str:
        try:
            svc = services.challenges
            store_create = svc.store.create

            async def create_as_b_refuses(*args: Any, **kwargs: Any) -> None:
                await svc.bots.set_challenge_policy(b_id, ChallengePolicy.REFUSE_ALL)  # the racing change
                await store_create(*args, **kwargs)

            svc.store.create = create_as_b_refuses
            caller = Caller(a_id, "a")
            with pytest.raises(ChallengeRefused, match="REFUSE_ALL"):
                await svc.create(caller, NewChallenge(bots=[b_id, c_id], ruleset="WIZARD_JUNIOR", players=3))
            return "refused"
        finally:
            await services.close()

    assert asyncio.run(work()) == "refused"
    # withdrawn: not OPEN, so it holds no place of the challenger's limit
    [made] = involving(api, a, a_id)
    assert read(api, made)["status"] == "CANCELLED"


def test_a_challenge_the_clock_cannot_handle_is_tried_again_later_not_first_each_round(
        api: Any, services: Any, redis_client: Any) -> None:
    """Left at its old due time, a challenge whose handling fails would stay among the first
    the clock takes each round; enough such would starve the others."""
    (a, _), (_, b_id), (_, c_id) = api.register(), api.register(), api.register()
    made = challenge(api, a, [b_id, c_id])
    redis_client.zadd(CHALLENGES_DUE, {made["id"]: 1})

    async def work() -> None:
        try:
            svc = services.challenges

            async def fails(challenge_id: str) -> None:
                raise RuntimeError("cannot")

            svc._sweep_one = fails
            await svc.sweep(limit=1)  # (it is the first due: due since 1 ms after the epoch)
        finally:
            await services.close()

    asyncio.run(work())
    assert redis_client.zscore(CHALLENGES_DUE, made["id"]) > time.time() * 1000


# ---------------------------------------------------------------------- in this process: a process that dies half way


async def _dies(*args: Any, **kwargs: Any) -> None:
    raise ConnectionError("the process dies here")


def test_a_challenge_its_process_stored_but_did_not_publish_is_published_by_the_clock(
        services: Any, redis_client: Any) -> None:
    """The challenge is stored (in its challenger's slot, counted among its waiting), and its
    process dies before the rest (the open challenges, the bots' lists, the telling): nobody
    is offered it until the clock, due to look soon, publishes it."""
    challenger = Caller(secrets.token_hex(8), "challenger")

    async def work() -> tuple[Any, bool, float, bool, float, bool]:
        svc = services.challenges
        try:
            publish, svc.store.publish = svc.store.publish, _dies
            try:
                with pytest.raises(ConnectionError):
                    await svc.create(challenger, NewChallenge(ruleset="WIZARD_JUNIOR", players=3))
            finally:
                svc.store.publish = publish
            [cid] = await svc.store.of_bot(challenger.bot_id, 10)
            stored = await svc.store.load(cid)
            offered = cid in await svc.store.open_to_anyone(now_ms(), 1000)
            due = await services.redis.zscore(CHALLENGES_DUE, cid)
            redis_client.zadd(CHALLENGES_DUE, {cid: 0})  # (past the grace the clock leaves its process)
            await svc.sweep()
            offered_after = cid in await svc.store.open_to_anyone(now_ms(), 1000)
            counted = await services.redis.zscore(bot_waiting_key(challenger.bot_id), cid) is not None
            return stored, offered, due, offered_after, await services.redis.zscore(CHALLENGES_DUE, cid), counted
        finally:
            await services.close()

    stored, offered, due, offered_after, due_after, counted = asyncio.run(work())
    assert stored.status is ChallengeStatus.OPEN and counted
    assert not offered and due <= stored.created_ms + START_GRACE_MS  # not offered yet, and due soon
    assert offered_after and due_after == stored.expires_ms  # offered, and due at its expiry


def test_a_cancel_its_process_stored_but_did_not_publish_is_published_by_the_clock(
        services: Any, redis_client: Any) -> None:
    """The cancel is stored (the challenger's limit freed with it, in the same script), and its
    process dies before the rest: the challenge is due soon, and the clock takes it off the
    open challenges and off those due."""
    challenger = Caller(secrets.token_hex(8), "challenger")

    async def work() -> tuple[Any, bool, bool, float, bool, float | None]:
        svc = services.challenges
        try:
            made = await svc.create(challenger, NewChallenge(ruleset="WIZARD_JUNIOR", players=3))
            publish, svc.store.publish = svc.store.publish, _dies
            try:
                with pytest.raises(ConnectionError):
                    await svc.cancel(challenger, made.id)
            finally:
                svc.store.publish = publish
            stored = await svc.store.load(made.id)
            counted = await services.redis.zscore(bot_waiting_key(challenger.bot_id), made.id) is not None
            offered = made.id in await svc.store.open_to_anyone(now_ms(), 1000)
            due = await services.redis.zscore(CHALLENGES_DUE, made.id)
            redis_client.zadd(CHALLENGES_DUE, {made.id: 0})  # (past the grace the clock leaves its process)
            await svc.sweep()
            offered_after = made.id in await svc.store.open_to_anyone(now_ms(), 1000)
            return stored, counted, offered, due, offered_after, await services.redis.zscore(CHALLENGES_DUE, made.id)
        finally:
            await services.close()

    stored, counted, offered, due, offered_after, due_after = asyncio.run(work())
    assert stored.status is ChallengeStatus.CANCELLED and not counted
    assert offered and due <= now_ms() + START_GRACE_MS  # still offered (readers see it CANCELLED), due soon
    assert not offered_after and due_after is None


def test_of_commits_racing_from_one_version_one_applies(services: Any) -> None:
    """Five bots' accepts of one open challenge, each decided on the same version read and
    committed at once: the compare-and-set (in the challenger's slot) lets one through."""
    challenger = Caller(secrets.token_hex(8), "challenger")

    async def work() -> tuple[list[bool], Any]:
        svc = services.challenges
        try:
            made = await svc.create(challenger, NewChallenge(ruleset="WIZARD_JUNIOR", players=3))
            read = await svc.store.load(made.id)
            answers = [read.answered(secrets.token_hex(8), f"bot {n}", ChallengeAnswer.ACCEPTED, now_ms(), None)
                       for n in range(5)]
            applied = await asyncio.gather(*(svc._commit(read, after, after.accepted[0]) for after in answers))
            return list(applied), await svc.store.load(made.id)
        finally:
            await services.close()

    applied, stored = asyncio.run(work())
    assert applied.count(True) == 1 and stored.version == 2 and len(stored.accepted) == 1


def test_waiting_entries_past_their_time_hold_no_place_of_the_challengers_limit(services: Any, redis_client: Any) -> None:
    """The challenger's waiting set is full, but only of entries past their time (a challenge
    expired, a match past its abort, whose step that was to drop them died): a new challenge
    is made, and they are gone."""
    challenger = Caller(secrets.token_hex(8), "challenger")
    waiting = bot_waiting_key(challenger.bot_id)
    limit = services.settings.waiting_matches_per_bot
    redis_client.zadd(waiting, {f"gone-{n}": now_ms() - 1_000 for n in range(limit)})

    async def work() -> Any:
        try:
            return await services.challenges.create(challenger, NewChallenge(ruleset="WIZARD_JUNIOR", players=3))
        finally:
            await services.close()

    made = asyncio.run(work())
    assert [m.decode() for m in redis_client.zrange(waiting, 0, -1)] == [made.id]
