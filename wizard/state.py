"""One match in progress: dealing, the three phases (choose trump, bid, play), tricks,
scoring and the end of the match.

The state is mutable (search code copies it with :meth:`MatchState.copy`) and keeps its
cards private: what a seat may know leaves it only through :meth:`MatchState.view`.
Moves go in as :class:`~wizard.moves.Move` objects (:meth:`MatchState.apply`) or as small
int actions (:meth:`MatchState.apply_action`); both are checked, and a refused move raises
a typed error and changes nothing.

>>> state = new_match(MatchConfig.create("WIZARD", 3), seed="doc")
>>> state.phase, state.round, state.awaiting()
(<Phase.BID: 'BID'>, 1, (1,))
>>> state.view(1).hand, [str(m) for m in state.view(1).legal_moves]
(('W',), ['bid 0', 'bid 1'])
>>> state.apply(1, Move(bid=1)); state.view(0).seats[1].bid
1
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from math import floor
from random import Random

from wizard.cards import (
    BIT,
    CARD_IDS,
    SAME_CODE_MASK,
    CODE_MASK,
    CODES,
    JESTER,
    JESTER_BASE,
    RANKS_PER_SUIT,
    SPECIAL_MASK,
    SUIT_MASK,
    SUIT_OF,
    WIZARD,
    WIZARD_BASE,
    Suit,
    parse_cards,
)
from wizard.errors import (
    ConfigError,
    DealError,
    IllegalMoveError,
    InvalidMoveError,
    MatchFinishedError,
    NotYourTurnError,
)
from wizard.moves import ACTION_BID, ACTION_TRUMP, Move, move_of_action
from wizard.rules import PILE_SIZE, POINTS, MatchConfig, Scoring
from wizard.shuffle import SeedStream, fresh_shuffle, round_label, salt_problem, seed_hash
from wizard.tricks import trick_table


class Phase(str, Enum):
    CHOOSE_TRUMP = "CHOOSE_TRUMP"
    BID = "BID"
    PLAY = "PLAY"
    FINISHED = "FINISHED"


#: ``_lead`` while the trick is empty or holds only Jesters: the next card sets the lead.
#: (0-3 is a lead suit; every sentinel is above 3 so ``lead < 4`` tests for a lead suit.)
LEAD_OPEN = 6
#: ``_lead`` after a Wizard led: no lead suit for the rest of the trick.
LEAD_FREE = WIZARD
NO_SEAT = -1
#: ``_FOLLOW_MASK[suit]``: the cards a seat holding that suit may play when it is led.
_FOLLOW_MASK = tuple(SUIT_MASK[s] | SPECIAL_MASK for s in range(4))
# Tables of the playout loop (MatchState._playout_round).
#: ``_LOG_CODES[seat][card]``: the log entry of the seat playing that card
_LOG_CODES = tuple(tuple(seat << 8 | card for card in range(CARD_IDS)) for seat in range(6))
#: ``_TRICK_SEATS[n][leader]``: ``(seat, _LOG_CODES[seat])`` in playing order
_TRICK_SEATS = {
    n: tuple(tuple(((leader + i) % n, _LOG_CODES[(leader + i) % n]) for i in range(n)) for leader in range(n))
    for n in range(3, 7)
}
#: a trick-table row every card beats: the "winner" of an empty trick
_TAKES_ALL = (True,) * CARD_IDS
#: by the card that sets the lead: the suit to follow (0: none), and the cards a seat
#: holding that suit may play (SINGLE_SUIT never follows: ``_NO_FOLLOW``)
_FOLLOW_OF = tuple(SUIT_MASK[SUIT_OF[c]] if SUIT_OF[c] < 4 else 0 for c in range(CARD_IDS))
_LEGAL_OF = tuple(_FOLLOW_MASK[SUIT_OF[c]] if SUIT_OF[c] < 4 else 0 for c in range(CARD_IDS))
_NO_FOLLOW = (0,) * CARD_IDS
_STANDARD_POINTS = POINTS[Scoring.STANDARD]
# Tables of the playout's later rounds (MatchState._playout_rounds).
#: ``_ROUND_TAIL[r]``: what follows ``f"{seed}:round-"`` in the prefix of round r's stream
_ROUND_TAIL = tuple(f"{r}:".encode() for r in range(64))
#: ``_DEAL_SLICES[n][dealer]``: by seat, the positions of its cards among those dealt
#: (card ``k`` goes to seat ``dealer + 1 + k``)
_DEAL_SLICES = {n: tuple(tuple(slice((s - dealer - 1) % n, None, n) for s in range(n)) for dealer in range(n)) for n in range(3, 7)}
#: ``_FOLLOWERS[n][leader]``: ``_TRICK_SEATS[n][leader]`` without the leader
_FOLLOWERS = {n: tuple(order[1:] for order in _TRICK_SEATS[n]) for n in range(3, 7)}
#: ``_BID_ORDER[n][dealer]``: the seats that bid before the dealer, in turn
_BID_ORDER = {n: tuple(tuple((d + 1 + i) % n for i in range(n - 1)) for d in range(n)) for n in range(3, 7)}
MAX_SEED_BYTES = 256


@dataclass(frozen=True, slots=True)
class Outcome:
    """The end of a match: final totals by seat and the seats tied on the highest."""

    scores: tuple[int, ...]
    winners: tuple[int, ...]


def _lowest_copy(hand: int, card: int) -> int:
    """The copy of ``card`` the seat plays: Wizards and Jesters are told apart only inside
    the engine, so it always plays the lowest-numbered copy it holds, which makes a card
    code name one exact card and a record of codes replay to identical state."""
    same = hand & SAME_CODE_MASK[card]
    return (same & -same).bit_length() - 1


def single_suit_pile(seat: int) -> tuple[int, ...]:
    """Seat ``i``'s own cards under SINGLE_SUIT: suit ``i`` in rank order, a Wizard, a Jester."""
    return tuple(range(seat * RANKS_PER_SUIT, (seat + 1) * RANKS_PER_SUIT)) + (
        WIZARD_BASE + seat,
        JESTER_BASE + seat,
    )


class MatchState:
    """A match from its first deal to its end. Build one with :func:`new_match`."""

    __slots__ = (
        "config", "seed", "salt", "_n", "_round", "_dealer", "_first_dealer", "_phase", "_to_act",
        "_trump_card", "_trump_suit", "_hands", "_bids", "_tricks", "_scores", "_leader",
        "_trick", "_lead", "_win_pos", "_done", "_last_trick", "_results", "_log",
        "_single", "_beats", "_size",
    )

    config: MatchConfig
    seed: str
    #: hides the seed in ``seed_hash`` until the end (None: the hash is of the seed alone)
    salt: str | None

    # ----------------------------------------------------------------- public facts
    @property
    def players(self) -> int:
        return self._n

    @property
    def round(self) -> int:
        return self._round

    @property
    def dealer(self) -> int:
        return self._dealer

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def to_act(self) -> int | None:
        """The seat whose move it is; None while bids are simultaneous or the match is over."""
        return None if self._to_act == NO_SEAT else self._to_act

    @property
    def is_finished(self) -> bool:
        return self._phase is Phase.FINISHED

    @property
    def scores(self) -> tuple[int, ...]:
        return tuple(self._scores)

    @property
    def moves_made(self) -> int:
        """How many moves the seats have made (the server's clairvoyant plays not counted)."""
        return len(self._log)

    @property
    def seed_hash(self) -> str:
        return seed_hash(self.seed, self.salt)

    @property
    def outcome(self) -> Outcome | None:
        if self._phase is not Phase.FINISHED:
            return None
        best = max(self._scores)
        return Outcome(tuple(self._scores), tuple(s for s in range(self._n) if self._scores[s] == best))

    def awaiting(self) -> tuple[int, ...]:
        """The seats that have a move to make now (several only while bids are simultaneous)."""
        if self._phase is Phase.FINISHED:
            return ()
        if self._to_act != NO_SEAT:
            return (self._to_act,)
        return tuple(s for s in range(self._n) if self._bids[s] is None)

    def hand_size(self) -> int:
        return self.config.hand_size(self._round)

    # ----------------------------------------------------------------- legal moves
    def legal_actions(self, seat: int) -> list[int]:
        """The seat's legal actions now (empty when it has nothing to do)."""
        if type(seat) is not int or not 0 <= seat < self._n:
            self._check_seat(seat)
        phase = self._phase
        if phase is Phase.PLAY:
            if seat != self._to_act:
                return []
            mask = self._playable(self._hands[seat])
            out = []
            while mask:
                low = mask & -mask
                out.append(low.bit_length() - 1)
                mask ^= low
            return out
        if phase is Phase.BID:
            return [ACTION_BID + b for b in self._legal_bids(seat)]
        if phase is Phase.CHOOSE_TRUMP and seat == self._dealer:
            return [ACTION_TRUMP + s for s in range(4)]
        return []

    def legal_moves(self, seat: int) -> list[Move]:
        """The seat's legal moves now; a Wizard or Jester appears once however many are held."""
        moves: list[Move] = []
        seen: set[str] = set()
        for action in self.legal_actions(seat):
            move = move_of_action(action)
            if move.card is None or move.card not in seen:
                moves.append(move)
                if move.card is not None:
                    seen.add(move.card)
        return moves

    def _playable(self, hand: int) -> int:
        lead = self._lead
        if lead < 4 and hand & SUIT_MASK[lead]:
            return hand & (SUIT_MASK[lead] | SPECIAL_MASK)
        return hand

    def _legal_bids(self, seat: int) -> list[int]:
        bids = self._bids
        if bids[seat] is not None:
            return []
        if self._to_act != NO_SEAT and seat != self._to_act:
            return []
        size = self._size
        legal = list(range(size + 1))
        if self.config.plus_minus_one and seat == self._dealer:
            forbidden = size - sum(b for b in bids if b is not None)
            if 0 <= forbidden <= size:
                legal.remove(forbidden)
        return legal

    # ----------------------------------------------------------------- applying moves
    def apply(self, seat: int, move: Move) -> None:
        """Make ``move`` for ``seat``; raises and changes nothing if it is not legal now."""
        self.apply_action(seat, self.action_of(seat, move))

    def action_of(self, seat: int, move: Move) -> int:
        """The action ``move`` stands for when ``seat`` makes it (a Wizard or Jester is the
        lowest copy held); raises if ``seat`` does not hold the card."""
        self._check_seat(seat)
        if not isinstance(move, Move):
            raise InvalidMoveError(f"expected a Move, got {type(move).__name__}")
        if move.card is not None:
            if self._phase is not Phase.PLAY or seat != self._to_act:
                # decided before looking at the hand: under CLAIRVOYANCE a seat may not learn
                # its own round-1 card from which refusal it gets
                self._refuse(seat, f"card {move.card} is not legal now")
            held = CODE_MASK[move.card] & self._hands[seat]
            if not held:
                self._refuse(seat, f"seat {seat} does not hold {move.card}")
            action = (held & -held).bit_length() - 1
        elif move.bid is not None:
            if not 0 <= move.bid <= 255 - ACTION_BID:
                self._refuse(seat, f"bid {move.bid} is out of range")
            action = ACTION_BID + move.bid
        else:
            assert move.trump is not None
            action = ACTION_TRUMP + int(move.trump)
        return action

    def apply_action(self, seat: int, action: int) -> None:
        """Make an action for ``seat``; raises and changes nothing if it is not legal now."""
        if type(seat) is not int or not 0 <= seat < self._n or type(action) is not int:
            self._check_seat(seat)
            raise InvalidMoveError(f"an action is a whole number, not {action!r}")
        phase = self._phase
        if phase is Phase.PLAY:
            if seat == self._to_act and 0 <= action < ACTION_TRUMP:
                bit = BIT[action]
                hand = self._hands[seat]
                if bit & hand and bit & self._playable(hand):
                    action = _lowest_copy(hand, action)
                    self._log.append(seat << 8 | action)
                    self._run_tricks(action, None)
                    return
        elif phase is Phase.BID:
            if ACTION_BID <= action and action - ACTION_BID in self._legal_bids(seat):
                self._log.append(seat << 8 | action)
                self._bid(seat, action - ACTION_BID)
                return
        elif phase is Phase.CHOOSE_TRUMP:
            if seat == self._dealer and ACTION_TRUMP <= action < ACTION_BID:
                self._log.append(seat << 8 | action)
                self._set_trump(action - ACTION_TRUMP)
                return
        self._check_seat(seat)
        self._refuse(seat, f"{move_of_action(action) if 0 <= action < 256 else action} is not legal now")

    def playout(self, rng: Random) -> Outcome:
        """Play the match to its end with every seat on the RANDOM policy (uniform over the
        legal actions), and return the outcome: the rollout of Monte Carlo search.

        It runs the same transitions as :meth:`apply_action`, without the checks a move
        from outside needs; copy the state first to keep it.
        """
        random = rng.random
        while True:
            phase = self._phase
            if phase is Phase.PLAY:
                self._playout_round(random)
            elif phase is Phase.BID:
                self._playout_bids(random)
            elif phase is Phase.CHOOSE_TRUMP:
                suit = floor(random() * 4)
                self._log.append(self._dealer << 8 | (ACTION_TRUMP + suit))
                self._set_trump(suit)
            else:
                assert self.outcome is not None
                return self.outcome

    def _playout_bids(self, random: Callable[[], float]) -> None:
        """The rest of the bids with every seat RANDOM, then the play: what :meth:`_bid`
        does bid by bid, with one draw per bid. A draw picks ``floor(u * count)`` from the
        legal bids (the same as ``int``, and a faster call); every bid from 0 to the hand
        size is legal but the dealer's under PLUS_MINUS_ONE, so only that one needs the list."""
        bids = self._bids
        append = self._log.append
        choices = self._size + 1
        seat = self._to_act
        if seat != NO_SEAT:  # in turn, the dealer last
            dealer = self._dealer
            n = self._n
            while seat != dealer:
                bid = floor(random() * choices)
                append(seat << 8 | (ACTION_BID + bid))
                bids[seat] = bid
                seat += 1
                if seat == n:
                    seat = 0
            self._to_act = seat
            if self.config.plus_minus_one:
                legal = self._legal_bids(seat)
                bid = legal[floor(random() * len(legal))]
            else:
                bid = floor(random() * choices)
            append(seat << 8 | (ACTION_BID + bid))
            bids[seat] = bid
        else:  # all at once: in seat order
            while None in bids:
                seat = bids.index(None)
                if seat == self._dealer and self.config.plus_minus_one:
                    legal = self._legal_bids(seat)
                    bid = legal[floor(random() * len(legal))]
                else:
                    bid = floor(random() * choices)
                append(seat << 8 | (ACTION_BID + bid))
                bids[seat] = bid
        self._start_play()

    def _playout_round(self, random: Callable[[], float]) -> None:
        """The rest of the round's tricks with every seat RANDOM: the playout's hot loop.

        It makes the same moves, from the same draws of ``random``, as :meth:`_run_tricks`
        card by card (one draw per card: the ``k``-th legal card, lowest id first), and
        leaves the same state; it is only arranged for speed:

        - a trick is its seats in order (``_TRICK_SEATS``) and the row of the trick table
          of the card winning it so far; before the lead that row is ``_TAKES_ALL``, so the
          lead "takes" the empty trick and sets the suit to follow like any winning card;
        - ``k = int(u * count)`` is counted down in floats, which is exact: ``x - 1.0`` is
          exact for ``1 <= x < 2**52``, so the loop runs ``floor(x)`` times;
        - cards are not collected per trick: a finished trick is only kept (``_done``) in
          the match's last round, since dealing the next round drops it, and its cards are
          then read back from the log.
        """
        n = self._n
        hands = self._hands
        beats = self._beats
        log = self._log
        append = log.append
        tricks = self._tricks
        same_code = SAME_CODE_MASK
        if self._single:  # nothing is ever followed
            follow_of = _NO_FOLLOW
            legal_of = _NO_FOLLOW
        else:
            follow_of = _FOLLOW_OF
            legal_of = _LEGAL_OF
        seats = _TRICK_SEATS[n]
        keep = self._round == self.config.rounds
        left = self._size - len(self._done)
        leader = self._leader
        trick = self._trick  # cards of a trick begun before the playout
        start = len(trick)
        if start:
            lead = self._lead
            win = leader + self._win_pos
            if win >= n:
                win -= n
            row = beats[trick[self._win_pos]]
            open_lead = lead == LEAD_OPEN
            follow = SUIT_MASK[lead] if lead < 4 else 0
            legal = _FOLLOW_MASK[lead] if lead < 4 else 0
            order = seats[leader][start:]
        else:
            row = _TAKES_ALL
            open_lead = True
            follow = legal = 0
            order = seats[leader]
            win = leader
        while True:
            for seat, codes in order:
                hand = hands[seat]
                mask = hand & legal if hand & follow else hand
                x = random() * mask.bit_count()
                while x >= 1.0:
                    mask &= mask - 1
                    x -= 1.0
                bit = mask & -mask
                card = bit.bit_length() - 1
                if card >= WIZARD_BASE:
                    bit = hand & same_code[card]
                    bit &= -bit
                    card = bit.bit_length() - 1
                append(codes[card])
                hands[seat] = hand ^ bit
                if row[card]:
                    row = beats[card]
                    win = seat
                    if open_lead:
                        follow = follow_of[card]
                        legal = legal_of[card]
                        open_lead = card >= JESTER_BASE
            tricks[win] += 1
            left -= 1
            if keep or not left:
                played = len(order)
                finished = (leader, (*trick, *[e & 0xFF for e in log[len(log) - played :]]), win)
                if start:
                    trick.clear()
                    start = 0
                if keep:
                    self._done.append(finished)
                if not left:
                    break
            leader = win
            order = seats[win]
            row = _TAKES_ALL
            open_lead = True
            follow = legal = 0
        self._last_trick = finished
        self._lead = LEAD_OPEN
        self._leader = self._to_act = win
        config = self.config
        if config.deals is None and not self._single and self._round < config.rounds:
            self._playout_rounds(random)
        else:
            self._end_round()

    def _playout_rounds(self, random: Callable[[], float]) -> None:
        """Score the round just played, then deal and play the match's other rounds with
        every seat RANDOM, to the end: what :meth:`_end_round`, :meth:`_deal`, the trump
        choice, :meth:`_playout_bids` and :meth:`_playout_round` do round by round, with
        the same draws of ``random``, the same log and results, and the same final state.

        Only for decks shuffled from the seed without SINGLE_SUIT (the caller checks).  A
        round lives in locals and only the last one is written back to the state: no
        round's attributes but the last one's outlive it.  Dealing shuffles the cards' bits
        (the same permutation as the cards'), on the shuffle's fast path
        (:func:`~wizard.shuffle.fresh_shuffle`), falling back to the word-by-word stream
        when a word might be rejected; a seat's hand is the sum of its slice of the dealt
        bits (``_DEAL_SLICES``).  In the trick loop the lead is played
        before the loop over the other seats, and a seat that need not follow chooses
        among its whole hand, whose size the trick number gives.
        """
        config = self.config
        n = self._n
        last = config.rounds
        scoring = config.scoring
        points = _STANDARD_POINTS if scoring is Scoring.STANDARD else POINTS[scoring]
        scores = self._scores
        results = self._results
        log = self._log
        append = log.append
        bids = tuple(self._bids)
        tricks = tuple(self._tricks)
        for seat, bid, taken in zip(range(n), bids, tricks):
            scores[seat] += points[bid][taken]  # type: ignore[index]
        results.append((bids, tricks))
        seed = self.seed
        prefix = f"{seed}:round-".encode()
        deck_bits = [BIT[card] for card in config.deck.cards]  # in canonical order
        deck_size = len(deck_bits)
        plus_minus_one = config.plus_minus_one
        simultaneous = config.simultaneous_bids
        deal_slices = _DEAL_SLICES[n]
        bid_order = _BID_ORDER[n]
        followers = _FOLLOWERS[n]
        log_codes = _LOG_CODES
        same_code = SAME_CODE_MASK
        follow_of = _FOLLOW_OF
        legal_of = _LEGAL_OF
        suit_of = SUIT_OF
        dealer = self._dealer
        r = self._round
        while r < last:
            r += 1
            dealer += 1
            if dealer == n:
                dealer = 0
            # ---- the deal: round_deck and _deal_order
            dealt = r * n
            needed = dealt + 1
            # the deck shuffled as the cards' bits: a hand is the sum of its slice of the deal
            deck = list(deck_bits)
            if fresh_shuffle(prefix + _ROUND_TAIL[r], deck, needed if needed < deck_size else deck_size - 1) is None:
                SeedStream(seed, round_label(r)).shuffle(deck, needed)
            dealt_bits = deck[:dealt]
            hands = list(map(sum, map(dealt_bits.__getitem__, deal_slices[dealer])))
            if dealt < deck_size:
                trump_card = deck[dealt].bit_length() - 1
                suit = suit_of[trump_card]
                if suit == WIZARD:  # the dealer names trump
                    suit = floor(random() * 4)
                    append(dealer << 8 | (ACTION_TRUMP + suit))
                elif suit == JESTER:
                    suit = None
            else:
                trump_card = suit = None
            beats = trick_table(suit)
            # ---- the bids: _playout_bids
            choices = r + 1
            bids = [None] * n
            if simultaneous:
                for seat in range(n):
                    if seat == dealer and plus_minus_one:
                        legal = self._legal_bids_of(bids, r, seat)
                        bid = legal[floor(random() * len(legal))]
                    else:
                        bid = floor(random() * choices)
                    append(seat << 8 | (ACTION_BID + bid))
                    bids[seat] = bid
            else:
                for seat in bid_order[dealer]:
                    bid = floor(random() * choices)
                    append(seat << 8 | (ACTION_BID + bid))
                    bids[seat] = bid
                if plus_minus_one:
                    legal = self._legal_bids_of(bids, r, dealer)
                    bid = legal[floor(random() * len(legal))]
                else:
                    bid = floor(random() * choices)
                append(dealer << 8 | (ACTION_BID + bid))
                bids[dealer] = bid
            # ---- the tricks: _playout_round from the first lead
            keep = r == last
            done = []
            tricks = [0] * n
            win = dealer + 1
            if win == n:
                win = 0
            held = float(r)  # the cards each seat holds as the trick starts
            while True:
                # the lead: any card of the hand
                leader = win
                hand = hands[leader]
                mask = hand
                x = random() * held
                while x >= 1.0:
                    mask &= mask - 1
                    x -= 1.0
                bit = mask & -mask
                card = bit.bit_length() - 1
                if card >= WIZARD_BASE:
                    bit = hand & same_code[card]
                    bit &= -bit
                    card = bit.bit_length() - 1
                append(log_codes[leader][card])
                hands[leader] = hand ^ bit
                row = beats[card]
                follow = follow_of[card]
                legal = legal_of[card]
                open_lead = card >= JESTER_BASE
                for seat, codes in followers[leader]:
                    hand = hands[seat]
                    if hand & follow:
                        mask = hand & legal
                        x = random() * mask.bit_count()
                    else:
                        mask = hand
                        x = random() * held
                    while x >= 1.0:
                        mask &= mask - 1
                        x -= 1.0
                    bit = mask & -mask
                    card = bit.bit_length() - 1
                    if card >= WIZARD_BASE:
                        bit = hand & same_code[card]
                        bit &= -bit
                        card = bit.bit_length() - 1
                    append(codes[card])
                    hands[seat] = hand ^ bit
                    if row[card]:
                        row = beats[card]
                        win = seat
                        if open_lead:
                            follow = follow_of[card]
                            legal = legal_of[card]
                            open_lead = card >= JESTER_BASE
                tricks[win] += 1
                held -= 1.0
                if keep:
                    finished = (leader, tuple([e & 0xFF for e in log[len(log) - n :]]), win)
                    done.append(finished)
                if not held:
                    break
            # ---- the score: _end_round
            bids = tuple(bids)  # type: ignore[assignment]
            tricks = tuple(tricks)  # type: ignore[assignment]
            for seat, bid, taken in zip(range(n), bids, tricks):
                scores[seat] += points[bid][taken]  # type: ignore[index]
            results.append((bids, tricks))
        # the last round's state, as _deal_order, _set_trump, _playout_round and
        # _end_round leave it
        self._round = r
        self._dealer = dealer
        self._size = r
        self._hands = hands
        self._tricks = list(tricks)
        self._trick = []
        self._lead = LEAD_OPEN
        self._win_pos = 0
        self._done = done
        self._bids = list(bids)
        self._trump_card = trump_card
        self._trump_suit = suit
        self._beats = beats
        self._last_trick = finished
        self._leader = win
        self._phase = Phase.FINISHED
        self._to_act = NO_SEAT

    def _legal_bids_of(self, bids: list[int | None], size: int, seat: int) -> list[int]:
        """The dealer's legal bids under PLUS_MINUS_ONE, the others' bids in: as :meth:`_legal_bids`."""
        legal = list(range(size + 1))
        forbidden = size - sum(b for b in bids if b is not None)
        if 0 <= forbidden <= size:
            legal.remove(forbidden)
        return legal

    def _check_seat(self, seat: int) -> None:
        if type(seat) is not int or not 0 <= seat < self._n:
            raise InvalidMoveError(f"seat must be a number from 0 to {self._n - 1}, not {seat!r}")

    def _refuse(self, seat: int, reason: str) -> None:
        if self._phase is Phase.FINISHED:
            raise MatchFinishedError("the match is over: no more moves")
        legal = self.legal_moves(seat)
        if not legal:
            waiting = ", ".join(map(str, self.awaiting()))
            raise NotYourTurnError(
                f"seat {seat} has no move to make now ({self._phase.value}); waiting for seat(s) {waiting}"
            )
        raise IllegalMoveError(f"{reason} ({self._phase.value}, round {self._round})", legal)

    # ----------------------------------------------------------------- transitions
    def _bid(self, seat: int, bid: int) -> None:
        bids = self._bids
        bids[seat] = bid
        if self._to_act != NO_SEAT:
            if seat != self._dealer:
                self._to_act = (seat + 1) % self._n
                return
        elif None in bids:
            return
        self._start_play()

    def _start_bidding(self) -> None:
        self._phase = Phase.BID
        self._bids = [None] * self._n
        self._to_act = NO_SEAT if self.config.simultaneous_bids else (self._dealer + 1) % self._n

    def _start_play(self) -> None:
        self._phase = Phase.PLAY
        self._leader = self._to_act = (self._dealer + 1) % self._n
        if self.config.clairvoyant(self._round):
            # Nobody has a choice with one card each: the server plays them in turn order.
            self._run_tricks(-1, None)

    def _run_tricks(self, card: int, random: Callable[[], float] | None) -> None:
        """Play cards for the seat to act, trick after trick: ``card`` (already checked), or,
        when ``card`` is -1, one the seat may play, chosen uniformly by ``random`` (a
        playout) or the only one it holds (a clairvoyant round).  Returns after one card
        for a move from outside, and when the round ends for the other two.

        This one loop is the whole of trick play, kept in locals because it is the hot path.
        """
        n = self._n
        hands = self._hands
        trick = self._trick
        beats = self._beats
        log = self._log
        single = self._single
        seat = self._to_act
        lead = self._lead
        win_pos = self._win_pos
        leader = self._leader
        chooses = random is not None
        keep_going = card < 0
        while True:
            hand = hands[seat]
            if card < 0:
                if lead < 4 and hand & SUIT_MASK[lead]:
                    mask = hand & (SUIT_MASK[lead] | SPECIAL_MASK)
                else:
                    mask = hand
                if chooses:
                    skip = int(random() * mask.bit_count())  # type: ignore[misc]
                    while skip:
                        mask &= mask - 1
                        skip -= 1
                    bit = mask & -mask
                    card = bit.bit_length() - 1
                    if card >= WIZARD_BASE:
                        card = _lowest_copy(hand, card)
                        bit = BIT[card]
                    log.append(seat << 8 | card)
                else:
                    bit = mask & -mask
                    card = bit.bit_length() - 1
            else:
                bit = BIT[card]
            hands[seat] = hand ^ bit
            trick.append(card)
            if len(trick) == 1:
                win_pos = 0
                suit = SUIT_OF[card]
                lead = LEAD_OPEN if suit == JESTER else (LEAD_FREE if single else suit)
            elif beats[trick[win_pos]][card]:
                win_pos = len(trick) - 1
                if lead == LEAD_OPEN:
                    lead = LEAD_FREE if single else SUIT_OF[card]
            if len(trick) < n:
                seat += 1
                if seat == n:
                    seat = 0
            else:
                seat = leader + win_pos
                if seat >= n:
                    seat -= n
                self._tricks[seat] += 1
                finished = (leader, tuple(trick), seat)
                done = self._done
                done.append(finished)
                self._last_trick = finished
                trick.clear()
                lead = LEAD_OPEN
                self._leader = leader = seat
                if len(done) == self._size:
                    self._lead = lead
                    self._to_act = seat
                    self._end_round()
                    return
            if not keep_going:
                self._lead = lead
                self._win_pos = win_pos
                self._to_act = seat
                return
            card = -1

    def _end_round(self) -> None:
        scoring = self.config.scoring
        # (Scoring hashes in Python, in enum.py: look the usual table up by identity)
        points = _STANDARD_POINTS if scoring is Scoring.STANDARD else POINTS[scoring]
        bids = tuple(self._bids)
        tricks = tuple(self._tricks)
        scores = self._scores
        for seat, bid, taken in zip(range(self._n), bids, tricks):
            scores[seat] += points[bid][taken]  # type: ignore[index]
        self._results.append((bids, tricks))  # type: ignore[arg-type]
        if self._round == self.config.rounds:
            self._phase = Phase.FINISHED
            self._to_act = NO_SEAT
            return
        self._deal(self._round + 1, (self._dealer + 1) % self._n)

    def _deal(self, round_number: int, dealer: int) -> None:
        self._deal_order(round_number, dealer, round_deck(self.config, self.seed, round_number, dealer))

    def _deal_order(self, round_number: int, dealer: int, order: list[int]) -> None:
        """Start round ``round_number`` from ``order``, its cards in dealing order (as
        :func:`round_deck` gives them): deal, turn the trump card, open the first phase.
        :func:`wizard.sampling.sample_state` calls it with an order of its own."""
        self._round = round_number
        self._dealer = dealer
        n = self._n
        self._size = self.config.hand_size(round_number)
        dealt = self._size * n
        hands = [0] * n
        bit_of = BIT.__getitem__
        for i in range(n):  # card k goes to seat dealer + 1 + k
            hands[(dealer + 1 + i) % n] = sum(map(bit_of, order[i:dealt:n]))
        self._hands = hands
        self._tricks = [0] * n
        self._trick = []
        self._lead = LEAD_OPEN
        self._win_pos = 0
        self._done = []
        self._bids = [None] * n
        self._trump_card = order[dealt] if len(order) > dealt and not self._single else None
        self._trump_suit = None
        turned = NO_SEAT if self._trump_card is None else SUIT_OF[self._trump_card]
        if turned == WIZARD:
            # no trump until the dealer names one; every slot stays set, so copies work
            self._beats = trick_table(None, self._single)
            self._phase = Phase.CHOOSE_TRUMP
            self._to_act = dealer
            return
        self._set_trump(turned if 0 <= turned < 4 else None)

    def _set_trump(self, suit: int | None) -> None:
        self._trump_suit = suit
        self._beats = trick_table(suit, self._single)
        self._start_bidding()

    # ----------------------------------------------------------------- copies and views
    def copy(self) -> MatchState:
        """An independent copy, for search: play it on without touching this state."""
        other = MatchState.__new__(MatchState)
        for name in MatchState.__slots__:
            setattr(other, name, getattr(self, name))
        other._hands = list(self._hands)
        other._bids = list(self._bids)
        other._tricks = list(self._tricks)
        other._scores = list(self._scores)
        other._trick = list(self._trick)
        other._done = list(self._done)
        other._results = list(self._results)
        other._log = list(self._log)
        return other

    def to_bytes(self) -> bytes:
        """The compact, versioned serialisation (see :mod:`wizard.record`)."""
        from wizard.record import state_to_bytes

        return state_to_bytes(self)

    @staticmethod
    def from_bytes(data: bytes) -> MatchState:
        from wizard.record import state_from_bytes

        return state_from_bytes(data)

    def record(self):  # noqa: ANN201 (MatchRecord)
        """The finished match's record: config, seed, every move (and so every hand)."""
        from wizard.record import record_of

        return record_of(self)

    def view(self, seat: int | None):  # noqa: ANN201 (MatchView, imported late to avoid a cycle)
        """What ``seat`` may know now (``None``: a spectator). The only way cards leave."""
        from wizard.views import build_view

        if seat is not None:
            self._check_seat(seat)
        return build_view(self, seat)


def _validated_stacked_round(config: MatchConfig, round_number: int, dealer: int) -> list[int] | None:
    assert config.deals is not None
    codes = config.deals[round_number - 1] if round_number <= len(config.deals) else ()
    if not codes:
        return None
    deck = config.deck
    where = f"deals[{round_number - 1}] (round {round_number})"
    if not config.single_suit:
        try:
            cards = parse_cards(codes, deck)
        except InvalidMoveError as e:
            raise DealError(f"{where}: {e}") from None
        if len(cards) != deck.size:
            raise DealError(
                f"{where} lists {len(cards)} cards; a stacked deal is the whole {deck.name} deck"
                f" of {deck.size} cards in dealing order"
            )
        return cards
    n = config.players
    size = config.hand_size(round_number)
    if len(codes) != n * size:
        raise DealError(
            f"{where} lists {len(codes)} cards; under SINGLE_SUIT a round lists the"
            f" {n} x {size} = {n * size} cards drawn, in dealing order"
        )
    cards = []
    taken = 0
    for k, code in enumerate(codes):
        seat = (dealer + 1 + k) % n
        pile = single_suit_pile(seat)
        card = next((c for c in pile if CODES[c] == code), None)
        if card is None:
            raise DealError(
                f"{where}: card {k} ({code!r}) goes to seat {seat}, whose SINGLE_SUIT pile is"
                f" {Suit(seat).name} 1-13, one W and one J"
            )
        if taken & BIT[card]:
            raise DealError(f"{where}: {code} is dealt twice to seat {seat}")
        taken |= BIT[card]
        cards.append(card)
    return cards


def round_deck(config: MatchConfig, seed: str, round_number: int, dealer: int) -> list[int]:
    """Round ``r``'s cards in dealing order (see :mod:`wizard.shuffle` for the algorithm)."""
    if config.deals is not None:
        stacked = _validated_stacked_round(config, round_number, dealer)
        if stacked is not None:
            return stacked
    stream = SeedStream(seed, round_label(round_number))
    if not config.single_suit:
        # the dealt cards and the trump card are all the round uses of the shuffle
        needed = config.hand_size(round_number) * config.players + 1
        return stream.shuffle(list(config.deck.cards), needed)
    n = config.players
    piles = [stream.shuffle(list(single_suit_pile(s))) for s in range(n)]
    size = config.hand_size(round_number)
    assert size <= PILE_SIZE
    return [piles[(dealer + 1 + k) % n][k // n] for k in range(n * size)]


def first_dealer(config: MatchConfig, seed: str) -> int:
    if config.first_dealer is not None:
        return config.first_dealer
    return SeedStream(seed, "dealer").uniform(config.players)


def new_match(config: MatchConfig, seed: str, salt: str | None = None) -> MatchState:
    """A match at its first move: round 1 dealt, trump turned.

    ``salt`` (lowercase hex) goes into ``seed_hash`` with the seed, and is revealed with the
    seed once the match is over; it does not change the deals (see :mod:`wizard.shuffle`).

    Every stacked round of ``config.deals`` is checked now, against the dealer of its
    round, so a bad deal is refused before the match starts (:class:`DealError`).
    """
    if not isinstance(seed, str) or not seed:
        raise ConfigError("the seed must be a non-empty string")
    try:
        encoded = len(seed.encode())
    except UnicodeEncodeError:
        raise ConfigError("the seed must be text that UTF-8 can encode (no lone surrogates)") from None
    if encoded > MAX_SEED_BYTES:
        raise ConfigError(f"the seed is {encoded} bytes long; at most {MAX_SEED_BYTES} are allowed")
    if salt is not None and (problem := salt_problem(salt)) is not None:
        raise ConfigError(problem)
    dealer = first_dealer(config, seed)
    if config.deals is not None:
        for r in range(1, len(config.deals) + 1):
            _validated_stacked_round(config, r, (dealer + r - 1) % config.players)
    state = undealt_match(config, seed, dealer)
    state.salt = salt
    state._deal(1, dealer)
    return state


def undealt_match(config: MatchConfig, seed: str, dealer: int) -> MatchState:
    """A match before its first deal (no scores, no moves): call ``_deal`` or
    ``_deal_order`` next. The seed is not checked here; :func:`new_match` checks it."""
    state = MatchState.__new__(MatchState)
    state.config = config
    state.seed = seed
    state.salt = None
    n = state._n = config.players
    state._first_dealer = dealer
    # SINGLE_SUIT has no following: a lead that never matches any suit turns it off.
    state._single = config.single_suit
    state._scores = [0] * n
    state._results = []
    state._log = []
    state._last_trick = None
    state._leader = NO_SEAT
    state._win_pos = 0
    return state

