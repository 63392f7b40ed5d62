"""The seed commitment: a match's ``seedHash`` is the SHA-256 of ``salt ":" seed`` (of the
seed alone without a salt), the salt changes no deal, it lives in the state, its bytes
and its record, and states serialised before salts (format 1) still load."""

from __future__ import annotations

import hashlib
import random

import pytest

from wizard import ConfigError, MatchConfig, MatchRecord, MatchState, Ruleset, new_match, seed_hash
from wizard.record import STATE_FORMAT, record_of, state_from_bytes, state_to_bytes

SALT = "9b1c" * 8


def played(state: MatchState, moves: int, rng_seed: int = 11) -> MatchState:
    rng = random.Random(rng_seed)
    for _ in range(moves):
        if state.is_finished:
            break
        seat = rng.choice(state.awaiting())
        state.apply(seat, rng.choice(state.legal_moves(seat)))
    return state


# ----------------------------------------------------------------------------- the hash


def test_the_published_hash_is_sha256_of_salt_colon_seed():
    state = new_match(MatchConfig.create("WIZARD", 4), "1234", SALT)
    assert state.seed_hash == hashlib.sha256(f"{SALT}:1234".encode()).hexdigest()
    assert state.seed_hash != hashlib.sha256(b"1234").hexdigest()
    assert state.view(None).seed_hash == state.seed_hash


def test_without_a_salt_the_hash_is_of_the_seed_alone():
    state = new_match(MatchConfig.create("WIZARD", 4), "1234")
    assert state.salt is None
    assert state.seed_hash == seed_hash("1234") == "03ac674216f3e15c761ee1a5e255f067953623c8b388b4459e13f978d7c846f4"


def test_the_documented_example():
    """The worked example of RULES.md and the README (`printf '%s' 'SALT:SEED' | sha256sum`)."""
    salt = "5f2b8c1d9e4a7f3608b1c2d3e4f5a6b7"
    assert seed_hash("1234", salt) == "3d7c1939a24e2bcb4cc3854d762a0e03e1a6b931b308fad7dbec9f6e570dd745"


def test_the_salt_changes_no_deal():
    config = MatchConfig.create("WIZARD", 5)
    plain, salted = new_match(config, "deals"), new_match(config, "deals", SALT)
    played(plain, 200)
    played(salted, 200)
    for seat in [None, *range(5)]:
        a, b = plain.view(seat), salted.view(seat)
        assert a.hand == b.hand and a.seats == b.seats and a.trump_card == b.trump_card
        assert a.seed_hash != b.seed_hash


@pytest.mark.parametrize("salt", ["", "ABCD", "a:b", "g0", "0" * 65, 1234, b"00"])
def test_a_malformed_salt_is_refused(salt):
    with pytest.raises(ConfigError, match="salt must be 1 to 64 lowercase hex digits"):
        new_match(MatchConfig.create("WIZARD", 3), "seed", salt)  # type: ignore[arg-type]


def test_the_salt_is_revealed_only_at_the_end_and_copies_keep_it():
    state = new_match(MatchConfig.create("WIZARD_JUNIOR", 3), "end", SALT)
    assert state.copy().salt == SALT
    while not state.is_finished:
        assert all(state.view(s).salt is None for s in [None, 0, 1, 2])
        played(state, 1, rng_seed=state.moves_made)
    assert all(state.view(s).salt == SALT and state.view(s).seed == "end" for s in [None, 0, 1, 2])
    assert state.view(None).to_dict()["salt"] == SALT


# ----------------------------------------------------------------------------- bytes


def test_salted_states_round_trip_through_bytes():
    state = played(new_match(MatchConfig.create("WIZARD", 4), "bytes", SALT), 30)
    data = state_to_bytes(state)
    assert data[3] == STATE_FORMAT == 2
    restored = state_from_bytes(data)
    assert restored.salt == SALT and restored.seed_hash == state.seed_hash
    assert state_to_bytes(restored) == data
    assert all(restored.view(s) == state.view(s) for s in [None, 0, 1, 2, 3])


#: states serialised by the engine before salts (format 1), each with how to build it again:
#: (ruleset, players, variants, seed, random moves made, stacked deals, first dealer)
_JUNIOR_DECK = [f"{s}{r}" for s in "BGRY" for r in range(1, 9)] + ["W", "W", "J", "J"]
random.Random(4).shuffle(_JUNIOR_DECK)
FORMAT_1 = [
    (
        ("WIZARD", 4, (), "v1-live", 40, None, None),
        "575a5301000400ff070076312d6c697665ff04000102013103010600000220000000140010000000840400000a0800400000000000"
        "008120400000000300030100000000d8ffffff1e000000f6ffffffecffffff0000010001380b1a0803010001000000010000000202"
        "02000000020003020101010028004102400341004001340229030000150142034000400142023a031a000e0139020800100113022003"
        "420040014302420328001f0133022f033a020f033700190138000b011a0208034001430241034300",
    ),
    (
        ("WIZARD_JUNIOR", 3, ("HIDDEN_BIDS",), "v1-finished", 10_000, None, None),
        "575a5301010302ff0b0076312d66696e6973686564ff08020103ff04000006000000000000000000000000000000000000000000000000"
        "000100060601010500000000000000020000000008000006053900021d213402002b2e290000071f0300002d142c0001381c0f0100201202"
        "0000130d0e010000130d0e080101000100000201020200000003010101010001030400000005010002030406030101040004070002050100"
        "060601018400410140024100030214002a014202420041011000020100022c00200104024102430140002e01120239002b011d021b000e02"
        "1c00290140004101430228022c002b0107000501200212000e010f021d001c0127024102450140003800070134021f0213002101"
        "1a012802290027012e0212002d02390020014302440046011b0135021f002d022c0021011e02010020010e00120113021d0214000601"
        "0d01040211004000440147020d02020011010001130207003902010003010f01350234002b022900280114021a002d01100227002c01"
        "4001460241000600050139021d00210134022b022e00290107001f0103022d0014012c0238001c010f0220011202020013000d010e02",
    ),
    (
        ("WIZARD_JUNIOR", 4, (), "v1-stacked", 12, [[], _JUNIOR_DECK], 2),
        "575a5301010400020a0076312d737461636b656402002427212012341e38292b13392e0f2a1f1c03050d10351a07010e1b11002c0204"
        "2d28061d1402030202002b0300060000000000800010000000004002000000000000000100000100000400000200000200000200000000"
        "010000000000000000000000000000000000010302040002070100010001000001000c00410340004101400204030000020107024200"
        "400140024203",
    ),
]


@pytest.mark.parametrize("recipe,hex_bytes", FORMAT_1, ids=[r[3] for r, _ in FORMAT_1])
def test_states_serialised_before_salts_still_load(recipe, hex_bytes):
    ruleset, n, variants, seed, moves, deals, first_dealer = recipe
    old = bytes.fromhex(hex_bytes)
    assert old[3] == 1
    loaded = state_from_bytes(old)
    again = played(new_match(MatchConfig.create(ruleset, n, variants, first_dealer, deals), seed), moves)
    assert loaded.salt is None and loaded.seed == seed
    assert loaded.seed_hash == hashlib.sha256(seed.encode()).hexdigest()  # the hash it published
    assert all(loaded.view(s) == again.view(s) for s in [None, *range(n)])
    assert loaded.scores == again.scores and loaded.moves_made == again.moves_made
    # written again, it is format 2 (no salt) and reads back the same
    rewritten = state_to_bytes(loaded)
    assert rewritten[3] == 2 and rewritten == state_to_bytes(again)
    assert state_from_bytes(rewritten).view(None) == loaded.view(None)
    if loaded.is_finished:
        assert record_of(loaded) == record_of(again) and record_of(loaded).salt is None


def test_a_state_format_1_byte_string_keeps_reading_after_a_format_2_one_of_the_same_match():
    """The decoded header is cached by its bytes and version: the two headers of one match
    (without and with the salt field) must not be mistaken for each other."""
    _recipe, hex_bytes = FORMAT_1[0]
    old = bytes.fromhex(hex_bytes)
    new = state_to_bytes(state_from_bytes(old))
    for data in (new, old, new, old):
        assert state_from_bytes(data).seed == "v1-live"


# ----------------------------------------------------------------------------- records


def test_a_salted_record_round_trips_and_replays():
    state = played(new_match(MatchConfig.create(Ruleset.WIZARD_JUNIOR, 3), "rec", SALT), 10_000)
    record = record_of(state)
    assert record.salt == SALT and record.seed_hash == state.seed_hash
    data = record.to_dict()
    assert data["format"] == 2 and data["salt"] == SALT
    again = MatchRecord.from_dict(data)
    assert again == record
    assert again.replay().seed_hash == state.seed_hash


def test_a_record_from_before_salts_still_reads():
    state = played(new_match(MatchConfig.create(Ruleset.WIZARD_JUNIOR, 3), "old-rec"), 10_000)
    data = record_of(state).to_dict()
    del data["salt"]
    data["format"] = 1
    record = MatchRecord.from_dict(data)
    assert record.salt is None and record.seed_hash == seed_hash("old-rec")
    assert record.replay().scores == state.scores
