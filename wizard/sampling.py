"""Determinization: full engine states that agree with one seat's view, for search.

A seat sees a :class:`~wizard.views.MatchView`, not the state: the other seats' hands, the
undealt cards and, under HIDDEN_BIDS or SECRET_BIDS, some bids are hidden from it.
:func:`sample_state` fills them in at random, consistently with everything the view shows,
and returns a :class:`~wizard.state.MatchState` to copy, play on and score: the forward
model of determinized Monte Carlo search. :func:`sample_hands` draws the hidden hands alone
(bit masks, no state), for a search that stays within the round; :func:`round_deal` reads
the view once for many such draws.

>>> import dataclasses, random
>>> from wizard import MatchConfig, new_match
>>> state = new_match(MatchConfig.create("WIZARD", 4), seed="sampling")
>>> _ = [state.apply(state.to_act, state.legal_moves(state.to_act)[0]) for _ in range(30)]
>>> view = state.view(0)
>>> world = sample_state(view, random.Random(1))
>>> world.view(0) == dataclasses.replace(view, seed_hash=world.seed_hash)
True
>>> from wizard.playout import playout
>>> playout(world, random.Random(2)).scores != ()   # play it on to the end of the match
True
"""

from __future__ import annotations

from functools import lru_cache
from math import comb
from random import Random
from typing import TYPE_CHECKING

from wizard.bots import HeuristicBot
from wizard.cards import CODE_MASK, JESTER_MASK, SUIT_LETTERS, SUIT_MASK, WIZARD_MASK, cards_of, mask_of
from wizard.errors import MatchFinishedError
from wizard.moves import Move
from wizard.rules import MatchConfig, Phase, Ruleset, Variant
from wizard.state import MatchState, deal_round, fields_of, single_suit_pile, state_of_fields, undealt_match
from wizard.views import MatchView, Play, Trick

if TYPE_CHECKING:
    # mypyc's native 64-bit int, in annotations only (see wizard.shuffle)
    from mypy_extensions import i64

#: Stands in the sampled state's move log for each move of an earlier round: the viewer
#: does not know them, but the count keeps ``moves_made`` equal to the view's.
UNKNOWN_MOVE = 0xFFFF
#: Proposals tried before falling back to a deal that respects the voids but is not uniform.
REJECTION_TRIES = 200
_BIDDER = HeuristicBot()


def sample_state(view: MatchView, rng: Random) -> MatchState:
    """A state consistent with ``view``, the hidden parts drawn from ``rng``.

    ``sample_state(view, rng).view(view.my_seat) == view`` in every field but
    ``seed_hash``: the sampled state deals the rounds after this one from a seed of its own,
    drawn from ``rng`` (same rng state, same sample). What is drawn:

    - every card the view hides (other seats' hands, the undealt cards; under CLAIRVOYANCE
      in round 1 the viewer's own card; for a spectator every hand), uniformly among the
      deals that give each seat the cards it still holds and respect what play revealed: a
      seat that did not follow the lead suit holds none of it (SINGLE_SUIT has no following);
    - bids the viewer cannot see yet: the :class:`~wizard.bots.HeuristicBot`'s bid for that
      seat's sampled hand (the sampled hands do not take bids into account).

    Scores and results of earlier rounds come from the view; this round's trump choice,
    bids and plays are re-applied through the engine. The moves of earlier rounds are
    unknown: the log holds :data:`UNKNOWN_MOVE` for each, so ``moves_made`` matches but
    ``record()`` of a sampled state does not replay. A finished match has nothing hidden:
    its view raises :class:`~wizard.errors.MatchFinishedError`.
    """
    config = _config_of(view)
    n = view.players
    first_dealer = (view.dealer - view.round + 1) % n
    state = undealt_match(
        config,
        f"sample-{rng.getrandbits(64):016x}",
        first_dealer,
        scores=[s.score for s in view.seats],
        results=[(tuple(x.bid for x in r.seats), tuple(x.tricks for x in r.seats)) for r in view.round_results],
        # the last trick of the round before, until one is done
        last_trick=None if view.last_trick is None else _trick_ids(view.last_trick, config),
    )
    plays = _plays(view)
    deal = RoundDeal(view, config, plays)
    trump = deal.trump
    hands = [cards_of(h) for h in deal.draw(rng)]
    start = view.dealer + 1
    order = [hands[(start + k) % n][k // n] for k in range(n * view.hand_size)]
    deal_round(state, view.round, view.dealer, order if trump is None else [*order, trump])
    _replay_round(state, view, plays, rng)
    # the earlier rounds' moves, unknown, go before this round's in the log
    fields = fields_of(state)
    earlier = [UNKNOWN_MOVE] * (view.moves_made - len(fields.log))
    return state_of_fields(config, state.seed, None, fields._replace(log=earlier + fields.log))


def sample_hands(view: MatchView, rng: Random) -> list[int]:
    """Every seat's cards in hand now, as bit masks of card ids, the hidden ones drawn as
    :func:`sample_state` draws them: the part of a determinization that search within the
    round needs, without a state to build (the view's bids must then be all it needs).
    To draw many from one view, :func:`round_deal`'s :meth:`~RoundDeal.draw_held` reads the
    view once."""
    return round_deal(view).draw_held(rng)


def round_deal(view: MatchView) -> RoundDeal:
    """This round's deal as ``view`` shows it, to draw the hidden cards from."""
    return RoundDeal(view, _config_of(view), _plays(view))


def _plays(view: MatchView) -> list[Play]:
    """This round's cards played so far, in order."""
    return [p for t in view.completed_tricks for p in t.plays] + list(view.current_trick)


def _config_of(view: MatchView) -> MatchConfig:
    if view.phase is Phase.FINISHED:
        raise MatchFinishedError("the match is over: there is nothing hidden left to sample")
    n = view.players
    return _config(view.ruleset, n, frozenset(view.variants), (view.dealer - view.round + 1) % n)


@lru_cache(maxsize=256)
def _config(ruleset: Ruleset, players: int, variants: frozenset[Variant], first_dealer: int) -> MatchConfig:
    return MatchConfig(ruleset, players, variants, first_dealer)


def _trick_ids(trick: Trick, config: MatchConfig) -> tuple[int, tuple[int, ...], int]:
    taken = 0
    cards = []
    for play in trick.plays:
        bit = _take(play.card, config.deck.mask, taken)
        taken |= bit
        cards.append(bit.bit_length() - 1)
    return trick.leader, tuple(cards), trick.winner


def _take(code: str, within: int, taken: int) -> int:
    """The bit of a copy of ``code`` in ``within`` not yet taken (W and J have several)."""
    free = CODE_MASK[code] & within & ~taken
    if not free:
        raise ValueError(f"the view shows {code} more often than this deal can hold it")
    return free & -free


class RoundDeal:
    """This round's deal as a view shows it, read once: the cards each seat is seen to hold
    or to have played, the turned trump card, and for each other seat how many cards it was
    dealt that the view hides and which it cannot hold (:func:`_voids`). :meth:`draw` fills
    in the hidden ones (uniformly among the deals that respect all that)."""

    def __init__(self, view: MatchView, config: MatchConfig, plays: list[Play]) -> None:
        n = view.players
        deck = config.deck.mask
        piles = [mask_of(single_suit_pile(s)) for s in range(n)] if config.single_suit else [deck] * n
        taken = trump = 0
        if view.trump_card is not None:
            trump = _take(view.trump_card, deck, 0)
            taken = trump
        played = [0] * n
        for p in plays:
            bit = _take(p.card, piles[p.seat], taken)
            played[p.seat] |= bit
            taken |= bit
        known = list(played)
        needs = []
        for s, seat in enumerate(view.seats):
            if seat.hand is None:
                needs.append((s, view.hand_size - played[s].bit_count()))
            else:
                for code in seat.hand:
                    bit = _take(code, piles[s], taken)
                    known[s] |= bit
                    taken |= bit
        #: by seat, the cards it is seen to hold or to have played, as masks
        self.known = known
        #: by seat, the cards it played this round
        self.played = played
        #: the turned trump card (None: none turned)
        self.trump = trump.bit_length() - 1 if trump else None
        if config.single_suit:  # each seat draws from its own pile, with no following to reveal voids
            self.hidden = [_HiddenDraw(piles[s] & ~taken, [(s, need, 0)]) for s, need in needs]
        else:
            voids = _voids(view)
            self.hidden = [_HiddenDraw(deck & ~taken, [(s, need, voids[s]) for s, need in needs])]

    def draw(self, rng: Random) -> list[int]:
        """Every seat's cards as dealt this round, as masks, the hidden ones drawn."""
        hands = list(self.known)
        for hidden in self.hidden:
            for s, hand in hidden.draw(rng).items():
                hands[s] |= hand
        return hands

    def draw_held(self, rng: Random) -> list[int]:
        """Every seat's cards in hand now (as dealt, less those played), the hidden ones drawn."""
        played = self.played
        return [hand ^ played[s] for s, hand in enumerate(self.draw(rng))]


def _voids(view: MatchView) -> list[int]:
    """Per seat, the cards it cannot hold: every suit it failed to follow this round."""
    voids = [0] * view.players
    for trick in [*(t.plays for t in view.completed_tricks), view.current_trick]:
        lead = None  # a suit letter, "W" after a Wizard led (no lead suit), None before
        for play in trick:
            card = play.card
            if card == "J":
                continue
            if lead is None:
                lead = card[0]
            elif lead != "W" and card != "W" and card[0] != lead:
                voids[play.seat] |= SUIT_MASK[SUIT_LETTERS.index(lead)]
    return voids


def _deal_hidden(
    pool: int, needs: list[tuple[int, int, int]], rng: Random, tries: int = REJECTION_TRIES
) -> dict[int, int]:
    """Hands from ``pool`` for ``needs``, a list of (seat, cards it holds, cards it cannot
    hold), uniform among all the deals that respect them (:class:`_HiddenDraw`)."""
    return _HiddenDraw(pool, needs).draw(rng, tries)


class _HiddenDraw:
    """Hands from ``pool`` for ``needs``, a list of (seat, cards it holds, cards it cannot
    hold), uniform among all the deals that respect them; what the draws share is worked
    out once.

    Rejection sampling: the seats with a void draw first, each uniformly from the cards it
    may hold; a proposal is kept with probability ``prod C(a_k, c_k) / C(b_k, c_k)`` (``a_k``
    cards were open to seat k when it drew ``c_k``, ``b_k`` bounds ``a_k``), which cancels
    the proposal's bias exactly. The other seats then split what is left.
    """

    def __init__(self, pool: int, needs: list[tuple[int, int, int]]) -> None:
        self.pool = pool
        self.needs = needs
        banned = [(s, c, pool & ~ban) for s, c, ban in needs if c and ban & pool]
        banned.sort(key=lambda x: x[2].bit_count())
        self.banned = banned
        self.free = [(s, c) for s, c, ban in needs if not (c and ban & pool)]
        self.tops: list[int] = []
        drawn = 0
        for k, (_, count, allowed) in enumerate(banned):
            # the seats before k take at least this many cards seat k could have held
            lost = sum(max(0, c - (a & ~allowed).bit_count()) for _, c, a in banned[:k])
            self.tops.append(comb(min(allowed.bit_count() - lost, pool.bit_count() - drawn), count))
            drawn += count

    def draw(self, rng: Random, tries: int = REJECTION_TRIES) -> dict[int, int]:
        for _ in range(tries):
            left = self.pool
            hands: dict[int, int] = {}
            for (seat, count, allowed), top in zip(self.banned, self.tops, strict=True):
                open_ = left & allowed
                ways = comb(open_.bit_count(), count)
                if not ways or rng.random() * top >= ways:
                    break
                hands[seat] = hand = _draw(open_, count, rng)
                left ^= hand
            else:
                for seat, count in self.free:
                    hands[seat] = hand = _draw(left, count, rng)
                    left ^= hand
                return hands
        return _deal_by_flow(self.pool, self.needs, rng)


def _deal_by_flow(pool: int, needs: list[tuple[int, int, int]], rng: Random) -> dict[int, int]:
    """Some deal that respects the voids, not a uniform one: how many cards of each suit
    (and of the Wizards, the Jesters) each seat gets is a max flow from the pool's counts
    to the seats' hand sizes; the cards themselves are then drawn at random."""
    kinds = [pool & mask for mask in (*SUIT_MASK, WIZARD_MASK, JESTER_MASK)]
    rng.shuffle(needs := list(needs))
    # nodes: 0 source, 1-6 kinds of card, then the seats, then the sink
    sink = 7 + len(needs)
    cap = [[0] * (sink + 1) for _ in range(sink + 1)]
    for k, cards in enumerate(kinds):
        cap[0][1 + k] = cards.bit_count()
        for i, (_, count, ban) in enumerate(needs):
            cap[1 + k][7 + i] = 0 if cards & ban else count
    for i, (_, count, _) in enumerate(needs):
        cap[7 + i][sink] = count
    flow = [[0] * (sink + 1) for _ in range(sink + 1)]
    while True:  # Edmonds-Karp: shortest augmenting paths
        parent = {0: 0}
        queue = [0]
        for u in queue:
            for v in range(sink + 1):
                if v not in parent and cap[u][v] - flow[u][v] > 0:
                    parent[v] = u
                    queue.append(v)
        if sink not in parent:
            break
        push = min(cap[parent[x]][x] - flow[parent[x]][x] for x in _path(parent, sink))
        for v in _path(parent, sink):
            flow[parent[v]][v] += push
            flow[v][parent[v]] -= push
    if any(flow[7 + i][sink] < count for i, (_, count, _) in enumerate(needs)):
        raise ValueError("no deal of the unseen cards agrees with this view: it is inconsistent")
    hands: dict[int, int] = {}
    for i, (seat, _, _) in enumerate(needs):
        hand = 0
        for k in range(6):
            chosen = _draw(kinds[k], flow[1 + k][7 + i], rng)
            kinds[k] ^= chosen
            hand |= chosen
        hands[seat] = hand
    return hands


def _draw(pool: int, count: int, rng: Random) -> int:
    """``count`` cards of the mask ``pool``, drawn uniformly one by one, as a mask: each the
    card at a random place among those left (found by dropping the lower ones: no list of
    the cards to build)."""
    left = pool.bit_count()
    rest: i64 = pool
    hand: i64 = 0
    for _ in range(count):
        place = int(rng.random() * left)
        left -= 1
        mask: i64 = rest
        while place:
            mask &= mask - 1
            place -= 1
        bit: i64 = mask & -mask
        hand |= bit
        rest ^= bit
    return hand


def _path(parent: dict[int, int], node: int) -> list[int]:
    path = []
    while node:
        path.append(node)
        node = parent[node]
    return path


def _replay_round(state: MatchState, view: MatchView, plays: list[Play], rng: Random) -> None:
    """Make this round's moves so far: the trump choice, the bids (a guess for each bid made
    but hidden from the viewer), the plays."""
    if view.phase is Phase.CHOOSE_TRUMP:
        return
    if view.trump_card == "W":
        state.apply(view.dealer, Move(trump=view.trump_suit))
    n = view.players
    waiting = view.awaiting if view.phase is Phase.BID else ()
    for i in range(n):
        seat = (view.dealer + 1 + i) % n
        bid = view.seats[seat].bid
        if bid is None:
            if state.to_act is not None:  # bids in turn are public: nobody from here has bid
                break
            if seat in waiting:
                continue
            bid = _BIDDER.bid(state.view(seat), rng).bid
        state.apply(seat, Move(bid=bid))
    for play in plays:
        state.apply(play.seat, Move(card=play.card))
