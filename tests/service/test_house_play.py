"""House-only matches that a worker starts (a tournament's tables of house bots) are played
wherever a worker is free: the starting process hands them over (``matches:house-play``),
and each worker's clock takes as many as it has room for and plays them; two players of one
match make each move once (the commit's expected version). The API still
plays the house bots of the matches it starts itself."""

from __future__ import annotations

import asyncio
import json

from service.domain.services import Services
from service.model.live_match import MatchStatus, SeatHolder
from service.settings import Settings
from service.store.keys import HOUSE_PLAY, events_key
from tests.service.conftest import live_match
from wizard import MatchConfig
from worker import clock


def house_holders(players: int) -> list[SeatHolder]:
    return [SeatHolder("house-random", f"House Random #{seat}", "RANDOM") for seat in range(players)]


async def start_house_match(services: Services) -> str:
    """A short house-only match started with every seat taken, as a tournament's table is."""
    shape = live_match(3, "WIZARD_JUNIOR", timeout_ms=60_000)
    config = MatchConfig.create("WIZARD_JUNIOR", 3)
    made = await services.matches.create_seated(shape.id, config, "house-play", shape.settings, house_holders(3))
    assert made is not None
    return made.id


def worker_services(redis_url: str, role: str = "worker") -> Services:
    """The parts of a worker's clock or job (``role``) in this process; every event kept."""
    return Services.open(Settings(REDIS_URL=redis_url, match_events_kept=0), role=role)


def test_a_worker_hands_over_the_house_only_matches_it_starts_and_each_clock_plays_its_share(
    redis_url, redis_client, monkeypatch
):
    redis_client.delete(HOUSE_PLAY)  # (left by another test)

    async def main() -> tuple[list[int], list[int], list[MatchStatus]]:
        services, other = worker_services(redis_url), worker_services(redis_url)
        try:
            ids = [await start_house_match(services) for _ in range(5)]
            await services.matches.drain()  # the hand-over is done, and nothing was played here
            versions = [(await services.matches.get(m)).version for m in ids]
            players = [clock.HousePlayer(services), clock.HousePlayer(other)]
            monkeypatch.setattr(clock, "HOUSE_MATCHES_PER_WORKER", 0)
            assert [await player.take_share() for player in players] == [0, 0]  # no room: none taken
            monkeypatch.setattr(clock, "HOUSE_MATCHES_PER_WORKER", 8)
            shares = [0, 0]
            for turn in range(5):  # two workers' clocks going round in turn, one match a round each
                shares[turn % 2] += await players[turn % 2].take_share()
            for player in players:
                await asyncio.gather(*player.playing)
            return versions, shares, [(await services.matches.get(m)).status for m in ids]
        finally:
            await services.close()
            await other.close()

    versions, shares, statuses = asyncio.run(main())
    assert versions == [4] * 5  # created (1) and three seats taken: no house move made where it started
    assert shares == [3, 2]  # shared out, a round at a time
    assert statuses == [MatchStatus.FINISHED] * 5


def test_two_players_of_one_house_match_make_each_move_once(redis_url, redis_client):
    async def main() -> tuple[str, int]:
        services = worker_services(redis_url)
        try:
            match_id = await start_house_match(services)
            await services.matches.drain()
            # two clocks (or a clock and the deadline sweeper) on the same match at once
            await asyncio.gather(services.matches.play_house_turns(match_id), services.matches.play_house_turns(match_id))
            match = await services.matches.get(match_id)
            assert match.status is MatchStatus.FINISHED
            return match_id, match.state.moves_made
        finally:
            await services.close()

    match_id, moves_made = asyncio.run(main())
    entries = redis_client.xrange(events_key(match_id))
    moves = [json.loads(fields[b"e"]) for _, fields in entries]
    versions = [int(fields[b"v"]) for _, fields in entries]
    assert sum(1 for e in moves if e["t"] == "move") == moves_made
    assert versions == sorted(set(versions))  # no version written twice


def test_the_api_plays_the_house_only_matches_it_starts_itself(redis_url):
    async def main() -> MatchStatus:
        services = worker_services(redis_url, role="api")
        try:
            match_id = await start_house_match(services)
            await services.matches.drain()
            return (await services.matches.get(match_id)).status
        finally:
            await services.close()

    assert asyncio.run(main()) is MatchStatus.FINISHED
