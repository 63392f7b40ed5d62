"""House bots. Each sees only its own :class:`~wizard.views.MatchView` and answers a Move.

- ``RANDOM``: a uniformly random legal move; it is also the server's fallback move for a
  seat that misses its deadline (:func:`fallback_move`).
- ``HEURISTIC``: bids the tricks its hand should take (Wizards, trumps, high cards, the
  number of players and the cards still out) and plays to make that bid exactly: it tries
  to win while it still needs tricks and ducks once it has enough.

>>> import random
>>> from wizard import MatchConfig, new_match
>>> state = new_match(MatchConfig.create("WIZARD", 4), seed="bots")
>>> bots = [HeuristicBot(), RandomBot(), RandomBot(), RandomBot()]
>>> rng = random.Random(0)
>>> while not state.is_finished:
...     seat = state.awaiting()[0]
...     state.apply(seat, bots[seat].act(state.view(seat), rng))
>>> state.is_finished
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from random import Random

from wizard.cards import CODE_MASK, SUIT_LETTERS
from wizard.moves import Move
from wizard.rules import MatchConfig, Phase
from wizard.state import MatchState, new_match
from wizard.tricks import takes_trick, takes_trick_single_suit
from wizard.views import MatchView


def _card_id(code: str) -> int:
    """A representative id for a code (any copy of W or J compares the same)."""
    mask = CODE_MASK[code]
    return (mask & -mask).bit_length() - 1


def _suit(code: str) -> str:
    return code[0]


def _rank(code: str) -> int:
    """Jester 0, ranks 1-13, Wizard 14."""
    if code == "W":
        return 14
    if code == "J":
        return 0
    return int(code[1:])


class HouseBot:
    """A bot that answers from its view alone. Subclasses give the three decisions."""

    kind = "HOUSE"

    def act(self, view: MatchView, rng: Random) -> Move:
        if not view.legal_moves:
            raise ValueError("this seat has no move to make now")
        if view.phase is Phase.CHOOSE_TRUMP:
            return self.choose_trump(view, rng)
        if view.phase is Phase.BID:
            return self.bid(view, rng)
        return self.play(view, rng)

    def choose_trump(self, view: MatchView, rng: Random) -> Move:
        raise NotImplementedError

    def bid(self, view: MatchView, rng: Random) -> Move:
        raise NotImplementedError

    def play(self, view: MatchView, rng: Random) -> Move:
        raise NotImplementedError


class RandomBot(HouseBot):
    """Uniformly random among the legal moves."""

    kind = "RANDOM"

    def act(self, view: MatchView, rng: Random) -> Move:
        if not view.legal_moves:
            raise ValueError("this seat has no move to make now")
        return view.legal_moves[int(rng.random() * len(view.legal_moves))]

    choose_trump = bid = play = act


def fallback_move(view: MatchView, rng: Random) -> Move:
    """The server's move for a seat that missed its deadline: the RANDOM policy."""
    return RandomBot().act(view, rng)


class HeuristicBot(HouseBot):
    """Bids its expected tricks and plays to make the bid exactly."""

    kind = "HEURISTIC"

    # ------------------------------------------------------------------ trump
    def choose_trump(self, view: MatchView, rng: Random) -> Move:
        hand = view.hand or ()
        strength = {s: 0.0 for s in SUIT_LETTERS}
        for code in hand:
            if code not in ("W", "J"):
                strength[_suit(code)] += 1 + _rank(code) / 13
        best = max(SUIT_LETTERS, key=lambda s: (strength[s], -SUIT_LETTERS.index(s)))
        return next(m for m in view.legal_moves if m.trump is not None and m.trump.letter == best)

    # ------------------------------------------------------------------ bidding
    def bid(self, view: MatchView, rng: Random) -> Move:
        legal = [m.bid for m in view.legal_moves if m.bid is not None]
        return Move(bid=closest_bid(legal, self.expected_tricks(view)))

    def expected_tricks(self, view: MatchView, hand: Sequence[str] | None = None) -> float:
        """The tricks the viewer's hand should take (what it bids, rounded to a legal bid),
        or ``hand``'s, dealt in this view's round (another seat's, as search guesses it);
        any seat's view will do, whether or not it is its turn."""
        if hand is None:
            if view.hand is None:  # CLAIRVOYANCE round 1: we see the others' cards, not ours
                return self._clairvoyant_estimate(view)
            hand = view.hand
        return sum(self._win_chance(view, code, hand) for code in hand)

    def _win_chance(self, view: MatchView, code: str, hand: Sequence[str]) -> float:
        """How likely one card of a fresh hand is to take a trick."""
        others = view.players - 1
        size = max(view.hand_size, 1)
        top = 13 if view.ruleset.value == "WIZARD" else 8
        if _is_single_suit(view):
            return float((_rank(code) / 14) ** (others * 1.6))
        if code == "W":
            return 0.95
        if code == "J":
            return 0.0
        rank = _rank(code)
        trump = view.trump_suit.letter if view.trump_suit is not None else None
        if _suit(code) == trump:
            trumps_held = sum(1 for c in hand if _suit(c) == trump)
            base = 0.1 + 0.9 * float(((rank - 1) / (top - 1)) ** 1.4)
            length_bonus = 0.12 * max(0, trumps_held - 2)
            return min(1.0, base + length_bonus)
        # a plain card wins only as the best of its suit with nobody trumping in
        high = (rank - (top - 4)) / 4  # the top four ranks have a chance
        if high <= 0:
            return 0.0
        exposure = 1.0 / (1.0 + 0.35 * others * (size / 8) * (1.0 if trump else 0.4))
        return max(0.0, high * exposure * (0.9 if trump else 1.0))

    def _clairvoyant_estimate(self, view: MatchView) -> float:
        """Round 1 of CLAIRVOYANCE: try every card we could hold against the cards we see."""
        seen: list[str] = [c for s in view.seats if s.hand for c in s.hand]
        if view.trump_card:
            seen.append(view.trump_card)
        unseen = _unseen_codes(view, seen)
        if not unseen:
            return 0.0
        me = view.my_seat
        assert me is not None
        leader = (view.dealer + 1) % view.players
        order = [(leader + i) % view.players for i in range(view.players)]
        hands = {s.seat: s.hand[0] for s in view.seats if s.hand}
        wins = 0
        for mine in unseen:
            cards = [mine if seat == me else hands[seat] for seat in order]
            wins += order[_winner_pos(view, cards)] == me
        return wins / len(unseen)

    # ------------------------------------------------------------------ play
    def play(self, view: MatchView, rng: Random) -> Move:
        cards = [m.card for m in view.legal_moves if m.card is not None]
        assert view.my_seat is not None
        need = (view.my_bid or 0) - view.my_tricks
        trick = [p.card for p in view.current_trick]
        later = view.players - len(trick) - 1
        if need > 0:
            return Move(card=self._try_to_win(view, cards, trick, later))
        return Move(card=self._duck(view, cards, trick, later))

    def _try_to_win(self, view: MatchView, cards: list[str], trick: list[str], later: int) -> str:
        winning = [c for c in cards if _would_lead_trick(view, trick, c)]
        if not winning:
            return min(cards, key=lambda c: self._value(view, c))
        if later == 0:
            return min(winning, key=lambda c: self._value(view, c))
        # take the cheapest card that is likely to hold against the seats still to play
        holding = [c for c in winning if self._hold_chance(view, c, trick, later) >= 0.6]
        if holding:
            return min(holding, key=lambda c: self._value(view, c))
        return max(winning, key=lambda c: self._value(view, c))

    def _duck(self, view: MatchView, cards: list[str], trick: list[str], later: int) -> str:
        losing = [c for c in cards if not _would_lead_trick(view, trick, c)]
        if trick and losing:
            # shed the most dangerous card that cannot take this trick; keep Jesters for later
            plain = [c for c in losing if c != "J"] or losing
            return max(plain, key=lambda c: self._value(view, c))
        if not trick:
            if "J" in cards:
                return "J"
            return min(cards, key=lambda c: (self._value(view, c)))
        # every card we may play takes the trick for now: the last seat takes it anyway
        if later == 0:
            return max(cards, key=lambda c: self._value(view, c))
        return min(cards, key=lambda c: self._hold_chance(view, c, trick, later))

    def _value(self, view: MatchView, code: str) -> float:
        """How strong a card is in general: used to pick the cheapest or the costliest."""
        if _is_single_suit(view):
            return _rank(code)
        if code == "W":
            return 100
        if code == "J":
            return -1
        trump = view.trump_suit.letter if view.trump_suit is not None else None
        return _rank(code) + (30 if _suit(code) == trump else 0)

    def _hold_chance(self, view: MatchView, code: str, trick: list[str], later: int) -> float:
        """How likely ``code``, if played now, still takes the trick after ``later`` seats."""
        cards = trick + [code]
        unseen = _unseen_codes(view, list(view.hand or ()) + list(view.cards_played_this_round()) + ([view.trump_card] if view.trump_card else []))
        if not unseen:
            return 1.0
        beaters = sum(1 for u in unseen if _winner_pos(view, cards + [u]) == len(cards))
        per_seat = max(1, len(view.hand or ()) - 1)
        safe = 1.0 - beaters / len(unseen)
        return safe ** (later * per_seat)


def closest_bid(legal: Sequence[int], estimate: float) -> int:
    """The legal bid nearest ``estimate`` (the lower of two as near)."""
    return min(legal, key=lambda b: (abs(b - estimate), b))


def _is_single_suit(view: MatchView) -> bool:
    return any(v.value == "SINGLE_SUIT" for v in view.variants)


def _winner_pos(view: MatchView, codes: Sequence[str]) -> int:
    single = _is_single_suit(view)
    trump = None if view.trump_suit is None else int(view.trump_suit)
    best = 0
    for pos in range(1, len(codes)):
        card, top = _card_id(codes[pos]), _card_id(codes[best])
        if takes_trick_single_suit(card, top) if single else takes_trick(card, top, trump):
            best = pos
    return best


def _would_lead_trick(view: MatchView, trick: Sequence[str], code: str) -> bool:
    return not trick or _winner_pos(view, [*trick, code]) == len(trick)


def _unseen_codes(view: MatchView, seen: Iterable[str]) -> list[str]:
    """The cards of the deck (or, under SINGLE_SUIT, of the other seats' piles) not yet seen."""
    if _is_single_suit(view):
        me = view.my_seat or 0
        pool = [SUIT_LETTERS[s] + str(r) for s in range(view.players) if s != me for r in range(1, 14)]
        pool += ["W", "J"] * (view.players - 1)
    else:
        top = 13 if view.ruleset.value == "WIZARD" else 8
        specials = 4 if top == 13 else 2
        pool = [s + str(r) for s in SUIT_LETTERS for r in range(1, top + 1)] + ["W", "J"] * specials
    for code in seen:
        if code in pool:
            pool.remove(code)
    return pool


def play_match(
    config: MatchConfig, seed: str, bots: Sequence[HouseBot], rng: Random, salt: str | None = None
) -> MatchState:
    """A whole match between house bots, each deciding from its own view."""
    state = new_match(config, seed, salt)
    while not state.is_finished:
        for seat in state.awaiting():
            state.apply(seat, bots[seat].act(state.view(seat), rng))
            if state.is_finished:
                break
    return state
