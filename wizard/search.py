"""The SEARCH house bot: information-set Monte Carlo tree search from one seat's view.

Each iteration deals a *determinization*, a full state that agrees with the seat's view
(:func:`~wizard.sampling.sample_state`: the hidden cards and hidden bids drawn at random,
never read from the real state), and plays it to the end of the round:

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

from wizard.bots import HeuristicBot, HouseBot
from wizard.cards import JESTER, JESTER_BASE, SUIT_OF, VALUE_OF, WIZARD, WIZARD_BASE
from wizard.moves import ACTION_BID, ACTION_TRUMP, Move
from wizard.rules import Phase, Variant
from wizard.sampling import sample_state
from wizard.state import MatchState
from wizard.tricks import trick_table
from wizard.views import MatchView

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
    if action < ACTION_TRUMP and action >= WIZARD_BASE:
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


class _Round:
    """One determinization played to the end of its round, with what the greedy model
    needs kept up to date: the bids, the tricks taken, the trick on the table."""

    __slots__ = ("beats", "bids", "n", "single", "strength", "top", "top_seat", "trick_size", "tricks", "world")

    def __init__(self, world: MatchState, view: MatchView, me: int) -> None:
        self.world = world
        self.n = view.players
        self.single = Variant.SINGLE_SUIT in view.variants
        self.bids: list[int | None] = [s.bid for s in view.seats]
        if view.phase is Phase.PLAY:
            for s in range(self.n):  # a bid hidden from us: the determinization's guess
                if self.bids[s] is None:
                    self.bids[s] = world.view(s).seats[s].bid
        self.tricks = [s.tricks for s in view.seats]
        self.set_trump(None if view.trump_suit is None else int(view.trump_suit))
        self.top = -1
        self.top_seat = -1
        self.trick_size = 0
        for play in view.current_trick:
            self.note_card(play.seat, world_card(play.card))

    def set_trump(self, trump: int | None) -> None:
        self.beats = trick_table(trump, self.single)
        self.strength = _strengths(trump, self.single)

    def note_card(self, seat: int, card: int) -> None:
        if self.trick_size == 0 or self.beats[self.top][card]:
            self.top, self.top_seat = card, seat
        self.trick_size += 1
        if self.trick_size == self.n:
            self.tricks[self.top_seat] += 1
            self.trick_size = 0

    def apply(self, seat: int, action: int) -> None:
        if action < ACTION_TRUMP:
            self.note_card(seat, action)
        elif action < ACTION_BID:
            self.set_trump(action - ACTION_TRUMP)
        else:
            self.bids[seat] = action - ACTION_BID
        world = self.world
        world.apply_action(seat, action)
        if action >= ACTION_BID and world.phase is Phase.PLAY and None in self.bids:
            for s in range(self.n):  # bids made out of our sight: the determinization's
                if self.bids[s] is None:
                    self.bids[s] = world.view(s).seats[s].bid

    def model_action(self, seat: int, rng: Random) -> int:
        """The greedy model's move for ``seat``."""
        world = self.world
        phase = world.phase
        if phase is not Phase.PLAY:
            move = _MODEL.act(world.view(seat), rng)
            return world.action_of(seat, move)
        cards = world.legal_actions(seat)
        strength = self.strength
        if self.trick_size == 0:
            winning, losing = cards, []
        else:
            row = self.beats[self.top]
            winning = [c for c in cards if row[c]]
            losing = [c for c in cards if not row[c]]
        bid = self.bids[seat]
        if bid is None or bid > self.tricks[seat]:
            if winning:
                if self.trick_size == self.n - 1:
                    return min(winning, key=strength.__getitem__)
                return max(winning, key=strength.__getitem__)
            return min(cards, key=strength.__getitem__)
        if losing:
            return max(losing, key=strength.__getitem__)
        return min(cards, key=strength.__getitem__)


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
    scale = _scale(view)
    root = _Node()
    keys = [_key(_action_of_move(m)) for m in candidates]
    for k in keys:
        root.children[k] = _Node()
    deadline = time.perf_counter() + seconds
    done = 0
    while True:
        world = sample_state(view, rng)
        for key in keys:
            _iterate(root.children[key], key, world.copy(), view, me, rng, exploration, scale, rivalry)
            done += 1
        if nodes is not None:
            if done >= nodes:
                break
        elif time.perf_counter() >= deadline:
            break
    best = max(range(len(keys)), key=lambda i: root.children[keys[i]].total)
    return candidates[best]


def _action_of_move(move: Move) -> int:
    if move.bid is not None:
        return ACTION_BID + move.bid
    if move.trump is not None:
        return ACTION_TRUMP + int(move.trump)
    assert move.card is not None
    return world_card(move.card)


def _iterate(
    node: _Node, first: int, world: MatchState, view: MatchView, me: int, rng: Random, c: float, scale: float,
    rivalry: float,
) -> None:
    """One iteration: ``first`` (this seat's move at the root) on the determinization
    ``world``, down the tree while it has statistics, then the greedy model to the end of
    the round; the round's points go back up the path."""
    base = world.scores
    start = world.round
    play = _Round(world, view, me)
    play.apply(me, _actual(world, me, first))
    path = [node]
    in_tree = True
    while world.round == start and not world.is_finished:
        awaiting = world.awaiting()
        seat = me if me in awaiting else awaiting[0]
        if seat == me and in_tree:
            actions: dict[int, int] = {}
            for a in world.legal_actions(me):
                actions.setdefault(_key(a), a)
            key = _select(node, actions, rng, c)
            action = actions[key]
            child = node.children.get(key)
            if child is None:
                child = node.children[key] = _Node()
                in_tree = False
            node = child
            path.append(node)
        else:
            action = play.model_action(seat, rng)
            if in_tree and (action < ACTION_BID or not world.config.simultaneous_bids):
                # a move this seat sees: the tree follows it
                key = _key(action)
                child = node.children.get(key)
                if child is None:
                    child = node.children[key] = _Node()
                node = child
        play.apply(seat, action)
    after = world.scores
    gains = [a - b for a, b in zip(after, base, strict=True)]
    others = (sum(gains) - gains[me]) / (len(gains) - 1)
    reward = (gains[me] - rivalry * others) / scale
    for n in path:
        n.visits += 1
        n.total += reward


def _actual(world: MatchState, seat: int, key: int) -> int:
    """The action of this determinization a key stands for (the copy of W or J held)."""
    if key < ACTION_TRUMP and key >= WIZARD_BASE:
        for a in world.legal_actions(seat):
            if _key(a) == key:
                return a
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
