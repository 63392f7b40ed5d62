"""``MatchState.saw_last_move``: the cheap engine fact behind ``expectedVersion`` (a move is
stale only when something its seat sees changed since), checked against its definition on
whole random matches of every bidding rule: a seat saw the last move exactly when its view,
apart from ``awaiting`` and ``moves_made``, differs from its view before the move."""

from __future__ import annotations

import dataclasses
import random

import pytest

from wizard import MatchConfig, MatchView, new_match

IGNORED = {"awaiting": (), "moves_made": 0}


def seen(view: MatchView) -> MatchView:
    return dataclasses.replace(view, **IGNORED)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("players", "variants"),
    [
        (4, ["HIDDEN_BIDS"]),
        (3, ["SECRET_BIDS"]),
        (5, []),
        (4, ["PLUS_MINUS_ONE"]),
        (3, ["HIDDEN_BIDS", "CLAIRVOYANCE"]),
        (4, ["SECRET_BIDS", "SINGLE_SUIT"]),
    ],
)
def test_a_seat_saw_the_last_move_exactly_when_its_view_changed(players, variants):
    config = MatchConfig.create("WIZARD_JUNIOR", players, variants) if "SINGLE_SUIT" not in variants else (
        MatchConfig.create("WIZARD", players, variants)
    )
    rng = random.Random(f"{players}{variants}")
    state = new_match(config, f"saw-{players}-{'-'.join(variants)}")
    before = [seen(state.view(s)) for s in range(players)]
    unseen = 0
    while not state.is_finished:
        mover = rng.choice(state.awaiting())
        state.apply(mover, rng.choice(state.legal_moves(mover)))
        after = [seen(state.view(s)) for s in range(players)]
        for s in range(players):
            assert state.saw_last_move(s) == (after[s] != before[s]), (s, mover, state.phase, state.round)
            unseen += not state.saw_last_move(s)
        assert state.last_move_unseen_by() == tuple(s for s in range(players) if not state.saw_last_move(s))
        before = after
    # the simultaneous rules do hide bids from the other seats; the others never do
    assert (unseen > 0) == any(v in variants for v in ("HIDDEN_BIDS", "SECRET_BIDS"))


def test_before_any_move_every_seat_counts_as_having_seen_it():
    state = new_match(MatchConfig.create("WIZARD", 3, ["SECRET_BIDS"]), "start")
    assert [state.saw_last_move(s) for s in range(3)] == [True, True, True]
