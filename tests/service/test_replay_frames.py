"""``replay_frames`` in this process: for every ruleset, player count and variant, the frames are
the table as every seat's own view shows it after each move (the plain way: every view, every
frame), and each round's first frame holds the hands the record says were dealt."""

from __future__ import annotations

from random import Random
from typing import Any

import pytest

from service.domain.replays import replay_frames
from wizard import MatchConfig, MatchState, RandomBot, Ruleset, WizardError, new_match
from wizard.record import record_of

VARIANT_SETS = [(), ("CLAIRVOYANCE",), ("HIDDEN_BIDS",), ("SECRET_BIDS",), ("PLUS_MINUS_ONE",), ("SINGLE_SUIT",),
                ("CLAIRVOYANCE", "SECRET_BIDS", "PLUS_MINUS_ONE")]
CONFIGS = []
for _ruleset in Ruleset:
    for _players in range(3, 7):
        for _variants in VARIANT_SETS:
            try:
                CONFIGS.append(MatchConfig.create(_ruleset, _players, _variants))
            except WizardError:
                pass  # a combination RULES.md (or the engine) refuses


def played(config: MatchConfig, seed: int) -> MatchState:
    state, bot, rng = new_match(config, f"frames-{seed}"), RandomBot(), Random(seed)
    while not state.is_finished:
        seat = state.awaiting()[0]
        state.apply(seat, bot.act(state.view(seat), rng))
    return state


def every_view_frame(state: MatchState) -> dict[str, Any]:
    """The parts of a frame that come from the seats' own views, read the plain way."""
    n = state.config.players
    views = [state.view(s) for s in range(n)]
    return {
        "bids": [views[s].seats[s].bid for s in range(n)],
        "hands": [next((list(v.seats[s].hand) for v in views if v.seats[s].hand is not None), []) for s in range(n)],
    }


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.ruleset.value}-{c.players}-{'+'.join(sorted(v.value for v in c.variants)) or 'plain'}")
def test_frames_are_what_every_seats_view_shows(config: MatchConfig) -> None:
    finished = played(config, config.players)
    frames = replay_frames(finished)
    record = record_of(finished)
    assert len(frames) == len(record.moves) + 1
    state = new_match(record.config, record.seed, record.salt)
    for index, frame in enumerate(frames):
        if index:
            seat, move = record.moves[index - 1]
            state.apply(seat, move)
            assert frame["move"] == {"seat": seat, **move.to_dict()}
        expected = every_view_frame(state)
        assert [s["bid"] for s in frame["seats"]] == expected["bids"], index
        assert [s["hand"] for s in frame["seats"]] == expected["hands"], index
        public = state.view(None)
        assert [s["score"] for s in frame["seats"]] == [s.score for s in public.seats]
        assert frame["results"] == len(public.round_results) and frame["round"] == public.round
    for dealt in record.dealt_rounds():
        first = next(f for f in frames if f["round"] == dealt.round)
        assert [sorted(s["hand"]) for s in first["seats"]] == [sorted(h) for h in dealt.hands]
