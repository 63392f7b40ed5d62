"""A finished match move by move, for people to step through (the match page's replay,
``GET /api/matches/{id}/replay``): the table after every move as it would have looked with
every card face up, built by replaying the match's record through the engine.

Each frame is the table (field names as in GraphQL's ``Match``), taken from the engine's views
only: the spectator's for what is public, and each seat's own for its hand and its bid, which
are public once the match is over. A frame says how many rounds had ended by then (``results``:
the first that many of the match's ``roundResults``) instead of repeating them."""

from __future__ import annotations

from typing import Any

from wizard import MatchState, Move, new_match
from wizard.record import record_of
from wizard.views import MatchView, Play, Trick


def replay_frames(finished: MatchState) -> list[dict[str, Any]]:
    """The table at the start and after every move of a finished match."""
    record = record_of(finished)
    state = new_match(record.config, record.seed, record.salt)
    seats = _Seats(state)
    frames = [_frame(state.view(None), seats, None, None)]
    for seat, move in record.moves:
        state.apply(seat, move)
        public = state.view(None)
        seats.after(state, public, seat)
        frames.append(_frame(public, seats, seat, move))
    return frames


class _Seats:
    """Each seat's hand and bid, from its own view (or, in a clairvoyant round, the others'):
    read again for the seat that moved, and for every seat when a round begins or the match
    ends, since only then do they change."""

    def __init__(self, state: MatchState) -> None:
        self.players = state.config.players
        self.hands: list[list[str]] = []
        self.bids: list[int | None] = []
        self._read_all(state)
        self._moment = (state.round, state.is_finished)

    def after(self, state: MatchState, public: MatchView, mover: int) -> None:
        moment = (public.round, state.is_finished)
        if moment != self._moment:
            self._moment = moment
            self._read_all(state)
            return
        own = state.view(mover)
        self.bids[mover] = own.seats[mover].bid
        if own.seats[mover].hand is None:  # a clairvoyant round: the seat's cards are in the others' views
            self.hands[mover] = _hand([state.view((mover + 1) % self.players)], mover)
        else:
            self.hands[mover] = _hand([own], mover)

    def _read_all(self, state: MatchState) -> None:
        views = [state.view(s) for s in range(self.players)]
        self.hands = [_hand(views, s) for s in range(self.players)]
        self.bids = [views[s].seats[s].bid for s in range(self.players)]


def _frame(public: MatchView, seats: _Seats, mover: int | None, move: Move | None) -> dict[str, Any]:
    return {
        "move": None if move is None else {"seat": mover, **move.to_dict()},
        "round": public.round,
        "dealer": public.dealer,
        "phase": public.phase.name,
        "trumpCard": public.trump_card,
        "trumpSuit": None if public.trump_suit is None else public.trump_suit.name,
        "leadSuit": None if public.lead_suit is None else public.lead_suit.name,
        "toAct": public.to_act,
        "awaiting": list(public.awaiting),
        "seats": [
            {"seat": seat.seat, "score": seat.score, "bid": seats.bids[seat.seat], "tricks": seat.tricks,
             "hand": seats.hands[seat.seat]}
            for seat in public.seats
        ],
        "currentTrick": [_play(p) for p in public.current_trick],
        "lastTrick": None if public.last_trick is None else _trick(public.last_trick),
        "results": len(public.round_results),
    }


def _hand(views: list[MatchView], seat: int) -> list[str]:
    """A seat's cards as the first of ``views`` that shows them has them: its own view, except in
    a clairvoyant round, where the others' do (then a seat's own view shows no hand)."""
    for view in views:
        hand = view.seats[seat].hand
        if hand is not None:
            return list(hand)
    return []


def _play(play: Play) -> dict[str, Any]:
    return {"seat": play.seat, "card": play.card}


def _trick(trick: Trick) -> dict[str, Any]:
    return {"leader": trick.leader, "plays": [_play(p) for p in trick.plays], "winner": trick.winner}
