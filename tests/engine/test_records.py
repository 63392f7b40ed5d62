"""Match records and serialised states: only finished matches have a record; a record
replays to the same scores and the same dealt hands; any tampering, malformed record or
corrupt byte string is refused with RecordError; and every deal can be recomputed from the
seed published at the end (whose SHA-256 was published at the start), following the
algorithm documented in wizard/shuffle.py, implemented here again independently.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import struct
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wizard import MatchConfig, MatchRecord, MatchState, Move, Phase, RecordError, Ruleset, Variant, new_match
from wizard.playout import playout
from wizard.record import record_of, state_from_bytes, state_to_bytes

V = Variant

CONFIGS = [
    (Ruleset.WIZARD, 4, ()),
    (Ruleset.WIZARD, 3, (V.SECRET_BIDS, V.CLAIRVOYANCE)),
    (Ruleset.WIZARD, 4, (V.HIDDEN_BIDS, V.SINGLE_SUIT)),
    (Ruleset.WIZARD, 3, (V.PLUS_MINUS_ONE, V.SINGLE_SUIT)),
    (Ruleset.WIZARD, 6, (V.PLUS_MINUS_ONE, V.CLAIRVOYANCE)),
    (Ruleset.WIZARD_JUNIOR, 5, (V.HIDDEN_BIDS,)),
    (Ruleset.WIZARD_JUNIOR, 6, (V.CLAIRVOYANCE,)),
    (Ruleset.WIZARD_JUNIOR_CLASSIC, 5, (V.PLUS_MINUS_ONE,)),
    (Ruleset.WIZARD_JUNIOR_CLASSIC, 3, (V.SECRET_BIDS,)),
]


def label(c) -> str:
    return f"{c[0].value}-{c[1]}-" + ("+".join(v.value for v in c[2]) or "plain")


def deck_codes(ruleset: Ruleset) -> list[str]:
    top, specials = (13, 4) if ruleset is Ruleset.WIZARD else (8, 2)
    return [f"{s}{r}" for s in "BGRY" for r in range(1, top + 1)] + ["W"] * specials + ["J"] * specials


def canonical(hand) -> tuple[str, ...]:
    order = {c: i for i, c in enumerate(dict.fromkeys(deck_codes(Ruleset.WIZARD)))}
    return tuple(sorted(hand, key=order.__getitem__))


class Played:
    """A random match played to its end, with what the views showed at every round start."""

    def __init__(self, config: MatchConfig, seed: str, rng_seed: int = 0):
        self.config, self.seed = config, seed
        self.state = state = new_match(config, seed=seed)
        self.published_hash = state.view(None).seed_hash
        self.rounds: list[dict] = []
        rng = random.Random(rng_seed)
        self._capture()
        while not state.is_finished:
            assert state.view(None).seed is None
            seat = rng.choice(state.awaiting())
            r = state.round
            state.apply(seat, rng.choice(state.legal_moves(seat)))
            if state.round != r and not state.is_finished:
                self._capture()

    def _capture(self) -> None:
        state, n = self.state, self.state.players
        hands = []
        for s in range(n):
            seen_by = (s + 1) % n if self.config.clairvoyant(state.round) else s
            hands.append(state.view(seen_by).seats[s].hand)
        spec = state.view(None)
        self.rounds.append({"round": spec.round, "dealer": spec.dealer, "hands": hands, "trump": spec.trump_card})


@pytest.fixture(scope="module", params=CONFIGS, ids=label)
def played(request) -> Played:
    ruleset, n, variants = request.param
    return Played(MatchConfig.create(ruleset, n, variants), seed=f"records-{label(request.param)}", rng_seed=7)


def json_copy(data: dict) -> dict:
    return json.loads(json.dumps(data))


# ----------------------------------------------------------------------------- record when finished


def test_record_only_once_the_match_is_finished() -> None:
    state = new_match(MatchConfig.create(Ruleset.WIZARD, 4), seed="unfinished")
    rng = random.Random(3)
    for moves in range(200):
        if moves in (0, 1, 7, 50, 199):
            with pytest.raises(RecordError, match="finished"):
                record_of(state)
        seat = rng.choice(state.awaiting())
        state.apply(seat, rng.choice(state.legal_moves(seat)))
    assert not state.is_finished
    with pytest.raises(RecordError, match="finished"):
        record_of(state)
    playout(state, rng)
    assert record_of(state).scores == state.scores


def test_replay_reproduces_scores_and_every_dealt_hand(played: Played) -> None:
    state = played.state
    record = record_of(state)
    assert record.seed == played.seed and record.config == played.config
    assert record.scores == state.scores
    assert len(record.moves) == state.moves_made
    replayed = record.replay()
    assert replayed.scores == state.scores and replayed.is_finished
    for seat in [None, *range(state.players)]:
        assert replayed.view(seat) == state.view(seat)
    dealt = record.dealt_rounds()
    assert len(dealt) == played.config.rounds == len(played.rounds)
    for d, seen in zip(dealt, played.rounds, strict=True):
        assert d.round == seen["round"] and d.dealer == seen["dealer"]
        assert d.trump_card == seen["trump"]
        assert [canonical(h) for h in d.hands] == [canonical(h) for h in seen["hands"]], f"round {d.round}"
    data = record.to_dict()
    assert [r["hands"] for r in data["rounds"]] == [[list(h) for h in d.hands] for d in dealt]
    assert [r["trumpCard"] for r in data["rounds"]] == [s["trump"] for s in played.rounds]
    # and the JSON form reads back to the same record
    again = MatchRecord.from_dict(json_copy(data))
    assert again == record
    assert again.replay().scores == state.scores


# ----------------------------------------------------------------------------- tampering


def _first_index(record: MatchRecord, kind: str, start: int = 0) -> int:
    return next(i for i, (_, m) in enumerate(record.moves) if i >= start and getattr(m, kind) is not None)


def test_tampered_card_move_is_refused_with_a_clear_message(played: Played) -> None:
    record = record_of(played.state)
    data = record.to_dict()
    i = _first_index(record, "card", start=len(record.moves) // 2)
    seat = data["moves"][i]["seat"]
    replay = new_match(record.config, record.seed)
    for s, m in record.moves[:i]:
        replay.apply(s, m)
    # a card the seat was not dealt this round
    held = set(record.dealt_rounds()[replay.round - 1].hands[seat])
    data["moves"][i]["card"] = next(c for c in deck_codes(Ruleset.WIZARD) if c not in held)
    with pytest.raises(RecordError) as caught:
        MatchRecord.from_dict(json_copy(data)).replay()
    message = str(caught.value)
    assert f"move {i}" in message and "does not replay" in message, message


def test_tampered_bid_is_refused(played: Played) -> None:
    """A bid changed so that the seat's points for the round change (made <-> missed)."""
    record = record_of(played.state)
    data = record.to_dict()
    i = _first_index(record, "bid", start=len(record.moves) // 3)
    seat, move = record.moves[i]
    replay = new_match(record.config, record.seed)
    for s, m in record.moves[:i]:
        replay.apply(s, m)
    tricks = played.state.view(None).round_results[replay.round - 1].seats[seat].tricks
    data["moves"][i]["bid"] = tricks if move.bid != tricks else (tricks + 1 if tricks == 0 else tricks - 1)
    with pytest.raises(RecordError) as caught:
        MatchRecord.from_dict(json_copy(data)).replay()
    assert "does not replay" in str(caught.value) or "scores" in str(caught.value), str(caught.value)


def test_other_legal_move_is_refused(played: Played) -> None:
    """Swap one card play for another card the seat could have played: the rest no longer fits."""
    record = record_of(played.state)
    state = new_match(record.config, record.seed)
    for i, (seat, move) in enumerate(record.moves):
        others = [m for m in state.legal_moves(seat) if m != move and m.card is not None]
        if others and i > len(record.moves) // 2:
            moves = list(record.moves)
            moves[i] = (seat, others[0])
            tampered = MatchRecord(record.config, record.seed, tuple(moves), record.scores)
            with pytest.raises(RecordError):
                tampered.replay()
            return
        state.apply(seat, move)
    pytest.skip("no move had an alternative")


def test_tampered_seed_is_refused(played: Played) -> None:
    data = record_of(played.state).to_dict()
    data["seed"] = data["seed"] + "x"
    with pytest.raises(RecordError) as caught:
        MatchRecord.from_dict(json_copy(data)).replay()
    assert "does not replay" in str(caught.value) or "scores" in str(caught.value)


@pytest.mark.parametrize("how", ["one seat", "all seats", "swap"])
def test_tampered_score_is_refused(played: Played, how: str) -> None:
    data = record_of(played.state).to_dict()
    scores = list(data["scores"])
    if how == "one seat":
        scores[1] += 10
    elif how == "all seats":
        scores = [s + 1 for s in scores]
    else:
        scores = scores[::-1] if scores != scores[::-1] else [s + 1 for s in scores]
    data["scores"] = scores
    with pytest.raises(RecordError) as caught:
        MatchRecord.from_dict(json_copy(data)).replay()
    message = str(caught.value)
    assert "scores" in message and str(tuple(scores)) in message, message


def test_tampered_config_is_refused(played: Played) -> None:
    data = record_of(played.state).to_dict()
    n = data["config"]["players"]
    first = played.rounds[0]["dealer"]
    data["config"]["firstDealer"] = (first + 1) % n
    with pytest.raises(RecordError):
        MatchRecord.from_dict(json_copy(data)).replay()


def test_extra_or_reordered_moves_are_refused(played: Played) -> None:
    record = record_of(played.state)
    extra = MatchRecord(record.config, record.seed, record.moves + (record.moves[-1],), record.scores)
    with pytest.raises(RecordError, match="does not replay"):
        extra.replay()
    moves = list(record.moves)
    i = _first_index(record, "card", start=len(moves) // 2)
    moves[i], moves[i + 1] = moves[i + 1], moves[i]
    with pytest.raises(RecordError):
        MatchRecord(record.config, record.seed, tuple(moves), record.scores).replay()


def test_truncated_record_is_refused(played: Played) -> None:
    record = record_of(played.state)
    for cut in (1, 2, len(record.moves) // 2):
        short = MatchRecord(record.config, record.seed, record.moves[:-cut], record.scores)
        prefix = new_match(record.config, record.seed)
        for seat, move in short.moves:
            prefix.apply(seat, move)
        if prefix.scores == record.scores:
            continue  # the missing moves scored nothing: see the truncated-record test below
        with pytest.raises(RecordError, match="scores"):
            short.replay()


def _chips_match_whose_last_round_scores_nothing() -> MatchState:
    for i in range(500):
        state = new_match(MatchConfig.create(Ruleset.WIZARD_JUNIOR, 3), seed=f"chips-{i}")
        rng = random.Random(i)
        while not state.is_finished:
            seat = rng.choice(state.awaiting())
            state.apply(seat, rng.choice(state.legal_moves(seat)))
        if all(x.points == 0 for x in state.view(None).round_results[-1].seats):
            return state
    raise AssertionError("no such match found")


def test_truncated_record_is_refused_even_when_the_scores_agree() -> None:
    state = _chips_match_whose_last_round_scores_nothing()
    record = record_of(state)
    short = MatchRecord(record.config, record.seed, record.moves[:-1], record.scores)
    with pytest.raises(RecordError):
        short.replay()


# ----------------------------------------------------------------------------- malformed records


def _valid_dict() -> dict:
    state = new_match(MatchConfig.create(Ruleset.WIZARD_JUNIOR, 3), seed="malformed")
    playout(state, random.Random(1))
    return record_of(state).to_dict()


def _malformed() -> Iterator[tuple[str, object]]:
    base = _valid_dict()

    def edit(fn) -> dict:
        d = copy.deepcopy(base)
        fn(d)
        return d

    yield "not a dict", ["format", 1]
    yield "None", None
    yield "empty", {}
    yield "no format", edit(lambda d: d.pop("format"))
    yield "format 3", edit(lambda d: d.update(format=3))
    yield "format true", edit(lambda d: d.update(format=True))
    yield "salt not hex", edit(lambda d: d.update(salt="not:hex"))
    yield "salt empty", edit(lambda d: d.update(salt=""))
    yield "salt not text", edit(lambda d: d.update(salt=1234))
    yield "format as text", edit(lambda d: d.update(format="1"))
    yield "no config", edit(lambda d: d.pop("config"))
    yield "config not a dict", edit(lambda d: d.update(config="WIZARD"))
    yield "no ruleset", edit(lambda d: d["config"].pop("ruleset"))
    yield "unknown ruleset", edit(lambda d: d["config"].update(ruleset="POKER"))
    yield "2 players", edit(lambda d: d["config"].update(players=2))
    yield "players as text", edit(lambda d: d["config"].update(players="3"))
    yield "unknown variant", edit(lambda d: d["config"].update(variants=["DOUBLE_TRUMP"]))
    yield "conflicting variants", edit(lambda d: d["config"].update(variants=["HIDDEN_BIDS", "SECRET_BIDS"]))
    yield "first dealer out of range", edit(lambda d: d["config"].update(firstDealer=3))
    yield "no seed", edit(lambda d: d.pop("seed"))
    yield "no moves", edit(lambda d: d.pop("moves"))
    yield "moves not a list", edit(lambda d: d.update(moves=5))
    yield "move not a dict", edit(lambda d: d["moves"].__setitem__(0, "bid 1"))
    yield "move without seat", edit(lambda d: d["moves"][0].pop("seat"))
    yield "seat as word", edit(lambda d: d["moves"][0].update(seat="north"))
    yield "move with two fields", edit(lambda d: d["moves"][0].update(card="W"))
    yield "move with no field", edit(lambda d: d["moves"].__setitem__(0, {"seat": 0}))
    yield "move with unknown field", edit(lambda d: d["moves"][0].update(pass_=True))
    yield "bid as text", edit(lambda d: d["moves"][0].update(bid="one"))
    yield "unknown card", edit(lambda d: d["moves"][-1].update(card="X1"))
    yield "unknown trump", edit(lambda d: d["moves"].__setitem__(0, {"seat": 0, "trump": "PURPLE"}))
    yield "scores not numbers", edit(lambda d: d.update(scores=["a", "b", "c"]))
    yield "scores not a list", edit(lambda d: d.update(scores=7))


MALFORMED = list(_malformed())


@pytest.mark.parametrize("case", MALFORMED, ids=[name for name, _ in MALFORMED])
def test_malformed_record_dict_is_refused(case) -> None:
    _, data = case
    with pytest.raises(RecordError) as caught:
        MatchRecord.from_dict(data)  # type: ignore[arg-type]
    assert str(caught.value), "the error says what is wrong"


@pytest.mark.parametrize(
    "name,change",
    [
        ("stacked deal too short", lambda d: d["config"].update(deals=[["B1", "B2"]])),
        ("stacked deal bad card", lambda d: d["config"].update(deals=[["Z9"] * 36])),
        ("empty seed", lambda d: d.update(seed="")),
    ],
    ids=["stacked deal too short", "stacked deal bad card", "empty seed"],
)
def test_record_with_a_deal_or_seed_new_match_refuses_raises_record_error(name, change) -> None:
    data = _valid_dict()
    change(data)
    with pytest.raises(RecordError):
        MatchRecord.from_dict(data).replay()


def test_the_valid_dict_used_above_is_valid() -> None:
    record = MatchRecord.from_dict(_valid_dict())
    assert record.replay().is_finished


# ----------------------------------------------------------------------------- serialised states


def _some_bytes() -> list[bytes]:
    out = []
    for ruleset, n, variants in CONFIGS[:4]:
        state = new_match(MatchConfig.create(ruleset, n, variants), seed="bytes")
        rng = random.Random(2)
        out.append(state_to_bytes(state))
        for _ in range(25):
            seat = rng.choice(state.awaiting())
            state.apply(seat, rng.choice(state.legal_moves(seat)))
        out.append(state_to_bytes(state))
    return out


SOME_BYTES = _some_bytes()


@pytest.mark.parametrize(
    "data",
    [b"", b"W", b"WZS", b"WZS\x01", b"garbage", b"\x00" * 100, b"\xff" * 2048, b"WZS\x01 not bytes"],
)
def test_garbage_bytes_are_refused(data: bytes) -> None:
    with pytest.raises(RecordError):
        state_from_bytes(data)


def test_every_truncation_is_refused() -> None:
    for data in SOME_BYTES:
        for cut in range(len(data)):
            with pytest.raises(RecordError):
                state_from_bytes(data[:cut])


def test_wrong_version_magic_and_trailing_bytes_are_refused() -> None:
    data = SOME_BYTES[1]
    assert state_to_bytes(state_from_bytes(data)) == data
    for version in (0, 3, 255):
        with pytest.raises(RecordError, match="format"):
            state_from_bytes(data[:3] + bytes([version]) + data[4:])
    with pytest.raises(RecordError):
        state_from_bytes(b"WZT" + data[3:])
    with pytest.raises(RecordError, match="trailing"):
        state_from_bytes(data + b"\x00")


def test_states_with_stacked_deals_round_trip() -> None:
    deck = [f"{s}{r}" for s in "BGRY" for r in range(1, 9)] + ["W", "W", "J", "J"]
    random.Random(4).shuffle(deck)
    config = MatchConfig.create(Ruleset.WIZARD_JUNIOR, 4, (), first_dealer=2, deals=[[], deck, []])
    state = new_match(config, seed="stacked")
    rng = random.Random(4)
    while state.round < 4:
        data = state_to_bytes(state)
        restored = state_from_bytes(data)
        assert state_to_bytes(restored) == data and restored.config == config
        assert all(restored.view(s) == state.view(s) for s in [None, 0, 1, 2, 3])
        seat = rng.choice(state.awaiting())
        state.apply(seat, rng.choice(state.legal_moves(seat)))


@pytest.mark.parametrize("field,offset,value", [("ruleset", 4, 9), ("players", 5, 2), ("players", 5, 7), ("variants", 6, 0b110)])
def test_impossible_header_is_refused(field: str, offset: int, value: int) -> None:
    data = bytearray(SOME_BYTES[0])
    data[offset] = value
    with pytest.raises(RecordError):
        state_from_bytes(bytes(data))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_corrupted_bytes_raise_record_error_or_load(data) -> None:
    """Flipping bytes never makes from_bytes fail with anything but RecordError."""
    raw = bytearray(data.draw(st.sampled_from(SOME_BYTES)))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    try:
        state_from_bytes(bytes(raw))
    except RecordError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_random_bytes_after_a_good_header_raise_record_error_or_load(tail: bytes) -> None:
    try:
        state_from_bytes(SOME_BYTES[0][:4] + tail)
    except RecordError:
        pass


# ----------------------------------------------------------------------------- deals from the seed


def _words(seed: str, label: str) -> Iterator[int]:
    counter = 0
    while True:
        digest = hashlib.sha256(f"{seed}:{label}:{counter}".encode()).digest()
        yield from struct.unpack(">8I", digest)
        counter += 1


class Stream:
    """stream(S, L) as wizard/shuffle.py documents it, written again from the text."""

    def __init__(self, seed: str, label: str):
        self.words = _words(seed, label)

    def uniform(self, bound: int) -> int:
        limit = 2**32 - (2**32 % bound)
        while True:
            u = next(self.words)
            if u < limit:
                return u % bound

    def shuffle(self, items: list) -> list:
        items = list(items)
        for i in range(len(items) - 1):
            j = i + self.uniform(len(items) - i)
            items[i], items[j] = items[j], items[i]
        return items


def recompute_deals(config: MatchConfig, seed: str) -> list[dict]:
    """Every round's dealer, hands and turned card, from the seed alone."""
    n = config.players
    first = config.first_dealer if config.first_dealer is not None else Stream(seed, "dealer").uniform(n)
    single = V.SINGLE_SUIT in config.variants
    out = []
    for r in range(1, config.rounds + 1):
        dealer = (first + r - 1) % n
        stream = Stream(seed, f"round-{r}")
        if single:
            size = r + 3
            piles = [stream.shuffle([f"{'BGRY'[s]}{k}" for k in range(1, 14)] + ["W", "J"]) for s in range(n)]
            hands = [piles[s][:size] for s in range(n)]
            trump = None
        else:
            deck = stream.shuffle(deck_codes(config.ruleset))
            hands = [[] for _ in range(n)]
            for k in range(r * n):
                hands[(dealer + 1 + k) % n].append(deck[k])
            trump = deck[r * n] if r * n < len(deck) else None
        out.append({"round": r, "dealer": dealer, "hands": [canonical(h) for h in hands], "trump": trump})
    return out


def test_shuffle_matches_the_documented_example() -> None:
    assert Stream("example", "round-1").shuffle(list(range(5))) == [3, 2, 4, 0, 1]


def test_deals_recomputed_from_the_published_seed_match_what_was_dealt(played: Played) -> None:
    state = played.state
    seed = state.view(None).seed
    assert seed == played.seed, "the seed is published once the match is over"
    assert hashlib.sha256(seed.encode()).hexdigest() == played.published_hash, "seed_hash, published at the start"
    expected = recompute_deals(played.config, seed)
    seen = [
        {"round": s["round"], "dealer": s["dealer"], "hands": [canonical(h) for h in s["hands"]], "trump": s["trump"]}
        for s in played.rounds
    ]
    assert seen == expected, "the views showed other hands than the seed deals"
    recorded = [
        {"round": d.round, "dealer": d.dealer, "hands": [canonical(h) for h in d.hands], "trump": d.trump_card}
        for d in record_of(state).dealt_rounds()
    ]
    assert recorded == expected


@settings(max_examples=30, deadline=None)
@given(
    config=st.sampled_from([MatchConfig.create(r, n, v) for r, n, v in CONFIGS]),
    seed=st.text(min_size=1, max_size=30),
)
def test_first_deals_follow_from_any_seed(config: MatchConfig, seed: str) -> None:
    state = new_match(config, seed=seed)
    expected = recompute_deals(config, seed)[0]
    assert state.dealer == expected["dealer"]
    assert state.view(None).trump_card == expected["trump"]
    assert state.view(None).seed_hash == hashlib.sha256(seed.encode()).hexdigest()
    n = config.players
    for s in range(n):
        seen_by = (s + 1) % n if config.clairvoyant(1) else s
        assert canonical(state.view(seen_by).seats[s].hand) == expected["hands"][s]
    if state.phase is Phase.CHOOSE_TRUMP:
        state.apply(state.dealer, Move(trump=0))
    assert state.phase is Phase.BID
    assert Counter(expected["hands"][0]) <= Counter(deck_codes(config.ruleset))


def test_record_with_tampered_dealt_hands_is_refused() -> None:
    data = _valid_dict()
    first = data["rounds"][0]["hands"]
    first[0], first[1] = first[1], first[0]
    with pytest.raises(RecordError, match="dealt hands"):
        MatchRecord.from_dict(data)


@pytest.mark.parametrize(
    "change",
    [lambda d: d.update(seed=12345), lambda d: d.update(scores=[1.5] + d["scores"][1:]), lambda d: d["moves"][0].update(seat="0")],
    ids=["seed not a string", "fractional score", "seat as a string"],
)
def test_record_with_wrong_types_is_refused(change) -> None:
    data = _valid_dict()
    change(data)
    with pytest.raises(RecordError):
        MatchRecord.from_dict(data)


def test_state_bytes_with_a_card_outside_the_deck_are_refused() -> None:
    import random

    from wizard import MatchConfig, new_match

    state = new_match(MatchConfig.create("WIZARD_JUNIOR", 4), seed="corrupt")
    while state.round < 3 or not state.view(None).completed_tricks:
        seat = state.awaiting()[0]
        state.apply_action(seat, random.Random(seat).choice(state.legal_actions(seat)))
    data = bytearray(state_to_bytes(state))
    good = state_from_bytes(bytes(data))
    assert state_to_bytes(good) == state_to_bytes(state)
    trick = state.view(None).completed_tricks[0]
    # the first card of the first finished trick, as stored: find and corrupt it
    from wizard.cards import CODE_MASK

    card_id = (CODE_MASK[trick.plays[0].card] & -CODE_MASK[trick.plays[0].card]).bit_length() - 1
    pos = bytes(data).index(bytes([trick.leader, trick.winner, card_id]))
    data[pos + 2] = 200
    with pytest.raises(RecordError, match="not in this match's deck"):
        state_from_bytes(bytes(data))


def test_a_view_of_copies_that_went_separate_ways_shows_each_its_own_round_results() -> None:
    """A state keeps its finished rounds' views and its copies share them (the view builds
    only the new ones): after a copy, two states that play on differently must each show their
    own results, as a state read afresh from its bytes does."""
    config = MatchConfig.create("WIZARD", 3)
    state = new_match(config, "separate-ways")
    rng = random.Random(5)

    def play_round(s: MatchState, rng: random.Random) -> None:
        start = s.round
        while s.round == start and not s.is_finished:
            seat = s.awaiting()[0]
            s.apply(seat, rng.choice(s.legal_moves(seat)))

    for _ in range(3):
        play_round(state, rng)
    assert len(state.view(0).round_results) == 3  # (kept with the state from here)
    other = state.copy()
    for _ in range(2):
        play_round(state, random.Random(1))
        play_round(other, random.Random(2))
        for s in (state, other):
            assert s.view(1).round_results == state_from_bytes(state_to_bytes(s)).view(1).round_results
    assert state.view(None).round_results != other.view(None).round_results


def test_a_finished_trick_is_viewed_once_and_every_view_shows_it_as_played() -> None:
    """Every view shows all of the round's finished tricks again: each trick's view is built
    once and shared (a view never changes), and stays the trick as it was played, seat by seat
    from its leader, in the views of copies and of the state read afresh from its bytes."""
    state = new_match(MatchConfig.create("WIZARD", 4), "tricks-once")
    rng = random.Random(3)
    plays: list[tuple[int, str]] = []  # this round's
    while len(state.view(None).completed_tricks) < 2:
        seat = state.awaiting()[0]
        move = rng.choice(state.legal_moves(seat))
        round_played = state.round
        if move.card is not None:
            plays.append((seat, move.card))
        state.apply(seat, move)
        if state.round != round_played:
            plays.clear()
    shown = state.view(0).completed_tricks
    assert [(p.seat, p.card) for trick in shown for p in trick.plays] == plays[:8]
    assert all(t.plays[0].seat == t.leader for t in shown)
    for view in (state.view(2), state.copy().view(None), state_from_bytes(state_to_bytes(state)).view(0)):
        assert all(a is b for a, b in zip(view.completed_tricks, shown, strict=True))
    assert state.view(1).last_trick is shown[-1]
