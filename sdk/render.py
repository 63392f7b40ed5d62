"""Matches as plain text, for a terminal or a log: one round of a replay
(:func:`render_round`) and a live match as a seat or a spectator sees it (:func:`render_view`).
``wizard-arena replay`` and ``wizard-arena watch`` both print through these helpers, so a
seat, a card, a trick or the trump reads the same in both.

Seats are shown by name when names are known (``names[seat]``; ``None`` for a seat without
one), else as ``seat N``; a name two seats share gets its seat number (``house-random#2``).

>>> from wizard import MatchConfig, new_match
>>> state = new_match(MatchConfig.create("WIZARD", 3), seed="doc")
>>> print(render_view(state.view(1), ["ann", "bob", None]))
round 1/20 | BID | dealer ann | trump Y10 (YELLOW)
to act: bob
    seat       score  bid  tricks
    ann            0    -       0
  > bob (you)      0    -       0
    seat 2         0    -       0
your hand: W
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from wizard import MatchView, Phase, Play, RoundResult, Suit, Trick, Variant


@dataclass(frozen=True)
class PlayedRound:
    """One finished round of a match, everything a replay shows of it."""

    round: int
    rounds: int
    dealer: int
    #: the turned card (None when none is turned: the last round, SINGLE_SUIT)
    trump_card: str | None
    #: the round's trump (None: no trump)
    trump_suit: Suit | None
    #: True when the dealer named the trump after turning a Wizard
    trump_chosen: bool
    #: every seat's hand as dealt
    hands: tuple[tuple[str, ...], ...]
    tricks: tuple[Trick, ...]
    #: bids, tricks taken and points of each seat
    result: RoundResult
    #: every seat's total after the round
    totals: tuple[int, ...]


# ----------------------------------------------------------------------------- pieces


def seat_labels(players: int, names: Sequence[str | None] | None = None) -> list[str]:
    """How each seat is written: its name, ``seat N`` without one, ``name#N`` for a shared name.

    >>> seat_labels(3, ["ann", "rnd", "rnd"])
    ['ann', 'rnd#1', 'rnd#2']
    >>> seat_labels(2)
    ['seat 0', 'seat 1']
    """
    given = [names[s] if names is not None and s < len(names) else None for s in range(players)]
    shared = Counter(n for n in given if n)
    return [
        f"seat {s}" if not name else (f"{name}#{s}" if shared[name] > 1 else name)
        for s, name in enumerate(given)
    ]


def cards_text(cards: Iterable[str]) -> str:
    """Cards in the order given, ``-`` for none.

    >>> cards_text(["B3", "W"]), cards_text([])
    ('B3 W', '-')
    """
    return " ".join(cards) or "-"


def trump_text(trump_card: str | None, trump_suit: Suit | None, chosen: bool = False) -> str:
    """The turned card and the trump it makes.

    >>> trump_text("R7", Suit.RED), trump_text("W", Suit.BLUE, chosen=True), trump_text("J", None)
    ('R7 (RED)', 'W, dealer chose BLUE', 'J (no trump)')
    >>> trump_text(None, None), trump_text("W", None)
    ('none turned (no trump)', 'W, dealer to choose')
    """
    if trump_card is None:
        return "none turned (no trump)"
    if trump_card == "W":
        return f"W, dealer chose {trump_suit.name}" if trump_suit is not None else "W, dealer to choose"
    return f"{trump_card} ({'no trump' if trump_suit is None else trump_suit.name})"


def plays_text(plays: Iterable[Play], labels: Sequence[str]) -> str:
    return ", ".join(f"{labels[p.seat]} {p.card}" for p in plays) or "-"


def trick_text(trick: Trick, labels: Sequence[str]) -> str:
    """The cards in play order (the leader's first), and who won.

    >>> trick_text(Trick(1, (Play(1, "B3"), Play(0, "W")), 0), ["ann", "bob"])
    'bob B3, ann W -> ann'
    """
    return f"{plays_text(trick.plays, labels)} -> {labels[trick.winner]}"


def table(header: Sequence[str], rows: Iterable[Sequence[object]], indent: str = "  ") -> list[str]:
    """Columns lined up: the first left-aligned, the others right-aligned."""
    cells = [list(header), *([str(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return [
        (indent + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))).rstrip()
        for row in cells
    ]


def scores_text(scores: Sequence[int], labels: Sequence[str]) -> str:
    return ", ".join(f"{labels[s]} {score}" for s, score in enumerate(scores))


def seats_text(seats: Iterable[int], labels: Sequence[str]) -> str:
    """Seats by their labels: the winners, the seats to act."""
    return ", ".join(labels[s] for s in seats)


# ----------------------------------------------------------------------------- a replayed round


def render_round(played: PlayedRound, names: Sequence[str | None] | None = None) -> str:
    """One finished round: dealer, trump, hands as dealt, bids, every trick, the result."""
    n = len(played.hands)
    labels = seat_labels(n, names)
    by_seat = {r.seat: r for r in played.result.seats}
    order = [(played.dealer + 1 + i) % n for i in range(n)]  # bidding order: left of the dealer first
    lines = [
        f"round {played.round}/{played.rounds} | dealer {labels[played.dealer]}"
        f" | trump {trump_text(played.trump_card, played.trump_suit, played.trump_chosen)}",
        "  hands:",
        *(f"    {labels[s].ljust(max(map(len, labels)))}  {cards_text(played.hands[s])}" for s in order),
        "  bids: " + ", ".join(f"{labels[s]} {by_seat[s].bid}" for s in order),
        *(f"  trick {i}: {trick_text(t, labels)}" for i, t in enumerate(played.tricks, 1)),
        *table(
            ["seat", "bid", "took", "points", "total"],
            ((labels[s], by_seat[s].bid, by_seat[s].tricks, f"{by_seat[s].points:+d}", played.totals[s]) for s in range(n)),
        ),
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- a live view


def _bid_text(view: MatchView, seat: int) -> str:
    bid = view.seats[seat].bid
    if bid is not None:
        return str(bid)
    # a bid the viewer does not see: hidden (``?``) or not made yet (``-``)
    hiding = bool({Variant.HIDDEN_BIDS, Variant.SECRET_BIDS} & set(view.variants))
    if view.phase is Phase.PLAY or (view.phase is Phase.BID and hiding and seat not in view.awaiting):
        return "?"
    return "-"


def render_view(view: MatchView, names: Sequence[str | None] | None = None) -> str:
    """A compact picture of a match as ``view``'s viewer sees it: round, phase, dealer,
    trump, whose turn, each seat's score, bid (``?`` while hidden) and tricks, the trick on
    the table, the last trick, and the viewer's hand (and, under CLAIRVOYANCE, the others')."""
    labels = seat_labels(view.players, names)
    me = view.my_seat
    lines = [
        f"round {view.round}/{view.rounds} | {view.phase.value} | dealer {labels[view.dealer]}"
        f" | trump {trump_text(view.trump_card, view.trump_suit)}"
    ]
    if view.winners is not None:
        lines.append(f"winners: {seats_text(view.winners, labels)}")
    elif view.awaiting:
        lines.append(f"{'to act' if len(view.awaiting) == 1 else 'waiting for'}: {seats_text(view.awaiting, labels)}")
    rows = []
    for s in view.seats:
        marker = ">" if s.seat in view.awaiting else " "
        rows.append((f"{marker} {labels[s.seat]}{' (you)' if s.seat == me else ''}", s.score, _bid_text(view, s.seat), s.tricks))
    lines += table(["  seat", "score", "bid", "tricks"], rows)
    if view.current_trick:
        lead = f" (lead {view.lead_suit.name})" if view.lead_suit is not None else ""
        lines.append(f"trick: {plays_text(view.current_trick, labels)}{lead}")
    if view.last_trick is not None:
        lines.append(f"last trick: {trick_text(view.last_trick, labels)}")
    seen = [s for s in view.seats if s.hand is not None and s.seat != me]
    for s in seen:  # CLAIRVOYANCE round 1: the others' cards, not one's own
        lines.append(f"{labels[s.seat]}'s hand: {cards_text(s.hand or ())}")
    if view.hand is not None:
        lines.append(f"your hand: {cards_text(view.hand)}")
    return "\n".join(lines)
