"""Keeping matches: a compact, versioned binary form of a live state, and the match record.

- :func:`state_to_bytes` / :func:`state_from_bytes`: the live state, exactly, in well under
  2 KB (the service keeps it in Redis).  Format version 2, little-endian; the first four
  bytes are ``WZS`` and the version.  Version 2 added the salt after the seed; version 1
  (no salt) is still read.
- :class:`MatchRecord`: config, seed (and salt) and every move in order; :meth:`MatchRecord.replay`
  re-runs it through the engine and checks it ends as recorded.  ``state.record()`` gives
  it once the match is finished, with every seat's hand of every round.

>>> from wizard.state import new_match
>>> from wizard.rules import MatchConfig
>>> import random
>>> state = new_match(MatchConfig.create("WIZARD", 4), seed="doc")
>>> _ = state.playout(random.Random(7))
>>> record = state.record()
>>> record.replay().scores == state.scores
True
>>> state_from_bytes(state_to_bytes(state)).scores == state.scores
True
"""

from __future__ import annotations

import struct
from functools import lru_cache
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from wizard.cards import CARD_IDS, CODES, codes_of, parse_cards
from wizard.errors import RecordError, WizardError
from wizard.moves import Move, move_of_action
from wizard.rules import MatchConfig, Ruleset, Variant
from wizard.shuffle import ALGORITHM_VERSION, salt_problem, seed_hash
from wizard.state import NO_SEAT, MatchState, Phase, new_match
from wizard.tricks import trick_table

STATE_FORMAT = 2
#: the state formats :func:`state_from_bytes` reads (1: before salts)
STATE_FORMATS_READ = (1, 2)
RECORD_FORMAT = 2
#: the record formats :meth:`MatchRecord.from_dict` reads (1: before salts)
RECORD_FORMATS_READ = (1, 2)
_MAGIC = b"WZS"
_RULESETS = list(Ruleset)
_VARIANTS = list(Variant)
_PHASES = list(Phase)
_NONE = 255


def _opt(value: int | None) -> int:
    return _NONE if value is None or value == NO_SEAT else value


def _unopt(value: int) -> int | None:
    return None if value == _NONE else value


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise RecordError("serialised state is truncated")
        out = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return out

    def byte(self) -> int:
        return self.take("<B")[0]

    def bytes_(self, count: int) -> bytes:
        if self.pos + count > len(self.data):
            raise RecordError("serialised state is truncated")
        out = self.data[self.pos : self.pos + count]
        self.pos += count
        return out

    def text(self) -> str:
        (length,) = self.take("<H")
        return self.bytes_(length).decode()


def _text(out: bytearray, value: str) -> None:
    raw = value.encode()
    out += struct.pack("<H", len(raw)) + raw


def _head_bytes(cfg: MatchConfig, seed: str, salt: str | None) -> bytes:
    """The part of a state that never changes (config, seed and salt), encoded once per
    config: a stacked match's 15 deals would otherwise be re-encoded on every save."""
    cached = cfg.__dict__.get("_state_head")
    if cached is not None and cached[0] == (seed, salt):
        return cached[1]  # type: ignore[no-any-return]
    out = bytearray()
    variant_bits = sum(1 << _VARIANTS.index(v) for v in cfg.variants)
    out += bytes([_RULESETS.index(cfg.ruleset), cfg.players, variant_bits, _opt(cfg.first_dealer)])
    _text(out, seed)
    _text(out, salt or "")  # (a salt is never empty: empty is none)
    deals = cfg.deals
    out.append(_NONE if deals is None else len(deals))
    for rnd in deals or ():  # card ids, one byte each (codes come back from CODES)
        ids = parse_cards(rnd, cfg.deck)
        out.append(len(ids))
        out += bytes(ids)
    head = bytes(out)
    cfg.__dict__["_state_head"] = ((seed, salt), head)  # frozen dataclass: a cache, as cached_property does
    return head


@lru_cache(maxsize=4096)
def _config_of_head(head: bytes, version: int) -> tuple[MatchConfig, str, str | None]:
    """The config, seed and salt :func:`_head_bytes` wrote (cached: one config object per
    match); a version 1 head has no salt."""
    r = _Reader(head)
    ruleset, n, variant_bits, first = r.take("<4B")
    seed = r.text()
    salt = (r.text() or None) if version >= 2 else None
    if salt is not None and salt_problem(salt) is not None:
        raise RecordError("serialised state has a malformed salt")
    deal_count = r.byte()
    deals = None
    if deal_count != _NONE:
        deals = tuple(tuple(CODES[c] for c in r.bytes_(r.byte())) for _ in range(deal_count))
    if r.pos != len(head):
        raise RecordError("serialised state has a malformed header")
    config = MatchConfig(
        _RULESETS[ruleset],
        n,
        frozenset(v for i, v in enumerate(_VARIANTS) if variant_bits >> i & 1),
        _unopt(first),
        deals,
    )
    if version == STATE_FORMAT:  # (a version 1 head is written anew, with the salt)
        config.__dict__["_state_head"] = ((seed, salt), head)
    return config, seed, salt


def _head_end(data: bytes, version: int) -> int:
    """Where the header that starts at byte 4 ends."""
    pos = 8
    pos += 2 + struct.unpack_from("<H", data, pos)[0]  # the seed
    if version >= 2:
        pos += 2 + struct.unpack_from("<H", data, pos)[0]  # the salt
    deal_count = data[pos]
    pos += 1
    if deal_count != _NONE:
        for _ in range(deal_count):
            pos += 1 + data[pos]
    return pos


def state_to_bytes(state: MatchState) -> bytes:
    # The service writes this with every move: built from a few lists of small ints, each
    # made into bytes once, rather than from a byte array grown piece by piece.
    n = state._n
    small = [
        state._round, state._dealer, state._first_dealer, _PHASE_INDEX[state._phase],
        _opt(state._to_act), _opt(state._trump_card), _opt(state._trump_suit),
        _opt(state._leader), state._lead, state._win_pos,
    ]
    seats = [_opt(b) for b in state._bids]
    seats += state._tricks
    trick = state._trick
    done = state._done
    tail = [len(trick), *trick, len(done)]
    for leader, cards, winner in done:
        tail += (leader, winner, *cards)
    last = state._last_trick
    if last is None:
        tail.append(0)
    else:
        tail += (1, last[0], last[2], *last[1])
    results = state._results
    tail.append(len(results))
    for bids, tricks in results:
        tail += bids
        tail += tricks
    log = state._log
    return b"".join((
        _MAGIC, _FORMAT_BYTE, _head_bytes(state.config, state.seed, state.salt), bytes(small),
        _HANDS[n].pack(*state._hands), bytes(seats), _SCORES[n].pack(*state._scores), bytes(tail),
        struct.pack(f"<H{len(log)}H", len(log), *log),
    ))


_PHASE_INDEX = {phase: index for index, phase in enumerate(_PHASES)}
_FORMAT_BYTE = bytes([STATE_FORMAT])
_HANDS = [struct.Struct(f"<{n}Q") for n in range(7)]
_SCORES = [struct.Struct(f"<{n}i") for n in range(7)]


def state_from_bytes(data: bytes) -> MatchState:
    """The state :func:`state_to_bytes` wrote; :class:`RecordError` if it cannot be read."""
    try:
        return _state_from_bytes(data)
    except WizardError as e:
        raise RecordError(f"serialised state is not valid: {e}") from None
    except (IndexError, ValueError, struct.error, UnicodeDecodeError) as e:
        raise RecordError(f"serialised state is corrupt: {e}") from None


def _state_from_bytes(data: bytes) -> MatchState:
    if data[:3] != _MAGIC:
        raise RecordError("not a serialised match state")
    version = data[3]
    if version not in STATE_FORMATS_READ:
        raise RecordError(f"state format {version} is not supported (this engine reads {_formats(STATE_FORMATS_READ)})")
    end = _head_end(data, version)
    if end > len(data):
        raise RecordError("serialised state is truncated")
    config, seed, salt = _config_of_head(bytes(data[4:end]), version)
    n = config.players
    r = _Reader(data)
    r.pos = end
    s = MatchState.__new__(MatchState)
    s.config = config
    s.seed = seed
    s.salt = salt
    s._n = n
    (s._round, s._dealer, s._first_dealer, phase, to_act, trump_card, trump_suit, leader,
     s._lead, s._win_pos) = r.take("<10B")
    s._phase = _PHASES[phase]
    s._to_act = NO_SEAT if to_act == _NONE else to_act
    s._trump_card = _unopt(trump_card)
    s._trump_suit = _unopt(trump_suit)
    s._leader = NO_SEAT if leader == _NONE else leader
    s._hands = list(r.take(f"<{n}Q"))
    s._bids = [_unopt(b) for b in r.bytes_(n)]
    s._tricks = list(r.bytes_(n))
    s._scores = list(r.take(f"<{n}i"))
    s._trick = list(r.bytes_(r.byte()))
    s._done = []
    for _ in range(r.byte()):
        leader_, winner = r.take("<2B")
        s._done.append((leader_, tuple(r.bytes_(n)), winner))
    s._last_trick = None
    if r.byte():
        leader_, winner = r.take("<2B")
        s._last_trick = (leader_, tuple(r.bytes_(n)), winner)
    s._results = [(tuple(r.bytes_(n)), tuple(r.bytes_(n))) for _ in range(r.byte())]
    (count,) = r.take("<H")
    s._log = list(r.take(f"<{count}H"))
    if r.pos != len(data):
        raise RecordError("serialised state has trailing bytes")
    _check_cards(s)
    s._single = config.single_suit
    s._size = config.hand_size(s._round)
    s._beats = trick_table(s._trump_suit, s._single)
    return s


def _check_cards(s: MatchState) -> None:
    """Card ids and seats in range, so a corrupt state is refused here, not later."""
    deck = s.config.deck.mask
    cards = [*s._trick, *(c for t in s._done for c in t[1])]
    if s._last_trick is not None:
        cards += s._last_trick[1]
    if s._trump_card is not None:
        cards.append(s._trump_card)
    if any(not 0 <= c < CARD_IDS or not (deck >> c) & 1 for c in cards) or any(h & ~deck for h in s._hands):
        raise RecordError("serialised state holds a card that is not in this match's deck")
    seats = [s._dealer, s._first_dealer, *(t[0] for t in s._done), *(t[2] for t in s._done)]
    if s._to_act != NO_SEAT:
        seats.append(s._to_act)
    if any(not 0 <= x < s._n for x in seats) or not 1 <= s._round <= s.config.rounds:
        raise RecordError("serialised state names a seat or round that this match does not have")
    if s._trump_suit is not None and not 0 <= s._trump_suit < 4:
        raise RecordError("serialised state names a trump suit that does not exist")


@dataclass(frozen=True)
class DealtRound:
    """What chance gave one round: the dealer, every seat's hand, the turned card."""

    round: int
    dealer: int
    hands: tuple[tuple[str, ...], ...]
    trump_card: str | None


@dataclass(frozen=True)
class MatchRecord:
    """Everything needed to replay a match: its rules, its seed, every move in order."""

    config: MatchConfig
    seed: str
    moves: tuple[tuple[int, Move], ...]
    #: final totals by seat, once the match is finished
    scores: tuple[int, ...] | None = None
    #: the salt of the match's ``seed_hash`` (None: the hash is of the seed alone)
    salt: str | None = None

    @property
    def seed_hash(self) -> str:
        """The ``seedHash`` the match published at its start, if the record is true."""
        return seed_hash(self.seed, self.salt)

    def replay(self) -> MatchState:
        """Re-run the record; raises :class:`RecordError` if a move does not apply, or, for
        a record with final scores, if the match does not end there with those scores."""
        for state in _replayed(self):
            pass
        if self.scores is not None:
            if not state.is_finished:
                raise RecordError(
                    f"the record gives final scores but its {len(self.moves)} moves leave the match"
                    f" unfinished (round {state.round}, {state.phase.value})"
                )
            if state.scores != self.scores:
                raise RecordError(f"replay ends with scores {state.scores}, the record says {self.scores}")
        return state

    def dealt_rounds(self) -> list[DealtRound]:
        """Every round's hands as dealt, found by replaying the record."""
        return list(_dealt_rounds(self))

    def to_dict(self) -> dict[str, Any]:
        cfg = self.config
        return {
            "format": RECORD_FORMAT,
            "dealAlgorithm": ALGORITHM_VERSION,
            "config": {
                "ruleset": cfg.ruleset.value,
                "players": cfg.players,
                "variants": sorted(v.value for v in cfg.variants),
                "firstDealer": cfg.first_dealer,
                "deals": None if cfg.deals is None else [list(r) for r in cfg.deals],
            },
            "seed": self.seed,
            "salt": self.salt,
            "moves": [{"seat": seat, **move.to_dict()} for seat, move in self.moves],
            "scores": None if self.scores is None else list(self.scores),
            "rounds": [
                {"round": d.round, "dealer": d.dealer, "hands": [list(h) for h in d.hands], "trumpCard": d.trump_card}
                for d in self.dealt_rounds()
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MatchRecord:
        try:
            version = data.get("format")
            if isinstance(version, bool) or version not in RECORD_FORMATS_READ:
                raise RecordError(
                    f"record format {version!r} is not supported (this engine reads {_formats(RECORD_FORMATS_READ)})"
                )
            algorithm = data.get("dealAlgorithm", ALGORITHM_VERSION)
            if algorithm != ALGORITHM_VERSION:
                raise RecordError(
                    f"the record was dealt with deal algorithm {algorithm!r}; this engine deals with {ALGORITHM_VERSION}"
                )
            c = data["config"]
            config = MatchConfig.create(c["ruleset"], c["players"], c.get("variants") or (), c.get("firstDealer"), c.get("deals"))
            seed = data["seed"]
            if not isinstance(seed, str) or not seed:
                raise RecordError(f"the record's seed must be a non-empty string, not {seed!r}")
            moves = tuple((_whole(m["seat"], "seat"), Move.from_dict({k: v for k, v in m.items() if k != "seat"})) for m in data["moves"])
            scores = None if data.get("scores") is None else tuple(_whole(x, "score") for x in data["scores"])
            salt = data.get("salt")
            if salt is not None and version < 2:
                raise RecordError("a format 1 record has no salt (salts came with format 2)")
            if salt is not None and (problem := salt_problem(salt)) is not None:
                raise RecordError(f"the record's {problem}")
            record = cls(config, seed, moves, scores, salt)
            _start(record)  # a seed or stacked deal the engine refuses is refused here
        except RecordError:
            raise
        except WizardError as e:
            raise RecordError(f"match record is not valid: {e}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise RecordError(f"match record is malformed: {e!r}") from None
        if data.get("rounds") is not None:
            # the dealt hands are derived data: when given, they must be the ones the seed deals
            stated = data["rounds"]
            derived = record.to_dict()["rounds"]
            if stated != derived:
                raise RecordError("the record's dealt hands (rounds) are not what its seed and deals deal")
        return record


def _formats(versions: tuple[int, ...]) -> str:
    return " and ".join(map(str, versions))


def _whole(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"a {what} in the record must be a whole number, not {value!r}")
    return value


def _start(record: MatchRecord) -> MatchState:
    try:
        return new_match(record.config, record.seed, record.salt)
    except WizardError as e:
        raise RecordError(f"the record's match cannot be set up: {e}") from None


def _replayed(record: MatchRecord) -> Iterator[MatchState]:
    """The one state of a replay, yielded at the start and again after every move."""
    state = _start(record)
    yield state
    for index, (seat, move) in enumerate(record.moves):
        try:
            state.apply(seat, move)
        except WizardError as e:
            raise RecordError(f"move {index} ({move}, seat {seat}) does not replay: {e}") from None
        yield state


def _dealt_rounds(record: MatchRecord) -> Iterator[DealtRound]:
    dealt = 0
    for state in _replayed(record):
        if state._round != dealt and not state.is_finished:
            dealt = state._round
            yield DealtRound(
                state._round,
                state._dealer,
                tuple(codes_of(h) for h in state._hands),
                None if state._trump_card is None else CODES[state._trump_card],
            )


def record_of(state: MatchState) -> MatchRecord:
    """The finished match's record (see :meth:`MatchState.record`)."""
    if not state.is_finished:
        raise RecordError("the full record (hands and seed) is available only once the match is finished")
    moves = tuple((entry >> 8, move_of_action(entry & 0xFF)) for entry in state._log)
    return MatchRecord(state.config, state.seed, moves, tuple(state._scores), state.salt)

