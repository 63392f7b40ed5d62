"""Waiting through the API process's feed (service/store/feed.py): many waiters on one
match woken by seat, waiters on many matches each woken by its own, and a Redis restart
while a thousand wait (the feed reconnects, every waiter reads again, nothing is missed).

Waiters here are raw HTTP long polls (GET /api/turns) held open on sockets of the test, so
that thousands cost the test nothing but descriptors."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from service.store.embedded_redis import EmbeddedRedis
from tests.service.arena_client import Api, Process, free_port, wait_until

Poll = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Polls:
    """Long polls of GET /api/turns held on raw sockets, on an event loop of their own."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.loop = asyncio.new_event_loop()
        self.open: list[Poll] = []

    def start(self, token: str, count: int, match_id: str | None = None, timeout_ms: int = 60_000) -> list[Poll]:
        query = f"timeoutMs={timeout_ms}" + (f"&matchId={match_id}" if match_id else "")

        async def open_all() -> list[Poll]:
            polls = []
            for _ in range(count):
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.write(
                    f"GET /api/turns?{query} HTTP/1.1\r\nHost: arena\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
                )
                await writer.drain()
                polls.append((reader, writer))
            return polls

        polls = self.loop.run_until_complete(open_all())
        self.open += polls
        return polls

    def answers(self, polls: list[Poll], timeout: float = 30) -> list[tuple[int, Any]]:
        """Each poll's answer: (status, JSON body)."""

        async def answer(poll: Poll) -> tuple[int, Any]:
            reader, _ = poll
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            length = int(next(line.split(b":", 1)[1] for line in lines if line.lower().startswith(b"content-length")))
            return int(lines[0].split(b" ", 2)[1]), json.loads(await reader.readexactly(length))

        async def all_of() -> list[tuple[int, Any]]:
            return list(await asyncio.wait_for(asyncio.gather(*(answer(p) for p in polls)), timeout))

        return self.loop.run_until_complete(all_of())

    def ended(self, polls: list[Poll]) -> list[tuple[int, Any]]:
        """The answers of those of ``polls`` that have been answered (for a failure's message)."""
        ended = [poll for poll in polls if poll[0].at_eof() or len(poll[0]._buffer)]  # type: ignore[attr-defined]
        return self.answers(ended, timeout=5) if ended else []

    def close(self) -> None:
        async def close_all() -> None:
            for _, writer in self.open:
                writer.transport.abort()
            await asyncio.sleep(0)  # an aborted transport closes its socket in the next loop turn

        self.loop.run_until_complete(close_all())
        self.loop.close()


def wait_for_waits(api: Api, count: int, timeout: float = 60) -> None:
    """Until ``count`` waits are open in the API process (its gauge), saying how many were."""
    seen: list[float] = []
    try:
        wait_until(lambda: seen.append(waits_open(api)) or seen[-1] == count, f"{count} waiters", timeout)
    except AssertionError:
        raise AssertionError(f"{seen[-1]:.0f} waits open after {timeout} s, not {count}:\n{api.process.output()}") from None


def waits_open(api: Api) -> float:
    for family in text_string_to_metric_families(api.http.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "wizard_arena_waits_open":
                return float(sample.value)
    raise AssertionError("no wizard_arena_waits_open")


@pytest.fixture
def polls(api: Api) -> Iterator[Polls]:
    held = Polls(api.port)
    yield held
    held.close()


def three_bot_match(api: Api) -> tuple[str, list[str]]:
    """A started match of three registered bots, seats 0, 1, 2 by token, seat 1 to bid first."""
    tokens = [api.register()[0] for _ in range(3)]
    match_id = api.create_match(tokens[0], players=3, ruleset="WIZARD_JUNIOR", firstDealer=0, moveTimeoutMs=600_000,
                                seed="waiting")
    for seat, token in enumerate(tokens):
        api.join(token, match_id, seat)
    match = api.match(match_id)
    if match["phase"] == "CHOOSE_TRUMP":
        api.submit(tokens[0], match_id, {"trump": "RED"})
    assert api.match(match_id)["awaiting"] == [1]
    return match_id, tokens


def test_many_waiters_of_one_match_wake_by_seat(api, polls):
    match_id, tokens = three_bot_match(api)
    before = waits_open(api)
    second = polls.start(tokens[2], 50, match_id)  # seat 2 bids after seat 1
    third = polls.start(tokens[0], 50, match_id)  # seat 0, the dealer, bids last
    wait_for_waits(api, int(before) + 100)
    moved = api.submit(tokens[1], match_id, {"bid": 0})["data"]["submitMove"]
    for status, turn in polls.answers(second):
        assert status == 200 and turn["mySeat"] == 2 and turn["version"] == moved["version"], turn
    assert waits_open(api) == before + 50  # seat 0's waiters wait on
    moved = api.submit(tokens[2], match_id, {"bid": 0})["data"]["submitMove"]
    for status, turn in polls.answers(third):
        assert status == 200 and turn["mySeat"] == 0 and turn["version"] == moved["version"], turn
    wait_until(lambda: waits_open(api) == before, "every waiter answered")


def test_waiters_on_many_matches_each_wake_for_their_own(api, polls):
    bots = [api.register() for _ in range(60)]
    held = {token: polls.start(token, 2) for token, _ in bots}  # waiting on all their matches: none yet
    matches = {}
    for token, _ in bots:
        match_id = api.create_match(token, players=3, ruleset="WIZARD_JUNIOR", firstDealer=2, moveTimeoutMs=600_000)
        api.join(token, match_id, 0)  # seat 0 acts first (left of the dealer, 2)
        api.add_house_bot(token, match_id, "RANDOM")
        api.add_house_bot(token, match_id, "RANDOM")
        matches[token] = match_id
    for token, waiting in held.items():
        for status, turn in polls.answers(waiting):
            assert status == 200 and turn["id"] == matches[token] and turn["mySeat"] == 0, turn


def test_a_redis_restart_while_a_thousand_wait_misses_nothing(tmp_path: Path):
    """Redis dies and comes back on its append-only file while 1,000 long polls wait in one API
    process: the feed reconnects and subscribes again, every waiter reads its matches anew, and
    the change after the restart wakes exactly the waiters it concerns."""
    server = EmbeddedRedis(tmp_path / "redis", appendonly=True)
    url = server.start()
    port = free_port()
    # the polls must outlast the test however slow the machine is (a poll that timed out at the
    # server's bound, 30 s by default, would leave the wait it asserts is still open)
    env = {**os.environ, "REDIS_URL": url, "ARENA_AWAIT_TURN_MAX_MS": "600000"}
    process = Process(["serve", "--port", str(port), "--log-level", "warning"], env, tmp_path / "serve.log")
    api = Api(process, port)
    held = Polls(port)
    try:
        api.wait_healthy()
        tokens = [api.register()[0] for _ in range(10)]
        waiting = {token: held.start(token, 100, timeout_ms=600_000) for token in tokens}  # all their matches: none yet
        wait_for_waits(api, 1_000)

        server.process.kill()  # as a crash would
        server.process.wait()
        server.stop()
        server.start()  # on the same file and socket
        wait_until(api.reaches_redis, "the API to reach Redis again")

        chosen = tokens[3]
        match_id = api.create_match(chosen, players=3, ruleset="WIZARD_JUNIOR", firstDealer=2, moveTimeoutMs=600_000)
        api.join(chosen, match_id, 0)
        api.add_house_bot(chosen, match_id, "RANDOM")
        api.add_house_bot(chosen, match_id, "RANDOM")
        for status, turn in held.answers(waiting[chosen]):
            assert status == 200 and turn["id"] == match_id and turn["mySeat"] == 0, turn
        others = [poll for token, polls in waiting.items() if token != chosen for poll in polls]
        open_now = waits_open(api)
        assert open_now == 900, (open_now, held.ended(others)[:5], process.output()[-3000:])  # the others wait on
    finally:
        held.close()
        api.close()
        process.stop()
        server.stop()
