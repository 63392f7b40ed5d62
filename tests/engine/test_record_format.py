"""The stored byte format of a match state is frozen: the bytes below are states as this
engine stores them (format 2) and as an earlier one stored them (format 1).

Live matches are kept in these bytes (the service writes them to Redis with every move),
so today's encoder must write exactly these bytes, and the decoder must read them, old
formats too, to the very same state.  A test here failing means stored matches would be
misread after a deploy: do not change the bytes; add a format version instead (how, in
wizard/record.py's docstring) and keep these literals as the old version's.

Each state is built the same way: seed "frozen", the first dealer seat 0, then seven moves,
each the seat first in ``awaiting()`` making its lowest legal action (round 1 over, round 2
under way).  Every ruleset and every variant is here alone, and some combinations.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from tests.engine.conftest import full_deck
from wizard import MatchConfig, MatchState, Phase, RecordError, Ruleset, Variant, new_match
from wizard.record import (
    PHASE_CODES,
    RULESET_CODES,
    STATE_FORMAT,
    STATE_FORMATS_READ,
    VARIANT_BITS,
    state_from_bytes,
    state_to_bytes,
)

SEED = "frozen"
MOVES = 7
#: the stacked deal of the stacked case: the junior deck in reverse canonical order
STACKED = [full_deck("JUNIOR")[::-1]]


class Stored(NamedTuple):
    ruleset: str
    players: int
    variants: tuple[str, ...]
    salt: str | None
    stacked: bool
    hex: str

    def build(self) -> MatchState:
        config = MatchConfig.create(
            self.ruleset, self.players, self.variants, first_dealer=0, deals=STACKED if self.stacked else None
        )
        state = new_match(config, SEED, self.salt)
        for _ in range(MOVES):
            seat = state.awaiting()[0]
            state.apply_action(seat, state.legal_actions(seat)[0])
        return state


#: format 2 (the current one): every ruleset, every variant alone, some combinations, a
#: salt, a stacked deal
FORMAT_2 = [
    Stored("WIZARD", 4, (), None, False, (
        "575a530200040000060066726f7a656e0000ff0100000200030001030204000000000000000000000000000000000000"
        "0000000000000000000000000000000000000000000000000000000000000000000000000003272b3100000007004001"
        "40024003400027012b023103"
    )),
    Stored("WIZARD_JUNIOR", 4, (), None, False, (
        "575a530201040000060066726f7a656e0000ff01000002000e0101030200000000000000010000000000000000000000"
        "00000000000000000000000000000000000000000000000000000000000000000000000000032a272c00000007004001"
        "4002400340002a0127022c03"
    )),
    Stored("WIZARD_JUNIOR_CLASSIC", 3, (), None, False, (
        "575a530202030000060066726f7a656e0000ff0201000100100100060000800000004000000000100080000000400000"
        "4000000000ffff00000000f6ffffff140000001400000000000101002a272c0100000001000007004001400240002a01"
        "27022c004002"
    )),
    Stored("WIZARD", 4, ("PLUS_MINUS_ONE",), None, False, (
        "575a530200040100060066726f7a656e0000ff0100000200030001030204000000000000000000000000000000000000"
        "0000000000000000000000000000000000000000000000000000000000000000000000000003272b3100000007004001"
        "40024003400027012b023103"
    )),
    Stored("WIZARD", 4, ("HIDDEN_BIDS",), None, False, (
        "575a530200040200060066726f7a656e0000ff0100000200030001030204000000000000000000000000000000000000"
        "0000000000000000000000000000000000000000000000000000000000000000000000000003272b3100000007004000"
        "40014002400327012b023103"
    )),
    Stored("WIZARD", 4, ("SECRET_BIDS",), None, False, (
        "575a530200040400060066726f7a656e0000ff0100000200030001030204000000000000000000000000000000000000"
        "0000000000000000000000000000000000000000000000000000000000000000000000000003272b3100000007004000"
        "40014002400327012b023103"
    )),
    Stored("WIZARD", 4, ("CLAIRVOYANCE",), None, False, (
        "575a530200040800060066726f7a656e0000ff0201000101080000060008000000040000000000200000800000000000"
        "8000004000000000000100000800ff000000000000f6ffffff1400000014000000140000000000010100272b31020100"
        "0000000100000007004001400240034000400240034000"
    )),
    Stored("WIZARD", 4, ("SINGLE_SUIT",), None, False, (
        "575a530200041000060066726f7a656e0000ff0100000200ffff01040080060000000010000000080100002000000000"
        "50010000000000000000000508000000000000000000000000000000000000000000000000030f1b2900000007004001"
        "4002400340000f011b022903"
    )),
    Stored("WIZARD", 5, ("PLUS_MINUS_ONE", "CLAIRVOYANCE"), None, False, (
        "575a530200050900060066726f7a656e0000ff02010001031a0200060000010000008000000000008200000000000000"
        "000100400008000000000000080000200004000000ffff00ffff0000000000f6ffffff14000000140000001400000014"
        "0000000000010100272b310203010000000000010000000007003c00400140024003400440004002"
    )),
    Stored("WIZARD", 3, ("HIDDEN_BIDS", "SINGLE_SUIT"), None, False, (
        "575a530200031200060066726f7a656e0000ff0100000201ffff00040000040000000010000000080100002000000000"
        "500100000000000001000000000000000000000000000001090101000f1b070101000f1b070007004000400140020f01"
        "1b0207000900"
    )),
    Stored("WIZARD_JUNIOR", 6, ("SECRET_BIDS", "CLAIRVOYANCE"), None, False, (
        "575a530201060c00060066726f7a656e0000ff02010001ff040005060000000000014000000000140000000000400001"
        "000000000000c00000000000000000000480000000000000400008000000ffffffffff00000000000001000000010000"
        "000100000001000000010000000000000000000101052a272c380e000100000000000000000000000107004000400140"
        "024003400440054000"
    )),
    Stored("WIZARD", 4, ("PLUS_MINUS_ONE",), "0123456789abcdef0123456789abcdef", False, (
        "575a530200040100060066726f7a656e2000303132333435363738396162636465663031323334353637383961626364"
        "6566ff010000020003000103020400000000000000000000000000000000000000000000000000000000000000000000"
        "00000000000000000000000000000000000000000003272b310000000700400140024003400027012b023103"
    )),
    Stored("WIZARD_JUNIOR", 4, (), None, True, (
        "575a530201040000060066726f7a656e00000124383934352e2d2c2b2a29282721201f1e1d1c1b1a14131211100f0e0d"
        "070605040302010001000002002e03010402000000000000200000000000000000000000000000000000000000000000"
        "000000000000000000000000000000000000000000000000000003383934000000070040014002400340003801390234"
        "03"
    )),
]
#: format 1 (before salts): FORMAT_2[0] as it was stored then
FORMAT_1_WIZARD_4 = (
    "575a530100040000060066726f7a656eff01000002000300010302040000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000003272b31000000070040014002"
    "4003400027012b023103"
)


def _label(stored: Stored) -> str:
    return "-".join([stored.ruleset, str(stored.players), *stored.variants, *(["salt"] if stored.salt else []),
                     *(["stacked"] if stored.stacked else [])])


def test_the_current_format_is_the_one_these_bytes_are_in() -> None:
    assert STATE_FORMAT == 2 and STATE_FORMATS_READ == (1, 2)


def test_every_ruleset_and_variant_is_stored_above() -> None:
    assert {Ruleset(s.ruleset) for s in FORMAT_2} == set(Ruleset)
    alone = {s.variants[0] for s in FORMAT_2 if len(s.variants) == 1}
    assert alone == {v.value for v in Variant}


def test_every_ruleset_variant_and_phase_has_its_own_fixed_code() -> None:
    """A member without a code could not be stored; two members with one code would be misread."""
    assert set(RULESET_CODES) == set(Ruleset) and len(set(RULESET_CODES.values())) == len(Ruleset)
    assert set(PHASE_CODES) == set(Phase) and len(set(PHASE_CODES.values())) == len(Phase)
    assert set(VARIANT_BITS) == set(Variant)
    bits = list(VARIANT_BITS.values())
    assert all(b > 0 and b & (b - 1) == 0 for b in bits) and len(set(bits)) == len(bits)
    # the codes already in stored matches, for good
    assert [RULESET_CODES[Ruleset(r)] for r in ("WIZARD", "WIZARD_JUNIOR", "WIZARD_JUNIOR_CLASSIC")] == [0, 1, 2]
    assert [PHASE_CODES[Phase(p)] for p in ("CHOOSE_TRUMP", "BID", "PLAY", "FINISHED")] == [0, 1, 2, 3]
    assert [VARIANT_BITS[Variant(v)] for v in ("PLUS_MINUS_ONE", "HIDDEN_BIDS", "SECRET_BIDS", "CLAIRVOYANCE", "SINGLE_SUIT")] == [
        1, 2, 4, 8, 16
    ]


@pytest.mark.parametrize("stored", FORMAT_2, ids=_label)
def test_the_encoder_writes_exactly_the_stored_bytes(stored: Stored) -> None:
    assert state_to_bytes(stored.build()).hex() == stored.hex


@pytest.mark.parametrize("stored", FORMAT_2, ids=_label)
def test_the_stored_bytes_read_to_the_same_state(stored: Stored) -> None:
    expected = stored.build()
    state = state_from_bytes(bytes.fromhex(stored.hex))
    assert state.config == expected.config and (state.seed, state.salt) == (SEED, stored.salt)
    for seat in [None, *range(expected.players)]:
        assert state.view(seat) == expected.view(seat)
    assert state_to_bytes(state).hex() == stored.hex
    seat = state.awaiting()[0]  # and it plays on as the original does
    for s in (state, expected):
        s.apply_action(seat, s.legal_actions(seat)[-1])
    assert state_to_bytes(state) == state_to_bytes(expected)


def test_format_1_bytes_still_read_and_are_rewritten_in_the_current_format() -> None:
    state = state_from_bytes(bytes.fromhex(FORMAT_1_WIZARD_4))
    assert state.salt is None
    assert state_to_bytes(state).hex() == FORMAT_2[0].hex


def test_an_unknown_ruleset_variant_or_phase_code_is_refused() -> None:
    data = bytes.fromhex(FORMAT_2[0].hex)
    for position, value in ((4, 3), (6, 1 << 5)):  # the ruleset code, the variant bits
        with pytest.raises(RecordError, match="malformed header"):
            state_from_bytes(data[:position] + bytes([value]) + data[position + 1 :])
    # magic and version, ruleset to first dealer, the seed, no salt, no deals; round, dealer, first dealer
    phase = 4 + 4 + 2 + len(SEED) + 2 + 1 + 3
    with pytest.raises(RecordError, match="phase"):
        state_from_bytes(data[:phase] + bytes([4]) + data[phase + 1 :])
