"""A search bot: determinized Monte Carlo, with the engine as its forward model.

For each bid or card it samples worlds that agree with its view (``wizard.sample_state``
deals the unseen cards at random, keeping the suits a seat showed it lacks), tries every
candidate in each, plays the round out with a fast greedy policy for every seat (win while
short of the bid, else duck) and keeps the candidate that scored best for it. It thinks for
``budget_seconds`` per decision: keep that well under the match's move timeout. Trump is
chosen as the house heuristic bot chooses it.

    wizard-arena play --token $WIZARD_ARENA_TOKEN --bot examples/search_bot.py:SearchBot
    wizard-arena tournament run --bots examples/search_bot.py:SearchBot,heuristic,random --matches 50 --players 4
"""

import random
import time

from sdk import Bot
from wizard import HeuristicBot, MatchState, MatchView, Move, Phase, Variant, sample_state
from wizard.cards import CODE_MASK, JESTER, SUIT_OF, VALUE_OF, WIZARD
from wizard.tricks import takes_trick, takes_trick_single_suit


class SearchBot(Bot):
    budget_seconds = 0.2  # thinking time per decision
    candidate_bids = 2  # bids tried on each side of the heuristic's estimate

    def __init__(self, seed: int | None = None):
        self.rng = random.Random(seed)
        self.heuristic = HeuristicBot()

    def choose_trump(self, view: MatchView) -> Move:
        return self.heuristic.choose_trump(view, self.rng)

    def bid(self, view: MatchView) -> Move:
        guess = self.heuristic.bid(view, self.rng).bid
        bids = [m.bid for m in view.legal_moves if abs(m.bid - guess) <= self.candidate_bids]
        return Move(bid=self._search(view, bids, self._try_bids))

    def play(self, view: MatchView) -> Move:
        if len(view.legal_moves) == 1:
            return view.legal_moves[0]
        return self._search(view, list(view.legal_moves), self._try_cards)

    def _search(self, view, candidates, try_all):
        """The candidate with the best total score over as many worlds as the budget allows."""
        deadline = time.perf_counter() + self.budget_seconds
        totals = [0] * len(candidates)
        while True:  # one world at least, then as many as fit
            world = sample_state(view, self.rng)
            totals = [t + points for t, points in zip(totals, try_all(world, view, candidates), strict=True)]
            if time.perf_counter() >= deadline:
                return candidates[totals.index(max(totals))]

    def _try_cards(self, world: MatchState, view: MatchView, moves: list[Move]) -> list[int]:
        """This seat's points for the round after each card it could play now."""
        me, points = view.my_seat, []
        for move in moves:
            w = world.copy()
            Rollout(w, view).run(first=w.action_of(me, move))
            points.append(w.scores[me] - world.scores[me])
        return points

    def _try_bids(self, world: MatchState, view: MatchView, bids: list[int]) -> list[int]:
        """This seat's points for the round after each bid; the others bid as the heuristic would."""
        me, others, points = view.my_seat, {}, []
        for bid in bids:
            w, made = world.copy(), {}
            while w.phase is Phase.BID:
                seat = w.awaiting()[0]
                if seat != me and seat not in others:  # (the heuristic ignores our bid)
                    others[seat] = self.heuristic.bid(w.view(seat), self.rng).bid
                want = bid if seat == me else others[seat]
                legal = [m.bid for m in w.legal_moves(seat)]  # PLUS_MINUS_ONE may forbid one
                made[seat] = min(legal, key=lambda b: abs(b - want))
                w.apply(seat, Move(bid=made[seat]))
            if w.round == view.round:  # (CLAIRVOYANCE: round 1 plays itself)
                Rollout(w, view, made).run()
            points.append(w.scores[me] - world.scores[me])
        return points


class Rollout:
    """The rest of the round for every seat: win while short of the bid, else duck."""

    def __init__(self, world: MatchState, view: MatchView, bids: dict[int, int] | None = None):
        self.world, self.round, self.n = world, view.round, view.players
        self.trump = None if view.trump_suit is None else int(view.trump_suit)
        self.single = Variant.SINGLE_SUIT in view.variants
        even = round(view.hand_size / view.players)  # for a bid we cannot see
        self.bids = {s.seat: even if s.bid is None else s.bid for s in view.seats} | (bids or {})
        self.tricks = [s.tricks for s in view.seats]
        # (seat, card id) on the table; any copy of a Wizard or Jester compares the same
        self.trick = [(p.seat, CODE_MASK[p.card].bit_length() - 1) for p in view.current_trick]

    def beats(self, card: int, best: int) -> bool:
        return takes_trick_single_suit(card, best) if self.single else takes_trick(card, best, self.trump)

    def strength(self, card: int) -> int:
        """Jester lowest, then by rank with trumps above the rest, Wizard highest."""
        suit = SUIT_OF[card]
        if suit == JESTER or self.single:
            return -1 if suit == JESTER else VALUE_OF[card]
        return 100 if suit == WIZARD else VALUE_OF[card] + 30 * (suit == self.trump)

    def taking(self) -> tuple[int, int] | None:
        """The (seat, card) that takes the trick on the table so far."""
        top = None
        for seat, card in self.trick:
            if top is None or self.beats(card, top[1]):
                top = seat, card
        return top

    def choose(self, seat: int) -> int:
        cards, top = self.world.legal_actions(seat), self.taking()
        winning = [c for c in cards if top is None or self.beats(c, top[1])]
        losing = [c for c in cards if c not in winning]
        if self.bids[seat] > self.tricks[seat]:  # last to play: the cheapest winner will do
            if winning:
                return (min if len(self.trick) == self.n - 1 else max)(winning, key=self.strength)
            return min(cards, key=self.strength)
        return max(losing, key=self.strength) if losing else min(cards, key=self.strength)

    def run(self, first: int | None = None) -> None:
        """Play to the end of the round; ``first``, an action, is the next seat's card."""
        world = self.world
        while world.round == self.round and not world.is_finished:
            seat = world.to_act
            card = self.choose(seat) if first is None else first
            first = None
            world.apply_action(seat, card)
            self.trick.append((seat, card))
            if len(self.trick) == self.n:
                self.tricks[self.taking()[0]] += 1
                self.trick = []
