"""Cards as small ints, hands as bit masks, and the card codes of the wire format.

Every card of every deck has one id in ``0 … 59``: suit cards are ``suit * 13 + rank - 1``
(so the junior deck uses ranks 1-8 of the same numbering), Wizards are ``52 … 55`` and
Jesters ``56 … 59``.  Copies of a Wizard or a Jester are distinct ids inside the engine
but share one code (``W`` / ``J``) outside it, because the players cannot tell them apart.

>>> card_code(0), card_code(51), card_code(52), card_code(59)
('B1', 'Y13', 'W', 'J')
>>> [card_code(c) for c in cards_of(mask_of(parse_cards(["R7", "W", "B1"], JUNIOR_DECK)))]
['B1', 'R7', 'W']
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property
from typing import Final

from wizard.errors import InvalidMoveError

SUIT_LETTERS = "BGRY"
RANKS_PER_SUIT: Final = 13
WIZARD_BASE: Final = 52
JESTER_BASE: Final = 56
CARD_IDS: Final = 60

#: ``SUIT_OF[card]``: 0-3 for suit cards, ``WIZARD`` or ``JESTER`` for the specials.
WIZARD: Final = 4
JESTER: Final = 5


class Suit(IntEnum):
    """The four suits; card codes use their first letters."""

    BLUE = 0
    GREEN = 1
    RED = 2
    YELLOW = 3

    @property
    def letter(self) -> str:
        return SUIT_LETTERS[self]


def _suit_of(card: int) -> int:
    if card < WIZARD_BASE:
        return card // RANKS_PER_SUIT
    return WIZARD if card < JESTER_BASE else JESTER


SUIT_OF: tuple[int, ...] = tuple(_suit_of(c) for c in range(CARD_IDS))
#: Rank 1-13 of suit cards; Jester 0 and Wizard 14, the values of the SINGLE_SUIT variant.
VALUE_OF: tuple[int, ...] = tuple(
    c % RANKS_PER_SUIT + 1 if c < WIZARD_BASE else (14 if c < JESTER_BASE else 0)
    for c in range(CARD_IDS)
)
BIT: tuple[int, ...] = tuple(1 << c for c in range(CARD_IDS))
SUIT_MASK: tuple[int, ...] = tuple(
    sum(1 << (s * RANKS_PER_SUIT + r) for r in range(RANKS_PER_SUIT)) for s in range(4)
)
WIZARD_MASK = sum(1 << c for c in range(WIZARD_BASE, JESTER_BASE))
JESTER_MASK = sum(1 << c for c in range(JESTER_BASE, CARD_IDS))
SPECIAL_MASK = WIZARD_MASK | JESTER_MASK


def card_code(card: int) -> str:
    """The wire code of a card id: ``B1`` … ``Y13``, ``W``, ``J``."""
    return CODES[card]


CODES: tuple[str, ...] = tuple(
    (SUIT_LETTERS[c // RANKS_PER_SUIT] + str(c % RANKS_PER_SUIT + 1))
    if c < WIZARD_BASE
    else ("W" if c < JESTER_BASE else "J")
    for c in range(CARD_IDS)
)
#: code -> bit mask of every id carrying that code (four ids for ``W`` and ``J``).
CODE_MASK: dict[str, int] = {}
for _c, _code in enumerate(CODES):
    CODE_MASK[_code] = CODE_MASK.get(_code, 0) | (1 << _c)
del _c, _code
#: ``SAME_CODE_MASK[card]``: every id sharing that card's code (itself, or the W / J copies).
SAME_CODE_MASK: tuple[int, ...] = tuple(CODE_MASK[CODES[c]] for c in range(CARD_IDS))


def lowest_copy(hand: int, card: int) -> int:
    """The copy of ``card`` the seat plays: Wizards and Jesters are told apart only inside
    the engine, so it always plays the lowest-numbered copy it holds, which makes a card
    code name one exact card and a record of codes replay to identical state."""
    same = hand & SAME_CODE_MASK[card]
    return (same & -same).bit_length() - 1


def cards_of(mask: int) -> list[int]:
    """The card ids in a mask, lowest first (a list: search draws from them in its loops,
    where a generator's resuming per card cost more than the list)."""
    cards = []
    while mask:
        low = mask & -mask
        cards.append(low.bit_length() - 1)
        mask ^= low
    return cards


def mask_of(cards: Iterable[int]) -> int:
    mask = 0
    for c in cards:
        mask |= 1 << c
    return mask


def codes_of(mask: int) -> tuple[str, ...]:
    """The codes of a hand, in deck order (suits B, G, R, Y by rank, then W, then J)."""
    return tuple(CODES[c] for c in cards_of(mask))


@dataclass(frozen=True)
class Deck:
    """One of the two decks: which ids it holds and in which canonical order."""

    name: str
    max_rank: int
    specials_each: int

    @cached_property
    def cards(self) -> tuple[int, ...]:
        """Canonical order, the start of every shuffle: B1…, G1…, R1…, Y1…, Wizards, Jesters."""
        return _DECK_CARDS[self.name]

    @property
    def size(self) -> int:
        return len(self.cards)

    @cached_property
    def mask(self) -> int:
        return _DECK_MASKS[self.name]


WIZARD_DECK = Deck("WIZARD", 13, 4)
JUNIOR_DECK = Deck("JUNIOR", 8, 2)
_DECK_CARDS = {
    d.name: tuple(s * RANKS_PER_SUIT + r for s in range(4) for r in range(d.max_rank))
    + tuple(range(WIZARD_BASE, WIZARD_BASE + d.specials_each))
    + tuple(range(JESTER_BASE, JESTER_BASE + d.specials_each))
    for d in (WIZARD_DECK, JUNIOR_DECK)
}
_DECK_MASKS = {name: mask_of(cards) for name, cards in _DECK_CARDS.items()}


def parse_cards(codes: Iterable[str], deck: Deck) -> list[int]:
    """Turn codes into distinct ids of ``deck``; repeated ``W``/``J`` take the next copy.

    Raises :class:`InvalidMoveError` for a code that is not a card of the deck, or one
    given more often than the deck holds it.
    """
    taken = 0
    out: list[int] = []
    for code in codes:
        candidates = CODE_MASK.get(code, 0) & deck.mask & ~taken if isinstance(code, str) else 0
        if not candidates:
            if isinstance(code, str) and CODE_MASK.get(code, 0) & deck.mask:
                raise InvalidMoveError(f"card {code!r} appears more often than the {deck.name} deck holds it")
            raise InvalidMoveError(
                f"{code!r} is not a card of the {deck.name} deck: use B1-B{deck.max_rank}, "
                f"G…, R…, Y… (suit letter + rank), W or J"
            )
        low = candidates & -candidates
        taken |= low
        out.append(low.bit_length() - 1)
    return out
