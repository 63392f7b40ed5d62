"""Chance from a seed: a documented, version-stable algorithm anyone can re-run.

**The algorithm (version 1).**  Everything random in a match comes from byte streams
derived from the match seed ``S`` (a UTF-8 string) and a label ``L``:

    stream(S, L) = SHA-256(S ":" L ":" "0") || SHA-256(S ":" L ":" "1") || …

(the block counter written in decimal; ``:`` is a literal colon).  The stream is read as
big-endian unsigned 32-bit integers ``u``.  ``uniform(b)``, a number in ``0 … b-1``, takes
the next ``u`` until ``u < 2**32 - (2**32 mod b)`` (rejection keeps it exactly uniform)
and answers ``u mod b``.

- First dealer (when the match does not name one): ``uniform(players)`` from the stream
  with label ``dealer``.
- ``shuffle(cards)`` is the forward Fisher-Yates shuffle: for ``i`` from ``0`` to
  ``size-2``, ``j = i + uniform(size - i)`` and swap positions ``i`` and ``j``.  The first
  ``k`` cards of the result depend only on the first ``k`` draws, so the engine stops once
  it has the cards it deals (and the trump card); a full shuffle gives the same prefix.
- Round ``r``'s deck: the deck in canonical order (B1 … B13, G1 …, R1 …, Y1 …, then the
  Wizards, then the Jesters; the junior deck stops each suit at 8), shuffled from the
  stream with label ``round-r``.  Card ``k`` of the result goes to seat
  ``(dealer + 1 + k) mod players`` while ``k < r * players``; the next card, if any, is
  turned up for trump.
- ``SINGLE_SUIT``: in round ``r``, seat ``0``'s pile (its suit in rank order, then its
  Wizard, then its Jester), then seat ``1``'s, … are each shuffled, in that order, from the
  one stream with label ``round-r`` (each pile fully, 14 draws); every seat draws the first
  ``r + 3`` cards of its own pile.

**The commitment.**  At its start a match publishes ``seedHash``, the SHA-256 (hex) of
``salt ":" seed``, where the salt is lowercase hex drawn by the server; at its end it reveals
the seed and the salt, and anyone can check the hash (:func:`seed_hash`).  The salt only
hides the seed: the deals come from the seed alone.  A match without a salt (made before
salts existed, or by the engine without one) publishes the SHA-256 of the seed alone.

>>> shuffled(list(range(5)), "example", "round-1")
[3, 2, 4, 0, 1]
"""

from __future__ import annotations

import hashlib
import importlib
import struct
from collections.abc import Callable
from types import FunctionType
from typing import TYPE_CHECKING, Final, TypeVar, cast

if TYPE_CHECKING:
    # mypyc's native 64-bit int, in the annotations of locals only (never evaluated): the
    # engine needs no mypy_extensions at run time
    from mypy_extensions import i64

ALGORITHM_VERSION = 1
_BLOCK_WORDS = struct.Struct(">8I")
_LIMITS = [0] + [(1 << 32) - ((1 << 32) % b) for b in range(1, 256)]
#: the lowest rejection limit over the bounds 2 … size: a word below it is never rejected
_MIN_LIMIT = [0, 0] + [min(_LIMITS[2 : size + 1]) for size in range(2, 256)]
_WORDS = [struct.Struct(f">{8 * blocks}I") for blocks in range(33)]
_DECIMAL = [str(k).encode() for k in range(64)]
_FFF = b"\xff\xff\xff"
#: ``_COUNTERS[blocks]``: the block counters ``0 … blocks-1`` as the stream writes them
_COUNTERS = [tuple(_DECIMAL[:blocks]) for blocks in range(33)]


def _fastest_sha256() -> Callable[[bytes], hashlib._Hash]:
    """CPython's own SHA-256 where it has one (``_sha256``, ``_sha2`` from 3.12), else
    OpenSSL's: the same digests, and for a stream's many short messages the faster, since
    OpenSSL allocates and frees a context for every hash and every digest."""
    for name in ("_sha256", "_sha2"):
        try:
            return cast("Callable[[bytes], hashlib._Hash]", importlib.import_module(name).sha256)
        except (ImportError, AttributeError):
            continue
    return hashlib.sha256


_sha256 = _fastest_sha256()
#: ``digest`` of the objects ``_sha256`` makes, called through ``map``
_digest = type(_sha256(b"")).digest
#: what a shuffle moves: card ids, or (the playout) their bits; a type variable, not ``int``,
#: so that mypyc moves the objects as they are (an ``int`` is unboxed, then boxed again)
_Item = TypeVar("_Item")


def _probe() -> None: ...


#: whether mypyc compiled this module (its functions are then not Python functions), and so
#: the playout's: where the fastest code for a build differs, each takes its own (the same
#: results; tests/engine/test_compiled.py compares the builds)
MYPYC_COMPILED: Final = not isinstance(_probe, FunctionType)


def fresh_shuffle(prefix: bytes, items: list[_Item], stop: int) -> bytes | None:
    """Positions ``0 … stop-1`` of a forward Fisher-Yates of ``items`` (in place), drawn
    from a fresh ``stream`` whose blocks are ``SHA-256(prefix + counter)``, when no word
    the draws read is rejected: then every draw is ``word % bound``, and the blocks read
    (whole ones, ``stop`` words used) are returned.  Otherwise it returns None and
    leaves ``items`` as they were, for the word-by-word shuffle.  ``1 <= stop <= 255``,
    ``stop < len(items)``."""
    blocks = (stop + 7) >> 3
    # the blocks, hashed and joined in C
    data = b"".join(map(_digest, map(_sha256, map(prefix.__add__, _COUNTERS[blocks]))))
    # Every rejection limit is above 0xFFFFFF00, so a word that could be rejected
    # starts with three 0xFF bytes: without them, none is (a quick test before the exact
    # one). Compiled, each word's first bytes are read natively; Python searches the data
    # for the three in C, with ``find``: bytes' ``in`` first tries its operand as an int,
    # raising and clearing a TypeError every time (~2,500 instructions).
    if MYPYC_COMPILED:
        end: i64 = stop
        end *= 4
        k: i64 = 0
        while k < end and (data[k] != 0xFF or data[k + 1] != 0xFF or data[k + 2] != 0xFF):
            k += 4
        suspect = k < end
    else:
        suspect = data.find(_FFF) >= 0
    if suspect and max(_WORDS[blocks].unpack(data)[:stop]) >= _MIN_LIMIT[len(items)]:
        return None
    if MYPYC_COMPILED:
        # The words read from the bytes as native ints: struct's tuple would box each
        # one, to be unboxed again (a third of a compiled deal's time).
        bound: i64 = len(items)
        k = 0
        i: i64 = 0
        while i < stop:
            j = i + (data[k] << 24 | data[k + 1] << 16 | data[k + 2] << 8 | data[k + 3]) % bound
            items[i], items[j] = items[j], items[i]
            i += 1
            k += 4
            bound -= 1
    else:
        # (Python: struct's words, in C; zip without strict=: the first ends it)
        for i, word, bound in zip(range(stop), _WORDS[blocks].unpack(data), range(len(items), 0, -1)):  # noqa: B905
            j = i + word % bound
            items[i], items[j] = items[j], items[i]
    return data


class SeedStream:
    """The stream of 32-bit words of ``stream(seed, label)``, with ``uniform``."""

    __slots__ = ("_counter", "_pos", "_prefix", "_words")

    def __init__(self, seed: str, label: str):
        self._prefix = f"{seed}:{label}:".encode()
        self._counter = 0
        self._words: tuple[int, ...] = ()
        self._pos = 8

    def _next_word(self) -> int:
        if self._pos == 8:
            digest = _sha256(self._prefix + str(self._counter).encode()).digest()
            self._counter += 1
            self._words = _BLOCK_WORDS.unpack(digest)
            self._pos = 0
        word = self._words[self._pos]
        self._pos += 1
        return word

    def uniform(self, bound: int) -> int:
        """An exactly uniform whole number in ``0 … bound-1`` (``bound`` up to 255)."""
        limit = _LIMITS[bound]
        while True:
            word = self._next_word()
            if word < limit:
                return word % bound

    def shuffle(self, items: list[_Item], needed: int | None = None) -> list[_Item]:
        """Forward Fisher-Yates in place (and returned); with ``needed``, only the first
        ``needed`` positions are settled (the rest of the list is left part-shuffled)."""
        size = len(items)
        stop = size - 1 if needed is None else min(needed, size - 1)
        if stop <= 0:
            return items
        if self._counter == 0 and stop <= 255:
            # Fast path for a fresh stream: take all the words at once; when none of them
            # is high enough to be rejected, every draw is simply ``word % bound``.
            data = fresh_shuffle(self._prefix, items, stop)
            if data is not None:
                blocks = len(data) >> 5
                self._counter = blocks
                self._words = _BLOCK_WORDS.unpack(data[-32:])
                self._pos = 8 - (blocks * 8 - stop)
                return items
        for i in range(stop):
            bound = size - i
            limit = _LIMITS[bound]
            word = self._next_word()
            while word >= limit:
                word = self._next_word()
            j = i + word % bound
            items[i], items[j] = items[j], items[i]
        return items


def shuffled(items: list[int], seed: str, label: str) -> list[int]:
    return SeedStream(seed, label).shuffle(list(items))


def round_label(round_number: int) -> str:
    return f"round-{round_number}"


#: a salt is lowercase hex (so it holds no ``:`` and ``salt ":" seed`` splits one way only)
SALT_DIGITS = frozenset("0123456789abcdef")
MAX_SALT_LENGTH = 64


def seed_hash(seed: str, salt: str | None = None) -> str:
    """The ``seedHash`` a match publishes at its start, so that the seed it reveals at the end
    can be checked: the SHA-256 (hex) of ``salt ":" seed`` (UTF-8), or of the seed alone for
    a match without a salt (one made before salts, or by the engine without one).

    The salt, drawn by the server and revealed with the seed, is what keeps a seed its creator
    chose (``"1234"``) from being found by trying likely seeds against the hash.

    >>> seed_hash("1234") == hashlib.sha256(b"1234").hexdigest()
    True
    >>> seed_hash("1234", "00ff") == hashlib.sha256(b"00ff:1234").hexdigest()
    True
    """
    text = seed if salt is None else f"{salt}:{seed}"
    return hashlib.sha256(text.encode()).hexdigest()


def salt_problem(salt: object) -> str | None:
    """Why ``salt`` cannot be a match's salt (None: it can)."""
    if not isinstance(salt, str) or not 0 < len(salt) <= MAX_SALT_LENGTH or not SALT_DIGITS.issuperset(salt):
        return f"the salt must be 1 to {MAX_SALT_LENGTH} lowercase hex digits, not {salt!r}"
    return None
