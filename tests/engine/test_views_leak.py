"""The leak test: a seat's view depends only on what RULES.md lets that seat know.

Pairs of matches are built with stacked deals that differ only in cards the viewer cannot
see (other seats' hands, the undealt deck; under CLAIRVOYANCE round 1 the viewer's own
card), or in bids the viewer cannot see yet (HIDDEN_BIDS / SECRET_BIDS).  The same moves are
made in both (only moves legal in both), and after every move the viewer's view, and its
``to_dict()``, must be identical in the two matches: in CHOOSE_TRUMP, BID and PLAY, for
every variant set, for every seat and for a spectator (``view(None)``).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter

import pytest

from tests.engine.conftest import allowed_triples
from wizard import MatchConfig, MatchState, Move, Phase, Ruleset, Variant, new_match

V = Variant



TRIPLES = allowed_triples()


def label(triple) -> str:
    ruleset, players, variants = triple
    return f"{ruleset.value}-{players}-" + ("+".join(v.value for v in variants) or "plain")


def deck_codes(ruleset: Ruleset) -> list[str]:
    top, specials = (13, 4) if ruleset is Ruleset.WIZARD else (8, 2)
    return [f"{s}{r}" for s in "BGRY" for r in range(1, top + 1)] + ["W"] * specials + ["J"] * specials


def pile_codes(seat: int) -> list[str]:
    return [f"{'BGRY'[seat]}{r}" for r in range(1, 14)] + ["W", "J"]


def rounds_of(ruleset: Ruleset, players: int, variants) -> int:
    return MatchConfig.create(ruleset, players, variants).rounds


# ----------------------------------------------------------------------------- building pairs


def stacked_pair(
    ruleset: Ruleset,
    n: int,
    variants: tuple[Variant, ...],
    r: int,
    dealer: int,
    viewer: int | None,
    rng: random.Random,
    *,
    trump: str | None = None,
    own_card: bool = False,
) -> tuple[list[str], list[str]]:
    """Round ``r``'s stacked decks for two matches that differ only in cards ``viewer``
    cannot see.  ``own_card``: CLAIRVOYANCE round 1, swap the viewer's own card with an
    undealt one (the viewer sees the others' cards, so those stay)."""
    single = V.SINGLE_SUIT in variants
    if single:
        size = r + 3
        draws = []
        for s in range(n):
            pile = pile_codes(s)
            rng.shuffle(pile)
            draws.append(pile)
        order_a = [draws[(dealer + 1 + k) % n][k // n] for k in range(n * size)]
        for s in range(n):
            if s == viewer:
                continue
            pile = draws[s]
            if size < len(pile) and rng.random() < 0.8:  # swap a drawn card with an undrawn one
                i, j = rng.randrange(size), rng.randrange(size, len(pile))
                pile[i], pile[j] = pile[j], pile[i]
            head = pile[:size]
            rng.shuffle(head)  # the order of a seat's own draw does not matter
            pile[:size] = head
        order_b = [draws[(dealer + 1 + k) % n][k // n] for k in range(n * size)]
        return order_a, order_b

    deck = deck_codes(ruleset)
    rng.shuffle(deck)
    dealt = r * n
    if trump is not None:
        assert dealt < len(deck)
        k = deck.index(trump, dealt) if trump in deck[dealt:] else deck.index(trump)
        deck[dealt], deck[k] = deck[k], deck[dealt]
    seat_of = [(dealer + 1 + k) % n if k < dealt else None for k in range(len(deck))]
    undealt = list(range(dealt + 1, len(deck)))
    if own_card:
        assert viewer is not None and r == 1 and undealt
        mine = seat_of.index(viewer)
        other = rng.choice([k for k in undealt if deck[k] != deck[mine]])
        b = list(deck)
        b[mine], b[other] = b[other], b[mine]
        return deck, b
    hidden = [k for k in range(dealt) if seat_of[k] != viewer] + undealt
    b = list(deck)
    for _ in range(rng.randint(1, 4)):
        i, j = rng.sample(hidden, 2)
        b[i], b[j] = b[j], b[i]
    if all(x == y for x, y in zip(deck, b, strict=True)):  # make sure the pair differs somewhere
        i = next(k for k in hidden if any(deck[k] != deck[m] for m in hidden))
        j = next(m for m in hidden if deck[m] != deck[i])
        b[i], b[j] = b[j], b[i]
    return deck, b


def pair_of_matches(
    ruleset: Ruleset, n: int, variants, r: int, dealer: int, deals: tuple[list[str], list[str]], seed: str
) -> tuple[MatchState, MatchState]:
    first = (dealer - r + 1) % n
    out = []
    for deal in deals:
        config = MatchConfig.create(ruleset, n, variants, first_dealer=first, deals=[[]] * (r - 1) + [deal])
        out.append(new_match(config, seed=seed))
    return out[0], out[1]


def play_to_round(a: MatchState, b: MatchState, r: int, rng: random.Random) -> None:
    """Earlier rounds are dealt from the same seed: make the same moves in both."""
    while a.round < r:
        seat = rng.choice(a.awaiting())
        move = rng.choice(a.legal_moves(seat))
        a.apply(seat, move)
        b.apply(seat, move)
    assert b.round == r


def assert_same_view(a: MatchState, b: MatchState, viewer: int | None, where: str, as_dict: bool = True) -> None:
    """Equal views, and (``as_dict``) equal ``to_dict()``: the dict is a function of the
    view, so the long runs compare it at every few moves only, to keep the test fast."""
    va, vb = a.view(viewer), b.view(viewer)
    if va != vb or (as_dict and va.to_dict() != vb.to_dict()):
        da, db = va.to_dict(), vb.to_dict()
        diff = [k for k in da if da[k] != db[k]]
        raise AssertionError(
            f"{where}: viewer {viewer} can tell the two matches apart by {diff}: "
            + "; ".join(f"{k}: {da[k]!r} vs {db[k]!r}" for k in diff)
        )


def lockstep(
    a: MatchState,
    b: MatchState,
    viewer: int | None,
    rng: random.Random,
    where: str,
    seen: Counter,
    *,
    stop_before_round_change: bool = False,
) -> None:
    """Make moves legal in both matches until the round is over (or no such move is left),
    comparing the viewer's views after every move."""
    start = a.round
    compared = 0
    while True:
        last = a.round != start or a.is_finished
        assert_same_view(
            a, b, viewer, f"{where}, {a.phase.value} after move {a.moves_made}", as_dict=compared % 5 == 0 or last
        )
        compared += 1
        seen[a.phase] += 1
        if a.phase is Phase.PLAY:
            seen["PLAY-mid-trick" if a.view(None).current_trick else "PLAY-trick-start"] += 1
        if a.round != start or a.is_finished:
            seen["round-completed"] += 1
            return
        seats = list(a.awaiting())
        assert tuple(seats) == b.awaiting()
        rng.shuffle(seats)
        for seat in seats:
            common = [m for m in a.legal_moves(seat) if m in b.legal_moves(seat)]
            if common:
                break
        else:
            return  # every move left tells the seats' own hands apart
        move = rng.choice(common)
        if stop_before_round_change:
            probe = a.copy()
            probe.apply(seat, move)
            if probe.round != start:
                return
        a.apply(seat, move)
        b.apply(seat, move)


# ----------------------------------------------------------------------------- the pair tests


@pytest.mark.parametrize("triple", TRIPLES, ids=label)
def test_hidden_cards_do_not_change_views(triple) -> None:
    """Swap cards between other seats' hands and the undealt deck: every seat, and a
    spectator, sees exactly the same thing in CHOOSE_TRUMP, BID and PLAY."""
    ruleset, n, variants = triple
    rng = random.Random(label(triple))
    rounds = rounds_of(ruleset, n, variants)
    single = V.SINGLE_SUIT in variants
    seen: Counter = Counter()
    for viewer in [None, *range(n)]:
        # the last round (every card dealt, nothing turned) for the spectator and one seat
        last = {rounds} if viewer in (None, n - 1) else set()
        for r in sorted({rng.randint(1, min(4, rounds))} | last):
            clairvoyant = r == 1 and V.CLAIRVOYANCE in variants
            if clairvoyant and viewer is not None:
                continue  # the viewer sees the other hands: see the clairvoyance test below
            dealer = rng.randrange(n)
            deals = stacked_pair(ruleset, n, variants, r, dealer, viewer, rng)
            a, b = pair_of_matches(ruleset, n, variants, r, dealer, deals, seed=f"leak-{r}")
            play_to_round(a, b, r, rng)
            # (in a clairvoyant round the server plays the cards after the last bid: they
            # differ, as they should, so the spectator's comparison stops before that bid)
            where = f"{label(triple)} round {r} viewer {viewer}"
            lockstep(a, b, viewer, rng, where, seen, stop_before_round_change=clairvoyant)
            # a Wizard turned up: the dealer chooses trump, seeing only their own hand
            if not single and r * n < len(deck_codes(ruleset)):
                # (the viewer is the dealer, who chooses, for every other seat)
                dealer = viewer if viewer is not None and viewer % 2 == 0 else rng.randrange(n)
                deals = stacked_pair(ruleset, n, variants, r, dealer, viewer, rng, trump="W")
                a, b = pair_of_matches(ruleset, n, variants, r, dealer, deals, seed=f"leak-w-{r}")
                play_to_round(a, b, r, rng)
                assert a.phase is Phase.CHOOSE_TRUMP and a.awaiting() == (dealer,)
                where = f"{label(triple)} round {r} (Wizard turned) viewer {viewer}"
                lockstep(a, b, viewer, rng, where, seen, stop_before_round_change=clairvoyant)
    assert seen[Phase.BID] > 0
    assert seen[Phase.PLAY] >= 5 and seen["PLAY-mid-trick"] > 0 and seen["PLAY-trick-start"] > 0
    if not single:
        assert seen[Phase.CHOOSE_TRUMP] > 0


@pytest.mark.parametrize(
    "triple", [t for t in TRIPLES if V.CLAIRVOYANCE in t[2]], ids=label
)
def test_clairvoyance_round_one_hides_only_the_own_card(triple) -> None:
    """CLAIRVOYANCE round 1: the viewer's own card is what it cannot see; swapping it with
    an undealt card changes nothing it sees, through the trump choice and every bid."""
    ruleset, n, variants = triple
    rng = random.Random("clairvoyant-" + label(triple))
    seen: Counter = Counter()
    for viewer in range(n):
        for trump in (None, "W"):
            dealer = rng.randrange(n)
            deals = stacked_pair(ruleset, n, variants, 1, dealer, viewer, rng, trump=trump, own_card=True)
            a, b = pair_of_matches(ruleset, n, variants, 1, dealer, deals, seed="clairvoyant")
            va = a.view(viewer)
            assert va.hand is None and va.seats[viewer].hand is None, "clairvoyant: the own card is hidden"
            assert all(va.seats[s].hand is not None and len(va.seats[s].hand) == 1 for s in range(n) if s != viewer)
            lockstep(a, b, viewer, rng, f"{label(triple)} viewer {viewer}", seen, stop_before_round_change=True)
            # only the last bid is left: it ends the round and reveals the cards (as it should)
            assert a.phase is Phase.BID and len(a.awaiting()) >= 1
    assert seen[Phase.CHOOSE_TRUMP] > 0 and seen[Phase.BID] > 0


@pytest.mark.parametrize("variant", [V.HIDDEN_BIDS, V.SECRET_BIDS])
@pytest.mark.parametrize("players", [3, 4, 6])
def test_hidden_bids_do_not_change_views(variant: Variant, players: int) -> None:
    """Two matches where the other seats bid differently: the viewer sees the same thing
    while RULES.md hides those bids (HIDDEN: until every bid is in; SECRET: until the round's
    last trick is done)."""
    rng = random.Random(f"bids-{variant.value}-{players}")
    for r in (1, 2, 4):
        for viewer in [None, *range(players)]:
            config = MatchConfig.create(Ruleset.WIZARD, players, [variant], first_dealer=0)
            a, b = new_match(config, seed=f"bids-{r}"), new_match(config, seed=f"bids-{r}")
            while a.round < r:
                seat = a.awaiting()[0]
                move = a.legal_moves(seat)[0]
                a.apply(seat, move)
                b.apply(seat, move)
            # every seat but the viewer bids differently in the two matches
            order = list(range(players))
            rng.shuffle(order)
            last = order[-1]
            for seat in order:
                assert_same_view(a, b, viewer, f"{variant.value} round {r} viewer {viewer} before seat {seat} bids")
                if seat == last and variant is V.HIDDEN_BIDS:
                    # the last bid reveals every bid: from here on the views may differ
                    break
                bid_a = rng.randint(0, r)
                bid_b = bid_a if seat == viewer else (bid_a + 1 + rng.randrange(r)) % (r + 1)
                a.apply(seat, Move(bid=bid_a))
                b.apply(seat, Move(bid=bid_b))
                assert_same_view(a, b, viewer, f"{variant.value} round {r} viewer {viewer} after seat {seat} bid")
            if variant is V.HIDDEN_BIDS:
                continue
            # SECRET_BIDS: the whole round is played with the bids still hidden
            while True:
                assert_same_view(a, b, viewer, f"SECRET_BIDS round {r} viewer {viewer} in PLAY")
                seat = a.to_act
                move = rng.choice(a.legal_moves(seat))
                probe = a.copy()
                probe.apply(seat, move)
                if probe.round != r:
                    break  # the last card: now the bids are shown (in round_results)
                a.apply(seat, move)
                b.apply(seat, move)


# ----------------------------------------------------------------------------- direct checks


SALT = "5a17" * 8


def _walk(config: MatchConfig, seed: str, rng: random.Random, salt: str | None = None):
    """Yield (state, last move or None) after every move of a random match."""
    state = new_match(config, seed=seed, salt=salt)
    yield state, None, None
    while not state.is_finished:
        seat = rng.choice(state.awaiting())
        move = rng.choice(state.legal_moves(seat))
        state.apply(seat, move)
        yield state, seat, move


@pytest.mark.parametrize("triple", [t for t in TRIPLES if t[0] is Ruleset.WIZARD and t[1] in (3, 4)] + [
    (Ruleset.WIZARD_JUNIOR, 6, ()), (Ruleset.WIZARD_JUNIOR_CLASSIC, 5, (V.SECRET_BIDS, V.CLAIRVOYANCE))
], ids=label)
@pytest.mark.parametrize("salt", [None, SALT], ids=["unsalted", "salted"])
def test_what_each_view_shows_as_rules_md_says(triple, salt) -> None:
    """Spectators see no hand and no seed of a live match; seats see their own hand (under
    CLAIRVOYANCE round 1: every other hand and not their own); bids show up exactly when
    RULES.md says; the seed and its salt show once the match is over and hash to seed_hash
    (SHA-256 of ``salt ":" seed``, of the seed alone without a salt); no live view, nor its
    JSON, holds the salt."""
    ruleset, n, variants = triple
    seed = f"views-{label(triple)}"
    config = MatchConfig.create(ruleset, n, variants)
    reveal = "SECRET" if V.SECRET_BIDS in variants else "HIDDEN" if V.HIDDEN_BIDS in variants else "AT_ONCE"
    digest = hashlib.sha256((seed if salt is None else f"{salt}:{seed}").encode()).hexdigest()
    bids: list[int | None] = [None] * n
    past: list[list[int]] = []
    rng = random.Random(seed)
    for state, seat, move in _walk(config, seed, rng, salt):
        if move is not None and move.bid is not None:
            bids[seat] = move.bid
        finished = state.is_finished
        r = state.round
        if len(state.view(None).round_results) > len(past):
            past.append(list(bids))
            if not finished:
                bids = [None] * n
        if 3 < r < config.rounds:
            continue  # (the middle rounds add nothing new: check the first three and the last)
        clair = V.CLAIRVOYANCE in variants and r == 1 and not finished
        for viewer in [None, *range(n)]:
            view = state.view(viewer)
            where = f"{label(triple)} round {r} {state.phase.value} move {state.moves_made} viewer {viewer}"
            assert view.seed_hash == digest, where
            assert view.seed == (seed if finished else None), f"{where}: seed shown too early or not at the end"
            assert view.salt == (salt if finished else None), f"{where}: salt shown too early or not at the end"
            if salt is not None and not finished:
                assert salt not in json.dumps(view.to_dict()), f"{where}: the salt is in a live view's JSON"
            assert view.my_seat == viewer
            if viewer is None:
                assert view.hand is None and view.legal_moves == (), where
                assert all(s.hand is None for s in view.seats), f"{where}: a spectator sees a hand"
            else:
                assert view.legal_moves == tuple(state.legal_moves(viewer)), where
                for s in view.seats:
                    if clair:
                        assert (s.hand is None) == (s.seat == viewer), f"{where}: clairvoyant hands"
                    else:
                        assert (s.hand is not None) == (s.seat == viewer), f"{where}: hands"
                assert view.hand == view.seats[viewer].hand
            # bids of the current round
            for s in view.seats:
                real = past[-1][s.seat] if finished else bids[s.seat]
                if finished or s.seat == viewer or reveal == "AT_ONCE":
                    shown = real
                elif reveal == "HIDDEN":
                    shown = real if None not in bids else None
                else:
                    shown = None
                assert s.bid == shown, f"{where}: bid of seat {s.seat} shows {s.bid}, RULES.md says {shown}"
            # the bids of finished rounds are public in round_results
            assert [[x.bid for x in rr.seats] for rr in view.round_results] == past, where


def test_spectator_sees_no_hand_and_no_seed_in_any_configuration() -> None:
    for index, triple in enumerate(TRIPLES):
        ruleset, n, variants = triple
        rng = random.Random(label(triple))
        seed = f"spectator-{label(triple)}"
        salt = f"{index:032x}" if index % 2 else None  # every other configuration salted
        hashed = seed if salt is None else f"{salt}:{seed}"
        for state, _, _ in _walk(MatchConfig.create(ruleset, n, variants), seed, rng, salt):
            view = state.view(None)
            data = view.to_dict()
            if state.is_finished:
                assert data["seed"] == seed and data.get("salt") == salt
                break
            assert data["hand"] is None and data["legalMoves"] == [] and data["mySeat"] is None
            assert all(s["hand"] is None for s in data["seats"]), label(triple)
            assert data["seed"] is None and data["seedHash"] == hashlib.sha256(hashed.encode()).hexdigest()
            assert "salt" not in data and view.salt is None, f"{label(triple)}: a live view shows the salt"
            if state.round > 3:
                break


@pytest.mark.parametrize("players", [3, 4, 5, 6])
def test_refusals_do_not_reveal_the_hidden_own_card_under_clairvoyance(players: int) -> None:
    """A seat that cannot see its round-1 card must not learn it by trying to play cards:
    every card it tries before its turn to play is refused with the same words."""
    for seed in range(20):
        state = new_match(MatchConfig.create("WIZARD", players, ["CLAIRVOYANCE"]), f"leak-{seed}")
        for seat in state.awaiting():
            messages = set()
            for code in ("R5", "R7", "B13", "G1", "Y9", "W", "J"):
                with pytest.raises(ValueError) as refused:
                    state.apply(seat, Move(card=code))
                messages.add((type(refused.value), str(refused.value).replace(f"card {code} ", "card X ")))
            assert len(messages) == 1, messages
