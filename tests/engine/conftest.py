"""Shared test helpers: stacked deals written as "the hands I want", and short ways to bid,
play and skip rounds.

Dealing order (RULES.md): card ``k`` of a round's deck goes to seat ``(dealer + 1 + k) mod n``
while ``k < r * n``; card ``r * n`` is turned up for trump.

>>> stacked([["R7"], ["W"], ["J"]], trump="G2", dealer=0)[:4]
['W', 'J', 'R7', 'G2']
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence

import pytest

from wizard import ConfigError, MatchConfig, MatchState, Move, Phase, Ruleset, Variant, new_match
from wizard.record import state_to_bytes

SEED = "tests"


def full_deck(deck: str = "WIZARD") -> list[str]:
    """Every code of a deck, in canonical order (suits B, G, R, Y by rank, then W, then J)."""
    max_rank, specials = {"WIZARD": (13, 4), "JUNIOR": (8, 2)}[deck]
    suits = [f"{s}{r}" for s in "BGRY" for r in range(1, max_rank + 1)]
    return suits + ["W"] * specials + ["J"] * specials


def dealing_order(hands: Sequence[Sequence[str]], dealer: int) -> list[str]:
    """The dealt cards in dealing order, so that seat ``i`` receives ``hands[i]``.

    This is the whole of a round's list under SINGLE_SUIT.
    """
    n = len(hands)
    size = len(hands[0])
    assert all(len(h) == size for h in hands), "every seat gets the same number of cards"
    return [hands[(dealer + 1 + k) % n][k // n] for k in range(n * size)]


def stacked(
    hands: Sequence[Sequence[str]], trump: str | None, *, dealer: int, deck: str = "WIZARD"
) -> list[str]:
    """A whole stacked deck: seat ``i`` is dealt ``hands[i]``, ``trump`` is turned up, and the
    unused cards follow in canonical order.  ``trump`` is None only when no card is left."""
    order = dealing_order(hands, dealer)
    if trump is not None:
        order.append(trump)
    rest = Counter(full_deck(deck))
    rest.subtract(order)
    assert all(v >= 0 for v in rest.values()), f"cards used more often than {deck} holds them: {dict(-rest)}"
    for card in full_deck(deck):
        if rest[card] > 0:
            rest[card] -= 1
            order.append(card)
    assert (trump is None) == (len(order) == len(hands) * len(hands[0])), (
        "name the trump card exactly when a card is left to turn up"
    )
    return order


def new_test_match(
    players: int = 4,
    *,
    dealer: int,
    deals: Iterable[Iterable[str]] | None = None,
    ruleset: str = "WIZARD",
    variants: Iterable[str] = (),
    seed: str = SEED,
) -> MatchState:
    config = MatchConfig.create(ruleset, players, variants, first_dealer=dealer, deals=deals)
    return new_match(config, seed=seed)


def finish_round(state: MatchState) -> None:
    """Play the current round to its end, each seat making its first legal move."""
    start = state.round
    while state.round == start and state.phase is not Phase.FINISHED:
        seat = state.awaiting()[0]
        state.apply(seat, state.legal_moves(seat)[0])


def match_at_round(
    round_number: int,
    hands: Sequence[Sequence[str]] | None = None,
    trump: str | None = None,
    *,
    dealer: int,
    ruleset: str = "WIZARD",
    variants: Iterable[str] = (),
    players: int | None = None,
    deck: str | None = None,
    seed: str = SEED,
) -> MatchState:
    """A match at the start of round ``round_number``, dealt by ``dealer``, whose deck for that
    round is stacked from ``hands`` and ``trump`` (earlier rounds are shuffled from the seed
    and played out with first legal moves)."""
    n = players if players is not None else len(hands)  # type: ignore[arg-type]
    deals = None
    if hands is not None:
        deck = deck or ("WIZARD" if ruleset == "WIZARD" else "JUNIOR")
        deals = [[]] * (round_number - 1) + [stacked(hands, trump, dealer=dealer, deck=deck)]
    state = new_test_match(
        n,
        dealer=(dealer - round_number + 1) % n,
        deals=deals,
        ruleset=ruleset,
        variants=variants,
        seed=seed,
    )
    while state.round < round_number:
        finish_round(state)
    assert state.round == round_number and state.dealer == dealer
    return state


def bid_all(state: MatchState, bids: Sequence[int]) -> None:
    """Every seat bids ``bids[seat]``, in the order the engine asks for them."""
    while state.phase is Phase.BID:
        seat = state.awaiting()[0]
        state.apply(seat, Move(bid=bids[seat]))


def play(state: MatchState, *cards: str) -> None:
    """Play the cards in turn: each by the seat to act."""
    for card in cards:
        state.apply(state.to_act, Move(card=card))


def refused(state: MatchState, seat: int, move: object, error: type[Exception]) -> Exception:
    """Assert that ``move`` raises ``error`` and leaves the state exactly as it was."""
    def snapshot() -> tuple[object, ...]:
        return (state_to_bytes(state), *(state.view(s) for s in [None, *range(state.players)]))

    before = snapshot()
    with pytest.raises(error) as caught:
        state.apply(seat, move)  # type: ignore[arg-type]
    assert snapshot() == before, "a refused move changed the state"
    return caught.value


def allowed_triples() -> list[tuple[Ruleset, int, tuple[Variant, ...]]]:
    """Every (ruleset, players, variant set) that MatchConfig accepts."""
    out = []
    for ruleset in Ruleset:
        for players in range(3, 7):
            for k in range(len(Variant) + 1):
                for combo in itertools.combinations(list(Variant), k):
                    try:
                        MatchConfig.create(ruleset, players, combo)
                    except ConfigError:
                        continue
                    out.append((ruleset, players, combo))
    return out
