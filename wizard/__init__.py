"""Wizard Arena's rules engine: every ruleset and variant of the card game Wizard, pure
Python, no I/O. Bot authors import it as a forward model; the service runs every match
through it.

>>> import random
>>> from wizard import MatchConfig, Move, new_match
>>> state = new_match(MatchConfig.create("WIZARD", players=4), seed="readme-0")
>>> view = state.view(state.to_act)          # what the seat to act may know
>>> view.phase.value, len(view.hand), view.legal_moves[:2]
('BID', 1, (Move(bid=0), Move(bid=1)))
>>> state.apply(view.my_seat, Move(bid=1))
>>> from wizard.playout import playout
>>> playout(state, random.Random(1)).winners  # the rest of the match, all seats random
(3,)
"""

from wizard.bots import HOUSE_BOTS, HeuristicBot, HouseBot, RandomBot, fallback_move
from wizard.cards import Suit, card_code
from wizard.errors import (
    ConfigError,
    DealError,
    IllegalMoveError,
    InvalidMoveError,
    MatchFinishedError,
    NotYourTurnError,
    RecordError,
    WizardError,
)
from wizard.moves import Move
from wizard.record import MatchRecord, record_of, state_from_bytes, state_to_bytes
from wizard.rules import BidReveal, MatchConfig, Phase, Ruleset, Scoring, Variant
from wizard.sampling import sample_state
from wizard.shuffle import seed_hash
from wizard.state import MatchState, Outcome, new_match
from wizard.views import MatchView, Play, RoundResult, SeatResult, SeatView, Trick

__all__ = [
    "HOUSE_BOTS", "BidReveal", "ConfigError", "DealError", "HeuristicBot", "HouseBot",
    "IllegalMoveError", "InvalidMoveError", "MatchConfig", "MatchFinishedError", "MatchRecord",
    "MatchState", "MatchView", "Move", "NotYourTurnError", "Outcome", "Phase", "Play",
    "RandomBot", "RecordError", "RoundResult", "Ruleset", "Scoring", "SeatResult", "SeatView",
    "Suit", "Trick", "Variant", "WizardError", "card_code", "fallback_move", "new_match",
    "record_of", "sample_state", "seed_hash", "state_from_bytes", "state_to_bytes",
]
