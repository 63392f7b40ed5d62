"""Moves: the value object bots and the API speak, and the small-int actions of the engine.

A :class:`Move` has exactly one of ``bid``, ``card`` (a code) or ``trump`` (a :class:`Suit`).
Inside the engine a move is an *action*, a small int (card ids 0-59, ``ACTION_TRUMP + suit``,
``ACTION_BID + bid``), so that search code can enumerate and apply moves without building
objects.

>>> Move(bid=2), Move(card="R7"), Move(trump=Suit.BLUE)
(Move(bid=2), Move(card='R7'), Move(trump=BLUE))
>>> Move.from_dict({"card": "R7"}) == Move(card="R7")
True
>>> Move.from_dict({"bid": 1, "card": "W"})
Traceback (most recent call last):
...
wizard.errors.InvalidMoveError: a move sets exactly one of bid, card, trump; this one sets bid, card
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from wizard.cards import CARD_IDS, CODE_MASK, CODES, Suit
from wizard.errors import InvalidMoveError

#: actions 0-59 play that card id; 60-63 choose that suit as trump; 64 + b bids b.
ACTION_TRUMP: Final = CARD_IDS
ACTION_BID: Final = ACTION_TRUMP + 4
MAX_BID = 20


@dataclass(frozen=True, slots=True)
class Move:
    bid: int | None = None
    card: str | None = None
    trump: Suit | None = None

    def __post_init__(self) -> None:
        given = [name for name in ("bid", "card", "trump") if getattr(self, name) is not None]
        if len(given) != 1:
            raise InvalidMoveError(
                "a move sets exactly one of bid, card, trump; this one sets "
                + (", ".join(given) if given else "none")
            )
        if self.bid is not None and (isinstance(self.bid, bool) or not isinstance(self.bid, int)):
            raise InvalidMoveError(f"bid must be a whole number, not {self.bid!r}")
        if self.card is not None and (not isinstance(self.card, str) or self.card not in CODE_MASK):
            raise InvalidMoveError(
                f"{self.card!r} is not a card code: use a suit letter B, G, R or Y with a rank"
                " (B1 … B13), W for a Wizard or J for a Jester"
            )
        if self.trump is not None and not isinstance(self.trump, Suit):
            try:
                if isinstance(self.trump, str):
                    object.__setattr__(self, "trump", Suit[self.trump])
                elif type(self.trump) is int:
                    object.__setattr__(self, "trump", Suit(self.trump))
                else:
                    raise ValueError(self.trump)
            except (KeyError, ValueError):
                raise InvalidMoveError(
                    f"trump must be one of BLUE, GREEN, RED, YELLOW, not {self.trump!r}"
                ) from None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Move:
        """A move from its wire form, ``{"bid": 2}``, ``{"card": "R7"}`` or ``{"trump": "BLUE"}``."""
        if not isinstance(data, Mapping):
            raise InvalidMoveError("a move is an object with one of the fields bid, card, trump")
        unknown = set(data) - {"bid", "card", "trump"}
        if unknown:
            raise InvalidMoveError(
                f"unknown move field(s) {', '.join(sorted(map(str, unknown)))}: use bid, card or trump"
            )
        return cls(data.get("bid"), data.get("card"), data.get("trump"))

    def to_dict(self) -> dict[str, Any]:
        if self.bid is not None:
            return {"bid": self.bid}
        if self.card is not None:
            return {"card": self.card}
        assert self.trump is not None
        return {"trump": self.trump.name}

    def __str__(self) -> str:
        if self.bid is not None:
            return f"bid {self.bid}"
        if self.card is not None:
            return f"card {self.card}"
        assert self.trump is not None
        return f"trump {self.trump.name}"

    def __repr__(self) -> str:
        if self.trump is not None:
            return f"Move(trump={self.trump.name})"
        key, value = next(iter(self.to_dict().items()))
        return f"Move({key}={value!r})"


@lru_cache(maxsize=256)  # a Move never changes: one for each action (a byte)
def move_of_action(action: int) -> Move:
    """The Move an action stands for (card ids become their codes)."""
    if action < ACTION_TRUMP:
        return Move(card=CODES[action])
    if action < ACTION_BID:
        return Move(trump=Suit(action - ACTION_TRUMP))
    return Move(bid=action - ACTION_BID)

