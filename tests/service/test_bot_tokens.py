"""A bot's named tokens over real HTTP: createToken (shown once), me { tokens } (never a
secret), revokeToken (not the last one), and a revoked token refused at once by every API
process, also one that was spending a lease of the token's requests."""

from __future__ import annotations

from typing import Any

import pytest

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
