"""Keeping matches: a compact, versioned binary form of a live state, and the match record.

- :func:`state_to_bytes` / :func:`state_from_bytes`: the live state, exactly, in well under
  2 KB (the service keeps it in Redis).  Format version 2, little-endian; the first four
  bytes are ``WZS`` and the version.  Version 2 added the salt after the seed; version 1
  (no salt) is still read.
- :class:`MatchRecord`: config, seed (and salt) and every move in order; :meth:`MatchRecord.replay`
  re-runs it through the engine and checks it ends as recorded.  :func:`record_of` gives
  it once the match is finished, with every seat's hand of every round.

The byte format is frozen: live matches are stored in it, so the bytes of a state never
change within a version.  Rulesets, variants and phases are stored by the fixed codes of
:data:`RULESET_CODES`, :data:`VARIANT_BITS` and :data:`PHASE_CODES` (never by their order
in the enums: a new variant declared anywhere changes no stored byte), and
tests/engine/test_record_format.py holds known bytes of every ruleset and variant, which
today's encoder must write and today's decoder must read.

A new format (version N+1): write it in :func:`state_to_bytes` and set
:data:`STATE_FORMAT` to N+1; keep reading N, with the decoder choosing the layout by the
version byte (:func:`_head_end` and :func:`_config_of_head` take the version, as version 1,
which has no salt, shows; a change in the body after the header gets its own branch on
the version in :func:`_state_from_bytes`); add N+1 to :data:`STATE_FORMATS_READ`; and in
test_record_format.py keep the version N bytes (they must still read, to the same state)
and add version N+1 bytes for every ruleset and variant.  Drop N from
:data:`STATE_FORMATS_READ` only once no stored match can still be in it.

>>> from wizard.state import new_match
>>> from wizard.rules import MatchConfig
>>> import random
>>> state = new_match(MatchConfig.create("WIZARD", 4), seed="doc")
>>> from wizard.playout import playout
>>> _ = playout(state, random.Random(7))
>>> record = record_of(state)
>>> record.replay().scores == state.scores
True
>>> state_from_bytes(state_to_bytes(state)).scores == state.scores
True
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from wizard.cards import CARD_IDS, CODES, codes_of, parse_cards
from wizard.errors import RecordError, WizardError
from wizard.moves import Move, move_of_action
from wizard.rules import MatchConfig, Phase, Ruleset, Variant
from wizard.shuffle import ALGORITHM_VERSION, salt_problem, seed_hash
from wizard.state import NO_SEAT, MatchState, StateFields, fields_of, new_match, state_of_fields

STATE_FORMAT = 2
#: the state formats :func:`state_from_bytes` reads (1: before salts)
STATE_FORMATS_READ = (1, 2)
RECORD_FORMAT = 2
#: the record formats :meth:`MatchRecord.from_dict` reads (1: before salts)
RECORD_FORMATS_READ = (1, 2)
_MAGIC = b"WZS"
#: The stored code of each ruleset, variant (one bit each) and phase: fixed for good.  A
#: new member gets a new code; a code is never reused or renumbered.
RULESET_CODES: dict[Ruleset, int] = {
    Ruleset.WIZARD: 0,
    Ruleset.WIZARD_JUNIOR: 1,
    Ruleset.WIZARD_JUNIOR_CLASSIC: 2,
}
VARIANT_BITS: dict[Variant, int] = {
    Variant.PLUS_MINUS_ONE: 1 << 0,
    Variant.HIDDEN_BIDS: 1 << 1,
    Variant.SECRET_BIDS: 1 << 2,
    Variant.CLAIRVOYANCE: 1 << 3,
    Variant.SINGLE_SUIT: 1 << 4,
}
PHASE_CODES: dict[Phase, int] = {Phase.CHOOSE_TRUMP: 0, Phase.BID: 1, Phase.PLAY: 2, Phase.FINISHED: 3}
_RULESET_OF_CODE = {code: ruleset for ruleset, code in RULESET_CODES.items()}
_PHASE_OF_CODE = {code: phase for phase, code in PHASE_CODES.items()}
_ALL_VARIANT_BITS = sum(VARIANT_BITS.values())
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
        return int(self.take("<B")[0])

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
    variant_bits = sum(VARIANT_BITS[v] for v in cfg.variants)
    out += bytes([RULESET_CODES[cfg.ruleset], cfg.players, variant_bits, _opt(cfg.first_dealer)])
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
    if r.pos != len(head) or ruleset not in _RULESET_OF_CODE or variant_bits & ~_ALL_VARIANT_BITS:
        raise RecordError("serialised state has a malformed header")
    config = MatchConfig(
        _RULESET_OF_CODE[ruleset],
        n,
        frozenset(v for v, bit in VARIANT_BITS.items() if variant_bits & bit),
        _unopt(first),
        deals,
    )
    if version == STATE_FORMAT:  # (a version 1 head is written anew, with the salt)
        config.__dict__["_state_head"] = ((seed, salt), head)
    return config, seed, salt


def _head_end(data: bytes, version: int) -> int:
    """Where the header that starts at byte 4 ends."""
    pos = 8
    pos += 2 + int.from_bytes(data[pos : pos + 2], "little")  # the seed
    if version >= 2:
        pos += 2 + int.from_bytes(data[pos : pos + 2], "little")  # the salt
    deal_count = data[pos]
    pos += 1
    if deal_count != _NONE:
        for _ in range(deal_count):
            pos += 1 + data[pos]
    return pos


def state_to_bytes(state: MatchState) -> bytes:
    """The state, exactly, in the current format (:data:`STATE_FORMAT`)."""
    # The service writes this with every move: built from a few lists of small ints, each
    # made into bytes once, rather than from a byte array grown piece by piece.
    f = fields_of(state)
    n = state.players
    small = [
        f.round, f.dealer, f.first_dealer, PHASE_CODES[f.phase], _opt(f.to_act), _opt(f.trump_card),
        _opt(f.trump_suit), _opt(f.leader), f.lead, f.win_pos,
    ]
    seats = [_opt(b) for b in f.bids]
    seats += f.tricks
    trick = f.trick
    tail = [len(trick), *trick, len(f.done)]
    for leader, cards, winner in f.done:
        tail += (leader, winner, *cards)
    last = f.last_trick
    if last is None:
        tail.append(0)
    else:
        tail += (1, last[0], last[2], *last[1])
    results = f.results
    tail.append(len(results))
    for bids, tricks in results:
        tail += bids
        tail += tricks
    log = f.log
    return b"".join((
        _MAGIC, _FORMAT_BYTE, _head_bytes(state.config, state.seed, state.salt), bytes(small),
        _HANDS[n].pack(*f.hands), bytes(seats), _SCORES[n].pack(*f.scores), bytes(tail),
        struct.pack(f"<H{len(log)}H", len(log), *log),
    ))


_FORMAT_BYTE = bytes([STATE_FORMAT])
_HANDS = [struct.Struct(f"<{n}Q") for n in range(7)]
_SCORES = [struct.Struct(f"<{n}i") for n in range(7)]


def state_from_bytes(data: bytes) -> MatchState:
    """The state :func:`state_to_bytes` wrote, in any format this engine reads
    (:data:`STATE_FORMATS_READ`); :class:`RecordError` if it cannot be read."""
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
    (round_, dealer, first_dealer, phase, to_act, trump_card, trump_suit, leader, lead, win_pos) = r.take("<10B")
    hands = list(r.take(f"<{n}Q"))
    bids = [_unopt(b) for b in r.bytes_(n)]
    tricks = list(r.bytes_(n))
    scores = list(r.take(f"<{n}i"))
    trick = list(r.bytes_(r.byte()))
    done = []
    for _ in range(r.byte()):
        done_leader, done_winner = r.take("<2B")
        done.append((done_leader, tuple(r.bytes_(n)), done_winner))
    last_trick = None
    if r.byte():
        last_leader, last_winner = r.take("<2B")
        last_trick = (last_leader, tuple(r.bytes_(n)), last_winner)
    results = [(tuple(r.bytes_(n)), tuple(r.bytes_(n))) for _ in range(r.byte())]
    (count,) = r.take("<H")
    log = list(r.take(f"<{count}H"))
    if r.pos != len(data):
        raise RecordError("serialised state has trailing bytes")
    if phase not in _PHASE_OF_CODE:
        raise RecordError("serialised state names a phase that does not exist")
    fields = StateFields(
        round_, dealer, first_dealer, _PHASE_OF_CODE[phase], NO_SEAT if to_act == _NONE else to_act,
        _unopt(trump_card), _unopt(trump_suit), NO_SEAT if leader == _NONE else leader, lead, win_pos,
        hands, bids, tricks, scores, trick, done, last_trick, results, log,
    )
    _check_cards(config, fields)
    return state_of_fields(config, seed, salt, fields)


def _check_cards(config: MatchConfig, f: StateFields) -> None:
    """Card ids and seats in range, so a corrupt state is refused here, not later."""
    deck = config.deck.mask
    cards = [*f.trick, *(c for t in f.done for c in t[1])]
    if f.last_trick is not None:
        cards += f.last_trick[1]
    if f.trump_card is not None:
        cards.append(f.trump_card)
    if any(not 0 <= c < CARD_IDS or not (deck >> c) & 1 for c in cards) or any(h & ~deck for h in f.hands):
        raise RecordError("serialised state holds a card that is not in this match's deck")
    seats = [f.dealer, f.first_dealer, *(t[0] for t in f.done), *(t[2] for t in f.done)]
    if f.to_act != NO_SEAT:
        seats.append(f.to_act)
    if any(not 0 <= x < config.players for x in seats) or not 1 <= f.round <= config.rounds:
        raise RecordError("serialised state names a seat or round that this match does not have")
    if f.trump_suit is not None and not 0 <= f.trump_suit < 4:
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
        *_, state = _replayed(self)  # (the one state, after the last move)
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
        if state.round != dealt and not state.is_finished:
            dealt = state.round
            fields = fields_of(state)
            yield DealtRound(
                state.round,
                state.dealer,
                tuple(codes_of(h) for h in fields.hands),
                None if fields.trump_card is None else CODES[fields.trump_card],
            )


def record_of(state: MatchState) -> MatchRecord:
    """The finished match's record: config, seed (and salt), every move (and so every hand)."""
    if not state.is_finished:
        raise RecordError("the full record (hands and seed) is available only once the match is finished")
    moves = tuple((entry >> 8, move_of_action(entry & 0xFF)) for entry in fields_of(state).log)
    return MatchRecord(state.config, state.seed, moves, state.scores, state.salt)

