"""A match's keys and its home's share one Cluster slot, so that its scripts stay whole on a
cluster: checked by the slot arithmetic, and by running the scripts on the test Redis (with
``ARENA_TEST_REDIS=cluster``, a real cluster, where a script touching two slots is refused).
Its bots' lists, in their own slots, are kept by steps of their own around the scripts:
stale entries those steps can leave are dropped by their readers.

The tests drive the service's own classes in this process (``services``), on fake bot ids:
what they check is in the stores, not in registration."""

from __future__ import annotations

import asyncio
import secrets

import pytest
from redis.crc import key_slot

from service.domain.listings import MatchFilter
from service.domain.services import Services
from service.model.homes import HOMES, home_of_match, homed_match_id, new_match_id
from service.model.live_match import LiveMatch, MatchStatus, SeatHolder
from service.settings import Settings
from service.store.clock import now_ms
from service.store.keys import (
    bot_key,
    bot_matches_key,
    bot_waiting_key,
    events_key,
    home_key,
    match_home_key,
    match_key,
)
from service.store.matches import WaitingFull
from tests.service.conftest import first_action, house, live_match
from worker.deadlines import PER_HOME, TRUST_SECONDS, Sweeper

HOME_NAMES = ("deadlines", "unsettled", "settle-claims", "live", "webhook-calls")


def run(services: Services, work: object) -> None:
    async def main() -> None:
        try:
            await work  # type: ignore[misc]
        finally:
            await services.close()

    asyncio.run(main())


def test_a_matchs_keys_and_its_homes_keys_share_one_slot():
    ids = [new_match_id() for _ in range(200)] + [homed_match_id(f"t{n}-r1t0-0") for n in range(50)]
    for match_id in ids:
        home = home_of_match(match_id)
        assert home is not None
        slot = key_slot(match_key(match_id).encode())
        assert key_slot(events_key(match_id).encode()) == slot
        assert {key_slot(home_key(home, name).encode()) for name in HOME_NAMES} == {slot}
    # each home one slot of its own, spread evenly over the 16,384
    assert sorted(key_slot(home_key(h, "live").encode()) for h in range(HOMES)) == [h * 256 for h in range(HOMES)]


def bots(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{n}-{secrets.token_hex(4)}" for n in range(count)]


def test_a_whole_match_commits_to_its_home_and_queues_only_its_hooked_bots_calls(services):
    """Create, joins, moves to the end, settlement's steps: every script on the match's slot."""
    alice, bob = bots("home", 2)
    match = live_match(ruleset="WIZARD_JUNIOR", timeout_ms=600_000)
    store = services.matches.matches
    redis = services.redis

    async def work() -> None:
        await redis.hset(bot_key(alice), mapping={"name": "Alice", "webhook": "http://127.0.0.1:9/hook"})
        await redis.hset(bot_key(bob), mapping={"name": "Bob"})
        assert await store.create(match)
        assert await redis.zscore(match_home_key(match.id, "live"), match.id) is not None
        for seat, holder in enumerate([SeatHolder(alice, "Alice"), house(1), SeatHolder(bob, "Bob")]):
            assert await store.commit(match, match.join(seat, holder, now_ms()))
        assert await redis.hget(match_key(match.id), "hooked") == f"|{alice}|".encode()
        assert await redis.zscore(match_home_key(match.id, "deadlines"), match.id) == match.due_ms
        for bot_id in (alice, bob):
            assert await redis.sismember(bot_matches_key(bot_id), match.id)
        while not match.ended:
            seat, action = first_action(match)
            assert await store.commit(match, match.play(seat, action, "bot", now_ms()))
        assert await redis.zscore(match_home_key(match.id, "deadlines"), match.id) is None
        assert await redis.zscore(match_home_key(match.id, "unsettled"), match.id) is not None
        for bot_id in (alice, bob):
            assert not await redis.sismember(bot_matches_key(bot_id), match.id)
        calls = [fields[b"c"].decode() for _, fields in await redis.xrange(match_home_key(match.id, "webhook-calls"))]
        mine = [c for c in calls if c.startswith(f"{match.id}|")]
        assert mine and all(c.endswith(f"|{alice}") for c in mine), mine  # Bob has no webhook
        assert {c.split("|")[3] for c in mine} >= {"start", "end"}
        # settlement's steps, also per home
        assert match.id in await store.claim_unsettled(1000, 30)
        assert match.id not in await store.claim_unsettled(1000, 30)  # claimed already
        [ended] = await store.ended_ms([match.id])
        assert ended is not None
        await store.settled([(match.id, True)])
        assert await redis.zscore(match_home_key(match.id, "unsettled"), match.id) is None
        assert await redis.zscore(match_home_key(match.id, "live"), match.id) is None
        assert await redis.hget(match_home_key(match.id, "settle-claims"), match.id) is None
        assert 0 < await redis.ttl(match_key(match.id)) <= store.grace_seconds

    run(services, work())


def test_set_hooked_marks_and_unmarks_a_bot_of_an_existing_match_only(services):
    alice, bob = bots("hook", 2)
    match = live_match(ruleset="WIZARD_JUNIOR", timeout_ms=600_000)
    store = services.matches.matches

    async def work() -> None:
        assert not await store.set_hooked(match.id, alice, True)  # no such match: nothing made
        assert not await services.redis.exists(match_key(match.id))
        assert await store.create(match)
        for bot_id, on, expected in ((alice, True, f"|{alice}|"), (bob, True, f"|{alice}|{bob}|"),
                                     (alice, True, f"|{alice}|{bob}|"), (alice, False, f"|{bob}|"),
                                     (alice, False, f"|{bob}|"), (bob, False, "|")):
            assert await store.set_hooked(match.id, bot_id, on)
            assert await services.redis.hget(match_key(match.id), "hooked") == expected.encode()
        await services.redis.zrem(match_home_key(match.id, "deadlines"), match.id)
        await services.redis.zrem(match_home_key(match.id, "live"), match.id)

    run(services, work())


def test_a_resync_from_a_stale_read_never_undoes_a_newer_deadline(services):
    """The sweeper resyncs a match it found nothing due in: a commit that lands between that
    read and the write keeps its own deadline (CI once caught the index 5 ms off the match)."""
    alice, bob = bots("resync", 2)
    match = live_match(ruleset="WIZARD_JUNIOR", timeout_ms=600_000)
    store = services.matches.matches
    redis = services.redis
    deadline_of = lambda: redis.zscore(match_home_key(match.id, "deadlines"), match.id)  # noqa: E731

    async def work() -> None:
        assert await store.create(match)
        for seat, holder in enumerate([SeatHolder(alice, "Alice"), house(1), SeatHolder(bob, "Bob")]):
            assert await store.commit(match, match.join(seat, holder, now_ms()))
        stale = await store.load(match.id)
        assert stale is not None
        seat, action = first_action(match)
        assert await store.commit(match, match.play(seat, action, "bot", now_ms() + 50))
        assert match.due_ms != stale.match.due_ms
        fresh_load = store.load

        async def load_before_the_commit(match_id: str):  # the sweeper's read, overtaken
            return stale

        store.load = load_before_the_commit  # type: ignore[method-assign]
        await store.resync_due(match.id)
        assert await deadline_of() == match.due_ms, "the newer commit's deadline stays"
        store.load = fresh_load  # type: ignore[method-assign]
        await redis.zadd(match_home_key(match.id, "deadlines"), {match.id: 1})  # the index wrong
        await store.resync_due(match.id)
        assert await deadline_of() == match.due_ms, "a read of the current version puts it right"
        await redis.delete(match_key(match.id))  # the match left Redis
        await store.resync_due(match.id)
        assert await deadline_of() is None
        await redis.zrem(match_home_key(match.id, "live"), match.id)

    run(services, work())


def test_a_match_created_with_its_seats_taken_queues_its_hooked_bots_start_calls(services):
    alice, bob = bots("seated", 2)
    match = live_match(ruleset="WIZARD_JUNIOR", timeout_ms=600_000)
    events = [match.join(seat, holder, now_ms())
              for seat, holder in enumerate([SeatHolder(alice, "Alice"), house(1), SeatHolder(bob, "Bob")])]
    store = services.matches.matches

    async def work() -> None:
        await services.redis.hset(bot_key(bob), mapping={"name": "Bob", "webhook": "http://127.0.0.1:9/hook"})
        assert await store.create(match, events)
        assert not await store.create(match, events)  # created once: a retried round changes nothing
        assert await services.redis.hget(match_key(match.id), "hooked") == f"|{bob}|".encode()
        stream = match_home_key(match.id, "webhook-calls")
        calls = [f[b"c"].decode() for _, f in await services.redis.xrange(stream) if f[b"c"].startswith(match.id.encode())]
        assert calls and all(c.endswith(f"|{bob}") for c in calls) and "start" in {c.split("|")[3] for c in calls}
        for bot_id in (alice, bob):
            assert await services.redis.sismember(bot_matches_key(bot_id), match.id)
        await store.commit(match, match.abort("test over"))
        await store.settled([(match.id, False)])

    run(services, work())


def test_stale_open_matches_are_dropped_by_the_cap_and_a_pending_join_is_kept(redis_url, database_url):
    """A step that was to drop a match from a bot's open matches died: the entry stays until
    the cap on open matches finds it stale (ended, or not the bot's and no longer joinable)."""
    services = Services.open(Settings(REDIS_URL=redis_url, DATABASE_URL=database_url, open_matches_per_bot=2))
    bot_id = bots("stale", 1)[0]
    ended, taken, waiting = (live_match(ruleset="WIZARD_JUNIOR", timeout_ms=600_000) for _ in range(3))
    store = services.matches.matches

    async def work() -> None:
        for match in (ended, taken, waiting):
            assert await store.create(match)
        assert await store.commit(ended, ended.abort("over"))
        for seat in range(3):
            assert await store.commit(taken, taken.join(seat, house(seat), now_ms()))
        assert taken.status is MatchStatus.ACTIVE
        # as if each were noted for the bot and the steps that drop them never ran
        await services.redis.sadd(bot_matches_key(bot_id), ended.id, taken.id, waiting.id, "no-such-match")
        await services.matches.refuse_if_seated_too_often(bot_id)  # 4 noted, 1 counts: under the cap of 2
        assert await services.matches.bots.open_matches(bot_id) == [waiting.id]  # (its join may be under way)
        for match in (taken, waiting):
            await store.commit(match, match.abort("test over"))
        await store.settled([(m.id, False) for m in (ended, taken, waiting)])

    run(services, work())


def test_a_waiting_place_is_reserved_before_the_match_and_stale_places_are_dropped_at_the_limit(services):
    creator = bots("creator", 1)[0]
    store = services.matches.matches
    key = bot_waiting_key(creator)

    def waiting_match(ttl_ms: int) -> LiveMatch:
        match = live_match(ruleset="WIZARD_JUNIOR", timeout_ms=600_000)
        match.settings.created_by = creator
        match.settings.waiting_until_ms = now_ms() + ttl_ms
        return match

    async def work() -> None:
        first, second = waiting_match(600_000), waiting_match(600_000)
        assert await store.create(first, waiting_limit=2)
        assert await store.create(second, waiting_limit=2)
        with pytest.raises(WaitingFull):
            await store.create(waiting_match(600_000), waiting_limit=2)
        # the first fills up, and the step that drops it from its creator's list never runs
        for seat in range(3):
            assert await store.commit(first, first.join(seat, house(seat), now_ms()))
        await services.redis.zadd(key, {first.id: first.settings.waiting_until_ms})
        third = waiting_match(600_000)
        assert await store.create(third, waiting_limit=2)  # the stale place was found and dropped
        assert {m.decode() for m in await services.redis.zrange(key, 0, -1)} == {second.id, third.id}
        # a place past its time (the match aborted by now, or never made) counts no more
        await services.redis.zadd(key, {"never-made": now_ms() - 1, second.id: now_ms() - 1})
        assert await store.create(waiting_match(600_000), waiting_limit=2)
        assert b"never-made" not in await services.redis.zrange(key, 0, -1)
        await services.redis.delete(key)

    run(services, work())


def ids_in_homes(homes: list[int]) -> list[str]:
    """A new match id in each of ``homes`` (the same home again: another id there)."""
    drawn: dict[int | None, list[str]] = {}
    while any(len(drawn.get(h, [])) < homes.count(h) for h in homes):
        match_id = new_match_id()
        drawn.setdefault(home_of_match(match_id), []).append(match_id)
    return [drawn[h].pop() for h in homes]


def test_the_sweeper_reads_the_homes_earliest_deadlines_in_one_round(services):
    store = services.matches.matches
    spread = ids_in_homes(list(range(40)))  # one match in each of 40 homes
    crowded = ids_in_homes([50] * (PER_HOME + 2))  # more due in one home than one read takes

    async def work() -> None:
        try:  # (other tests' matches are due at today's times, much later than these)
            for n, match_id in enumerate(spread + crowded):
                await services.redis.zadd(match_home_key(match_id, "deadlines"), {match_id: 1000 + n})
            read = await store.earliest_deadlines(list(range(40)) + [50], PER_HOME)
            assert [rows[0] for rows in read[:40]] == [(match_id, 1000 + n) for n, match_id in enumerate(spread)]
            assert read[40] == [(match_id, 1040 + n) for n, match_id in enumerate(crowded[:PER_HOME])]
            # none of these matches exists: the sweep finds nothing to do and takes them out
            sweeper = Sweeper(services)
            assert await sweeper.sweep() <= now_ms()  # the crowded home has more due: at once again
            assert [await services.redis.zscore(match_home_key(m, "deadlines"), m) for m in spread] == [None] * 40
            await sweeper.sweep()
            assert [await services.redis.zscore(match_home_key(m, "deadlines"), m) for m in crowded] == [None] * 5
            # it looks again when a home's trust runs out, soon
            assert await sweeper.sweep() <= now_ms() + 1000 * TRUST_SECONDS
        finally:
            for match_id in spread + crowded:
                await services.redis.zrem(match_home_key(match_id, "deadlines"), match_id)

    run(services, work())


def test_the_live_listing_merges_every_homes_set_newest_first_paged_without_skips_or_repeats(services):
    tournament = f"t-{secrets.token_hex(4)}"  # (a filter only these matches pass)
    base = now_ms()
    matches = []
    for n in range(30):
        match = live_match(ruleset="WIZARD_JUNIOR", timeout_ms=600_000, tournament=tournament)
        match.settings.created_at_ms = base + n // 3  # three at each time: ties ordered by id
        matches.append(match)
    assert len({home_of_match(m.id) for m in matches}) > 10
    expected = [m.id for m in sorted(matches, key=lambda m: (m.settings.created_at_ms, m.id), reverse=True)]

    async def work() -> None:
        store = services.matches.matches
        try:
            for match in matches:
                assert await store.create(match)
            listed: list[str] = []
            after = None
            while True:
                page = await services.listings.match_page(MatchFilter(tournament_id=tournament), 7, after)
                listed += [match.id for _, match in page.entries]
                if not page.has_next:
                    break
                after = page.end_cursor
            assert listed == expected
        finally:
            for match in matches:
                await services.redis.zrem(match_home_key(match.id, "deadlines"), match.id)
            await store.settled([(m.id, True) for m in matches])  # off the live sets, keys expiring

    run(services, work())


def test_a_bot_that_leaves_a_match_leaves_its_open_matches_and_joining_again_notes_it_again(services):
    bot_id = bots("leaver", 1)[0]
    match = live_match(ruleset="WIZARD_JUNIOR", timeout_ms=600_000)
    store = services.matches.matches

    async def work() -> None:
        assert await store.create(match)
        for _ in range(2):
            assert await store.commit(match, match.join(0, SeatHolder(bot_id, "Leaver"), now_ms()))
            assert await services.redis.sismember(bot_matches_key(bot_id), match.id)
            assert await store.commit(match, match.leave(0))
            assert not await services.redis.sismember(bot_matches_key(bot_id), match.id)
        assert await store.commit(match, match.join(0, SeatHolder(bot_id, "Leaver"), now_ms()))
        await store.commit(match, match.abort("test over"))
        assert not await services.redis.sismember(bot_matches_key(bot_id), match.id)
        await store.settled([(match.id, False)])

    run(services, work())
