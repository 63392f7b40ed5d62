"""The example search bot (examples/search_bot.py) loads through the SDK and plays whole
matches in-process, every move it makes legal, in plain and variant rules."""

from __future__ import annotations

import random

import pytest

from sdk import load_bot
from wizard import HeuristicBot, MatchConfig, new_match


@pytest.mark.parametrize(
    ("ruleset", "variants"),
    [
        ("WIZARD_JUNIOR", ()),
        ("WIZARD_JUNIOR_CLASSIC", ("PLUS_MINUS_ONE",)),
        ("WIZARD_JUNIOR", ("SECRET_BIDS", "CLAIRVOYANCE")),
        ("WIZARD", ("SINGLE_SUIT", "HIDDEN_BIDS")),
    ],
    ids=["junior", "classic-plus-minus-one", "junior-secret-bids-clairvoyance", "single-suit-hidden-bids"],
)
def test_search_bot_plays_a_whole_match_with_legal_moves(ruleset: str, variants: tuple[str, ...]) -> None:
    bot = load_bot("examples/search_bot.py:SearchBot")
    bot.budget_seconds = 0.003
    bot.rng = random.Random(1)
    house, rng = HeuristicBot(), random.Random(2)
    state = new_match(MatchConfig.create(ruleset, 3, variants), seed=f"search-bot-{ruleset}")
    decisions = 0
    while not state.is_finished:
        seat = state.awaiting()[0]
        view = state.view(seat)
        if seat == 0:
            move = bot.act(view)
            assert move in view.legal_moves, f"round {view.round}: {move} is not legal; legal: {view.legal_moves}"
            decisions += 1
        else:
            move = house.act(view, rng)
        state.apply(seat, move)
    assert decisions >= state.config.rounds  # a bid every round, at least
