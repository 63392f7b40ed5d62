"""Per-seat views: exactly what one seat (or a spectator) may know, and nothing else.

The state builds a seat's view (:meth:`wizard.state.MatchState.view`) by these rules:

- a seat sees its own hand; under CLAIRVOYANCE in round 1 it sees every other seat's
  card and not its own; a spectator sees no hand of a live match;
- bids are public as soon as they are made, except under HIDDEN_BIDS (shown once every
  bid is in) and SECRET_BIDS (shown once the round is over, in ``round_results``); a seat
  always sees its own bid;
- played cards, the turned trump card, tricks and scores are public;
- the seed and its salt are shown only once the match is finished (their hash from the
  start).

Two states that differ only in cards a seat cannot see give that seat equal views.

This module holds the views' types and their JSON form; it knows nothing of the state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from typing import Any

from wizard.cards import Suit
from wizard.moves import Move
from wizard.rules import Phase, Ruleset, Variant


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
