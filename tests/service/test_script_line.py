"""The pipelined connection the move path's scripts run on (service.store.script_line.ScriptLine),
against the real embedded Redis: answers reach their own callers, in any interleaving, and
every failure fails only what it must, loudly, leaving the line usable. A commit caught in
such a failure may still have run: MatchStore then finds it applied (or not) from the
match's latest event."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest
import redis
from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from service.store.clock import now_ms
from service.store.keys import events_key, match_home_key, match_key
from service.store.matches import MatchStore
from service.store.script_line import ScriptLine
from tests.service.conftest import embedded_redis_url, first_action, house, live_match

T = TypeVar("T")

@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis server of this module's own (``redis_client`` connects to it): the tests pause
    it and close its connections, which the other tests' servers, sharing the session's
    Redis, must not feel."""
    yield from embedded_redis_url(tmp_path_factory.mktemp("redis-line"))


ECHO = "return {ARGV[1], redis.call('INCR', KEYS[1])}"
FAIL_ODD = "if tonumber(ARGV[1]) % 2 == 1 then return redis.error_reply('odd ' .. ARGV[1]) end return ARGV[1]"


def run_with_line(redis_url: str, work: Callable[[AsyncRedis, ScriptLine], Awaitable[T]], timeout: float = 10.0) -> T:
    async def main() -> T:
        # named, so that the tests can find the line's connection (it takes the client's settings)
        client = AsyncRedis.from_url(redis_url, client_name=f"sl-{secrets.token_hex(4)}")
        line = ScriptLine(client, timeout=timeout)
        try:
            return await work(client, line)
        finally:
            await line.close()
            await client.aclose()

    return asyncio.run(main())


def test_concurrent_calls_each_get_their_own_answer(redis_url: str, redis_client: redis.Redis) -> None:
    redis_client.delete("sl:count")

    async def work(client: AsyncRedis, line: ScriptLine) -> list[list[bytes]]:
        script = client.register_script(ECHO)
        return await asyncio.gather(*(line.run(script, ["sl:count"], [f"call-{i}"]) for i in range(500)))

    answers = run_with_line(redis_url, work)
    assert [a[0] for a in answers] == [f"call-{i}".encode() for i in range(500)]
    # each ran exactly once
    assert sorted(a[1] for a in answers) == list(range(1, 501))
    assert int(redis_client.get("sl:count")) == 500


def test_an_error_answer_fails_that_call_only(redis_url: str) -> None:
    async def work(client: AsyncRedis, line: ScriptLine) -> list[object]:
        script = client.register_script(FAIL_ODD)
        return await asyncio.gather(*(line.run(script, [], [i]) for i in range(10)), return_exceptions=True)

    answers = run_with_line(redis_url, work)
    for i, answer in enumerate(answers):
        if i % 2:
            assert isinstance(answer, ResponseError) and f"odd {i}" in str(answer)
        else:
            assert answer == str(i).encode()


def test_a_script_the_server_forgot_is_loaded_again(redis_url: str, redis_client: redis.Redis) -> None:
    async def work(client: AsyncRedis, line: ScriptLine) -> tuple[object, object]:
        script = client.register_script(ECHO)
        first = await line.run(script, ["sl:forgot"], ["a"])
        await client.script_flush()  # as after a restart or a failover
        second = await line.run(script, ["sl:forgot"], ["b"])
        return first, second

    redis_client.delete("sl:forgot")
    first, second = run_with_line(redis_url, work)
    assert first == [b"a", 1] and second == [b"b", 2]  # the refused call ran once, after the load


async def kill_line_connection(client: AsyncRedis) -> None:
    """Close the connection the line's last script ran on, from the server's side."""
    name = client.connection_pool.connection_kwargs["client_name"]
    killed = 0
    for entry in await client.client_list():
        if entry.get("name") == name and entry.get("cmd") in ("evalsha", "eval"):
            killed += await client.client_kill_filter(_id=entry["id"])
    assert killed == 1


def test_a_lost_connection_fails_the_calls_in_flight_and_the_next_call_reconnects(redis_url: str) -> None:
    async def work(client: AsyncRedis, line: ScriptLine) -> tuple[list[object], object]:
        script = client.register_script(ECHO)
        await line.run(script, ["sl:lost"], ["warm"])
        # scripts wait while writes are paused (CLIENT LIST and KILL do not)
        await client.execute_command("CLIENT", "PAUSE", 2000, "WRITE")
        in_flight = [asyncio.ensure_future(line.run(script, ["sl:lost"], [i])) for i in range(5)]
        await asyncio.sleep(0.1)
        await kill_line_connection(client)
        failed = await asyncio.gather(*in_flight, return_exceptions=True)
        await client.execute_command("CLIENT", "UNPAUSE")
        after = await line.run(script, ["sl:lost"], ["after"])
        return failed, after

    failed, after = run_with_line(redis_url, work)
    assert all(isinstance(f, RedisConnectionError) for f in failed), failed
    assert after[0] == b"after"


def test_an_idle_connection_the_server_closed_is_replaced_before_the_next_call(redis_url: str) -> None:
    async def work(client: AsyncRedis, line: ScriptLine) -> object:
        script = client.register_script(ECHO)
        await line.run(script, ["sl:idle"], ["warm"])
        await kill_line_connection(client)
        for _ in range(500):  # until the line's reader has seen the close (at most 5 s)
            if line._line is None:
                break
            await asyncio.sleep(0.01)
        assert line._line is None, "the line did not notice its connection closed"
        return await line.run(script, ["sl:idle"], ["after"])

    assert run_with_line(redis_url, work)[0] == b"after"  # type: ignore[index]


def test_answers_overdue_break_the_line_with_a_timeout(redis_url: str) -> None:
    async def work(client: AsyncRedis, line: ScriptLine) -> tuple[object, object]:
        script = client.register_script(ECHO)
        await line.run(script, ["sl:slow"], ["warm"])
        await client.execute_command("CLIENT", "PAUSE", 1500, "WRITE")
        started = asyncio.get_running_loop().time()
        try:
            await line.run(script, ["sl:slow"], ["late"])
        except RedisTimeoutError as error:
            waited = asyncio.get_running_loop().time() - started
            outcome: object = (error, waited)
        else:  # pragma: no cover - the assertion below reports it
            outcome = None
        await client.execute_command("CLIENT", "UNPAUSE")
        return outcome, await line.run(script, ["sl:slow"], ["after"])

    outcome, after = run_with_line(redis_url, work, timeout=0.2)
    assert outcome is not None, "a call whose answer never came did not time out"
    _, waited = outcome  # type: ignore[misc]
    assert 0.2 <= waited < 1.0
    assert after[0] == b"after"


def test_a_caller_that_goes_away_does_not_shift_the_answers(redis_url: str) -> None:
    async def work(client: AsyncRedis, line: ScriptLine) -> list[object]:
        script = client.register_script(ECHO)
        await client.execute_command("CLIENT", "PAUSE", 100, "WRITE")
        calls = [asyncio.ensure_future(line.run(script, ["sl:cancel"], [i])) for i in range(6)]
        await asyncio.sleep(0.01)
        calls[2].cancel()
        calls[4].cancel()
        return await asyncio.gather(*calls, return_exceptions=True)

    answers = run_with_line(redis_url, work)
    for i, answer in enumerate(answers):
        if i in (2, 4):
            assert isinstance(answer, asyncio.CancelledError)
        else:
            assert answer[0] == str(i).encode()  # type: ignore[index]


def test_a_closed_line_refuses_calls(redis_url: str) -> None:
    async def work(client: AsyncRedis, line: ScriptLine) -> None:
        script = client.register_script(ECHO)
        await line.close()
        with pytest.raises(RedisConnectionError, match="closed"):
            await line.run(script, ["sl:closed"], ["x"])

    run_with_line(redis_url, work)


def test_after_an_idle_spell_a_slow_answer_within_the_timeout_is_waited_for(redis_url: str) -> None:
    """The watchdog fails a call only after it has waited a whole period without an answer,
    not because nothing was answered while the line was idle."""

    async def work(client: AsyncRedis, line: ScriptLine) -> object:
        script = client.register_script(ECHO)
        await line.run(script, ["sl:idle-slow"], ["warm"])
        await asyncio.sleep(0.7)  # idle through two of the watchdog's looks
        await client.execute_command("CLIENT", "PAUSE", 150, "WRITE")
        return await line.run(script, ["sl:idle-slow"], ["slow"])

    assert run_with_line(redis_url, work, timeout=0.3)[0] == b"slow"  # type: ignore[index]


async def silent_server() -> tuple[asyncio.Server, int]:
    """A TCP server that accepts connections and never answers (a hung Redis, a bad proxy)."""

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # until the client goes
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def test_a_server_that_never_answers_the_handshake_fails_every_waiting_call_in_one_timeout() -> None:
    async def main() -> list[object]:
        server, port = await silent_server()
        client = AsyncRedis.from_url(f"redis://127.0.0.1:{port}/0")
        line = ScriptLine(client, timeout=0.3)
        script = client.register_script(ECHO)
        try:
            started = asyncio.get_running_loop().time()
            outcomes = await asyncio.gather(*(line.run(script, ["k"], [i]) for i in range(5)), return_exceptions=True)
            return [*outcomes, asyncio.get_running_loop().time() - started]
        finally:
            await line.close()
            await client.aclose()
            server.close()

    *outcomes, waited = asyncio.run(main())
    assert all(isinstance(o, (TimeoutError, RedisTimeoutError)) for o in outcomes), outcomes
    assert waited < 1.0  # one shared attempt, not one after another


def test_closing_while_connecting_leaves_no_line_behind() -> None:
    async def main() -> tuple[object, object]:
        server, port = await silent_server()
        client = AsyncRedis.from_url(f"redis://127.0.0.1:{port}/0")
        line = ScriptLine(client, timeout=5.0)
        script = client.register_script(ECHO)
        call = asyncio.ensure_future(line.run(script, ["k"], ["x"]))
        await asyncio.sleep(0.05)  # the call is connecting
        server.close()  # (the handshake still waits: the accepted connection stays open)
        closing = asyncio.ensure_future(line.close())
        outcome = (await asyncio.gather(call, return_exceptions=True))[0]
        await closing
        await client.aclose()
        return outcome, line._line

    outcome, left = asyncio.run(main())
    assert isinstance(outcome, Exception)
    assert left is None


# ---------------------------------------------------------------------- a commit caught in a failure


class AnswerLost(ScriptLine):
    """Runs each script, then fails as a connection lost before the answer arrived would."""

    async def run(self, script: Any, keys: list[Any], args: list[Any], replicated: bool = False) -> Any:
        await super().run(script, keys, args, replicated)
        raise RedisConnectionError("the connection was lost before the answer (injected)")


class NeverSent(ScriptLine):
    """Fails each script as a connection lost before the command reached Redis would."""

    async def run(self, script: Any, keys: list[Any], args: list[Any], replicated: bool = False) -> Any:
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
            await client.zrem(match_home_key(match.id, "deadlines"), match.id)
            for line in (scripts, lossy, dead):
                await line.close()
            await client.aclose()

    asyncio.run(work())
