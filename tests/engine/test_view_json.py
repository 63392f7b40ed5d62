"""A view survives its JSON form: what the SDK rebuilds from the API is the engine's view."""

import random

import pytest

from wizard import MatchConfig, MatchView, new_match


@pytest.mark.parametrize("variants", [(), ("HIDDEN_BIDS",), ("SECRET_BIDS",), ("CLAIRVOYANCE",), ("SINGLE_SUIT",)])
def test_every_seats_view_round_trips_through_json(variants):
    rng = random.Random(7)
    state = new_match(MatchConfig.create("WIZARD", 3, variants), seed=f"json-{variants}")
    while True:
        for seat in (*range(3), None):
            view = state.view(seat)
            assert MatchView.from_dict(view.to_dict()) == view
        if state.is_finished:
            break
        seat = state.awaiting()[0]
        state.apply(seat, rng.choice(state.legal_moves(seat)))


def test_extra_api_fields_are_ignored_and_missing_ones_refused():
    data = new_match(MatchConfig.create("WIZARD", 3), seed="x").view(0).to_dict()
    assert MatchView.from_dict({**data, "id": "m1", "status": "ACTIVE", "deadline": None}).my_seat == 0
    del data["seats"]
    with pytest.raises(KeyError):
        MatchView.from_dict(data)
