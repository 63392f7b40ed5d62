"""Bot names that look alike: registration keeps a name in NFKC and refuses one whose
confusables skeleton (UTS #39), case-insensitively, is an existing bot's, and names that
imitate the house bots' seats; bots registered before the look-alike index are covered too,
and of look-alikes registered at the same instant exactly one wins."""

from __future__ import annotations

import os
import random
import threading
import time
import unicodedata
from typing import Any

import httpx
import pytest

from service.domain.bot_names import KEY_VERSION, lookalike_key
from service.store.keys import LOOKALIKE_INDEX

REGISTER = "mutation($n: String!) { registerBot(name: $n) { token bot { id name } } }"
ME = "{ me { id name } }"
#: Latin letters and their Cyrillic look-alikes
CYRILLIC = {"a": "\u0430", "c": "\u0441", "e": "\u0435", "o": "\u043e", "p": "\u0440", "y": "\u0443"}


def tag() -> str:
    return "".join(random.Random(os.urandom(8)).choices("bdfghkmnqrtvwxz", k=6))


def register(api: Any, name: str) -> dict[str, Any]:
    return api.data(REGISTER, {"n": name})["registerBot"]  # type: ignore[no-any-return]


def refusal(api: Any, name: str) -> str:
    body = api.gql(REGISTER, {"n": name})
    assert body.get("data") is None and body.get("errors"), body
    error = body["errors"][0]
    assert error["extensions"]["code"] == "BAD_INPUT", error
    return error["message"]  # type: ignore[no-any-return]


def fullwidth(text: str) -> str:
    return "".join(chr(ord(ch) + 0xFEE0) if "!" <= ch <= "~" else ch for ch in text)


def test_look_alikes_of_a_name_are_refused_and_register_nothing(api, redis_client):
    name = f"paypal-{tag()}"
    first = register(api, name)
    look_alikes = [
        name.replace("a", CYRILLIC["a"], 1),  # pаypal: a Cyrillic а
        name.replace("p", CYRILLIC["p"]).replace("y", CYRILLIC["y"]),
        fullwidth(name),  # NFKC makes it the same name
        name.upper(),
        name.title(),
        name.replace("l", "1"),  # paypa1
        name.replace("l", "I"),  # paypaI
        name.replace("-", "-\ufe0f"),  # an invisible variation selector
    ]
    keys_before = sorted(redis_client.scan_iter(match="botname:*", count=1000))
    for other in look_alikes:
        message = refusal(api, other)
        assert "too similar to an existing bot" in message and "choose another" in message, message
    assert sorted(redis_client.scan_iter(match="botname:*", count=1000)) == keys_before  # nothing registered
    assert redis_client.get(f"botlook:{lookalike_key(name)}") == first["bot"]["id"].encode()
    assert api.data(ME, token=first["token"])["me"]["name"] == name
    # names that merely share letters are still free
    register(api, f"paypals-{tag()}")


def test_a_name_is_kept_in_nfkc(api):
    name = f"Wide-{tag()}"
    registered = register(api, fullwidth(name))
    assert registered["bot"]["name"] == name
    assert api.data(ME, token=registered["token"])["me"]["name"] == name
    assert "too similar" in refusal(api, name)


@pytest.mark.parametrize(
    "name",
    [
        "House Random #7", "house-heuristic", "HOUSE", "House Heuristic", "h0use random",
        "\u041d\u043eus\u0435 Random",  # Ноusе: Cyrillic Н, о, е
        fullwidth("HOUSE") + " 3", "House of Cards",
    ],
)
def test_names_that_imitate_the_house_bots_are_refused(api, redis_client, name):
    message = refusal(api, name)
    assert "kept for the server's house bots" in message, message
    assert not redis_client.exists(f"botlook:{lookalike_key(name)}")


def test_a_name_that_only_contains_house_is_free(api):
    register(api, f"my house {tag()}")


def test_bots_registered_before_the_look_alike_index_are_protected(api, redis_client):
    """A bot the registration before this change made (its case-folded name and its bot, no
    look-alike key), with the index not built: the next registration builds it first."""
    name = f"legacy-{tag()}"
    bot_id = os.urandom(8).hex()
    redis_client.set(f"botname:{name.casefold()}", bot_id)
    redis_client.hset(f"{{b:{bot_id}}}:bot", mapping={"name": name, "created": 0})
    for marker in (None, "an-older-key-version"):  # never built, and built for other keys
        redis_client.delete(f"botlook:{lookalike_key(name)}")
        if marker is None:
            redis_client.delete(LOOKALIKE_INDEX)
        else:
            redis_client.set(LOOKALIKE_INDEX, marker)
        assert "too similar" in refusal(api, name.replace("e", CYRILLIC["e"]))
        assert redis_client.get(LOOKALIKE_INDEX) == KEY_VERSION.encode()
        assert redis_client.get(f"botlook:{lookalike_key(name)}") == bot_id.encode()
    # built again (idempotent): every bot keeps its key, and registration goes on as before; a
    # name a registration has only reserved names no bot yet, and is left out
    reserved = f"reserved-{tag()}"
    redis_client.set(f"botname:{reserved}", f"~{os.urandom(8).hex()}|{int(time.time() * 1000)}")
    redis_client.delete(LOOKALIKE_INDEX)
    other = register(api, f"after-{tag()}")
    assert not redis_client.exists(f"botlook:{lookalike_key(reserved)}")
    assert redis_client.get(f"botlook:{lookalike_key(name)}") == bot_id.encode()
    assert redis_client.get(f"botlook:{lookalike_key(other['bot']['name'])}") == other["bot"]["id"].encode()


def test_of_look_alikes_registered_at_once_exactly_one_wins(api, redis_client):
    for _ in range(5):
        name = f"payco-{tag()}"
        variants = [name, name.upper(), fullwidth(name)]
        for letters in ("a", "p", "y", "c", "o", "ac", "po", "payco"):
            variants.append("".join(CYRILLIC[ch] if ch in letters and i < 5 else ch for i, ch in enumerate(name)))
        start = threading.Barrier(len(variants))
        answers: list[dict[str, Any] | None] = [None] * len(variants)

        def racer(i: int, start: threading.Barrier = start, answers: list[Any] = answers,
                  variants: list[str] = variants) -> None:
            with httpx.Client(base_url=api.base, timeout=30) as client:
                start.wait()
                answers[i] = client.post("/graphql", json={"query": REGISTER, "variables": {"n": variants[i]}}).json()

        threads = [threading.Thread(target=racer, args=(i,)) for i in range(len(variants))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        winners = [a["data"]["registerBot"] for a in answers if a and a.get("data")]  # type: ignore[index]
        losers = [a for a in answers if a and a.get("errors")]
        assert len(winners) == 1 and len(losers) == len(variants) - 1, answers
        assert all(a["errors"][0]["extensions"]["code"] == "BAD_INPUT" for a in losers)  # type: ignore[index]
        winner = winners[0]
        assert redis_client.get(f"botlook:{lookalike_key(name)}") == winner["bot"]["id"].encode()
        for variant in variants:  # no loser left anything behind
            folded = unicodedata.normalize("NFKC", variant).casefold()
            if folded != winner["bot"]["name"].casefold():
                assert not redis_client.exists(f"botname:{folded}"), variant
        assert api.data(ME, token=winner["token"])["me"] == winner["bot"]


def test_a_name_a_dead_registration_reserved_is_free_once_its_reservation_is_stale(api, redis_client):
    """Registration reserves a name's keys first (``~<bot id>|<ms>``) and makes them the bot's
    last; a registration that died between leaves its reservation, which holds the name only
    for a while (service.store.bots.STALE_RESERVATION_MS, 60 s)."""
    name = f"reserved-{tag()}"
    look, folded = f"botlook:{lookalike_key(name)}", f"botname:{name.casefold()}"
    now_ms = int(time.time() * 1000)
    # a registration under way (reserved a moment ago) holds the name by either key
    young = f"~{os.urandom(8).hex()}|{now_ms}"
    redis_client.set(look, young)
    assert "too similar" in refusal(api, name.replace("e", CYRILLIC["e"]))
    redis_client.delete(look)
    redis_client.set(folded, young)
    assert "too similar" in refusal(api, name.upper())
    # (the refused registration let go of the look-alike key it had reserved, and only of that)
    assert redis_client.get(folded) == young.encode() and not redis_client.exists(look)
    # one that died a minute ago does not
    redis_client.set(look, f"~{os.urandom(8).hex()}|{now_ms - 61_000}")
    redis_client.set(folded, f"~{os.urandom(8).hex()}|{now_ms - 61_000}")
    registered = register(api, name)
    assert redis_client.get(look) == redis_client.get(folded) == registered["bot"]["id"].encode()
    assert api.data(ME, token=registered["token"])["me"] == registered["bot"]
