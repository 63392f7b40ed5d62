"""The ladder's pairing (ranking.ladder.pair_ladder): its contract and its choices. Pure."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ranking.ladder import LadderBot, LadderTable, free_bots, pair_ladder


def _bots(n: int, seed: int = 0, playing: int = 0) -> list[LadderBot]:
    rng = random.Random(seed)
    return [LadderBot(f"b{i}", rng.uniform(1200, 1800), rng.uniform(30, 350), playing) for i in range(n)]


def _check_contract(bots: list[LadderBot], players: int, max_playing: int, tables: list[LadderTable]) -> None:
    by_id = {b.id: b for b in bots}
    seats = Counter(bot for t in tables for bot in t.bots)
    for table in tables:
        assert len(table.bots) == players  # full
        assert len(set(table.bots)) == players  # a bot (house bots too) sits one seat of a table
        assert any(not by_id[b].house for b in table.bots)  # never a table of house bots only
        for bot in table.bots:
            if not by_id[bot].house:
                assert by_id[bot].playing + (players if table.duplicate else 1) <= max_playing
    for bot, count in seats.items():
        if not by_id[bot].house:
            assert count == 1


def test_twenty_free_bots_make_five_full_tables_of_four():
    bots = _bots(20)
    tables = pair_ladder(bots, 4, {}, 1, random.Random(1))
    _check_contract(bots, 4, 1, tables)
    assert len(tables) == 5
    assert sorted(b for t in tables for b in t.bots) == sorted(b.id for b in bots)


def test_bots_at_their_cap_are_left_out():
    bots = _bots(8) + _bots(4, seed=9, playing=2)
    bots[-4:] = [LadderBot(f"busy{i}", b.rating, b.deviation, 2) for i, b in enumerate(bots[-4:])]
    tables = pair_ladder(bots, 4, {}, 2, random.Random(1))
    _check_contract(bots, 4, 2, tables)
    assert not {b for t in tables for b in t.bots} & {f"busy{i}" for i in range(4)}
    assert len(tables) == 2


def test_bots_that_do_not_make_a_full_table_wait_unless_house_bots_complete_it():
    bots = _bots(6)
    tables = pair_ladder(bots, 4, {}, 1, random.Random(2))
    _check_contract(bots, 4, 1, tables)
    assert len(tables) == 1
    house = [LadderBot("house-heuristic", 1600, 50, 7, house=True), LadderBot("house-random", 1100, 50, 3, house=True)]
    tables = pair_ladder(bots + house, 4, {}, 1, random.Random(2))
    _check_contract(bots + house, 4, 1, tables)
    assert len(tables) == 2
    assert sum(b.startswith("house-") for t in tables for b in t.bots) == 2


def test_the_same_arguments_give_the_same_tables():
    bots = _bots(37, seed=4)
    meetings = {frozenset({"b1", "b2"}): 3}
    assert pair_ladder(bots, 4, meetings, 1, random.Random(7)) == pair_ladder(bots, 4, meetings, 1, random.Random(7))


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(0, 40),
    houses=st.integers(0, 4),
    players=st.integers(2, 6),
    max_playing=st.integers(1, 8),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_ladder_gets_tables_that_keep_the_contract(n, houses, players, max_playing, seed):
    rng = random.Random(seed)
    bots = [
        LadderBot(f"b{i}", rng.uniform(1000, 2000), rng.uniform(0, 400), rng.randrange(0, max_playing + 2))
        for i in range(n)
    ]
    bots += [LadderBot(f"house-{i}", rng.uniform(1000, 2000), 40.0, rng.randrange(0, 50), True) for i in range(houses)]
    meetings = {frozenset(rng.sample([b.id for b in bots], 2)): rng.randrange(1, 9) for _ in range(n if n > 1 else 0)}
    tables = pair_ladder(bots, players, meetings, max_playing, random.Random(seed))
    _check_contract(bots, players, max_playing, tables)
    free = sum(1 for b in bots if not b.house and b.playing + 1 <= max_playing)
    spare = free % players
    completed = bool(spare) and houses >= players - spare and free > 0
    assert len(tables) == free // players + completed  # nobody waits who could fill a table
    house_seats = sum(b.startswith("house-") for t in tables for b in t.bots)
    assert house_seats == (players - spare if completed else 0)  # house bots only complete a short table


def test_bots_that_met_least_sit_together():
    bots = [LadderBot(f"b{i}", 1500.0, 0.0, 0) for i in range(8)]
    last = [{"b0", "b1", "b2", "b3"}, {"b4", "b5", "b6", "b7"}]
    meetings = {frozenset((a, b)): 5 for group in last for a in group for b in group if a < b}
    for seed in range(20):
        for table in pair_ladder(bots, 4, meetings, 1, random.Random(seed)):
            assert [len(set(table.bots) & group) for group in last] == [2, 2]


def test_a_bot_whose_rating_is_least_sure_waits_least():
    bots = [LadderBot("new", 1500.0, 350.0, 0)] + [LadderBot(f"old{i}", 1500.0, 40.0, 0) for i in range(4)]
    seated = Counter(b for seed in range(400) for t in pair_ladder(bots, 4, {}, 1, random.Random(seed)) for b in t.bots)
    assert seated["new"] > max(seated[f"old{i}"] for i in range(4))


def test_nobody_is_starved_over_many_passes():
    """Seven free bots, tables of four: three wait every pass. Over many passes each plays
    often, even a bot whose rating is far surer than the others' (and never moves)."""
    rng = random.Random(3)
    bots = [LadderBot("sure", 1500.0, 1.0, 0)] + [
        LadderBot(f"b{i}", rng.uniform(1300, 1700), 300.0, 0) for i in range(6)
    ]
    meetings: Counter[frozenset[str]] = Counter()
    seated: Counter[str] = Counter()
    for _ in range(300):
        for table in pair_ladder(bots, 4, meetings, 1, rng):
            seated.update(table.bots)
            meetings.update(frozenset((a, b)) for a in table.bots for b in table.bots if a < b)
    assert set(seated) == {b.id for b in bots}
    assert min(seated.values()) >= 0.25 * 300  # the fair share is 4/7 of the passes


def test_a_table_is_a_duplicate_set_when_all_its_bots_have_room_for_it():
    bots = _bots(8)
    tables = pair_ladder(bots, 4, {}, 4, random.Random(5))
    assert [t.duplicate for t in tables] == [True, True]
    busy = bots[:7] + [LadderBot("busy", bots[7].rating, bots[7].deviation, 1)]
    tables = pair_ladder(busy, 4, {}, 4, random.Random(5))
    _check_contract(busy, 4, 4, tables)
    assert sorted(("busy" in t.bots, t.duplicate) for t in tables) == [(False, True), (True, False)]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.integers(3, 5), st.integers(2, 40))
def test_the_pairing_reads_only_the_meetings_of_free_bots_with_each_other(seed: int, players: int, n: int) -> None:
    """The ladder service fetches only these (a ladder's meetings grow towards every pair of
    its bots): the tables are the same as with every meeting known."""
    rng = random.Random(seed)
    bots = [LadderBot(f"b{i}", rng.uniform(1200, 1800), rng.uniform(30, 350), rng.choice([0, 0, 1, 2]))
            for i in range(n)]
    bots += [LadderBot(f"house-{k}", 1500, 60, 0, True) for k in ("a", "b", "c", "d")[:rng.randrange(0, 5)]]
    everyone = [b.id for b in bots]
    meetings = {frozenset((a, b)): rng.randrange(1, 5) for i, a in enumerate(everyone) for b in everyone[i + 1:]
                if rng.random() < 0.5}
    free = {b.id for b in free_bots(bots, 2)}
    among = {pair: count for pair, count in meetings.items() if pair <= free}
    assert pair_ladder(bots, players, among, 2, random.Random(seed)) == pair_ladder(
        bots, players, meetings, 2, random.Random(seed))


def test_the_simulated_ladder_seats_every_bot_each_pass_and_rates_them_all():
    """bench/ladder.py's ladder, two passes: real matches through the engine, every bot at
    one table a pass, the leaderboard refitted over all of them."""
    from bench.ladder import BOTS, TABLE, Ladder, field, ladder_pairing

    ladder = Ladder(field(BOTS, 0.0), seed=3, pairing=ladder_pairing(False))
    passes = ladder.passes()
    tables = [next(passes) for _ in range(2 * BOTS // TABLE)]
    for first in range(0, len(tables), BOTS // TABLE):
        assert sorted(b for t in tables[first:first + BOTS // TABLE] for b in t.bots) == sorted(ladder.strengths)
    assert len(ladder.history) == 2 * BOTS // TABLE
    assert all(len(set(seats)) == TABLE and len(scores) == TABLE for seats, scores in ladder.history)
    assert set(ladder.fit.ratings) == set(ladder.strengths)
    assert sum(ladder.meetings.values()) == len(ladder.history) * TABLE * (TABLE - 1) // 2
