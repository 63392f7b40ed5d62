"""Each bot's open matches (the set that myTurns, awaitTurn without a match and the cap on
unfinished matches read) are kept by MatchStore around the scripts that store the match
(the set is in the bot's slot, not the match's), whose script tells the bot on its channel:
a join notes the match and its end removes it, whether through the API or MatchStore alone
(no MatchService bookkeeping around it); a match created with its seats taken (a
tournament's) is noted for each of its registered bots. House bots have no such set. What
a crash between those steps leaves is tests/service/test_match_homes.py's.

The in-process tests drive the service's own classes on the test Redis (``asyncio.run``);
the others talk to a real ``serve`` process. Waits are events or bounded polls."""

from __future__ import annotations

import asyncio
import json
import secrets

import redis

from service.domain.matches import Caller
from service.domain.tournaments import NewTournament
from service.model.live_match import MatchStatus, SeatHolder
from service.store.clock import now_ms
from service.store.keys import bot_channel, bot_matches_key, match_home_key, match_key
from service.store.matches import MatchStore
from service.store.redis_client import open_async
from service.store.script_line import ScriptLine
from tests.service.arena_client import first_legal, wait_until
from tests.service.conftest import first_action, house, live_match
from tests.service.test_tournaments import consenting

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


# ---------------------------------------------------------------------- tests


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
    # dropped by the step after the commit that ended it (another slot than the match's)
    wait_until(lambda: not redis_client.sismember(bot_matches_key(bot_id), match_id), "the match to leave the set")
    assert json.loads(redis_client.hget(match_key(match_id), "live"))["status"] == "FINISHED"


def test_commits_keep_the_bots_open_matches_in_the_same_script(redis_url, redis_client):
    """MatchStore alone (no MatchService bookkeeping around it) keeps the sets and tells the bots."""
    alice, bob = f"om-a-{secrets.token_hex(4)}", f"om-b-{secrets.token_hex(4)}"
    match = live_match(ruleset="WIZARD_JUNIOR")
    listener = Listener(redis_client, bot_channel(alice), bot_channel(bob))

    async def work() -> None:
        client = open_async(redis_url, max_connections=16, timeout=10, client_name="test")
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
            await client.zrem(match_home_key(match.id, "unsettled"), match.id)  # nobody settles this test's match
        finally:
            await scripts.close()
            await client.aclose()

    asyncio.run(work())


def test_a_match_created_with_seats_taken_is_noted_for_its_bots(redis_url, redis_client):
    """CREATE_MATCH (a tournament's match is created with every seat taken)."""
    alice, bob = f"om-a-{secrets.token_hex(4)}", f"om-b-{secrets.token_hex(4)}"
    match = live_match(ruleset="WIZARD_JUNIOR", timeout_ms=600_000)
    holders = [SeatHolder(alice, "Alice"), house(1), SeatHolder(bob, "Bob")]
    events = [match.join(seat, holder, now_ms()) for seat, holder in enumerate(holders)]

    async def work() -> None:
        client = open_async(redis_url, max_connections=16, timeout=10, client_name="test")
        scripts = ScriptLine(client)
        try:
            assert await MatchStore(client, scripts).create(match, events)
        finally:
            await scripts.close()
            await client.aclose()

    listener = Listener(redis_client, bot_channel(alice), bot_channel(bob))
    asyncio.run(work())
    try:
        assert sorted(listener.heard(2)) == sorted((bot_channel(b), match.id.encode()) for b in (alice, bob))
        listener.close()
        for bot_id in (alice, bob):
            assert redis_client.smembers(bot_matches_key(bot_id)) == {match.id.encode()}
        assert not redis_client.sismember(bot_matches_key("house-random"), match.id)
    finally:
        redis_client.zrem(match_home_key(match.id, "deadlines"), match.id)  # nobody will play it


def test_a_tournament_match_is_in_each_seated_bots_open_matches_and_the_bots_are_told(api, services, redis_client):
    bots = [api.register() for _ in range(3)]
    creator = Caller(bots[0][1], "creator")
    for token, _ in bots[1:]:  # the creator names itself and two bots that accept every invitation
        consenting(api, token)
    listener = Listener(redis_client, *(bot_channel(bot_id) for _, bot_id in bots))

    async def work() -> str:
        tournaments = services.tournaments
        spec = NewTournament("seated", "WIZARD_JUNIOR", players_per_match=3, rounds=1, move_timeout_ms=600_000,
                             rated=False, bots=[bot_id for _, bot_id in bots])
        t = await tournaments.create(creator, spec)
        try:
            assert await tournaments.advance(t.id)  # starts it: its only table is created
            match_id = t.match_ids("r1t0")[0]
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

    match_id = asyncio.run(work())
    redis_client.zrem(match_home_key(match_id, "unsettled"), match_id)
