"""The SEARCH house bot: information-set Monte Carlo tree search from one seat's view.

Each iteration deals a *determinization*, a deal that agrees with the seat's view (the
hidden cards, and any hidden bids, drawn at random by :mod:`wizard.sampling`, never read
from the real state), and plays it to the end of the round on a few local fields
(:class:`_Round`: the rules of bidding and trick play as the engine has them, without the
checked engine's checks and log, which took most of the time):

- at the root, every candidate move is tried on the same determinization (paired
  comparisons: the candidates are judged on the same deal, which cuts the variance that
  separates them, and the root is where the move is picked, so an even share of the
  budget suits it better than UCB's);
- below the root, a tree of this seat's later decisions (single-observer ISMCTS: a node
  is what the seat has seen, its own moves and the cards the others played; the others'
  hidden bids are not part of it) chooses by UCB1 with availability counts, the number of
  times a move was legal when its node was reached;
- the other seats, and this seat beyond the tree, follow a greedy model: bid as
  :class:`~wizard.bots.HeuristicBot` bids, play to win a trick while short of the bid
  (the cheapest winning card when last to play, else the strongest), duck once it is made.

The reward is this seat's points for the round (less ``rivalry`` times the others' mean
points, 0 by default): rounds are scored on their own, so the end of the round is the
horizon. At the root, of two cards of one suit with no card still out between them only
the lower is searched: they play alike. Bids, trump and cards are all chosen by the same search.
``seconds`` bounds the time per decision; ``nodes`` (iterations) makes it deterministic,
for tests: the same view, rng and ``nodes`` give the same move.

>>> import random
>>> from wizard import MatchConfig, new_match
>>> state = new_match(MatchConfig.create("WIZARD", 4), seed="search")
>>> view = state.view(state.to_act)
>>> SearchBot(nodes=40).act(view, random.Random(1)) in view.legal_moves
True
"""

from __future__ import annotations

import time
from functools import lru_cache
from math import log, sqrt
from random import Random
from typing import TYPE_CHECKING

from wizard.bots import HeuristicBot, HouseBot, closest_bid
from wizard.cards import (
    BIT,
    CARD_IDS,
    JESTER,
    JESTER_BASE,
    SUIT_OF,
    VALUE_OF,
    WIZARD,
    WIZARD_BASE,
    card_code,
    cards_of,
    lowest_copy,
)
from wizard.moves import ACTION_BID, ACTION_TRUMP, Move
from wizard.rules import MatchConfig, Phase, Variant, legal_bids, score_round
from wizard.sampling import RoundDeal, round_deal, sample_state
from wizard.state import NO_SEAT, MatchState, fields_of
from wizard.tricks import LEAD_OPEN, lead_after, playable, trick_table
from wizard.views import MatchView

if TYPE_CHECKING:
    # mypyc's native 64-bit int, in annotations only (see wizard.shuffle)
    from mypy_extensions import i64

#: seconds of search per decision, by default
DEFAULT_SECONDS = 0.05
#: UCB1's exploration constant, on rewards scaled to about -1 … 1
EXPLORATION = 0.6
#: how much the others' mean points for the round count against the seat's own: 0 plays
#: for its own score alone, 1 for its lead over the table. 1 measured no better (it gave up
#: own points for others' losses: BENCHMARKS.md), so the default is 0
RIVALRY = 0.0
#: bids tried on each side of the heuristic's estimate at the root
BID_SPREAD = 2

_MODEL = HeuristicBot()


def _key(action: int) -> int:
    """One key for every copy of a Wizard or a Jester: the seat cannot tell them apart."""
    if WIZARD_BASE <= action < CARD_IDS:
        return WIZARD_BASE if action < JESTER_BASE else JESTER_BASE
    return action


@lru_cache(maxsize=16)
def _strengths(trump: int | None, single_suit: bool) -> tuple[int, ...]:
    """How strong a card is in general, to pick the cheapest or the costliest: Jester
    lowest, then by rank with trumps above the other suits, Wizard highest."""
    out = []
    for card in range(WIZARD_BASE + 8):
        suit = SUIT_OF[card]
        if suit == JESTER:
            out.append(-1)
        elif single_suit:
            out.append(VALUE_OF[card])
        elif suit == WIZARD:
            out.append(100)
        else:
            out.append(VALUE_OF[card] + (30 if suit == trump else 0))
    return tuple(out)


class _Node:
    """What this seat has seen after a sequence of moves; its statistics are those of the
    move that led to it."""

    __slots__ = ("avail", "children", "total", "visits")

    def __init__(self) -> None:
        self.children: dict[int, _Node] = {}
        self.visits = 0
        self.total = 0.0
        self.avail = 0


@lru_cache(maxsize=16)
def _beaten_by(trump: int | None, single_suit: bool) -> tuple[int, ...]:
    """``_beaten_by(...)[best]``: the bit mask of the cards that take the trick from ``best``."""
    beats = trick_table(trump, single_suit)
    return tuple(sum(BIT[c] for c in range(CARD_IDS) if row[c]) for row in beats)


class _RoundRules:
    """What every determinization of one round shares: the match's rules of bidding and
    scoring, the trump's trick table and strengths."""

    __slots__ = ("beaten_by", "dealer", "n", "plus_minus_one", "points", "simultaneous", "single", "size", "strength")

    def __init__(self, config: MatchConfig, trump: int | None, dealer: int, size: int) -> None:
        self.n = config.players
        self.size = size
        self.dealer = dealer
        self.points = config.points
        self.plus_minus_one = config.plus_minus_one
        self.simultaneous = config.simultaneous_bids
        self.single = config.single_suit
        self.beaten_by = _beaten_by(trump, self.single)
        self.strength = _strengths(trump, self.single)


class _Round:
    """The rest of one determinization's round, from its bidding or its play, on a few
    local fields instead of a :class:`~wizard.state.MatchState` (search plays hundreds of
    these per decision; the checked engine spent most of the time in its checks and its
    log). It keeps the rules of bidding and of trick play as the engine
    has them (:func:`~wizard.rules.legal_bids`, :func:`~wizard.tricks.playable`,
    :func:`~wizard.tricks.lead_after`, the trick table); the round's points come from the
    match's table. ``estimates`` are the greedy model's tricks for each seat yet to bid."""

    __slots__ = (
        "beaten_by", "bidding", "bids", "estimates", "hands", "lead", "left", "n", "rules", "single", "strength",
        "to_act", "top", "top_seat", "trick_size", "tricks",
    )

    # the play so far (set by the constructors)
    hands: list[int]  #: by seat, the bit mask of the cards it holds
    bids: list[int | None]
    tricks: list[int]
    bidding: bool
    to_act: int  #: NO_SEAT while bids are simultaneous
    lead: int  #: as the engine keeps it (:mod:`wizard.tricks`)
    left: int  #: tricks still to finish
    trick_size: int  #: cards on the current trick
    top: int  #: the card taking the current trick so far (-1: none)
    top_seat: int

    def __init__(self, rules: _RoundRules, estimates: dict[int, float]) -> None:
        """The round's rules; a constructor (:meth:`of_state`, :meth:`of_view`) or
        :meth:`copy` sets the rest."""
        self.rules = rules
        self.estimates = estimates
        # (the rules the play reads on every card, as fields of their own)
        self.n = rules.n
        self.single = rules.single
        self.beaten_by = rules.beaten_by
        self.strength = rules.strength

    @classmethod
    def of_state(cls, world: MatchState, estimates: dict[int, float]) -> _Round:
        """The round of ``world`` (bidding or playing)."""
        f = fields_of(world)
        play = cls(_RoundRules(world.config, f.trump_suit, f.dealer, world.config.hand_size(f.round)), estimates)
        play.hands = list(f.hands)
        play.bids = list(f.bids)
        play.tricks = list(f.tricks)
        play.bidding = f.phase is Phase.BID
        play.to_act = f.to_act
        play.lead = f.lead
        play.left = play.rules.size - len(f.done)
        play.trick_size = len(f.trick)
        play.top = f.trick[f.win_pos] if f.trick else -1
        play.top_seat = (f.leader + f.win_pos) % play.n if f.trick else -1
        return play

    @classmethod
    def of_view(cls, view: MatchView, config: MatchConfig, hands: list[int]) -> _Round:
        """The round as ``view`` shows it, with ``hands`` (:func:`~wizard.sampling.sample_hands`)
        for the cards it hides: while bidding (a bid hidden from the view is made anew, by
        the model), or while cards are played in sight of every bid."""
        return cls.shown_by(view, config).dealt(view, hands)

    @classmethod
    def shown_by(cls, view: MatchView, config: MatchConfig) -> _Round:
        """The round as ``view`` shows it, no card in any hand yet: :meth:`dealt` deals a copy
        (the view is read once for all the determinizations of a decision)."""
        trump = None if view.trump_suit is None else int(view.trump_suit)
        play = cls(_RoundRules(config, trump, view.dealer, view.hand_size), {})
        play.hands = [0] * view.players
        play.bids = [s.bid for s in view.seats]
        play.tricks = [s.tricks for s in view.seats]
        play.bidding = view.phase is Phase.BID
        play.lead = LEAD_OPEN
        play.left = view.hand_size - len(view.completed_tricks)
        play.trick_size = 0
        play.top = play.top_seat = -1
        for p in view.current_trick:
            play.note_card(p.seat, world_card(p.card))
        play.to_act = NO_SEAT if view.to_act is None else view.to_act
        return play

    def dealt(self, view: MatchView, hands: list[int]) -> _Round:
        """A copy of this round (:meth:`shown_by` ``view``) with ``hands``, and while bidding
        the model's estimates for each seat yet to bid, from its hand as dealt (none is
        played yet)."""
        play = self.copy()
        play.hands = hands
        if play.bidding:
            play.estimates = {
                s: _MODEL.expected_tricks(view, [card_code(c) for c in cards_of(hands[s])])
                for s, bid in enumerate(play.bids)
                if bid is None
            }
        return play

    def copy(self) -> _Round:
        other = _Round(self.rules, self.estimates)
        other.hands = list(self.hands)
        other.bids = list(self.bids)
        other.tricks = list(self.tricks)
        other.bidding, other.to_act, other.lead, other.left = self.bidding, self.to_act, self.lead, self.left
        other.trick_size, other.top, other.top_seat = self.trick_size, self.top, self.top_seat
        return other

    def seat_to_move(self, me: int) -> int:
        """Who moves next (this seat first while bids are simultaneous and it has to bid)."""
        if self.to_act != NO_SEAT:
            return self.to_act
        bids = self.bids
        return me if bids[me] is None else bids.index(None)

    def legal(self, seat: int) -> list[int]:
        """The seat's legal actions, a Wizard or a Jester once (its lowest copy)."""
        if self.bidding:
            rules = self.rules
            return [ACTION_BID + b for b in legal_bids(rules.size, self.bids, seat == rules.dealer, rules.plus_minus_one)]
        out: dict[int, int] = {}
        mask: i64 = playable(self.hands[seat], self.lead)
        while mask:
            low: int = mask & -mask
            card = low.bit_length() - 1
            out.setdefault(_key(card), card)
            mask ^= low
        return list(out.values())

    def apply(self, seat: int, action: int) -> None:
        if self.bidding:
            self.bid(seat, action - ACTION_BID)
        else:
            self.play(seat, action)

    def bid(self, seat: int, bid: int) -> None:
        bids = self.bids
        bids[seat] = bid
        dealer = self.rules.dealer
        if self.to_act != NO_SEAT and seat != dealer:
            self.to_act = (seat + 1) % self.n
        elif None not in bids:
            self.bidding = False
            self.to_act = (dealer + 1) % self.n

    def play(self, seat: int, card: int) -> None:
        self.hands[seat] ^= 1 << card
        self.note_card(seat, card)

    def note_card(self, seat: int, card: int) -> None:
        """``card`` goes on the trick (the seat's hand aside); a full trick is taken."""
        if self.trick_size == 0 or self.beaten_by[self.top] >> card & 1:
            self.top, self.top_seat = card, seat
        self.lead = lead_after(card, self.lead, self.single)
        self.trick_size += 1
        if self.trick_size < self.n:
            self.to_act = seat + 1 if seat + 1 < self.n else 0
            return
        self.tricks[self.top_seat] += 1
        self.to_act = self.top_seat
        self.trick_size = 0
        self.lead = LEAD_OPEN
        self.left -= 1

    @property
    def over(self) -> bool:
        return not self.bidding and self.left == 0

    def gains(self) -> list[int]:
        """Every seat's points for the round, once it is over."""
        gains = [0] * self.n
        score_round(self.rules.points, [b or 0 for b in self.bids], self.tricks, gains)
        return gains

    def model_action(self, seat: int) -> int:
        """The greedy model's move for ``seat``."""
        if self.bidding:
            rules = self.rules
            legal = legal_bids(rules.size, self.bids, seat == rules.dealer, rules.plus_minus_one)
            return ACTION_BID + closest_bid(legal, self.estimates[seat])
        cards: i64 = playable(self.hands[seat], self.lead)
        winning: i64 = cards if self.trick_size == 0 else cards & self.beaten_by[self.top]
        bid = self.bids[seat]
        if bid is None or bid > self.tricks[seat]:
            if not winning:
                return self._cheapest(cards)
            if self.trick_size == self.n - 1:
                return self._cheapest(winning)
            return self._strongest(winning)
        losing: i64 = cards & ~winning
        if losing:
            return self._strongest(losing)
        return self._cheapest(cards)

    def _cheapest(self, mask: int) -> int:
        strength = self.strength
        best, best_strength = -1, 1000
        rest: i64 = mask
        while rest:
            low: int = rest & -rest
            card = low.bit_length() - 1
            value = strength[card]
            if value < best_strength:
                best, best_strength = card, value
            rest ^= low
        return best

    def _strongest(self, mask: int) -> int:
        strength = self.strength
        best, best_strength = -1, -1000
        rest: i64 = mask
        while rest:
            low: int = rest & -rest
            card = low.bit_length() - 1
            value = strength[card]
            if value > best_strength:
                best, best_strength = card, value
            rest ^= low
        return best


def world_card(code: str) -> int:
    """A card id for a code as the trick table reads it (any copy of W or J compares the same)."""
    if code == "W":
        return WIZARD_BASE
    if code == "J":
        return JESTER_BASE
    suit = "BGRY".index(code[0])
    return suit * 13 + int(code[1:]) - 1


def _scale(view: MatchView) -> float:
    """About the largest swing of points one round can bring, to keep rewards near -1 … 1."""
    if view.ruleset.value == "WIZARD_JUNIOR":  # chips scoring
        return float(max(1, view.hand_size))
    return float(20 + 10 * view.hand_size)


def _root_candidates(view: MatchView, rng: Random, spread: int) -> list[Move]:
    moves = list(view.legal_moves)
    if view.phase is Phase.BID and spread >= 0:
        guess = _MODEL.bid(view, rng).bid
        assert guess is not None
        moves = [m for m in moves if m.bid is not None and abs(m.bid - guess) <= spread]
    elif view.phase is Phase.PLAY and Variant.SINGLE_SUIT not in view.variants:
        moves = _distinct_cards(view, moves)
    return moves


def _distinct_cards(view: MatchView, moves: list[Move]) -> list[Move]:
    """The cards worth telling apart: of two cards of one suit with no card between them
    still out (every rank between is in the hand or was seen this round), either plays as
    the other, so only the lower is searched, and the budget goes to real choices."""
    seen = set(view.cards_played_this_round()) | set(view.hand or ())
    if view.trump_card is not None:
        seen.add(view.trump_card)
    out: list[Move] = []
    kept: dict[str, int] = {}  # suit letter -> rank of the last card kept, on the way up
    for move in sorted(moves, key=lambda m: (m.card is None, _rank_key(m.card))):
        code = move.card
        if code is None or code in ("W", "J"):
            out.append(move)
            continue
        suit, rank = code[0], int(code[1:])
        low = kept.get(suit)
        if low is not None and all(f"{suit}{r}" in seen for r in range(low + 1, rank)):
            kept[suit] = rank  # the same as the card below it: a chain of equals
            continue
        kept[suit] = rank
        out.append(move)
    return out


def _rank_key(code: str | None) -> tuple[str, int]:
    if code is None or code in ("W", "J"):
        return ("~", 0)
    return (code[0], int(code[1:]))


def search_move(
    view: MatchView,
    rng: Random,
    seconds: float = DEFAULT_SECONDS,
    nodes: int | None = None,
    exploration: float = EXPLORATION,
    bid_spread: int = BID_SPREAD,
    rivalry: float = RIVALRY,
) -> Move:
    """The move the search picks for the seat whose view this is (see the module's text).

    It searches for ``seconds`` (at least one determinization), or, if ``nodes`` is given,
    for exactly that many iterations (at least one per candidate move), whatever the clock.
    """
    if not view.legal_moves or view.my_seat is None:
        raise ValueError("this seat has no move to make now")
    candidates = _root_candidates(view, rng, bid_spread)
    if len(candidates) == 1:
        return candidates[0]
    me = view.my_seat
    search = _Search(me, rng, exploration, _scale(view), rivalry)
    root = _Node()
    keys = [_key(_action_of_move(m)) for m in candidates]
    for k in keys:
        root.children[k] = _Node()
    choosing_trump = view.phase is Phase.CHOOSE_TRUMP
    config = MatchConfig.create(view.ruleset, view.players, view.variants)
    determinizer = None if choosing_trump else _Determinizer(view, config)
    deadline = time.perf_counter() + seconds
    done = 0
    while True:
        if choosing_trump:  # the trump changes every seat's bid: a round per candidate
            world = sample_state(view, rng)
            for key in keys:
                after = world.copy()
                after.apply_action(me, key)
                search.iterate(root.children[key], _Round.of_state(after, _estimates(after)))
        else:
            assert determinizer is not None
            start = determinizer.round(rng)
            for key in keys:
                play = start.copy()
                play.apply(me, _actual(play, me, key))
                search.iterate(root.children[key], play)
        done += len(keys)
        if nodes is not None:
            if done >= nodes:
                break
        elif time.perf_counter() >= deadline:
            break
    best = max(range(len(keys)), key=lambda i: root.children[keys[i]].total)
    return candidates[best]


class _Determinizer:
    """Determinizations of one view's round: the hidden hands are all there is to draw
    (:class:`~wizard.sampling.RoundDeal`, cheap; it and the round as shown are read from the
    view once) while bidding, and while cards are played in sight of every bid; otherwise
    (SECRET_BIDS' play, CLAIRVOYANCE's round 1) a whole state
    (:func:`~wizard.sampling.sample_state`: the hidden bids guessed from the hands)."""

    def __init__(self, view: MatchView, config: MatchConfig) -> None:
        self.view = view
        bidding = view.phase is Phase.BID
        self.deal: RoundDeal | None = None
        if (bidding and view.hand is not None) or (not bidding and all(s.bid is not None for s in view.seats)):
            self.deal = round_deal(view)
            self.shown = _Round.shown_by(view, config)

    def round(self, rng: Random) -> _Round:
        if self.deal is not None:
            return self.shown.dealt(self.view, self.deal.draw_held(rng))
        world = sample_state(self.view, rng)
        return _Round.of_state(world, _estimates(world))


def _estimates(world: MatchState) -> dict[int, float]:
    """The greedy model's tricks for each seat yet to bid, from its view of ``world``."""
    f = fields_of(world)
    if f.phase is not Phase.BID:
        return {}
    return {s: _MODEL.expected_tricks(world.view(s)) for s in range(world.players) if f.bids[s] is None}


def _action_of_move(move: Move) -> int:
    if move.bid is not None:
        return ACTION_BID + move.bid
    if move.trump is not None:
        return ACTION_TRUMP + int(move.trump)
    assert move.card is not None
    return world_card(move.card)


class _Search:
    """What every iteration of one decision shares: the seat, the rng, the reward's terms."""

    __slots__ = ("c", "me", "rivalry", "rng", "scale")

    def __init__(self, me: int, rng: Random, c: float, scale: float, rivalry: float) -> None:
        self.me, self.rng, self.c, self.scale, self.rivalry = me, rng, c, scale, rivalry

    def iterate(self, node: _Node, play: _Round) -> None:
        """One iteration, after this seat's move at the root (whose node is ``node``) on
        ``play``: down the tree while it has statistics, then the greedy model to the end
        of the round; the round's points go back up the path."""
        me = self.me
        path = [node]
        in_tree = True
        while not play.over:
            seat = play.seat_to_move(me)
            if seat == me and in_tree:
                actions = {_key(a): a for a in play.legal(me)}
                key = _select(node, actions, self.rng, self.c)
                action = actions[key]
                child = node.children.get(key)
                if child is None:
                    child = node.children[key] = _Node()
                    in_tree = False
                node = child
                path.append(node)
            else:
                action = play.model_action(seat)
                if in_tree and (not play.bidding or not play.rules.simultaneous):
                    # a move this seat sees: the tree follows it
                    key = _key(action)
                    child = node.children.get(key)
                    if child is None:
                        child = node.children[key] = _Node()
                    node = child
            play.apply(seat, action)
        gains = play.gains()
        others = (sum(gains) - gains[me]) / (len(gains) - 1)
        reward = (gains[me] - self.rivalry * others) / self.scale
        for n in path:
            n.visits += 1
            n.total += reward


def _actual(play: _Round, seat: int, key: int) -> int:
    """The action of this determinization a key stands for (the copy of W or J held)."""
    if WIZARD_BASE <= key < CARD_IDS:
        return lowest_copy(play.hands[seat], key)
    return key


def _select(node: _Node, actions: dict[int, int], rng: Random, c: float) -> int:
    """UCB1 over the moves legal here, each judged by how often it was available: an
    untried one first (at random)."""
    children = node.children
    untried = [k for k in actions if k not in children]
    for key in actions:
        if key in children:
            children[key].avail += 1
    if untried:
        return untried[int(rng.random() * len(untried))]
    best_key = -1
    best = -1e18
    for key in actions:
        child = children[key]
        value = child.total / child.visits + c * sqrt(log(child.avail) / child.visits)
        if value > best:
            best, best_key = value, key
    return best_key


def house_move(view: MatchView, seed: str, seconds: float = DEFAULT_SECONDS) -> Move:
    """The SEARCH house bot's move, its rng seeded from ``seed``: a plain function of
    picklable values, for a server to run in another process."""
    return SearchBot(seconds).act(view, Random(seed))


class SearchBot(HouseBot):
    """Information-set Monte Carlo tree search (:func:`search_move`) for every decision."""

    kind = "SEARCH"

    def __init__(self, seconds: float = DEFAULT_SECONDS, nodes: int | None = None) -> None:
        self.seconds = seconds
        self.nodes = nodes

    def act(self, view: MatchView, rng: Random) -> Move:
        if not view.legal_moves:
            raise ValueError("this seat has no move to make now")
        if len(view.legal_moves) == 1:
            return view.legal_moves[0]
        return search_move(view, rng, self.seconds, self.nodes)

    def choose_trump(self, view: MatchView, rng: Random) -> Move:
        return self.act(view, rng)

    def bid(self, view: MatchView, rng: Random) -> Move:
        return self.act(view, rng)

    def play(self, view: MatchView, rng: Random) -> Move:
        return self.act(view, rng)


__all__ = ["DEFAULT_SECONDS", "SearchBot", "house_move", "search_move"]
