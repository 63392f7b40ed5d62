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

The hot modules (:mod:`wizard.tricks`, :mod:`wizard.shuffle`, :mod:`wizard.playout`, and the
search's :mod:`wizard.sampling`, :mod:`wizard.search`) may be compiled by mypyc: :data:`COMPILED` says whether they are, ``WIZARD_PURE_PYTHON=1`` forces
the pure-Python ones (:mod:`wizard._build`).
"""

from wizard._build import COMPILED
from wizard.bots import HeuristicBot, HouseBot, RandomBot, fallback_move
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
from wizard.house import HOUSE_BOTS
from wizard.moves import Move
from wizard.record import MatchRecord, record_of, state_from_bytes, state_to_bytes
from wizard.rules import BidReveal, MatchConfig, Phase, Ruleset, Scoring, Variant
from wizard.sampling import sample_state
from wizard.search import SearchBot, search_move
from wizard.shuffle import seed_hash
from wizard.state import MatchState, Outcome, new_match
from wizard.views import MatchView, Play, RoundResult, SeatResult, SeatView, Trick

__all__ = [
    "COMPILED", "HOUSE_BOTS", "BidReveal", "ConfigError", "DealError", "HeuristicBot", "HouseBot",
    "IllegalMoveError", "InvalidMoveError", "MatchConfig", "MatchFinishedError", "MatchRecord",
    "MatchState", "MatchView", "Move", "NotYourTurnError", "Outcome", "Phase", "Play",
    "RandomBot", "RecordError", "RoundResult", "Ruleset", "Scoring", "SearchBot", "SeatResult", "SeatView",
    "Suit", "Trick", "Variant", "WizardError", "card_code", "fallback_move", "new_match",
    "record_of", "sample_state", "search_move", "seed_hash", "state_from_bytes", "state_to_bytes",
]
