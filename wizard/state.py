"""One match in progress: dealing, the three phases (choose trump, bid, play), tricks,
scoring and the end of the match.

The state is mutable (search code copies it with :meth:`MatchState.copy`) and keeps its
cards private: what a seat may know leaves it only through :meth:`MatchState.view`.
Moves go in as :class:`~wizard.moves.Move` objects (:meth:`MatchState.apply`) or as small
int actions (:meth:`MatchState.apply_action`); both are checked, and a refused move raises
a typed error and changes nothing.

This is the reference implementation of play: the rules it applies are written once, in
:mod:`wizard.rules` (legal bids, scoring) and :mod:`wizard.tricks` (following, who takes a
trick), and it builds the views whose types :mod:`wizard.views` holds.  The modules above
it import it, never the reverse: :mod:`wizard.playout` (the fast random playout),
:mod:`wizard.record` (the stored bytes, :func:`~wizard.record.state_to_bytes`, and match
records) and :mod:`wizard.sampling`.  They reach the state's fields through the small typed
API at the end of this module (:class:`StateFields`); the playout, which must be fast,
plays on the typed fields declared on :class:`MatchState` directly.

>>> state = new_match(MatchConfig.create("WIZARD", 3), seed="doc")
>>> state.phase, state.round, state.awaiting()
(<Phase.BID: 'BID'>, 1, (1,))
>>> state.view(1).hand, [str(m) for m in state.view(1).legal_moves]
(('W',), ['bid 0', 'bid 1'])
>>> state.apply(1, Move(bid=1)); state.view(0).seats[1].bid
1
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Final, NamedTuple, cast

from wizard.cards import (
    BIT,
    CODE_MASK,
    CODES,
    JESTER_BASE,
    RANKS_PER_SUIT,
    SUIT_OF,
    WIZARD,
    WIZARD_BASE,
    Suit,
    codes_of,
    lowest_copy,
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
from wizard.rules import PILE_SIZE, BidReveal, MatchConfig, Phase, legal_bids, score_round
from wizard.shuffle import SeedStream, round_label, salt_problem, seed_hash
from wizard.tricks import LEAD_OPEN, lead_after, playable, trick_table
from wizard.views import MatchView, Play, RoundResult, SeatResult, SeatView, Trick

__all__ = [
    "MAX_SEED_BYTES", "NO_SEAT", "MatchState", "Outcome", "Phase", "StateFields", "deal_round", "fields_of",
    "first_dealer", "new_match", "round_deck", "single_suit_pile", "state_of_fields", "undealt_match",
]


NO_SEAT: Final = -1
MAX_SEED_BYTES = 256


@dataclass(frozen=True, slots=True)
class Outcome:
    """The end of a match: final totals by seat and the seats tied on the highest."""

    scores: tuple[int, ...]
    winners: tuple[int, ...]


def single_suit_pile(seat: int) -> tuple[int, ...]:
    """Seat ``i``'s own cards under SINGLE_SUIT: suit ``i`` in rank order, a Wizard, a Jester."""
    return tuple(range(seat * RANKS_PER_SUIT, (seat + 1) * RANKS_PER_SUIT)) + (
        WIZARD_BASE + seat,
        JESTER_BASE + seat,
    )


class MatchState:
    """A match from its first deal to its end. Build one with :func:`new_match`."""

    __slots__ = (
        "_beats",
        "_bids",
        "_dealer",
        "_done",
        "_first_dealer",
        "_hands",
        "_last_trick",
        "_lead",
        "_leader",
        "_log",
        "_n",
        "_phase",
        "_result_views",
        "_results",
        "_round",
        "_scores",
        "_single",
        "_size",
        "_to_act",
        "_trick",
        "_tricks",
        "_trump_card",
        "_trump_suit",
        "_win_pos",
        "config",
        "salt",
        "seed",
    )

    config: MatchConfig
    seed: str
    #: hides the seed in ``seed_hash`` until the end (None: the hash is of the seed alone)
    salt: str | None
    # The representation, private to the engine (cards leave only through view()):
    _n: int  #: players
    _round: int
    _dealer: int
    _first_dealer: int
    _phase: Phase
    #: the seat whose move it is; NO_SEAT while bids are simultaneous or the match is over
    _to_act: int
    #: card id turned up for trump (None: no card left, or SINGLE_SUIT)
    _trump_card: int | None
    #: 0-3, or None for no trump (also while the dealer has yet to name one)
    _trump_suit: int | None
    #: by seat, the bit mask of the card ids it holds
    _hands: list[int]
    #: by seat, this round's bid (None: not made yet)
    _bids: list[int | None]
    #: by seat, the tricks taken this round
    _tricks: list[int]
    _scores: list[int]
    #: the seat that led the current trick (NO_SEAT before the first trick of the match)
    _leader: int
    #: the card ids of the current trick, in playing order from ``_leader``
    _trick: list[int]
    #: the lead suit 0-3, LEAD_OPEN or LEAD_FREE
    _lead: int
    #: the position in ``_trick`` of the card winning it so far
    _win_pos: int
    #: this round's finished tricks: (leader, card ids in playing order, winner)
    _done: list[tuple[int, tuple[int, ...], int]]
    #: the last finished trick, kept across the end of a round
    _last_trick: tuple[int, tuple[int, ...], int] | None
    #: every finished round's (bids, tricks) by seat
    _results: list[tuple[tuple[int, ...], tuple[int, ...]]]
    #: the views of the first rounds of ``_results`` (``view()`` adds the rest): a finished
    #: round's result never changes, so copies share them and a view builds only the new ones
    _result_views: tuple[RoundResult, ...]
    #: every move made by a seat, ``seat << 8 | action``
    _log: list[int]
    #: SINGLE_SUIT (nothing is ever followed)
    _single: bool
    #: ``_beats[best][card]``: whether ``card`` takes the trick from ``best`` this round
    _beats: tuple[tuple[bool, ...], ...]
    #: this round's hand size (= its number of tricks)
    _size: int

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
        return _seed_hash(self.seed, self.salt)

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

    def saw_last_move(self, seat: int) -> bool:
        """Whether the latest move changed what ``seat`` sees: its view, apart from
        ``awaiting`` and ``moves_made`` (which count moves, not what they were). Only a bid
        of another seat that stays hidden from ``seat`` (HIDDEN_BIDS, SECRET_BIDS) and leaves
        the bidding going changes nothing it sees; every other move does (a card, a trump,
        a visible bid, the last hidden bid that ends the bidding). True before any move.

        >>> state = new_match(MatchConfig.create("WIZARD", 3, ["HIDDEN_BIDS"]), "doc")
        >>> state.apply(0, Move(bid=0))
        >>> [state.saw_last_move(s) for s in range(3)]
        [True, False, False]
        """
        if not self._log:
            return True
        entry = self._log[-1]
        mover, action = entry >> 8, entry & 0xFF
        # still bidding, the bid still among this round's: a clairvoyant round 1 ends at its
        # last bid, and the next round's bidding has begun
        bidding = self._phase is Phase.BID and self._bids[mover] is not None
        if seat == mover or action < ACTION_BID or not bidding:
            return True
        return self._bid_visible(seat, mover)

    def last_move_unseen_by(self) -> tuple[int, ...]:
        """The seats that did not see the latest move (:meth:`saw_last_move`); cheap outside
        the bidding, where every seat sees every move."""
        if self._phase is not Phase.BID:
            return ()
        return tuple(s for s in range(self._n) if not self.saw_last_move(s))

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
            mask = playable(self._hands[seat], self._lead)
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

    def _legal_bids(self, seat: int) -> list[int]:
        """The seat's legal bids now (empty once it has bid, or while another is to bid)."""
        bids = self._bids
        if bids[seat] is not None or (self._to_act != NO_SEAT and seat != self._to_act):
            return []
        return legal_bids(self._size, bids, seat == self._dealer, self.config.plus_minus_one)

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
                if bit & playable(hand, self._lead):
                    action = lowest_copy(hand, action)
                    self._log.append(seat << 8 | action)
                    self._play_card(action)
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
            for _ in range(self._n):
                self._play_card(self._hands[self._to_act].bit_length() - 1)

    def _play_card(self, card: int) -> None:
        """The seat to act plays ``card`` (checked: it holds it and may play it); a full
        trick goes to its winner, who leads the next, and the round's last trick ends the
        round.  The whole of trick play as moves apply it (the playout has loops of its own
        for speed, held equal to this one by tests/engine/test_playout.py)."""
        seat = self._to_act
        trick = self._trick
        self._hands[seat] ^= BIT[card]
        trick.append(card)
        win_pos = len(trick) - 1 if len(trick) == 1 or self._beats[trick[self._win_pos]][card] else self._win_pos
        n = self._n
        if len(trick) < n:
            self._lead = lead_after(card, self._lead, self._single)
            self._win_pos = win_pos
            self._to_act = seat + 1 if seat + 1 < n else 0
            return
        winner = (self._leader + win_pos) % n
        self._tricks[winner] += 1
        finished = (self._leader, tuple(trick), winner)
        self._done.append(finished)
        self._last_trick = finished
        trick.clear()
        self._lead = LEAD_OPEN
        self._leader = self._to_act = winner
        if len(self._done) == self._size:
            # (``_win_pos`` stays as the card before left it: dealing resets it, and a
            # finished match keeps it, in its bytes too)
            self._end_round()
        else:
            self._win_pos = win_pos

    def _score_round(self) -> None:
        """Score the round just played and keep its result."""
        bids = cast("tuple[int, ...]", tuple(self._bids))  # every seat has bid
        tricks = tuple(self._tricks)
        score_round(self.config.points, bids, tricks, self._scores)
        self._results.append((bids, tricks))

    def _end_round(self) -> None:
        self._score_round()
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

    def view(self, seat: int | None) -> MatchView:
        """What ``seat`` may know now (``None``: a spectator), by the rules of
        :mod:`wizard.views`. The only way cards leave the state."""
        if seat is not None:
            self._check_seat(seat)
        n = self._n
        config = self.config
        finished = self._phase is Phase.FINISHED
        shown = self._visible_hands(seat)
        seats = tuple(
            SeatView(
                seat=s,
                score=self._scores[s],
                bid=self._bids[s] if self._bid_visible(seat, s) else None,
                tricks=self._tricks[s],
                hand=codes_of(self._hands[s]) if s in shown else None,
            )
            for s in range(n)
        )
        results = self._result_views
        if len(results) < len(self._results):
            scoring = config.scoring
            results = self._result_views = results + tuple(
                RoundResult(
                    r + 1,
                    tuple(SeatResult(s, bids[s], tricks[s], scoring.points(bids[s], tricks[s])) for s in range(n)),
                )
                for r, (bids, tricks) in enumerate(self._results[len(results):], start=len(results))
            )
        outcome = self.outcome
        lead = self._lead
        last = self._last_trick
        return MatchView(
            ruleset=config.ruleset,
            variants=tuple(sorted(config.variants, key=lambda v: v.value)),
            players=n,
            round=self._round,
            rounds=config.rounds,
            hand_size=self._size,
            dealer=self._dealer,
            phase=self._phase,
            trump_card=None if self._trump_card is None else CODES[self._trump_card],
            trump_suit=None if self._trump_suit is None else Suit(self._trump_suit),
            to_act=self.to_act,
            awaiting=self.awaiting(),
            my_seat=seat,
            hand=None if seat is None else seats[seat].hand,
            legal_moves=() if seat is None else tuple(self.legal_moves(seat)),
            seats=seats,
            current_trick=tuple(Play((self._leader + i) % n, CODES[c]) for i, c in enumerate(self._trick)),
            lead_suit=Suit(lead) if lead < 4 and self._trick else None,
            completed_tricks=tuple(_trick_view(*trick, n) for trick in self._done),
            last_trick=None if last is None else _trick_view(*last, n),
            round_results=results,
            winners=None if outcome is None else outcome.winners,
            moves_made=len(self._log),
            seed_hash=self.seed_hash,
            seed=self.seed if finished else None,
            salt=self.salt if finished else None,
        )

    def _bid_visible(self, viewer: int | None, seat: int) -> bool:
        if viewer == seat or self._phase is Phase.FINISHED:
            return True
        reveal = self.config.bid_reveal
        if reveal is BidReveal.AT_ONCE:
            return True
        if reveal is BidReveal.ALL_IN:
            return None not in self._bids
        return False

    def _visible_hands(self, viewer: int | None) -> tuple[int, ...]:
        """The seats whose hands ``viewer`` sees: its own, or in a clairvoyant round the others'."""
        if viewer is None:
            return ()
        if self.config.clairvoyant(self._round) and self._phase is not Phase.FINISHED:
            return tuple(s for s in range(self._n) if s != viewer)
        return (viewer,)


#: every view shows its match's seed hash: worked out once per (seed, salt) of the matches in play
_seed_hash = lru_cache(maxsize=4096)(seed_hash)

#: finished tricks' views kept, at most: every view of a round shows all its finished tricks
#: again, so the current rounds of the matches in play are asked for over and over
TRICK_VIEWS_KEPT: Final = 8192


@lru_cache(maxsize=TRICK_VIEWS_KEPT)
def _trick_view(leader: int, cards: tuple[int, ...], winner: int, n: int) -> Trick:
    """A finished trick as views show it (kept: a Trick never changes, so views share it)."""
    return Trick(leader, tuple(Play((leader + i) % n, CODES[c]) for i, c in enumerate(cards)), winner)


# ------------------------------------------------------------------ the engine's internal API
class StateFields(NamedTuple):
    """Every field of a state but its config, seed and salt: how the engine's own modules
    read a whole state (:mod:`wizard.record` stores it) and build one (it restores it,
    :mod:`wizard.sampling` fills in its history).  Hands included: never show it to a seat.
    The lists are the state's own, not copies: read them before the state moves on."""

    round: int
    dealer: int
    first_dealer: int
    phase: Phase
    #: the seat whose move it is; NO_SEAT while bids are simultaneous or the match is over
    to_act: int
    trump_card: int | None
    trump_suit: int | None
    #: the seat that led the current trick; NO_SEAT before the first trick of the match
    leader: int
    #: the lead suit 0-3, LEAD_OPEN or LEAD_FREE (:mod:`wizard.tricks`)
    lead: int
    #: the position in ``trick`` of the card winning it so far
    win_pos: int
    hands: list[int]
    bids: list[int | None]
    tricks: list[int]
    scores: list[int]
    trick: list[int]
    done: list[tuple[int, tuple[int, ...], int]]
    last_trick: tuple[int, tuple[int, ...], int] | None
    results: list[tuple[tuple[int, ...], tuple[int, ...]]]
    #: every move a seat made, ``seat << 8 | action``
    log: list[int]


def fields_of(state: MatchState) -> StateFields:
    """The state's fields (its own lists, not copies)."""
    s = state
    return StateFields(
        s._round, s._dealer, s._first_dealer, s._phase, s._to_act, s._trump_card, s._trump_suit,
        s._leader, s._lead, s._win_pos, s._hands, s._bids, s._tricks, s._scores, s._trick, s._done,
        s._last_trick, s._results, s._log,
    )


def state_of_fields(config: MatchConfig, seed: str, salt: str | None, fields: StateFields) -> MatchState:
    """The state with these fields (it takes the lists over, it does not copy them); the
    fields are not checked against the rules: :mod:`wizard.record` checks what it reads."""
    s = MatchState.__new__(MatchState)
    s.config = config
    s.seed = seed
    s.salt = salt
    s._n = config.players
    (s._round, s._dealer, s._first_dealer, s._phase, s._to_act, s._trump_card, s._trump_suit,
     s._leader, s._lead, s._win_pos, s._hands, s._bids, s._tricks, s._scores, s._trick, s._done,
     s._last_trick, s._results, s._log) = fields
    s._result_views = ()
    s._single = config.single_suit
    s._size = config.hand_size(s._round)
    s._beats = trick_table(s._trump_suit, s._single)
    return s


def deal_round(state: MatchState, round_number: int, dealer: int, order: list[int]) -> None:
    """Start round ``round_number`` of ``state`` from ``order``, its cards in dealing order
    (as :func:`round_deck` gives them): deal, turn the trump card, open the first phase.
    :func:`wizard.sampling.sample_state` deals a round of its own drawing this way."""
    state._deal_order(round_number, dealer, order)


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


def undealt_match(
    config: MatchConfig,
    seed: str,
    dealer: int,
    *,
    scores: list[int] | None = None,
    results: list[tuple[tuple[int, ...], tuple[int, ...]]] | None = None,
    last_trick: tuple[int, tuple[int, ...], int] | None = None,
) -> MatchState:
    """A match before a deal (call ``_deal`` or :func:`deal_round` next): its first, or,
    given the ``scores`` and ``results`` of the rounds before and their ``last_trick``
    (for :mod:`wizard.sampling`), a later one.  The seed is not checked here;
    :func:`new_match` checks it."""
    state = MatchState.__new__(MatchState)
    state.config = config
    state.seed = seed
    state.salt = None
    n = state._n = config.players
    state._first_dealer = dealer
    # SINGLE_SUIT has no following: a lead that never matches any suit turns it off.
    state._single = config.single_suit
    state._scores = [0] * n if scores is None else scores
    state._results = [] if results is None else results
    state._result_views = ()
    state._log = []
    state._last_trick = last_trick
    state._leader = NO_SEAT if last_trick is None else last_trick[2]
    state._win_pos = 0
    return state

