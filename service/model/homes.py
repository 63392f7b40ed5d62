"""Match ids drawn for Redis Cluster's slots: every match's keys hash to one of ``HOMES``
slots, its home, where the service keeps beside it what one script writes with it (its
deadline, its place in the settlement queue, the live listing, its webhook calls). The key
names are ``service.store.keys``'s; this is only the arithmetic of ids and slots."""

from __future__ import annotations

import binascii
import secrets

#: how many homes the matches' queues and indexes are sharded into (never to change: match
#: ids are drawn for them)
HOMES = 64
SLOTS = 16384
HOME_STEP = SLOTS // HOMES
#: the hash tag of each home's keys: a string whose CRC16 is slot ``h * HOME_STEP``
HOME_TAGS = (
    'h12860', 'h13964', 'h3225', 'h2321', 'h20349', 'h40690', 'h11182', 'h10086', 'h4392', 'h5296', 'h26914',
    'h257', 'h5878', 'h12643', 'h43151', 'h15339', 'h3316', 'h2212', 'h12953', 'h5768', 'h8619', 'h23176',
    'h25508', 'h54090', 'h85', 'h364', 'h40980', 'h41884', 'h43062', 'h10578', 'h13674', 'h12770', 'h44280',
    'h24759', 'h14496', 'h9448', 'h4539', 'h107921', 'h3043', 'h2147', 'h13521', 'h12425', 'h7816', 'h6912',
    'h1686', 'h166931', 'h48638', 'h52998', 'h22214', 'h23310', 'h50480', 'h1996', 'h3170', 'h2074', 'h1378',
    'h69048', 'h7925', 'h6821', 'h13412', 'h12516', 'h38397', 'h102', 'h24849', 'h19019',
)
#: every home, then None: the unsharded keys of matches made before homes (one server only)
ALL_HOMES: tuple[int | None, ...] = (*range(HOMES), None)


def slot_of_tag(tag: str) -> int:
    """The Cluster slot of keys whose hash tag is ``tag`` (CRC16/XMODEM, Redis's rule)."""
    return binascii.crc_hqx(tag.encode(), 0) % SLOTS


def new_match_id() -> str:
    """A new match's id (16 hex digits), drawn so that its keys hash to a home's slot."""
    while True:
        found = _homed(secrets.token_hex(6), secrets.randbelow(1 << 16))
        if found is not None:
            return found


def homed_match_id(base: str) -> str:
    """The id of a match whose id is fixed by what makes it (a tournament's table, a
    challenge): ``base`` and the first 4 hex digits that put its keys in a home's slot, so
    that the same ``base`` always gives the same id."""
    found = _homed(f"{base}-", 0)
    assert found is not None, "one in 256 suffixes is homed: 65,536 never all miss"
    return found


def _homed(base: str, start: int) -> str | None:
    crc = binascii.crc_hqx(f"m:{base}".encode(), 0)
    for step in range(1 << 16):
        suffix = f"{(start + step) & 0xFFFF:04x}"
        if binascii.crc_hqx(suffix.encode(), crc) % HOME_STEP == 0:
            return base + suffix
    return None


def home_of_match(match_id: str) -> int | None:
    """The home of a match: the one its keys' slot is (None: a match made before homes)."""
    slot = slot_of_tag(f"m:{match_id}")
    return slot // HOME_STEP if slot % HOME_STEP == 0 else None


