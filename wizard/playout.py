"""The fast playout: a match played to its end with every seat on the RANDOM policy, the
rollout of Monte Carlo search (:func:`playout`).

This is the engine's second implementation of play, hand-optimised because search runs it
millions of times: the checked step (:meth:`~wizard.state.MatchState.apply_action`) is the
reference, and tests/engine/test_playout.py proves the two equal (same draws, same bytes,
same outcome) for every ruleset, player count and variant set.  Bidding and scoring use the
rules' own functions (:func:`~wizard.rules.legal_bids`, :func:`~wizard.tricks.score_round`);
trick play has one loop of its own (:func:`_play_tricks`) over tables built from the rules
of :mod:`wizard.tricks`, and finishes a trick already begun with the checked step's own
``_play_card``; later rounds are dealt, bid and played in local variables
(:func:`_random_later_rounds`).  It plays on :class:`~wizard.state.MatchState`'s typed
fields directly, as the state's own transitions do.
"""

from __future__ import annotations

from collections.abc import Callable
from math import floor
from random import Random
from typing import TYPE_CHECKING, Any, Final

from wizard.cards import (
    BIT,
    CARD_IDS,
    JESTER,
    JESTER_BASE,
    SAME_CODE_MASK,
    SUIT_MASK,
    SUIT_OF,
    WIZARD,
    WIZARD_BASE,
    lowest_copy,
)
from wizard.moves import ACTION_BID, ACTION_TRUMP
from wizard.rules import Phase, legal_bids
from wizard.shuffle import MYPYC_COMPILED, SeedStream, fresh_shuffle, round_label
from wizard.state import NO_SEAT, MatchState, Outcome
from wizard.tricks import FOLLOW_MASK, LEAD_OPEN, playable, score_round, trick_table, trick_winner

if TYPE_CHECKING:
    # mypyc's native 64-bit int, in annotations only (see wizard.shuffle)
    from mypy_extensions import i64

#: ``_LOG_CODES[seat][card]``: the log entry of the seat playing that card (ints, typed
#: ``Any`` so that mypyc appends the very objects to the log: an ``int`` it would unbox,
#: then box anew, a new object for most entries)
_LOG_CODES: Final[tuple[tuple[Any, ...], ...]] = tuple(tuple(seat << 8 | card for card in range(CARD_IDS)) for seat in range(6))
#: ``_FOLLOWERS[n][leader]``: the seats that play after the leader, in turn, each as
#: ``(seat, _LOG_CODES[seat])``
_FOLLOWERS: Final = {
    n: tuple(tuple(((leader + i) % n, _LOG_CODES[(leader + i) % n]) for i in range(1, n)) for leader in range(n))
    for n in range(3, 7)
}
#: by the card that sets the lead: the suit to follow (0: none), and the cards a seat
#: holding that suit may play (:func:`wizard.tricks.playable`; SINGLE_SUIT never follows:
#: ``_NO_FOLLOW``). (Every table is typed ``tuple[X, ...]``: mypyc would keep a tuple of a
#: known length, such as ``(0,) * CARD_IDS``, as a C struct, and build it anew where used.)
_FOLLOW_OF: Final[tuple[int, ...]] = tuple(SUIT_MASK[SUIT_OF[c]] if SUIT_OF[c] < 4 else 0 for c in range(CARD_IDS))
_LEGAL_OF: Final[tuple[int, ...]] = tuple(FOLLOW_MASK[SUIT_OF[c]] if SUIT_OF[c] < 4 else 0 for c in range(CARD_IDS))
_NO_FOLLOW: Final[tuple[int, ...]] = (0,) * CARD_IDS
# Tables of the later rounds' deals and bids (_random_later_rounds).
#: ``_ROUND_TAIL[r]``: what follows ``f"{seed}:round-"`` in the prefix of round r's stream
_ROUND_TAIL: Final[tuple[bytes, ...]] = tuple(f"{r}:".encode() for r in range(64))
#: ``_DEAL_SLICES[n][dealer]``: by seat, the positions of its cards among those dealt
#: (card ``k`` goes to seat ``dealer + 1 + k``)
_DEAL_SLICES: Final = {n: tuple(tuple(slice((s - dealer - 1) % n, None, n) for s in range(n)) for dealer in range(n)) for n in range(3, 7)}
#: ``_BID_ORDER[n][dealer]``: the seats that bid before the dealer, in turn
_BID_ORDER: Final = {n: tuple(tuple((d + 1 + i) % n for i in range(n - 1)) for d in range(n)) for n in range(3, 7)}


def playout(state: MatchState, rng: Random) -> Outcome:
    """Play the match to its end with every seat on the RANDOM policy (uniform over the
    legal actions), and return the outcome: the rollout of Monte Carlo search.

    It makes the moves :meth:`~wizard.state.MatchState.apply_action` would make if every
    seat chose, with one draw ``u`` of ``rng.random()`` per choice, the legal action at
    ``floor(u * count)``, lowest id first (tests/engine/test_playout.py holds it to that),
    without the checks a move from outside needs. It plays on ``state`` itself: copy the
    state first to keep it.

    >>> from wizard import MatchConfig, new_match
    >>> state = new_match(MatchConfig.create("WIZARD", 4), seed="doc")
    >>> playout(state, Random(1)).scores == state.scores and state.is_finished
    True
    """
    random = rng.random
    while True:
        phase = state._phase
        if phase is Phase.PLAY:
            _random_tricks(state, random)
        elif phase is Phase.BID:
            _random_bids(state, random)
        elif phase is Phase.CHOOSE_TRUMP:
            suit = floor(random() * 4)
            state._log.append(state._dealer << 8 | (ACTION_TRUMP + suit))
            state._set_trump(suit)
        else:
            assert state.outcome is not None
            return state.outcome


def _random_bids(state: MatchState, random: Callable[[], float]) -> None:
    """The rest of the bids with every seat RANDOM, then the play: what ``_bid`` does bid
    by bid, with one draw per bid. A draw picks ``floor(u * count)`` from the
    legal bids (the same as ``int``, and a faster call); every bid from 0 to the hand
    size is legal but the dealer's under PLUS_MINUS_ONE, so only that one needs the list."""
    bids = state._bids
    log = state._log
    choices = state._size + 1
    seat = state._to_act
    if seat != NO_SEAT:  # in turn, the dealer last
        dealer = state._dealer
        n = state._n
        while seat != dealer:
            bid = floor(random() * choices)
            log.append(seat << 8 | (ACTION_BID + bid))
            bids[seat] = bid
            seat += 1
            if seat == n:
                seat = 0
        state._to_act = seat
        if state.config.plus_minus_one:
            legal = legal_bids(choices - 1, bids, True, True)
            bid = legal[floor(random() * len(legal))]
        else:
            bid = floor(random() * choices)
        log.append(seat << 8 | (ACTION_BID + bid))
        bids[seat] = bid
    else:  # all at once: in seat order
        while None in bids:
            seat = bids.index(None)
            if seat == state._dealer and state.config.plus_minus_one:
                legal = legal_bids(choices - 1, bids, True, True)
                bid = legal[floor(random() * len(legal))]
            else:
                bid = floor(random() * choices)
            log.append(seat << 8 | (ACTION_BID + bid))
            bids[seat] = bid
    state._start_play()


def _random_tricks(state: MatchState, random: Callable[[], float]) -> None:
    """The rest of the round's tricks with every seat RANDOM, then the end of the round:
    the cards of a trick already begun one at a time, as the checked step plays them
    (it happens at most once a playout), then whole tricks in :func:`_play_tricks`."""
    while state._trick:
        seat = state._to_act
        hand = state._hands[seat]
        card = _chosen_card(hand, playable(hand, state._lead), random())
        state._log.append(seat << 8 | card)
        state._play_card(card)
        if state._phase is not Phase.PLAY:  # (that trick ended the round)
            return
    n = state._n
    single = state._single
    left = state._size - len(state._done)
    keep = state._round == state.config.rounds
    leader, win = _play_tricks(
        state._hands, state._beats, single, state._leader, left, random, state._log, state._tricks,
        state._done if keep else None,
    )
    log = state._log
    state._last_trick = finished = (leader, tuple([e & 0xFF for e in log[len(log) - n :]]), win)
    # _win_pos as the checked step leaves it when a round ends: where the card winning the
    # last trick stood before that trick's last card (dealing resets it; a finished match
    # keeps it, in its bytes too)
    state._win_pos = trick_winner(finished[1][: n - 1], state._trump_suit, single)
    state._lead = LEAD_OPEN
    state._leader = state._to_act = win
    config = state.config
    if config.deals is None and not single and state._round < config.rounds:
        _random_later_rounds(state, random)
    else:
        state._end_round()


def _chosen_card(hand: int, mask: int, u: float) -> int:
    """The card a draw ``u`` chooses among ``mask`` (the cards of ``hand`` its seat may
    play): the ``floor(u * count)``-th, lowest id first, as the lowest copy held."""
    k = floor(u * mask.bit_count())
    for _ in range(k):
        mask &= mask - 1
    card = (mask & -mask).bit_length() - 1
    return lowest_copy(hand, card) if card >= WIZARD_BASE else card


def _play_tricks(
    hands: list[int],
    beats: tuple[tuple[bool, ...], ...],
    single_suit: bool,
    leader: int,
    count: int,
    random: Callable[[], float],
    log: list[int],
    tricks: list[int],
    done: list[tuple[int, tuple[int, ...], int]] | None,
) -> tuple[int, int]:
    """Play ``count`` whole tricks, ``leader`` leading the first, with every seat RANDOM:
    the playout's hot loop.  It takes cards from ``hands``, logs them, counts the tricks
    taken in ``tricks``, keeps each finished trick in ``done`` (the match's last round:
    dealing drops them otherwise), and returns the last trick's leader and winner.

    It makes the same moves, from the same draws of ``random``, as the checked step card
    by card (one draw per card: the ``k``-th legal card, lowest id first), only arranged
    for speed:

    - the lead is played before the loop over the other seats (``_FOLLOWERS``); a card
      that sets the suit to follow gives both the suit and the cards a seat holding it may
      play (``_FOLLOW_OF``, ``_LEGAL_OF``; SINGLE_SUIT never follows: ``_NO_FOLLOW``);
    - a trick keeps the row of the trick table of the card winning it so far;
    - a seat that need not follow chooses among its whole hand, whose size the trick
      number gives (every seat holds as many cards as a trick starts);
    - ``k = floor(u * count)`` is counted down in floats, which is exact: ``x - 1.0`` is
      exact for ``1 <= x < 2**52``, so the loop runs ``floor(x)`` times;
    - cards are not collected per trick: a finished trick's are read back from the log.
    """
    n = len(hands)
    followers = _FOLLOWERS[n]
    log_codes = _LOG_CODES
    same_code = SAME_CODE_MASK
    follow_of = _NO_FOLLOW if single_suit else _FOLLOW_OF
    legal_of = _NO_FOLLOW if single_suit else _LEGAL_OF
    # counting a follower's legal cards: natively where mypyc compiled this (int.bit_count
    # would box the mask), else int's own (locals: the choice costs Python no global lookup)
    native = MYPYC_COMPILED
    bit_count = int.bit_count
    win = leader
    held = float(count)  # the cards each seat holds as the trick starts
    while True:
        # the lead: any card of the hand
        leader = win
        hand: i64 = hands[leader]
        mask: i64 = hand
        x = random() * held
        while x >= 1.0:
            mask &= mask - 1
            x -= 1.0
        bit: int = mask & -mask
        card = bit.bit_length() - 1
        if card >= WIZARD_BASE:
            bit = hand & same_code[card]
            bit &= -bit
            card = bit.bit_length() - 1
        log.append(log_codes[leader][card])
        hands[leader] = hand ^ bit
        row = beats[card]
        follow: i64 = follow_of[card]
        legal: i64 = legal_of[card]
        open_lead = card >= JESTER_BASE
        for seat, codes in followers[leader]:
            hand = hands[seat]
            if hand & follow:
                mask = hand & legal
                x = random() * (_bit_count(mask) if native else bit_count(mask))
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
            log.append(codes[card])
            hands[seat] = hand ^ bit
            if row[card]:
                row = beats[card]
                win = seat
                if open_lead:
                    follow = follow_of[card]
                    legal = legal_of[card]
                    open_lead = card >= JESTER_BASE
        tricks[win] = tricks[win] + 1  # (``+=`` on an item is a generic call for mypyc)
        held -= 1.0
        if done is not None:
            done.append((leader, tuple([e & 0xFF for e in log[len(log) - n :]]), win))
        if not held:
            return leader, win


def _bit_count(mask: i64) -> int:
    """``mask.bit_count()`` for a mask of cards (below ``2**60``) in native arithmetic, where
    mypyc compiled the playout: ``int.bit_count`` is a method call for it, boxing the mask.
    (Every constant is below ``2**62``, mypyc's unboxed ints: ``0x5555555555555555`` would be
    a boxed int, converted on every call; ``mask >> 1`` has no bit above 58 to keep.)"""
    mask -= (mask >> 1) & 0x0555555555555555
    mask = (mask & 0x3333333333333333) + ((mask >> 2) & 0x3333333333333333)
    mask = (mask + (mask >> 4)) & 0x0F0F0F0F0F0F0F0F
    mask += mask >> 8
    mask += mask >> 16
    mask += mask >> 32
    return mask & 0x7F


def _dealt_hand(deck: list[int], first: int, dealt: int, n: int) -> int:
    """The hand of the seat dealt ``deck[first:dealt:n]`` (cards' bits), in native arithmetic
    where mypyc compiled the playout: ``sum`` of the slice would box every partial sum."""
    hand: i64 = 0
    # (a while loop: mypyc compiles a range with a variable step as Python's range object)
    k: i64 = first
    while k < dealt:
        hand |= deck[k]
        k += n
    return hand


def _random_later_rounds(state: MatchState, random: Callable[[], float]) -> None:
    """Score the round just played, then deal and play the match's other rounds with
    every seat RANDOM, to the end: what ``_end_round``, ``_deal``, the trump choice,
    :func:`_random_bids` and :func:`_random_tricks` do round by round, with the same
    draws of ``random``, the same log and results, and the same final state.

    Only for decks shuffled from the seed without SINGLE_SUIT (the caller checks).  A
    round lives in locals and only the last one is written back to the state: no
    round's attributes but the last one's outlive it.  Dealing shuffles the cards' bits
    (the same permutation as the cards'), on the shuffle's fast path
    (:func:`~wizard.shuffle.fresh_shuffle`), falling back to the word-by-word stream
    when a word might be rejected; a seat's hand is the sum of its slice of the dealt
    bits (``_DEAL_SLICES``).  The tricks are :func:`_play_tricks`'s, as in the round in
    progress.
    """
    config = state.config
    n = state._n
    last = config.rounds
    points = config.points
    scores = state._scores
    results = state._results
    log = state._log
    state._score_round()
    seed = state.seed
    prefix = f"{seed}:round-".encode()
    deck_bits = [BIT[card] for card in config.deck.cards]  # in canonical order
    deck_size = len(deck_bits)
    plus_minus_one = config.plus_minus_one
    simultaneous = config.simultaneous_bids
    deal_slices = _DEAL_SLICES[n]
    bid_order = _BID_ORDER[n]
    suit_of = SUIT_OF
    dealer = state._dealer
    r = state._round
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
        if MYPYC_COMPILED:
            hands = [_dealt_hand(deck, part.start, dealt, n) for part in deal_slices[dealer]]
        else:
            hands = list(map(sum, map(deck[:dealt].__getitem__, deal_slices[dealer])))
        trump_card: int | None
        suit: int | None
        if dealt < deck_size:
            trump_card = deck[dealt].bit_length() - 1
            suit = suit_of[trump_card]
            if suit == WIZARD:  # the dealer names trump
                suit = floor(random() * 4)
                log.append(dealer << 8 | (ACTION_TRUMP + suit))
            elif suit == JESTER:
                suit = None
        else:
            trump_card = suit = None
        beats = trick_table(suit)
        # ---- the bids: _random_bids
        choices = r + 1
        bids = [0] * n  # (0 for a bid not made yet: legal_bids adds them up)
        if simultaneous:
            for seat in range(n):
                if seat == dealer and plus_minus_one:
                    allowed = legal_bids(r, bids, True, True)
                    bid = allowed[floor(random() * len(allowed))]
                else:
                    bid = floor(random() * choices)
                log.append(seat << 8 | (ACTION_BID + bid))
                bids[seat] = bid
        else:
            for seat in bid_order[dealer]:
                bid = floor(random() * choices)
                log.append(seat << 8 | (ACTION_BID + bid))
                bids[seat] = bid
            if plus_minus_one:
                allowed = legal_bids(r, bids, True, True)
                bid = allowed[floor(random() * len(allowed))]
            else:
                bid = floor(random() * choices)
            log.append(dealer << 8 | (ACTION_BID + bid))
            bids[dealer] = bid
        # ---- the tricks: _random_tricks from the first lead
        done: list[tuple[int, tuple[int, ...], int]] = []
        tricks = [0] * n
        first = dealer + 1 if dealer + 1 < n else 0
        _, win = _play_tricks(hands, beats, False, first, r, random, log, tricks, done if r == last else None)
        # ---- the score: _end_round
        score_round(points, bids, tricks, scores)
        results.append((tuple(bids), tuple(tricks)))
    # the last round's state, as _deal_order, _set_trump, _random_tricks and
    # _end_round leave it
    state._round = r
    state._dealer = dealer
    state._size = r
    state._hands = hands
    state._tricks = list(tricks)
    state._trick = []
    state._lead = LEAD_OPEN
    finished = done[-1]  # (the last round keeps its tricks)
    state._win_pos = trick_winner(finished[1][:-1], suit)  # (as _random_tricks says)
    state._done = done
    state._bids = list(bids)
    state._trump_card = trump_card
    state._trump_suit = suit
    state._beats = beats
    state._last_trick = finished
    state._leader = win
    state._phase = Phase.FINISHED
    state._to_act = NO_SEAT

