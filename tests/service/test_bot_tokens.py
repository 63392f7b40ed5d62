"""A bot's named tokens over real HTTP: createToken (shown once), me { tokens } (never a
secret), revokeToken (not the last one), and a revoked token refused at once by every API
process, also one that was spending a lease of the token's requests."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from typing import Any

import httpx
import pytest

from service.store.embedded_cluster import EmbeddedCluster
from service.store.embedded_redis import EmbeddedRedis
from tests.service.arena_client import Api, Process, free_port

TOKENS = "{ me { id tokens { id name createdAt lastUsedAt } } }"
CREATE = "mutation($n: String!) { createToken(name: $n) { token info { id name createdAt lastUsedAt } } }"
REVOKE = "mutation($id: ID!) { revokeToken(id: $id) { id name } }"


@pytest.fixture(scope="module")
def other_api(start_api: Any) -> Any:
    """A second API process on the same Redis as ``api``."""
    return start_api()


def test_registration_gives_the_first_token_and_more_can_be_named(api):
    token, bot_id = api.register()
    first = api.data(TOKENS, token=token)["me"]
    assert first["id"] == bot_id
    [registration] = first["tokens"]
    assert registration["name"] == "registration" and registration["lastUsedAt"] is not None

    response = api.http.post("/graphql", json={"query": CREATE, "variables": {"n": "laptop"}},
                             headers={"Authorization": f"Bearer {token}"})
    grant = response.json()["data"]["createToken"]
    laptop = grant["token"]
    assert laptop.startswith("wza_") and laptop != token
    assert grant["info"]["name"] == "laptop" and grant["info"]["lastUsedAt"] is None

    # the new token acts for the same bot; neither secret is ever listed
    listed = api.http.post("/graphql", json={"query": TOKENS}, headers={"Authorization": f"Bearer {laptop}"})
    assert listed.json()["data"]["me"]["id"] == bot_id
    assert token not in listed.text and laptop not in listed.text
    names = [t["name"] for t in listed.json()["data"]["me"]["tokens"]]
    assert names == ["registration", "laptop"]


def test_token_names_are_checked_and_unique_per_bot(api):
    token, _ = api.register()
    assert api.error_code(CREATE, {"n": "  "}, token) == "BAD_INPUT"
    assert api.error_code(CREATE, {"n": "x" * 41}, token) == "BAD_INPUT"
    assert api.error_code(CREATE, {"n": "registration"}, token) == "BAD_INPUT"
    assert api.error_code(CREATE, {"n": "ci"}) == "UNAUTHENTICATED"


def test_the_last_token_cannot_be_revoked_and_others_tokens_are_out_of_reach(api):
    token, _ = api.register()
    other, other_id = api.register()
    [only] = api.data(TOKENS, token=token)["me"]["tokens"]
    body = api.gql(REVOKE, {"id": only["id"]}, token)
    assert body["errors"][0]["extensions"]["code"] == "BAD_INPUT"
    assert "last token" in body["errors"][0]["message"]
    assert [t["id"] for t in api.data(TOKENS, token=token)["me"]["tokens"]] == [only["id"]]

    # another bot's token id is not the caller's to revoke; its token list is not the caller's to read
    [theirs] = api.data(TOKENS, token=other)["me"]["tokens"]
    api.data(CREATE, {"n": "spare"}, token)
    assert api.error_code(REVOKE, {"id": theirs["id"]}, token) == "NOT_FOUND"
    assert api.error_code("query($id: ID!) { bot(id: $id) { tokens { id } } }", {"id": other_id}, token) == "FORBIDDEN"
    assert api.data("{ me { id } }", token=other)["me"]["id"] == other_id


def test_a_revoked_token_is_refused_at_once_by_every_api_process(api, other_api):
    token, bot_id = api.register()
    spare = api.data(CREATE, {"n": "spare"}, token)["createToken"]["token"]
    [registration, _] = api.data(TOKENS, token=token)["me"]["tokens"]
    # Busy on the other process: it leases the token's requests and spends them without
    # asking Redis (up to rate_limit_lease_ms, 500 ms), so only the revocation's message stops it.
    for _ in range(40):
        assert other_api.data("{ me { id } }", token=token)["me"]["id"] == bot_id
    left = api.data(REVOKE, {"id": registration["id"]}, spare)["revokeToken"]
    assert [t["name"] for t in left] == ["spare"]
    for process in (other_api, api, other_api):
        body = process.gql("{ me { id } }", token=token)
        assert body["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED", body
    assert other_api.data("{ me { id } }", token=spare)["me"]["id"] == bot_id
    # revoking it again: it is gone
    assert api.error_code(REVOKE, {"id": registration["id"]}, spare) == "NOT_FOUND"


# ----------------------------------------------------------------------------- steps across slots
# A token's entry among its bot's tokens and the key its hash names are in two slots, changed
# in steps (service.store.bots); these tests leave a change where a dead process would have.


def token_keys(token: str) -> list[str]:
    digest = hashlib.sha256(token.encode()).hexdigest()
    return [f"{{t:{digest}}}:{name}" for name in ("bot", "used", "rate")]


def test_a_token_a_dead_process_left_half_made_is_swept_and_counts_for_nothing(api, redis_client):
    token, bot_id = api.register()
    [registration] = api.data(TOKENS, token=token)["me"]["tokens"]
    # died after writing the hash, before making the entry plain: the secret was never handed out
    left = "wza_left-by-a-dead-process-" + os.urandom(8).hex()
    digest = hashlib.sha256(left.encode()).hexdigest()
    made = int(time.time() * 1000) - 61_000
    redis_client.set(token_keys(left)[0], json.dumps({"id": bot_id, "name": "x", "hash": digest, "tid": "dead"}))
    redis_client.hset(f"{{b:{bot_id}}}:tokens", "dead", json.dumps(
        {"name": "late", "created": made, "hash": digest, "state": "making"}))
    # not a token in use: the registration token is still the bot's last
    assert api.error_code(REVOKE, {"id": registration["id"]}, token) == "BAD_INPUT"
    assert api.error_code(REVOKE, {"id": "dead"}, token) == "NOT_FOUND"
    # the next listing sweeps it: entry and hash
    assert [t["id"] for t in api.data(TOKENS, token=token)["me"]["tokens"]] == [registration["id"]]
    assert not redis_client.hexists(f"{{b:{bot_id}}}:tokens", "dead")
    assert not redis_client.exists(token_keys(left)[0])
    assert api.error_code("{ me { id } }", token=left) == "UNAUTHENTICATED"
    # one being made now (not lapsed) is neither listed nor swept
    redis_client.hset(f"{{b:{bot_id}}}:tokens", "young", json.dumps(
        {"name": "young", "created": int(time.time() * 1000), "hash": "0" * 64, "state": "making"}))
    assert [t["id"] for t in api.data(TOKENS, token=token)["me"]["tokens"]] == [registration["id"]]
    assert redis_client.hexists(f"{{b:{bot_id}}}:tokens", "young")


def test_a_revocation_a_dead_process_left_halfway_is_finished_by_the_next_look(api, redis_client):
    for finish in ("revoking it again", "listing the tokens"):
        token, bot_id = api.register()
        spare = api.data(CREATE, {"n": "spare"}, token)["createToken"]["token"]
        [registration, kept] = api.data(TOKENS, token=token)["me"]["tokens"]
        # died after marking the entry, before dropping the hash: the token still works
        tokens_key = f"{{b:{bot_id}}}:tokens"
        entry = json.loads(redis_client.hget(tokens_key, registration["id"]))
        redis_client.hset(tokens_key, registration["id"], json.dumps({**entry, "state": "revoking"}))
        assert api.data("{ me { id } }", token=token)["me"]["id"] == bot_id
        # the token being revoked counts as gone: the spare is the last token in use
        assert api.error_code(REVOKE, {"id": kept["id"]}, spare) == "BAD_INPUT"
        if finish == "revoking it again":
            left = api.data(REVOKE, {"id": registration["id"]}, spare)["revokeToken"]
        else:
            left = api.data(TOKENS, token=spare)["me"]["tokens"]
        assert [t["id"] for t in left] == [kept["id"]], finish
        assert api.error_code("{ me { id } }", token=token) == "UNAUTHENTICATED", finish
        assert not any(redis_client.exists(key) for key in token_keys(token)), finish
        assert list(redis_client.hkeys(tokens_key)) == [kept["id"].encode()], finish


def test_of_two_last_tokens_revoked_at_once_one_stays(api):
    for _ in range(5):
        token, _ = api.register()
        spare = api.data(CREATE, {"n": "spare"}, token)["createToken"]["token"]
        ids = [t["id"] for t in api.data(TOKENS, token=token)["me"]["tokens"]]
        start = threading.Barrier(2)
        answers: list[Any] = [None, None]

        def revoke(i: int, start: threading.Barrier = start, answers: list[Any] = answers,
                   ids: list[str] = ids, by: tuple[str, str] = (spare, token)) -> None:
            with httpx.Client(base_url=api.base, timeout=30) as client:
                start.wait()
                answers[i] = client.post("/graphql", json={"query": REVOKE, "variables": {"id": ids[i]}},
                                         headers={"Authorization": f"Bearer {by[i]}"}).json()

        threads = [threading.Thread(target=revoke, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        revoked = [a for a in answers if a.get("data")]
        refused = [a for a in answers if a.get("errors")]
        assert len(revoked) == 1 and len(refused) == 1, answers
        assert refused[0]["errors"][0]["extensions"]["code"] in ("BAD_INPUT", "UNAUTHENTICATED"), refused
        [survivor] = revoked[0]["data"]["revokeToken"]
        holder = token if survivor["id"] == ids[0] else spare
        assert [t["id"] for t in api.data(TOKENS, token=holder)["me"]["tokens"]] == [survivor["id"]]


def test_a_token_from_before_named_tokens_is_listed_once_when_first_used(api, other_api, redis_client):
    """A bot the registration before named tokens made: its token's hash names it, with no
    token id, and the bot has no token entries; both API processes use it at once."""
    bot_id = os.urandom(8).hex()
    name = f"old-{os.urandom(4).hex()}"
    token = "wza_" + os.urandom(16).hex()
    digest = hashlib.sha256(token.encode()).hexdigest()
    redis_client.hset(f"{{b:{bot_id}}}:bot", mapping={"name": name, "created": 5})
    redis_client.set(f"botname:{name}", bot_id)
    redis_client.set(token_keys(token)[0], json.dumps({"id": bot_id, "name": name, "hash": digest}))
    processes = (api, other_api, api, other_api)
    start = threading.Barrier(len(processes))
    answers: list[Any] = [None] * len(processes)

    def use(i: int) -> None:
        start.wait()
        answers[i] = processes[i].data("{ me { id } }", token=token)["me"]["id"]

    threads = [threading.Thread(target=use, args=(i,)) for i in range(len(processes))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert answers == [bot_id] * len(processes)
    [adopted] = api.data(TOKENS, token=token)["me"]["tokens"]
    assert adopted["name"] == "registration"
    assert json.loads(redis_client.get(token_keys(token)[0]))["tid"] == adopted["id"]
    assert list(redis_client.hkeys(f"{{b:{bot_id}}}:tokens")) == [adopted["id"].encode()]


def test_a_revocation_on_a_cluster_goes_through_with_a_node_down(tmp_path, database_url):
    """On a Redis Cluster a revocation is published on every node (each process's feed follows
    one): a node that is down has nobody left to tell, and holds up nothing. A cluster of its
    own, whichever Redis the session runs on: one of its nodes is killed."""
    cluster = EmbeddedCluster(tmp_path / "cluster", masters=3, replicas=1)
    queue = EmbeddedRedis(tmp_path / "queue", appendonly=False)
    port = free_port()
    try:
        env = {**os.environ, "REDIS_URL": cluster.start(), "ARENA_QUEUE_URL": queue.start(), "DATABASE_URL": database_url}
        api = Api(Process(["serve", "--port", str(port), "--log-level", "warning"], env, tmp_path / "serve.log"), port)
        try:
            api.wait_healthy()
            token, bot_id = api.register()
            spare = api.data(CREATE, {"n": "spare"}, token)["createToken"]["token"]
            [registration, _] = api.data(TOKENS, token=token)["me"]["tokens"]
            cluster.kill(next(node for node in cluster.nodes if node.replica_of is not None))
            left = api.data(REVOKE, {"id": registration["id"]}, spare)["revokeToken"]
            assert [t["name"] for t in left] == ["spare"]
            assert api.error_code("{ me { id } }", token=token) == "UNAUTHENTICATED"
            assert api.data("{ me { id } }", token=spare)["me"]["id"] == bot_id
        finally:
            api.close()
            api.process.stop()
    finally:
        queue.stop()
        cluster.stop()
