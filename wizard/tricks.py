"""Trick play: what a seat may play (following the lead), who takes a trick, and what the
tricks a seat took score against its bid, each rule once, as a function, and as the tables
the engine runs on.

>>> from wizard.cards import parse_cards, WIZARD_DECK
>>> def winner(codes, trump):
...     return trick_winner(parse_cards(codes, WIZARD_DECK), trump)
>>> winner(["R5", "W", "W"], trump=None)       # the first Wizard
1
>>> winner(["R5", "R9", "B2"], trump=0)        # the highest trump
2
>>> winner(["R5", "R9", "G13"], trump=0)       # the highest of the lead suit
1
>>> winner(["J", "J", "J"], trump=0)           # only Jesters: the first
0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from wizard.cards import CARD_IDS, JESTER, SPECIAL_MASK, SUIT_MASK, SUIT_OF, VALUE_OF, WIZARD

#: index of the "no trump" row in :data:`BEATS`
NO_TRUMP: Final = 4
#: The lead of a trick while it is empty or holds only Jesters: the next card sets it.
#: (0-3 is a lead suit; every sentinel is above 3 so ``lead < 4`` tests for a lead suit.)
LEAD_OPEN: Final = 6
#: The lead after a Wizard led (and always under SINGLE_SUIT): no suit to follow.
LEAD_FREE: Final = WIZARD
#: ``FOLLOW_MASK[suit]``: the cards a seat holding that suit may play when it is led.
FOLLOW_MASK = tuple(SUIT_MASK[s] | SPECIAL_MASK for s in range(4))
#: ``table[bid][tricks]``: the points of a seat for one round (:data:`wizard.rules.POINTS`)
PointsTable = tuple[tuple[int, ...], ...]


def playable(hand: int, lead: int) -> int:
    """The cards of ``hand`` (a bit mask) its seat may play on a trick whose lead is ``lead``:
    a seat holding the lead suit plays that suit, a Wizard or a Jester; any card otherwise."""
    if lead < 4 and hand & SUIT_MASK[lead]:
        return hand & FOLLOW_MASK[lead]
    return hand


def lead_after(card: int, lead: int, single_suit: bool) -> int:
    """The lead once ``card`` is played on a trick whose lead was ``lead``: the first card
    that is not a Jester sets it (a Wizard to LEAD_FREE); SINGLE_SUIT never has one."""
    if lead != LEAD_OPEN:
        return lead
    suit = SUIT_OF[card]
    if suit == JESTER:
        return LEAD_OPEN
    return LEAD_FREE if single_suit else suit


def takes_trick(card: int, best: int, trump: int | None) -> bool:
    """Whether ``card``, played after ``best`` (the card winning the trick so far), takes it.

    First rule that applies: the first Wizard; the highest trump; the highest card of the
    lead suit; only Jesters: the first.  ``best`` is always a Wizard, a trump, a card of
    the lead suit, or (while only Jesters were played) a Jester.
    """
    best_suit = SUIT_OF[best]
    if best_suit == WIZARD:
        return False
    suit = SUIT_OF[card]
    if suit == WIZARD:
        return True
    if suit == JESTER:
        return False
    if best_suit == JESTER:
        return True
    if suit == best_suit:
        return card > best
    return suit == trump


def takes_trick_single_suit(card: int, best: int) -> bool:
    """SINGLE_SUIT: the highest value (Jester 0, ranks, Wizard 14); the earliest of equals."""
    return VALUE_OF[card] > VALUE_OF[best]


def _table(rule) -> tuple[tuple[bool, ...], ...]:  # type: ignore[no-untyped-def]
    return tuple(tuple(rule(card, best) for card in range(CARD_IDS)) for best in range(CARD_IDS))


#: ``BEATS[trump][best][card]``, trump 0-3 or NO_TRUMP: :func:`takes_trick` precomputed.
BEATS: tuple[tuple[tuple[bool, ...], ...], ...] = tuple(
    _table(lambda c, b, t=t: takes_trick(c, b, None if t == NO_TRUMP else t)) for t in range(5)
)
BEATS_SINGLE_SUIT = _table(takes_trick_single_suit)


def trick_table(trump: int | None, single_suit: bool = False) -> tuple[tuple[bool, ...], ...]:
    """``table[best][card]``: whether ``card`` takes the trick from ``best``, this round."""
    return BEATS_SINGLE_SUIT if single_suit else BEATS[NO_TRUMP if trump is None else trump]


def trick_winner(cards: Sequence[int], trump: int | None, single_suit: bool = False) -> int:
    """The position (0-based, in play order) of the card that takes a full trick."""
    beats = trick_table(trump, single_suit)
    best = 0
    for pos in range(1, len(cards)):
        if beats[cards[best]][cards[pos]]:
            best = pos
    return best


def score_round(points: PointsTable, bids: Sequence[int], tricks: Sequence[int], scores: list[int]) -> None:
    """Add each seat's points for a round (its bid, the tricks it took) to ``scores``, from
    the match's table of points (:attr:`wizard.rules.MatchConfig.points`).

    >>> from wizard.rules import POINTS, Scoring
    >>> scores = [0, 0, 0]
    >>> score_round(POINTS[Scoring.STANDARD], bids=[1, 0, 2], tricks=[1, 1, 1], scores=scores)
    >>> scores
    [30, -10, -10]
    """
    for seat, bid in enumerate(bids):
        scores[seat] += points[bid][tricks[seat]]
