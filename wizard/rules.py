"""The rules as configuration: rulesets, variants, round counts, scoring, and what a
match's variants change; and the rules of bidding and scoring a round, once, for both the
checked step (:mod:`wizard.state`) and the fast playout (:mod:`wizard.playout`); scoring's
function, :func:`score_round`, is :mod:`wizard.tricks`' (which mypyc compiles), re-exported
here.  A :class:`MatchConfig` is immutable and validated on creation;
a configuration RULES.md rules out raises :class:`ConfigError` naming the conflict.

>>> cfg = MatchConfig(Ruleset.WIZARD, 4)
>>> cfg.rounds, cfg.hand_size(15), cfg.scoring.name
(15, 15, 'STANDARD')
>>> MatchConfig(Ruleset.WIZARD, 4, frozenset({Variant.HIDDEN_BIDS, Variant.SECRET_BIDS}))
Traceback (most recent call last):
...
wizard.errors.ConfigError: variants HIDDEN_BIDS and SECRET_BIDS cannot be combined: SECRET_BIDS already hides the bids (until the round ends); pick one
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from typing import TypeVar

from wizard.cards import JUNIOR_DECK, WIZARD_DECK, Deck
from wizard.errors import ConfigError

# the round's score is added up where the playout runs natively (the compiled trick rules)
from wizard.tricks import PointsTable as PointsTable
from wizard.tricks import score_round as score_round


class Ruleset(str, Enum):
    WIZARD = "WIZARD"
    WIZARD_JUNIOR = "WIZARD_JUNIOR"
    WIZARD_JUNIOR_CLASSIC = "WIZARD_JUNIOR_CLASSIC"


class Variant(str, Enum):
    PLUS_MINUS_ONE = "PLUS_MINUS_ONE"
    HIDDEN_BIDS = "HIDDEN_BIDS"
    SECRET_BIDS = "SECRET_BIDS"
    CLAIRVOYANCE = "CLAIRVOYANCE"
    SINGLE_SUIT = "SINGLE_SUIT"


class Phase(str, Enum):
    """What a match waits for: the dealer to name trump (a Wizard was turned up), bids,
    cards, or nothing more."""

    CHOOSE_TRUMP = "CHOOSE_TRUMP"
    BID = "BID"
    PLAY = "PLAY"
    FINISHED = "FINISHED"


class Scoring(Enum):
    #: exact bid: 20 + 10 per trick; otherwise -10 per trick off.
    STANDARD = "STANDARD"
    #: exact bid: +bid (bid 0 and won 0: +1); otherwise 0.
    CHIPS = "CHIPS"

    def points(self, bid: int, tricks: int) -> int:
        if self is Scoring.STANDARD:
            return 20 + 10 * tricks if bid == tricks else -10 * abs(tricks - bid)
        if bid == tricks:
            return bid if bid else 1
        return 0


MAX_TRICKS = 20
#: ``POINTS[scoring][bid][tricks]``: :meth:`Scoring.points` precomputed for the engine.
POINTS: dict[Scoring, PointsTable] = {
    scoring: tuple(tuple(scoring.points(b, t) for t in range(MAX_TRICKS + 1)) for b in range(MAX_TRICKS + 1))
    for scoring in Scoring
}


def legal_bids(size: int, bids: Sequence[int | None], is_dealer: bool, plus_minus_one: bool) -> list[int]:
    """The bids a seat may make in a round of ``size`` tricks, ``bids`` holding the bids made
    so far (None: not made): any number of tricks from 0 to ``size``, except that under
    PLUS_MINUS_ONE the dealer, who bids last, may not bring the total to ``size``.

    >>> legal_bids(3, [1, None, 1, None], is_dealer=True, plus_minus_one=True)
    [0, 2, 3]
    """
    legal = list(range(size + 1))
    if plus_minus_one and is_dealer:
        forbidden = size - sum(b for b in bids if b is not None)
        if 0 <= forbidden <= size:
            legal.remove(forbidden)
    return legal


class BidReveal(Enum):
    """When one seat's bid becomes visible to the other seats."""

    AT_ONCE = "AT_ONCE"  # the usual: public as soon as it is made
    ALL_IN = "ALL_IN"  # HIDDEN_BIDS: all shown once every bid is in
    ROUND_END = "ROUND_END"  # SECRET_BIDS: shown once the round's last trick is done


@dataclass(frozen=True)
class RulesetInfo:
    deck: Deck
    rounds_by_players: dict[int, int]
    scoring: Scoring


RULESETS: dict[Ruleset, RulesetInfo] = {
    Ruleset.WIZARD: RulesetInfo(WIZARD_DECK, {3: 20, 4: 15, 5: 12, 6: 10}, Scoring.STANDARD),
    Ruleset.WIZARD_JUNIOR: RulesetInfo(JUNIOR_DECK, {3: 8, 4: 8, 5: 7, 6: 6}, Scoring.CHIPS),
    Ruleset.WIZARD_JUNIOR_CLASSIC: RulesetInfo(
        JUNIOR_DECK, {3: 12, 4: 9, 5: 7, 6: 6}, Scoring.STANDARD
    ),
}
_E = TypeVar("_E", bound=Enum)
SINGLE_SUIT_ROUNDS = 12
SINGLE_SUIT_EXTRA_CARDS = 3  # round r draws r + 3 cards: 4 to 15
PILE_SIZE = 15  # one suit of 13 plus one Wizard and one Jester


def _as_enum(enum: type[_E], value: object, what: str) -> _E:
    try:
        return enum(value)
    except ValueError:
        names = ", ".join(str(m.value) for m in enum)
        raise ConfigError(f"unknown {what} {value!r}: use one of {names}") from None


@dataclass(frozen=True)
class MatchConfig:
    """The rules of one match: immutable, validated, and free of any chance.

    ``deals`` is an optional stacked deck: per round (starting with round 1), a list of card
    codes in dealing order; an empty list, or a round beyond the list, is shuffled from the
    seed. Deals are checked against the dealer of their round when the match is set up
    (see :func:`wizard.state.new_match`).
    """

    ruleset: Ruleset
    players: int
    variants: frozenset[Variant] = field(default_factory=frozenset)
    first_dealer: int | None = None
    deals: tuple[tuple[str, ...], ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "ruleset", _as_enum(Ruleset, self.ruleset, "ruleset"))
        try:
            variants = frozenset(_as_enum(Variant, v, "variant") for v in self.variants)
        except TypeError:
            raise ConfigError(f"variants must be a list of variant names, not {self.variants!r}") from None
        object.__setattr__(self, "variants", variants)
        if isinstance(self.players, bool) or not isinstance(self.players, int) or not 3 <= self.players <= 6:
            raise ConfigError(f"players must be a whole number from 3 to 6, not {self.players!r}")
        if self.first_dealer is not None and (
            isinstance(self.first_dealer, bool)
            or not isinstance(self.first_dealer, int)
            or not 0 <= self.first_dealer < self.players
        ):
            raise ConfigError(
                f"firstDealer must be a seat from 0 to {self.players - 1}, not {self.first_dealer!r}"
            )
        for conflict in _variant_conflicts(self.ruleset, self.players, variants):
            raise ConfigError(conflict)
        if self.deals is not None:
            deals = tuple(tuple(r) for r in self.deals)
            if len(deals) > self.rounds:
                raise ConfigError(
                    f"deals lists {len(deals)} rounds but this match has only {self.rounds}"
                )
            object.__setattr__(self, "deals", deals)

    @classmethod
    def create(
        cls,
        ruleset: Ruleset | str = Ruleset.WIZARD,
        players: int = 4,
        variants: Iterable[Variant | str] = (),
        first_dealer: int | None = None,
        deals: Iterable[Iterable[str]] | None = None,
    ) -> MatchConfig:
        try:
            variant_set = frozenset(variants)
        except TypeError:
            raise ConfigError(f"variants must be a list of variant names, not {variants!r}") from None
        if deals is not None:
            if isinstance(deals, str | bytes) or not isinstance(deals, Iterable):
                raise ConfigError("deals must be a list of rounds, each a list of card codes")
            rounds = []
            for r in deals:
                if isinstance(r, str | bytes) or not isinstance(r, Iterable):
                    raise ConfigError("deals must be a list of rounds, each a list of card codes")
                cards = tuple(r)
                if not all(isinstance(c, str) for c in cards):
                    raise ConfigError("deals must be a list of rounds, each a list of card codes (strings)")
                rounds.append(cards)
            deals = tuple(rounds)
        return cls(ruleset, players, variant_set, first_dealer, deals)  # type: ignore[arg-type]

    @cached_property
    def stacked(self) -> bool:
        """Whether any round's deal is given (``deals`` of empty rounds only stacks nothing)."""
        return any(self.deals or ())

    @cached_property
    def info(self) -> RulesetInfo:
        return RULESETS[self.ruleset]

    @cached_property
    def deck(self) -> Deck:
        return self.info.deck

    @cached_property
    def single_suit(self) -> bool:
        return Variant.SINGLE_SUIT in self.variants

    @cached_property
    def rounds(self) -> int:
        if self.single_suit:
            return SINGLE_SUIT_ROUNDS
        return self.info.rounds_by_players[self.players]

    @cached_property
    def scoring(self) -> Scoring:
        return self.info.scoring

    @cached_property
    def points(self) -> PointsTable:
        """``points[bid][tricks]``: :meth:`Scoring.points` of this match, as a table."""
        return POINTS[self.scoring]

    def hand_size(self, round_number: int) -> int:
        """Cards each seat holds at the start of a round, which is also its number of tricks."""
        return round_number + SINGLE_SUIT_EXTRA_CARDS if self.single_suit else round_number

    @cached_property
    def simultaneous_bids(self) -> bool:
        return bool(self.variants & {Variant.HIDDEN_BIDS, Variant.SECRET_BIDS})

    @cached_property
    def bid_reveal(self) -> BidReveal:
        if Variant.SECRET_BIDS in self.variants:
            return BidReveal.ROUND_END
        if Variant.HIDDEN_BIDS in self.variants:
            return BidReveal.ALL_IN
        return BidReveal.AT_ONCE

    @cached_property
    def plus_minus_one(self) -> bool:
        return Variant.PLUS_MINUS_ONE in self.variants

    def clairvoyant(self, round_number: int) -> bool:
        """Round 1 of CLAIRVOYANCE: seats see the others' cards, not their own."""
        return round_number == 1 and Variant.CLAIRVOYANCE in self.variants


def _variant_conflicts(ruleset: Ruleset, players: int, variants: frozenset[Variant]) -> list[str]:
    conflicts = []
    if {Variant.HIDDEN_BIDS, Variant.SECRET_BIDS} <= variants:
        conflicts.append(
            "variants HIDDEN_BIDS and SECRET_BIDS cannot be combined: SECRET_BIDS already hides"
            " the bids (until the round ends); pick one"
        )
    for hiding in (Variant.HIDDEN_BIDS, Variant.SECRET_BIDS):
        if Variant.PLUS_MINUS_ONE in variants and hiding in variants:
            conflicts.append(
                f"variants PLUS_MINUS_ONE and {hiding.value} cannot be combined: with bids made"
                " at once nobody bids last, so no bid can be forbidden"
            )
    if Variant.SINGLE_SUIT in variants:
        if players > 4:
            conflicts.append(
                f"variant SINGLE_SUIT is for 3 or 4 players (one suit each), not {players}"
            )
        if ruleset is not Ruleset.WIZARD:
            conflicts.append(
                f"variant SINGLE_SUIT needs the WIZARD deck; ruleset {ruleset.value} uses the junior deck"
            )
        if Variant.CLAIRVOYANCE in variants:
            conflicts.append(
                "variants CLAIRVOYANCE and SINGLE_SUIT cannot be combined: CLAIRVOYANCE needs a"
                " first round of one card each, SINGLE_SUIT deals four"
            )
    return conflicts
