"""Regression tests for the fixes of a code review, one section per fix:

1. the move deadline restarts when the seat that just moved must act again;
2. a rated match cannot be dealt from a seed of the caller's;
3. createTournament's startsAt: out-of-range times are BAD_INPUT, a time without a zone is UTC;
4. over one WebSocket every operation takes a request from the token's rate bucket;
5. concurrent joinTournament calls are all kept;
6. the bots' open-match sets are written (and the bots told) by the same script as the match;
7. a commit whose expected event id is not the stored one is refused, even at the right version;
8. settle() leaves a tournament match queued while another run holds the tournament's lock;
9. a round's tables are stored all at once, and a table stored earlier wins;
10. a refit waiting in the queue absorbs further asks for the same ruleset.

The in-process parts drive the service's own classes on the test Redis (``asyncio.run``);
the others talk to real ``serve`` processes. Waits are events or bounded polls."""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import httpx
import pytest
import redis
from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import ConnectionError as RedisConnectionError

from service.domain.matches import Caller
from service.domain.services import Services
from service.domain.tournaments import NewTournament
from service.model.live_match import LiveMatch, MatchSettings, MatchStatus, SeatHolder
from service.model.tournament import Table
from service.settings import Settings
from service.store.clock import now_ms
from service.store.keys import (
    DEADLINES,
    UNSETTLED,
    bot_channel,
    bot_matches_key,
    events_key,
    match_key,
    tournament_key,
    tournament_lock_key,
)
from service.store.matches import MatchStore
from service.store.script_line import ScriptLine
from tests.api.arena_client import first_legal, wait_until
from tests.api.ws_client import GraphQLWS
from tests.conftest import stacked
from wizard import MatchConfig, Move, Phase, new_match

T = TypeVar("T")

TIMEOUT_MS = 5_000  # the LiveMatch tests' move timeout
TOURNAMENT = "id status startsAt createdBy entrants { id name }"
CREATE_TOURNAMENT = "mutation($i: CreateTournamentInput!) { createTournament(input: $i) { " + TOURNAMENT + " } }"
GET_TOURNAMENT = "query($t: ID!) { tournament(id: $t) { " + TOURNAMENT + " } }"
JOIN_TOURNAMENT = "mutation($t: ID!) { joinTournament(tournamentId: $t) { id entrants { id } } }"
CANCEL_TOURNAMENT = "mutation($t: ID!) { cancelTournament(tournamentId: $t) { id status } }"
CREATE_MATCH = "mutation($i: CreateMatchInput!) { createMatch(input: $i) { id rated seed } }"
AWAIT = "query($m: ID!) { awaitTurn(matchId: $m, timeoutMs: 10000) { status version legalMoves { bid card trump } } }"


# ---------------------------------------------------------------------- helpers


class Listener:
    """A real pub/sub subscriber to some channels, subscribed (confirmed) when made, so that
    it hears everything published after."""

    def __init__(self, client: redis.Redis, *channels: bytes) -> None:
        self.pubsub = client.pubsub()
        self.pubsub.subscribe(*channels)
        confirmed = 0
        while confirmed < len(channels):
            message = self.pubsub.get_message(timeout=5)
            assert message is not None, "the subscription was not confirmed"
            confirmed += message["type"] == "subscribe"

    def heard(self, count: int) -> list[tuple[bytes, bytes]]:
        """The next ``count`` messages, (channel, data) each."""
        out = []
        while len(out) < count:
            message = self.pubsub.get_message(timeout=5)
            assert message is not None, f"heard {out}, expected {count} messages"
            if message["type"] == "message":
                out.append((message["channel"], message["data"]))
        return out

    def close(self) -> None:
        self.pubsub.close()


def run(work: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(work())  # type: ignore[arg-type]


def keys_like(client: redis.Redis, pattern: str) -> set[bytes]:
    return set(client.scan_iter(match=pattern, count=1000))


def live_match(players: int = 3, ruleset: str = "WIZARD", variants: tuple[str, ...] = (), *,
               first_dealer: int = 0, deals: list[list[str]] | None = None, timeout_ms: int = TIMEOUT_MS,
               tournament: str | None = None, match_id: str | None = None) -> LiveMatch:
    """A new LiveMatch (no seat taken), dealt from a fixed seed."""
    config = MatchConfig.create(ruleset, players, variants, first_dealer=first_dealer, deals=deals)
    settings = MatchSettings(config, timeout_ms, False, deals is not None, "creator", 0, tournament=tournament)
    return LiveMatch.new(match_id or f"rf-{secrets.token_hex(6)}", settings, new_match(config, "review-fixes"))


def first_action(match: LiveMatch) -> tuple[int, int]:
    """(seat, action): the first awaited seat's first legal action."""
    seat = match.awaiting()[0]
    return seat, match.state.legal_actions(seat)[0]


def house(seat: int) -> SeatHolder:
    return SeatHolder("house-random", f"House Random #{seat}", "RANDOM")


@pytest.fixture
def services(redis_url: str) -> Services:
    """The service's parts in this process, on the test Redis. A test uses them inside one
    ``asyncio.run`` and closes them there (its Redis pool belongs to that event loop)."""
    return Services.open(Settings(REDIS_URL=redis_url))


# ---------------------------------------------------------------------- 1. deadlines (pure)


def test_the_deadline_restarts_when_the_trick_winner_leads_the_next_trick():
    # round 2 (dealer 1) is stacked: seat 2 leads, seat 1 plays last and wins with the Wizard
    round2 = stacked([["B3", "B4"], ["W", "B5"], ["B1", "B2"]], trump="G1", dealer=1)
    match = live_match(first_dealer=0, deals=[[], round2])
    for seat in range(3):
        match.join(seat, SeatHolder(f"bot{seat}", f"Bot {seat}"), now_ms=1_000)
    assert match.status is MatchStatus.ACTIVE and match.deadline_ms == 1_000 + TIMEOUT_MS
    now = 2_000
    while match.state.round == 1 or match.state.phase is Phase.BID:  # round 1, then round 2's bids
        seat, action = first_action(match)
        match.play(seat, action, "bot", now)
        now += 100
    assert match.state.round == 2 and match.awaiting() == (2,)

    match.play(2, match.state.action_of(2, Move(card="B1")), "bot", 10_000)
    assert match.deadline_ms == 10_000 + TIMEOUT_MS  # another seat must act: restarted
    match.play(0, match.state.action_of(0, Move(card="B3")), "bot", 11_000)
    assert match.deadline_ms == 11_000 + TIMEOUT_MS
    event = match.play(1, match.state.action_of(1, Move(card="W")), "bot", 12_000)
    assert match.awaiting() == (1,) and match.state.to_act == 1  # seat 1 won the trick and leads again
    # the same seat acts again, anew: its deadline restarts (the bug kept 16_000 from seat 0's move)
    assert match.deadline_ms == 12_000 + TIMEOUT_MS
    assert event["dl"] == 12_000 + TIMEOUT_MS


def test_the_deadline_stays_while_hidden_bids_are_collected_and_restarts_for_the_last_bidder_who_leads():
    match = live_match(variants=("HIDDEN_BIDS",), first_dealer=0)  # round 1: seat 1 leads the trick
    for seat in range(3):
        match.join(seat, SeatHolder(f"bot{seat}", f"Bot {seat}"), now_ms=1_000)
    start = 1_000 + TIMEOUT_MS
    assert match.awaiting() == (0, 1, 2) and match.deadline_ms == start

    match.play(0, match.state.legal_actions(0)[0], "bot", 2_000)
    assert match.awaiting() == (1, 2) and match.deadline_ms == start  # bids still being collected
    event = match.play(2, match.state.legal_actions(2)[0], "bot", 3_000)
    assert match.awaiting() == (1,) and match.deadline_ms == start and event["dl"] == start
    assert match.state.phase is Phase.BID

    event = match.play(1, match.state.legal_actions(1)[0], "bot", 4_000)  # the last bid; seat 1 leads
    assert match.state.phase is Phase.PLAY and match.awaiting() == (1,)
    assert match.deadline_ms == 4_000 + TIMEOUT_MS and event["dl"] == 4_000 + TIMEOUT_MS


def test_the_deadline_restarts_when_the_last_hidden_bidder_is_not_the_one_to_lead():
    match = live_match(variants=("HIDDEN_BIDS",), first_dealer=0)
    for seat in range(3):
        match.join(seat, SeatHolder(f"bot{seat}", f"Bot {seat}"), now_ms=1_000)
    match.play(1, match.state.legal_actions(1)[0], "bot", 2_000)
    match.play(0, match.state.legal_actions(0)[0], "bot", 3_000)
    assert match.deadline_ms == 1_000 + TIMEOUT_MS
    match.play(2, match.state.legal_actions(2)[0], "bot", 4_000)
    assert match.awaiting() == (1,) and match.deadline_ms == 4_000 + TIMEOUT_MS


# ---------------------------------------------------------------------- 2. rated matches and seeds


def test_a_rated_match_with_a_seed_of_the_callers_is_refused_and_nothing_is_created(api, redis_client):
    token, _ = api.register()
    before = keys_like(redis_client, "{m:*}:match")
    body = api.gql(CREATE_MATCH, {"i": {"players": 3, "rated": True, "seed": "known-to-me"}}, token)
    assert body.get("errors") and body.get("data") is None, body
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT", body
    assert "seed" in body["errors"][0]["message"]
    assert keys_like(redis_client, "{m:*}:match") == before  # nothing was created
    # either alone is fine: a rated match the server deals, an unrated one from a given seed
    rated = api.data(CREATE_MATCH, {"i": {"players": 3, "rated": True}}, token)["createMatch"]
    seeded = api.data(CREATE_MATCH, {"i": {"players": 3, "seed": "known-to-me"}}, token)["createMatch"]
    assert rated["rated"] is True and seeded["rated"] is False


# ---------------------------------------------------------------------- 3. startsAt


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
    before = keys_like(redis_client, "{tn:*}:tournament")
    body = api.gql(CREATE_TOURNAMENT, {"i": {**base, "startsAt": starts}}, token)
    assert body.get("errors") and body.get("data") is None, body
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT", body
    assert "Traceback" not in json.dumps(body)
    assert keys_like(redis_client, "{tn:*}:tournament") == before  # no tournament was stored


def test_a_start_time_without_a_zone_is_taken_as_utc(api_west_of_utc):
    api = api_west_of_utc
    token, _ = api.register()
    starts = (datetime.now(UTC) + timedelta(hours=2)).replace(microsecond=0)
    naive = starts.replace(tzinfo=None).isoformat()  # "YYYY-MM-DDTHH:MM:SS", no zone
    t = api.data(CREATE_TOURNAMENT, {"i": {"name": "naive start", "format": "ROUND_ROBIN", "rounds": 1,
                                           "playersPerMatch": 3, "houseBots": ["RANDOM"] * 3,
                                           "startsAt": naive}}, token)["createTournament"]
    try:
        assert datetime.fromisoformat(t["startsAt"]) == starts, (naive, t["startsAt"])
    finally:
        api.data(CANCEL_TOURNAMENT, {"t": t["id"]}, token)


# ---------------------------------------------------------------------- 4. rate limit over a WebSocket


@pytest.fixture(scope="module")
def rate_limited_api(start_api: Any) -> Any:
    """Three requests per token, then one more about every 100 s."""
    return start_api(ARENA_RATE_LIMIT_BURST="3", ARENA_RATE_LIMIT_PER_SECOND="0.01")


def _error_codes(ws: GraphQLWS, op: str) -> list[str | None]:
    """The error codes an operation answered with (an ``error`` message, or a result with errors)."""
    message = ws.message(op)
    if message["type"] == "error":
        errors = message["payload"]
    else:
        assert message["type"] == "next", message
        errors = message["payload"].get("errors") or []
    return [(e.get("extensions") or {}).get("code") for e in errors]


def test_every_operation_over_one_websocket_takes_a_request_from_the_tokens_bucket(rate_limited_api):
    api = rate_limited_api
    token, bot_id = api.register()  # registerBot needs no token: the bucket is still full
    with GraphQLWS(api.ws_url) as ws:
        ws.init(token)  # connection_init authenticates: request 1 of 3
        for _ in range(2):  # requests 2 and 3
            op = ws.subscribe("query { me { id } }")
            assert ws.data(op, "me") == {"id": bot_id}
        op = ws.subscribe("query { me { id } }")
        assert _error_codes(ws, op) == ["RATE_LIMITED"]
        op = ws.subscribe("subscription { myTurns { id } }")
        assert _error_codes(ws, op) == ["RATE_LIMITED"]


# ---------------------------------------------------------------------- 5. concurrent joins


def test_bots_joining_a_tournament_at_the_same_instant_are_all_kept_each_once(api):
    creator, _ = api.register()
    starts = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    t = api.data(CREATE_TOURNAMENT, {"i": {"name": "crowd", "format": "ROUND_ROBIN", "rounds": 1,
                                           "playersPerMatch": 4, "startsAt": starts}}, creator)["createTournament"]
    bots = [api.register() for _ in range(8)]
    barrier = threading.Barrier(len(bots))
    answers: list[Any] = [None] * len(bots)

    def join(index: int, token: str) -> None:
        with httpx.Client(base_url=api.base, timeout=30) as client:
            barrier.wait(timeout=10)
            response = client.post("/graphql", json={"query": JOIN_TOURNAMENT, "variables": {"t": t["id"]}},
                                   headers={"Authorization": f"Bearer {token}"})
            answers[index] = response.json()

    threads = [threading.Thread(target=join, args=(i, token)) for i, (token, _) in enumerate(bots)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    try:
        for answer in answers:
            assert answer is not None and not answer.get("errors"), answer
        entrants = [e["id"] for e in api.data(GET_TOURNAMENT, {"t": t["id"]})["tournament"]["entrants"]]
        assert sorted(entrants) == sorted(bot_id for _, bot_id in bots)  # all of them, each once
    finally:
        api.data(CANCEL_TOURNAMENT, {"t": t["id"]}, creator)


# ---------------------------------------------------------------------- 6. open-match sets and inboxes


def test_join_match_notes_the_match_for_the_bot_and_its_end_removes_it(api, redis_client):
    token, bot_id = api.register()
    match_id = api.create_match(token, players=3, ruleset="WIZARD_JUNIOR", moveTimeoutMs=60_000)
    api.add_house_bot(token, match_id, "RANDOM")
    api.add_house_bot(token, match_id, "RANDOM")
    listener = Listener(redis_client, bot_channel(bot_id))
    api.join(token, match_id)
    assert redis_client.sismember(bot_matches_key(bot_id), match_id)
    assert listener.heard(1) == [(bot_channel(bot_id), match_id.encode())]  # the bot is told
    listener.close()

    while True:  # play the bot's moves until the match is over
        turn = api.data(AWAIT, {"m": match_id}, token)["awaitTurn"]
        if turn is None:
            break
        body = api.submit(token, match_id, first_legal(turn), turn["version"])
        assert not body.get("errors") or body["errors"][0]["extensions"]["code"] == "STALE_VERSION", body
    wait_until(lambda: api.match(match_id)["status"] == "FINISHED", "the match to finish")
    # read together: once the match is stored as ended, it is no longer among the bot's open matches
    with redis_client.pipeline(transaction=True) as pipe:
        pipe.hget(match_key(match_id), "live")
        pipe.sismember(bot_matches_key(bot_id), match_id)
        live, member = pipe.execute()
    assert json.loads(live)["status"] == "FINISHED" and not member


def test_commits_keep_the_bots_open_matches_in_the_same_script(redis_url, redis_client):
    """MatchStore alone (no MatchService bookkeeping around it) keeps the sets and tells the bots."""
    alice, bob = f"rf-a-{secrets.token_hex(4)}", f"rf-b-{secrets.token_hex(4)}"
    match = live_match(ruleset="WIZARD_JUNIOR")
    listener = Listener(redis_client, bot_channel(alice), bot_channel(bob))

    async def work() -> None:
        client = AsyncRedis.from_url(redis_url)
        scripts = ScriptLine(client)
        store = MatchStore(client, scripts)
        try:
            assert await store.create(match)
            for seat, holder in enumerate([SeatHolder(alice, "Alice"), house(1), SeatHolder(bob, "Bob")]):
                event = match.join(seat, holder, now_ms())
                assert await store.commit(match, event)
                if holder.house is None:  # a registered bot's join: noted, and the bot told
                    assert await client.sismember(bot_matches_key(holder.id), match.id)
                    assert listener.heard(1) == [(bot_channel(holder.id), match.id.encode())]
            listener.close()
            assert not await client.sismember(bot_matches_key("house-random"), match.id)
            while True:
                seat, action = first_action(match)
                event = match.play(seat, action, "bot", now_ms())
                ending = match.ended
                assert await store.commit(match, event)
                if ending:
                    break
                assert await client.sismember(bot_matches_key(alice), match.id)
                assert await client.sismember(bot_matches_key(bob), match.id)
            assert match.status is MatchStatus.FINISHED
            assert not await client.sismember(bot_matches_key(alice), match.id)
            assert not await client.sismember(bot_matches_key(bob), match.id)
            await client.zrem(UNSETTLED, match.id)  # nobody settles this test's match
        finally:
            await scripts.close()
            await client.aclose()

    run(work)


class AnswerLost(ScriptLine):
    """Runs each script, then fails as a connection lost before the answer arrived would."""

    async def run(self, script: Any, keys: list[Any], args: list[Any]) -> Any:
        await super().run(script, keys, args)
        raise RedisConnectionError("the connection was lost before the answer (injected)")


class NeverSent(ScriptLine):
    """Fails each script as a connection lost before the command reached Redis would."""

    async def run(self, script: Any, keys: list[Any], args: list[Any]) -> Any:
        raise RedisConnectionError("the connection was lost before the command was sent (injected)")


def test_a_commit_whose_answer_was_lost_is_found_applied(redis_url, redis_client):
    """A connection that fails with a commit in flight leaves it unknown whether it ran:
    the store then reads the match's latest event, and a commit that ran is a success."""
    match = live_match(ruleset="WIZARD_JUNIOR")

    async def work() -> None:
        client = AsyncRedis.from_url(redis_url)
        scripts, lossy, dead = ScriptLine(client), AnswerLost(client), NeverSent(client)
        store = MatchStore(client, scripts)
        try:
            assert await store.create(match)
            for seat, holder in enumerate([house(0), house(1), house(2)]):
                assert await MatchStore(client, lossy).commit(match, match.join(seat, holder, now_ms()))
                version, event_id = redis_client.hmget(match_key(match.id), "version", "eid")
                assert int(version) == match.version and event_id == match.event_id
            # never sent: an error, and nothing changed
            before = redis_client.hmget(match_key(match.id), "version", "eid")
            seat, action = first_action(match)
            trial = match.copy()
            trial_event = trial.play(seat, action, "bot", now_ms())
            with pytest.raises(RedisConnectionError):
                await MatchStore(client, dead).commit(trial, trial_event)
            assert redis_client.hmget(match_key(match.id), "version", "eid") == before
            # another change won meanwhile, making the version this one would have: not ours
            winner = match.copy()
            assert await store.commit(winner, winner.play(seat, action, "timeout", now_ms()))
            assert winner.version == trial.version
            with pytest.raises(RedisConnectionError):
                await MatchStore(client, dead).commit(trial, trial_event)
        finally:
            await client.execute_command("DEL", match_key(match.id), events_key(match.id))
            await client.zrem(DEADLINES, match.id)
            for line in (scripts, lossy, dead):
                await line.close()
            await client.aclose()

    run(work)


def test_a_match_created_with_seats_taken_is_noted_for_its_bots(redis_url, redis_client):
    """CREATE_MATCH (a tournament's match is created with every seat taken)."""
    alice, bob = f"rf-a-{secrets.token_hex(4)}", f"rf-b-{secrets.token_hex(4)}"
    match = live_match(ruleset="WIZARD_JUNIOR", timeout_ms=600_000)
    holders = [SeatHolder(alice, "Alice"), house(1), SeatHolder(bob, "Bob")]
    events = [match.join(seat, holder, now_ms()) for seat, holder in enumerate(holders)]

    async def work() -> None:
        client = AsyncRedis.from_url(redis_url)
        scripts = ScriptLine(client)
        try:
            assert await MatchStore(client, scripts).create(match, events)
        finally:
            await scripts.close()
            await client.aclose()

    listener = Listener(redis_client, bot_channel(alice), bot_channel(bob))
    run(work)
    try:
        assert sorted(listener.heard(2)) == sorted((bot_channel(b), match.id.encode()) for b in (alice, bob))
        listener.close()
        for bot_id in (alice, bob):
            assert redis_client.smembers(bot_matches_key(bot_id)) == {match.id.encode()}
        assert not redis_client.sismember(bot_matches_key("house-random"), match.id)
    finally:
        redis_client.zrem(DEADLINES, match.id)  # nobody will play it


def test_a_tournament_match_is_in_each_seated_bots_open_matches_and_the_bots_are_told(api, services, redis_client):
    bots = [api.register() for _ in range(3)]
    creator = Caller(bots[0][1], "creator")
    listener = Listener(redis_client, *(bot_channel(bot_id) for _, bot_id in bots))

    async def work() -> str:
        tournaments = services.tournaments
        spec = NewTournament("seated", "WIZARD_JUNIOR", players_per_match=3, rounds=1, move_timeout_ms=600_000,
                             rated=False, bots=[bot_id for _, bot_id in bots])
        t = await tournaments.create(creator, spec)
        try:
            assert await tournaments.advance(t.id)  # starts it: its only table is created
            match_id = f"{t.id}-r1t0-0"
            stored = await services.matches.matches.load(match_id)
            assert stored is not None and stored.match.status is MatchStatus.ACTIVE
            assert stored.match.bot_ids() == {bot_id for _, bot_id in bots}
            for _, bot_id in bots:
                assert await services.redis.sismember(bot_matches_key(bot_id), match_id)
            told = sorted(listener.heard(3))
            assert told == sorted((bot_channel(bot_id), match_id.encode()) for _, bot_id in bots)
            listener.close()
            # tidy up: the match aborted (which ends it for every bot), the tournament cancelled
            match = stored.match
            assert await services.matches.matches.commit(match, match.abort("test over"))
            for _, bot_id in bots:
                assert not await services.redis.sismember(bot_matches_key(bot_id), match_id)
            return match_id
        finally:
            await tournaments.cancel(creator, t.id)
            await services.close()

    match_id = run(work)
    redis_client.zrem(UNSETTLED, match_id)


# ---------------------------------------------------------------------- 7. the event id guard


def test_a_commit_with_a_stale_event_id_is_refused_even_at_the_right_version(api, redis_url, redis_client):
    tokens = [api.register()[0] for _ in range(3)]
    match_id = api.create_match(tokens[0], players=3, moveTimeoutMs=600_000)
    for token in tokens:  # registered bots only: nothing moves unless this test moves it
        api.join(token, match_id)

    def stored() -> tuple[Any, ...]:
        return (*redis_client.hmget(match_key(match_id), "version", "state", "live", "eid"),
                redis_client.xlen(events_key(match_id)), redis_client.zscore(DEADLINES, match_id))

    async def work() -> None:
        client = AsyncRedis.from_url(redis_url)
        scripts = ScriptLine(client)
        store = MatchStore(client, scripts)
        try:
            loaded = await store.load(match_id)
            assert loaded is not None
            match = loaded.match
            assert match.status is MatchStatus.ACTIVE and match.event_id == loaded.event_id
            before = stored()
            # a snapshot as if from before a failover: same version, but another latest event
            first_event = (await client.xrange(events_key(match_id), count=1))[0][0]
            assert first_event != loaded.event_id
            match.event_id = first_event
            seat, action = first_action(match)
            event = match.play(seat, action, "bot", now_ms())
            assert match.version == int(before[0]) + 1  # the version alone would let it through
            assert await store.commit(match, event) is False
            assert stored() == before  # nothing changed: version, state, event stream, deadline
            # the same move from the stored snapshot commits
            fresh = (await store.load(match_id)).match  # type: ignore[union-attr]
            event = fresh.play(seat, action, "bot", now_ms())
            assert await store.commit(fresh, event) is True
            after = stored()
            assert int(after[0]) == int(before[0]) + 1 and after[4] == before[4] + 1
            assert fresh.event_id == after[3]
        finally:
            await scripts.close()
            await client.aclose()

    try:
        run(work)
    finally:
        redis_client.zrem(DEADLINES, match_id)  # nobody will play it on


# ---------------------------------------------------------------------- 8. settle under another's lock


def test_settle_leaves_a_tournament_match_queued_while_another_run_holds_the_tournament(
    services, redis_client
):
    creator = Caller(f"rf-c-{secrets.token_hex(4)}", "creator")
    lock_key: list[str] = []

    async def work() -> None:
        tournaments = services.tournaments
        spec = NewTournament("locked", "WIZARD_JUNIOR", players_per_match=3, rounds=1,
                             starts_at_ms=now_ms() + 3_600_000, move_timeout_ms=600_000, rated=False,
                             house_bots=["RANDOM", "RANDOM", "RANDOM"])
        t = await tournaments.create(creator, spec)
        assert await services.redis.exists(tournament_key(t.id))
        try:
            # an ended match of the tournament, queued for settlement by its last commit
            match = live_match(ruleset="WIZARD_JUNIOR", tournament=t.id, match_id=f"{t.id}-r1t0-0")
            events = [match.join(seat, house(seat), now_ms()) for seat in range(3)]
            while True:  # all but the last move, in memory
                probe = match.copy()
                seat, action = first_action(probe)
                probe.play(seat, action, "house", now_ms())
                if probe.ended:
                    break
                events.append(match.play(seat, action, "house", now_ms()))
            store = services.matches.matches
            assert await store.create(match, events)
            seat, action = first_action(match)
            assert await store.commit(match, match.play(seat, action, "house", now_ms()))
            assert match.status is MatchStatus.FINISHED
            assert await services.redis.zscore(UNSETTLED, match.id) is not None

            key = tournament_lock_key(t.id)
            lock_key.append(key)
            assert redis_client.set(key, "someone-else", nx=True, px=60_000)
            await services.settlement.settle(match.id)
            assert await services.redis.zscore(UNSETTLED, match.id) is not None  # retried later
            assert redis_client.get(key) == b"someone-else"  # their lock is left alone

            redis_client.delete(key)
            await services.settlement.settle(match.id)  # the retry, once the lock is free
            assert await services.redis.zscore(UNSETTLED, match.id) is None
        finally:
            for key in lock_key:
                redis_client.delete(key)
            await tournaments.cancel(creator, t.id)
            await services.close()

    run(work)


# ---------------------------------------------------------------------- 9. a round is stored whole


def test_tables_are_stored_all_at_once_and_an_earlier_table_wins(services):
    """A round's tables go in by one transaction (a worker dying half way can no longer
    store half a round), and a table stored by an earlier run keeps its seed and seats:
    the caller gets what Redis holds, not what it proposed."""
    tid = f"rf-{secrets.token_hex(4)}"

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

    first, both = run(work)
    assert first["r1t0"].seed == "first"
    assert both["r1t0"] == first["r1t0"], "the table stored first is kept"
    assert both["r1t1"].seed == "other"


# ---------------------------------------------------------------------- 10. refits coalesce


def test_a_refit_waiting_in_the_queue_absorbs_further_asks(services, redis_client):
    """refitRatings (or a tournament's end) while a refit of the same ruleset still waits in
    the queue adds no job: the waiting one reads the history as it is when it runs. What the
    workers' clock queues is what claim_fit_requests answers."""
    ruleset = f"RF_{secrets.token_hex(3).upper()}"  # a name no real refit uses
    queued: list[list[str]] = []

    async def work() -> None:
        ratings = services.ratings
        try:
            await ratings.request_fit(ruleset)
            await ratings.request_fit(ruleset)
            queued.append([r for r in await ratings.ratings.claim_fit_requests() if r == ruleset])  # one job
            await ratings.request_fit(ruleset)  # while it waits in the queue
            queued.append([r for r in await ratings.ratings.claim_fit_requests() if r == ruleset])  # none
            await ratings.fit(ruleset)  # the job starts: it releases the claim
            await ratings.request_fit(ruleset)
            queued.append([r for r in await ratings.ratings.claim_fit_requests() if r == ruleset])  # one more
        finally:
            await services.close()

    run(work)
    assert queued == [[ruleset], [], [ruleset]]
    redis_client.delete(f"ratings:fit-queued:{ruleset}", f"leaderboard:{ruleset}:FITTED")
