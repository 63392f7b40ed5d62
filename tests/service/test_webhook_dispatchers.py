"""Webhook dispatchers side by side, on a Redis of their own (no other test's worker reads its
streams; with ``ARENA_TEST_REDIS=cluster``, a cluster of their own): the calls are shared among
the dispatchers and each is made once; calls that a dispatcher read and never finished (it
died) are taken over by another and made; every home's stream is read."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import secrets
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from sdk.bot import HouseBotPlayer
from sdk.webhook import serve_in_thread
from service.domain.services import Services
from service.model.homes import HOMES, home_of_match, new_match_id
from service.model.live_match import MatchSettings, MatchStatus, SeatHolder
from service.settings import Settings
from service.store.clock import now_ms
from service.store.embedded_cluster import EmbeddedCluster
from service.store.keys import WEBHOOK_DISPATCHERS, home_key
from service.store.redis_client import open_sync
from service.store.webhooks import CALL_STREAMS, WebhookCall
from tests.service.conftest import ON_CLUSTER, embedded_redis_url
from wizard import MatchConfig
from worker.webhooks import Dispatcher

SECRET = "whsec_" + "d" * 32


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("dispatchers-redis")
    if not ON_CLUSTER:
        yield from embedded_redis_url(folder)
        return
    cluster = EmbeddedCluster(folder, masters=3, replicas=1)
    try:
        yield cluster.start()
    finally:
        cluster.stop()


class Recorder:
    """A webhook bot (random moves, signatures checked) that remembers every call it got."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.server = serve_in_thread(HouseBotPlayer("random", 7), SECRET, on_call=self._heard)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"

    def _heard(self, call: dict[str, Any]) -> None:
        with self._lock:
            self.calls.append(call)

    def turns(self) -> list[tuple[str, int, int | None]]:
        with self._lock:
            return [(c["match"]["id"], c["version"], c["match"]["mySeat"]) for c in self.calls if c["type"] == "turn"]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def services_on(redis_url: str, **settings_given: Any) -> Services:
    settings = Settings.model_validate({"REDIS_URL": redis_url}).model_copy(update={
        "webhook_allow_private": True, "registrations_per_address_per_hour": 1_000_000, **settings_given,
    })
    return Services.open(settings, role="worker")


async def seated_matches(services: Services, url: str, matches: int, players: int = 3) -> list[str]:
    """``matches`` matches with every seat taken by a bot whose webhook is ``url`` (they start at once)."""
    holders = []
    for _ in range(matches * players):
        _, bot = await services.bots.register(f"dispatched-{os.urandom(4).hex()}", address="tests")
        await services.webhooks.store.set(bot["id"], url, SECRET)
        holders.append(SeatHolder(bot["id"], bot["name"]))
    config = MatchConfig.create("WIZARD", players)
    ids = []
    for m in range(matches):
        match_id = new_match_id()
        await services.matches.create_seated(
            match_id, config, secrets.token_urlsafe(12), MatchSettings(config, 60_000, False, False, holders[0].id,
                                                                        now_ms()),
            holders[m * players:(m + 1) * players],
        )
        ids.append(match_id)
    return ids


async def until_finished(services: Services, match_ids: list[str], seconds: float = 120) -> None:
    async with asyncio.timeout(seconds):
        for match_id in match_ids:
            while (await services.matches.get(match_id)).status is not MatchStatus.FINISHED:
                await asyncio.sleep(0.05)  # (a poll of the match's status: it has no event to await here)


async def dispatch_until_finished(services: Services, consumer: str, match_ids: list[str], **given: Any) -> Dispatcher:
    """One dispatcher, run until ``match_ids`` have finished, then stopped."""
    dispatcher = Dispatcher(services, consumer=consumer, **given)
    stop = asyncio.Event()
    running = asyncio.create_task(dispatcher.run(stop))
    try:
        await until_finished(services, match_ids)
    finally:
        stop.set()
        await running
    return dispatcher


def test_two_dispatchers_share_the_calls_and_make_each_once(own_redis: str) -> None:
    bot = Recorder()

    async def run() -> tuple[list[Dispatcher], list[Any]]:
        services = [services_on(own_redis) for _ in range(3)]
        dispatchers = [Dispatcher(services[1], consumer="one"), Dispatcher(services[2], consumer="two")]
        stop = asyncio.Event()
        for d in dispatchers:
            await d.store.join_dispatchers()
        running = [asyncio.create_task(d.run(stop)) for d in dispatchers]
        try:
            match_ids = await seated_matches(services[0], bot.url, matches=6)
            await until_finished(services[0], match_ids)
            finals = [await services[0].matches.get(m) for m in match_ids]
        finally:
            stop.set()
            await asyncio.gather(*running)
            for s in services:
                await s.close()
        return dispatchers, finals

    try:
        dispatchers, finals = asyncio.run(run())
    finally:
        bot.close()
    assert all(d.moves > 0 for d in dispatchers), [d.moves for d in dispatchers]  # both took calls
    assert all(d.failures == 0 for d in dispatchers)
    assert [m.timeouts for m in finals] == [[0, 0, 0]] * len(finals)  # every move was the bot's own
    turns = bot.turns()
    repeated = [turn for turn, n in collections.Counter(turns).items() if n > 1]
    assert not repeated, repeated  # no turn called twice
    # every move of every match was answered by a webhook call, one call per move
    assert len(turns) == sum(m.state.moves_made for m in finals) == sum(d.moves for d in dispatchers)
    kinds = collections.Counter(c["type"] for c in bot.calls)
    assert kinds["start"] == kinds["end"] == 3 * len(finals)
    assert_each_seat_heard_its_start_first(bot, [m.id for m in finals])


def assert_each_seat_heard_its_start_first(bot: Recorder, match_ids: list[str], players: int = 3) -> None:
    for match_id in match_ids:
        for seat in range(players):
            kinds = [c["type"] for c in bot.calls if c["match"]["id"] == match_id and c["match"]["mySeat"] == seat]
            assert kinds[0] == "start" and kinds.count("start") == 1 and kinds[-1] == "end", (match_id, seat, kinds[:3])


def held_then_dispatched(redis_url: str, bot: Recorder, holding: int, consumer: str,
                         **given: Any) -> tuple[list[WebhookCall], Dispatcher, Any]:
    """A match of ``bot``'s seats whose first ``holding`` calls a dispatcher reads and never
    makes (slow, or dead); then another, ``consumer``, runs until the match has finished:
    the calls held, that dispatcher, and the match at its end."""

    async def run() -> tuple[list[WebhookCall], Dispatcher, Any]:
        services = services_on(redis_url)
        await services.webhooks.store.join_dispatchers()
        try:
            [match_id] = await seated_matches(services, bot.url, matches=1)
            store = services.webhooks.store
            held = [c for stream in CALL_STREAMS for c in await store.next_calls("holder", stream, holding, None)
                    if c.match_id == match_id]
            other = await dispatch_until_finished(services, consumer, [match_id], **given)
            return held, other, await services.matches.get(match_id)
        finally:
            await services.close()

    try:
        return asyncio.run(run())
    finally:
        bot.close()


def test_a_seats_start_goes_before_its_first_turn_whichever_dispatcher_has_it(own_redis: str) -> None:
    """The starts of a match are read by a dispatcher that is slow to make them (here: never);
    another dispatcher gets the first turns, which must not reach a bot before its start: it
    makes each seat's start itself, first, and the slow dispatcher's starts are then not made."""
    bot = Recorder()
    held, other, final = held_then_dispatched(own_redis, bot, 3, "other")  # the three starts, queued first
    assert [c.kind for c in held] == ["start"] * 3
    assert final.timeouts == [0, 0, 0] and other.moves == final.state.moves_made and other.failures == 0
    assert_each_seat_heard_its_start_first(bot, [final.id])


def test_calls_a_dispatcher_read_and_never_finished_are_taken_over_and_made(own_redis: str) -> None:
    """A dispatcher reads the match's first calls (its starts and first turn), then dies before
    it makes them: they stay pending under its name, unacknowledged, and another takes them over."""
    bot = Recorder()
    held, survivor, final = held_then_dispatched(own_redis, bot, 100, "survivor", take_over_after_ms=300)
    assert {c.kind for c in held} == {"start", "turn"}
    assert final.timeouts == [0, 0, 0] and survivor.moves == final.state.moves_made
    assert_each_seat_heard_its_start_first(bot, [final.id])  # (the starts taken over with the turn)
    assert len(bot.turns()) == len(set(bot.turns())) == survivor.moves


def test_a_dispatcher_stopped_with_calls_in_hand_finishes_them_first(own_redis: str, tmp_path: Path) -> None:
    """A worker stopping (a rolling restart) makes the calls it holds and acknowledges them,
    so nothing waits for a take-over; the next dispatcher carries on with the rest."""
    bot = Recorder()

    async def run() -> Any:
        services = services_on(own_redis)
        try:
            [match_id] = await seated_matches(services, bot.url, matches=1)
            first = Dispatcher(services, consumer="first")
            stop = asyncio.Event()
            running = asyncio.create_task(first.run(stop))
            async with asyncio.timeout(30):
                while first.moves < 20:
                    await asyncio.sleep(0.01)  # (the dispatcher's count: no event to await)
            stop.set()
            await running
            pending = 0
            for stream in CALL_STREAMS:
                pending += (await services.redis.xpending(stream, WEBHOOK_DISPATCHERS))["pending"]
            second = await dispatch_until_finished(services, "second", [match_id])
            return pending, first, second, await services.matches.get(match_id)
        finally:
            await services.close()

    try:
        pending, first, second, final = asyncio.run(run())
    finally:
        bot.close()
    assert pending == 0  # the stopped one acknowledged all it had
    assert final.timeouts == [0, 0, 0] and first.moves + second.moves == final.state.moves_made
    assert len(bot.turns()) == len(set(bot.turns()))


class Slow(Recorder):
    """A webhook bot that thinks 0.1 s on every call, counting the calls it holds at once, its
    own and (``shared``) together with other Slow bots'."""

    def __init__(self, shared: dict[str, int]) -> None:
        self.shared = shared
        self.holding = self.most = 0
        super().__init__()

    def _heard(self, call: dict[str, Any]) -> None:
        with self._lock:
            self.holding += 1
            self.shared["holding"] += 1
            self.most = max(self.most, self.holding)
            self.shared["most"] = max(self.shared["most"], self.shared["holding"])
        time.sleep(0.1)  # (the bot's thinking: what keeps its calls open at once)
        with self._lock:
            self.holding -= 1
            self.shared["holding"] -= 1
        super()._heard(call)


def test_calls_are_bounded_per_bot_and_in_all(own_redis: str) -> None:
    """Two slow bots each in three matches at once, on a dispatcher allowed 2 calls per bot and 3
    in all: neither bot ever holds more than 2 calls, the two together never more than 3, and
    the bounds are reached (the calls do go out side by side)."""
    shared = {"holding": 0, "most": 0}
    slow = [Slow(shared), Slow(shared)]
    fast = Recorder()

    async def run() -> Dispatcher:
        services = services_on(own_redis, webhook_concurrency=3, webhook_concurrency_per_bot=2)
        try:
            slow_holders = []
            for bot in slow:
                _, made = await services.bots.register(f"slow-{os.urandom(4).hex()}", address="tests")
                await services.webhooks.store.set(made["id"], bot.url, SECRET)
                slow_holders.append(SeatHolder(made["id"], made["name"]))
            config = MatchConfig.create("WIZARD", 3)
            for m in range(6):
                holders = [slow_holders[m % 2]]
                for _ in range(2):
                    _, made = await services.bots.register(f"fast-{os.urandom(4).hex()}", address="tests")
                    await services.webhooks.store.set(made["id"], fast.url, SECRET)
                    holders.append(SeatHolder(made["id"], made["name"]))
                await services.matches.create_seated(
                    new_match_id(), config, secrets.token_urlsafe(12),
                    MatchSettings(config, 60_000, False, False, holders[0].id, now_ms()), holders,
                )
            dispatcher = Dispatcher(services, consumer="bounded")
            await dispatcher.store.join_dispatchers()
            stop = asyncio.Event()
            running = asyncio.create_task(dispatcher.run(stop))
            try:
                async with asyncio.timeout(60):
                    while min(len(bot.calls) for bot in slow) < 12:
                        await asyncio.sleep(0.05)  # (the bots' counts: no event to await here)
            finally:
                stop.set()
                await running
            return dispatcher
        finally:
            await services.close()

    try:
        dispatcher = asyncio.run(run())
    finally:
        for bot in [*slow, fast]:
            bot.close()
    assert dispatcher.failures == 0
    assert [bot.most for bot in slow] == [2, 2], [bot.most for bot in slow]
    assert shared["most"] == 3


def homed_ids() -> list[str]:
    """A match id in each home, by home."""
    ids: dict[int, str] = {}
    while len(ids) < HOMES:
        match_id = new_match_id()
        ids.setdefault(home_of_match(match_id) or 0, match_id)
    return [ids[home] for home in range(HOMES)]


def queue_a_call_in_every_stream(client: redis.Redis) -> list[str]:
    """One turn call on each home's stream (a match of that home's) and on the old unsharded
    one (a match made before homes): the streams, in that order."""
    calls = [(home_key(home, "webhook-calls"), match_id) for home, match_id in enumerate(homed_ids())]
    calls.append((home_key(None, "webhook-calls"), "0123456789abcdef"))
    for stream, match_id in calls:
        client.xadd(stream, {"c": f"{match_id}|1|0|turn|bot-of-{match_id}"})
    return [stream for stream, _ in calls]


def pending(client: redis.Redis) -> dict[str, int]:
    """The dispatchers' pending calls, by stream."""
    return {stream: int(client.xpending(stream, WEBHOOK_DISPATCHERS)["pending"]) for stream in CALL_STREAMS}


@contextlib.asynccontextmanager
async def listening_dispatcher(redis_url: str, consumer: str) -> AsyncIterator[Dispatcher]:
    """A dispatcher running on ``redis_url``, once it waits on every stream; stopped after."""
    services = services_on(redis_url)
    dispatcher = Dispatcher(services, consumer=consumer)
    stop = asyncio.Event()
    running = asyncio.create_task(dispatcher.run(stop))
    try:
        await dispatcher.listening.wait()
        yield dispatcher
    finally:
        stop.set()
        await running
        await services.close()


async def queued_in_every_stream_and_acknowledged(client: redis.Redis) -> dict[str, int]:
    """A call queued in every stream, then waited for until each stream's group has read and
    acknowledged it: the pending calls by stream then."""
    streams = queue_a_call_in_every_stream(client)
    while any(client.xinfo_groups(stream)[0]["last-delivered-id"] == b"0-0" or pending(client)[stream]
              for stream in streams):
        await asyncio.sleep(0.01)  # (the group's state: nothing to await)
    return pending(client)


def test_every_homes_stream_is_read_taken_over_and_acknowledged_on_its_own(own_redis: str) -> None:
    """A call in each of the 65 streams: reading every stream gets each once (its stream with it), nothing is left for a second read, a dispatcher that never finished
    them loses them to another (XAUTOCLAIM over every stream), and each is acknowledged on the
    stream it came from."""
    client = open_sync(own_redis)

    async def run() -> tuple[list[WebhookCall], list[WebhookCall], list[WebhookCall], dict[str, int]]:
        services = services_on(own_redis)
        store = services.webhooks.store
        try:
            await store.join_dispatchers()
            await store.join_dispatchers()  # (idempotent)
            queue_a_call_in_every_stream(client)
            read = [c for stream in CALL_STREAMS for c in await store.next_calls("gone", stream, 10, None)]
            again = [c for stream in CALL_STREAMS for c in await store.next_calls("gone", stream, 10, None)]
            taken = await store.take_over("heir", idle_ms=0)
            held = pending(client)
            await store.done(taken)
            return read, again, taken, held
        finally:
            await services.close()

    try:
        for stream in CALL_STREAMS:
            client.delete(stream)
        read, again, taken, held = asyncio.run(run())
        assert sorted(c.stream for c in read) == sorted(CALL_STREAMS)
        assert all(c.kind == "turn" and c.version == 1 and c.bot_id == f"bot-of-{c.match_id}" for c in read)
        assert [home_key(home_of_match(c.match_id), "webhook-calls") for c in read] == [c.stream for c in read]
        assert again == []
        assert sorted((c.stream, c.entry_id) for c in taken) == sorted((c.stream, c.entry_id) for c in read)
        assert held == dict.fromkeys(CALL_STREAMS, 1)
        assert pending(client) == dict.fromkeys(CALL_STREAMS, 0)
    finally:
        client.close()


def test_a_running_dispatcher_hears_every_stream_and_acknowledges_each_call(own_redis: str) -> None:
    """Calls queued while a dispatcher waits on every stream (blocked reads) are each read and
    acknowledged (their matches are gone: nothing is called), however the homes are spread."""
    client = open_sync(own_redis)

    async def run() -> dict[str, int]:
        async with asyncio.timeout(30), listening_dispatcher(own_redis, "listening"):
            return await queued_in_every_stream_and_acknowledged(client)

    try:
        for stream in CALL_STREAMS:
            client.delete(stream)
        assert asyncio.run(run()) == dict.fromkeys(CALL_STREAMS, 0)
    finally:
        client.close()


@pytest.mark.skipif(not ON_CLUSTER, reason="a failover needs a cluster (ARENA_TEST_REDIS=cluster)")
def test_a_dispatcher_carries_on_reading_after_a_master_fails_over(tmp_path: Path) -> None:
    """``kill -9`` the master of some homes while a dispatcher waits on every stream: its
    replica takes over, and the calls queued then, on every home, are read and acknowledged."""
    cluster = EmbeddedCluster(tmp_path / "cluster", masters=3, replicas=1)
    url = cluster.start()

    async def run() -> dict[str, int]:
        async with asyncio.timeout(90), listening_dispatcher(url, "survivor"):
            master = cluster.master_of(home_key(0, "webhook-calls"))
            master.client().execute_command("WAIT", 1, 5000)  # (its replica has the groups)
            cluster.kill(master)
            await asyncio.to_thread(cluster.wait_failover, master)
            client = open_sync(url if master.port != cluster.nodes[0].port else cluster.nodes_alive()[0].url)
            try:
                return await queued_in_every_stream_and_acknowledged(client)
            finally:
                client.close()

    try:
        assert asyncio.run(run()) == dict.fromkeys(CALL_STREAMS, 0)
    finally:
        cluster.stop()
