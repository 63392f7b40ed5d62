"""Per-seat views: exactly what one seat (or a spectator) may know, and nothing else.

A view is built from the state by :func:`build_view` (called as ``state.view(seat)``):

- a seat sees its own hand; under CLAIRVOYANCE in round 1 it sees every other seat's
  card and not its own; a spectator sees no hand of a live match;
- bids are public as soon as they are made, except under HIDDEN_BIDS (shown once every
  bid is in) and SECRET_BIDS (shown once the round is over, in ``round_results``); a seat
  always sees its own bid;
- played cards, the turned trump card, tricks and scores are public;
- the seed and its salt are shown only once the match is finished (their hash from the
  start).

Two states that differ only in cards a seat cannot see give that seat equal views.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from wizard.cards import CODES, Suit, codes_of
from wizard.moves import Move
from wizard.rules import BidReveal, Ruleset, Variant

if TYPE_CHECKING:
    from wizard.state import MatchState, Phase


@dataclass(frozen=True, slots=True)
class Play:
    seat: int
    card: str


@dataclass(frozen=True, slots=True)
class Trick:
    leader: int
    plays: tuple[Play, ...]
    winner: int


@dataclass(frozen=True, slots=True)
class SeatView:
    seat: int
    score: int
    #: None while hidden from the viewer (HIDDEN_BIDS / SECRET_BIDS) or not yet made.
    bid: int | None
    tricks: int
    #: The seat's cards as far as the viewer may see them, else None.
    hand: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class SeatResult:
    seat: int
    bid: int
    tricks: int
    points: int


@dataclass(frozen=True, slots=True)
class RoundResult:
    round: int
    seats: tuple[SeatResult, ...]


@dataclass(frozen=True, slots=True)
class MatchView:
    """One seat's (or a spectator's) view of a match."""

    ruleset: Ruleset
    variants: tuple[Variant, ...]
    players: int
    round: int
    rounds: int
    hand_size: int
    dealer: int
    phase: Phase
    trump_card: str | None
    trump_suit: Suit | None
    to_act: int | None
    #: Seats that have a move to make now (several while bids are simultaneous).
    awaiting: tuple[int, ...]
    my_seat: int | None
    hand: tuple[str, ...] | None
    legal_moves: tuple[Move, ...]
    seats: tuple[SeatView, ...]
    current_trick: tuple[Play, ...]
    #: The lead suit of the current trick: None before it is set or after a Wizard led.
    lead_suit: Suit | None
    completed_tricks: tuple[Trick, ...]
    last_trick: Trick | None
    round_results: tuple[RoundResult, ...]
    winners: tuple[int, ...] | None
    moves_made: int
    seed_hash: str
    seed: str | None
    #: the salt hashed with the seed into ``seed_hash``, shown with the seed (None until the
    #: match is finished, and for a match without a salt)
    salt: str | None = None

    @property
    def my_bid(self) -> int | None:
        return None if self.my_seat is None else self.seats[self.my_seat].bid

    @property
    def my_tricks(self) -> int:
        return 0 if self.my_seat is None else self.seats[self.my_seat].tricks

    def to_dict(self) -> dict[str, Any]:
        """The view as plain JSON data, with the API's camelCase field names. ``salt`` is
        there only when the view shows one, so a match without a salt reads as it did before
        salts existed."""
        data: dict[str, Any] = _jsonable(self)
        if self.salt is None:
            del data["salt"]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MatchView:
        """The view from its JSON form: :meth:`to_dict`'s output, or the API's ``Match`` object
        (its other fields, such as ``id``, ``status`` or ``deadline``, are ignored).

        Raises :class:`~wizard.errors.InvalidMoveError` (for a bad legal move) or ``ValueError``,
        ``KeyError`` or ``TypeError`` for data that is not a view.
        """
        from wizard.state import Phase

        def suit(name: str | None) -> Suit | None:
            return None if name is None else Suit[name]

        def hand(cards: Sequence[str] | None) -> tuple[str, ...] | None:
            return None if cards is None else tuple(cards)

        def trick(t: Mapping[str, Any] | None) -> Trick | None:
            return None if t is None else Trick(t["leader"], _plays(t["plays"]), t["winner"])

        winners = data["winners"]
        return cls(
            ruleset=Ruleset(data["ruleset"]),
            variants=tuple(sorted((Variant(v) for v in data["variants"]), key=lambda v: v.value)),
            players=data["players"],
            round=data["round"],
            rounds=data["rounds"],
            hand_size=data["handSize"],
            dealer=data["dealer"],
            phase=Phase(data["phase"]),
            trump_card=data["trumpCard"],
            trump_suit=suit(data["trumpSuit"]),
            to_act=data["toAct"],
            awaiting=tuple(data["awaiting"]),
            my_seat=data["mySeat"],
            hand=hand(data["hand"]),
            legal_moves=tuple(Move.from_dict(m) for m in data["legalMoves"]),
            seats=tuple(
                SeatView(s["seat"], s["score"], s["bid"], s["tricks"], hand(s["hand"])) for s in data["seats"]
            ),
            current_trick=_plays(data["currentTrick"]),
            lead_suit=suit(data["leadSuit"]),
            completed_tricks=tuple(trick(t) for t in data["completedTricks"]),  # type: ignore[misc]
            last_trick=trick(data["lastTrick"]),
            round_results=tuple(
                RoundResult(r["round"], tuple(SeatResult(x["seat"], x["bid"], x["tricks"], x["points"]) for x in r["seats"]))
                for r in data["roundResults"]
            ),
            winners=None if winners is None else tuple(winners),
            moves_made=data["movesMade"],
            seed_hash=data["seedHash"],
            seed=data["seed"],
            salt=data.get("salt"),
        )

    def cards_played_this_round(self) -> tuple[str, ...]:
        """Every card already played in this round, finished tricks first."""
        played = [p.card for t in self.completed_tricks for p in t.plays]
        return tuple(played + [p.card for p in self.current_trick])


def _plays(plays: Sequence[Mapping[str, Any]]) -> tuple[Play, ...]:
    return tuple(Play(p["seat"], p["card"]) for p in plays)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _jsonable(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.name if isinstance(value, Suit) else value.value
    if isinstance(value, Move):
        return value.to_dict()
    if is_dataclass(value):
        return {_camel(f.name): _jsonable(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    return value


def _trick(leader: int, cards: tuple[int, ...], winner: int, n: int) -> Trick:
    return Trick(leader, tuple(Play((leader + i) % n, CODES[c]) for i, c in enumerate(cards)), winner)


def _bid_visible(state: MatchState, viewer: int | None, seat: int) -> bool:
    if viewer == seat or state.is_finished:
        return True
    reveal = state.config.bid_reveal
    if reveal is BidReveal.AT_ONCE:
        return True
    if reveal is BidReveal.ALL_IN:
        return None not in state._bids
    return False


def _hand_visible(state: MatchState, viewer: int | None, seat: int) -> bool:
    if viewer is None:
        return False
    clairvoyant = state.config.clairvoyant(state._round) and not state.is_finished
    return (viewer != seat) if clairvoyant else (viewer == seat)


def build_view(state: MatchState, viewer: int | None) -> MatchView:
    from wizard.state import Phase

    n = state._n
    config = state.config
    finished = state._phase is Phase.FINISHED
    seats = tuple(
        SeatView(
            seat=s,
            score=state._scores[s],
            bid=state._bids[s] if _bid_visible(state, viewer, s) else None,
            tricks=state._tricks[s],
            hand=codes_of(state._hands[s]) if _hand_visible(state, viewer, s) else None,
        )
        for s in range(n)
    )
    scoring = config.scoring
    results = tuple(
        RoundResult(
            r + 1,
            tuple(SeatResult(s, bids[s], tricks[s], scoring.points(bids[s], tricks[s])) for s in range(n)),
        )
        for r, (bids, tricks) in enumerate(state._results)
    )
    outcome = state.outcome
    lead = state._lead
    last = state._last_trick
    return MatchView(
        ruleset=config.ruleset,
        variants=tuple(sorted(config.variants, key=lambda v: v.value)),
        players=n,
        round=state._round,
        rounds=config.rounds,
        hand_size=config.hand_size(state._round),
        dealer=state._dealer,
        phase=state._phase,
        trump_card=None if state._trump_card is None else CODES[state._trump_card],
        trump_suit=None if state._trump_suit is None else Suit(state._trump_suit),
        to_act=state.to_act,
        awaiting=state.awaiting(),
        my_seat=viewer,
        hand=None if viewer is None else seats[viewer].hand,
        legal_moves=() if viewer is None else tuple(state.legal_moves(viewer)),
        seats=seats,
        current_trick=tuple(
            Play((state._leader + i) % n, CODES[c]) for i, c in enumerate(state._trick)
        ),
        lead_suit=Suit(lead) if lead < 4 and state._trick else None,
        completed_tricks=tuple(_trick(l, c, w, n) for l, c, w in state._done),
        last_trick=None if last is None else _trick(*last, n),
        round_results=results,
        winners=None if outcome is None else outcome.winners,
        moves_made=len(state._log),
        seed_hash=state.seed_hash,
        seed=state.seed if finished else None,
        salt=state.salt if finished else None,
    )
