"""Webhook bots (issue 18): the server calls the bot when it must act. Real processes (an API
and a worker that allow loopback webhooks), and real HTTP servers on loopback as the bots:
the SDK's serve-bot endpoint, and misbehaving ones."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import redis

from sdk.bot import HouseBotPlayer
from sdk.webhook import SIGNATURE_HEADER, SignatureError, serve_in_thread, sign, verify
from service.domain.matches import Caller
from service.domain.services import Services
from service.domain.webhooks import checked_url
from service.errors import BadInput
from service.model.homes import new_match_id
from service.settings import Settings
from service.store.keys import bot_matches_key, match_key
from tests.project.readme_blocks import readme_blocks
from tests.service.arena_client import Api, free_port, wait_until
from worker.webhooks import CallFailed, WebhookClient

WEBHOOK = "url status failures lastError lastErrorAt pausedUntil"
REGISTER = (
    "mutation($n: String!, $w: String) { registerBot(name: $n, webhook: $w) { token bot { id } webhookSecret } }"
)
SET = "mutation($u: String!) { setWebhook(url: $u) { secret webhook { " + WEBHOOK + " } } }"
ME = "query { me { id webhook { " + WEBHOOK + " } } }"
SEATS = "query($m: ID!) { match(id: $m) { status version seats { seat timeouts } winners } }"


@pytest.fixture(scope="module")
def hooks_api(start_api: Any) -> Api:
    """An API that takes loopback webhooks (as the worker below calls them)."""
    return start_api(ARENA_WEBHOOK_ALLOW_PRIVATE="true")  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def worker(start_worker: Any) -> Iterator[Any]:
    """This module's worker: loopback webhooks allowed; paused after 2 failures for 1 s."""
    process = start_worker(ARENA_WEBHOOK_ALLOW_PRIVATE="true", ARENA_WEBHOOK_PAUSE_AFTER_FAILURES="2",
                           ARENA_WEBHOOK_PAUSE_SECONDS="1", ARENA_WEBHOOK_PAUSE_MAX_SECONDS="1")
    yield process
    process.stop()


def name() -> str:
    return f"hook-{os.urandom(4).hex()}"


class SdkBot:
    """A random bot served by the SDK's serve-bot endpoint, registered with its webhook."""

    def __init__(self, api: Api) -> None:
        self.calls: list[dict[str, Any]] = []
        self.token, self.id = api.register()
        self.server = serve_in_thread(HouseBotPlayer("random", 1), "unset", on_call=self.calls.append)
        grant = api.data(SET, {"u": f"http://127.0.0.1:{self.server.server_address[1]}/hook"}, self.token)["setWebhook"]
        self._retarget(grant["secret"])

    def _retarget(self, secret: str) -> None:
        # the server was made before the secret existed: make the one that checks it
        port = self.server.server_address[1]
        self.server.shutdown()
        self.server.server_close()
        self.server = serve_in_thread(HouseBotPlayer("random", 1), secret, port=port, on_call=self.calls.append)

    def kinds(self, match_id: str) -> list[str]:
        return [c["type"] for c in self.calls if c["match"]["id"] == match_id]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Misbehaving(BaseHTTPRequestHandler):
    """A webhook that answers as ``server.mode`` says (set per server)."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # (http.server's name)
        call = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        mode: str = self.server.mode  # type: ignore[attr-defined]
        self.server.calls += 1  # type: ignore[attr-defined]
        self.heard(call)
        status, body, headers = 200, b'{"bid": 0}', {}
        if mode == "not-json":
            body = b"<html>hello</html>"
        elif mode == "illegal":
            body = b'{"bid": 99}'
        elif mode == "error":
            status, body = 500, b'{"error": "oops"}'
        elif mode == "redirect":
            status, body, headers = 302, b"", {"Location": "http://127.0.0.1:1/"}
        elif mode == "slow":
            time.sleep(1.5)
        elif mode == "big":
            body = b'{"bid": 0, "pad": "' + b"x" * 100_000 + b'"}'
        elif mode == "good" and call["type"] == "turn":  # a legal move, whatever the turn
            move = call["match"]["legalMoves"][0]
            body = json.dumps({k: v for k, v in move.items() if v is not None}).encode()
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:  # the server hung up on a slow or big answer
            pass

    def heard(self, call: dict[str, Any]) -> None:
        """Each call as it comes (a subclass records them)."""

    def log_message(self, format: str, *args: Any) -> None:  # (http.server's name)
        pass


def misbehaving(mode: str, handler: type[Misbehaving] = Misbehaving) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.handle_error = lambda *_: None  # type: ignore[method-assign]  # (calls it hung up on)
    server.mode = mode  # type: ignore[attr-defined]
    server.calls = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}/"


def seats(api: Api, match_id: str) -> dict[str, Any]:
    return api.data(SEATS, {"m": match_id})["match"]  # type: ignore[no-any-return]


def webhook_of(api: Api, token: str) -> dict[str, Any]:
    return api.data(ME, {}, token)["me"]["webhook"]  # type: ignore[no-any-return]


# ---------------------------------------------------------------------- signatures


def test_a_signature_is_checked_against_the_body_the_secret_and_the_time() -> None:
    body = b'{"type": "turn"}'
    header = sign("whsec_a", body)
    verify("whsec_a", body, header)
    for secret, given, sent in (("whsec_b", body, header), ("whsec_a", body + b" ", header),
                                ("whsec_a", body, None), ("whsec_a", body, "v1=abc")):
        with pytest.raises(SignatureError):
            verify(secret, given, sent)
    old = sign("whsec_a", body, now=time.time() - 301)
    with pytest.raises(SignatureError, match="old"):
        verify("whsec_a", body, old)


def test_the_readmes_verification_example_agrees_with_the_signer() -> None:
    [block] = [b for b in readme_blocks("python") if b.marker and b.marker.startswith("webhook check")]
    namespace: dict[str, Any] = {}
    exec(compile(block.code, "README.md", "exec"), namespace)
    verified = namespace["verified"]
    body = b'{"type": "turn"}'
    assert verified("whsec_a", body, sign("whsec_a", body))
    assert not verified("whsec_b", body, sign("whsec_a", body))
    assert not verified("whsec_a", body + b"x", sign("whsec_a", body))
    assert not verified("whsec_a", body, sign("whsec_a", body, now=time.time() - 301))
    assert not verified("whsec_a", body, "")


def test_serve_bot_refuses_calls_not_signed_with_its_secret() -> None:
    server = serve_in_thread(HouseBotPlayer("random"), "whsec_right")
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        body = b'{"type": "start", "match": {}}'
        for header in (None, sign("whsec_wrong", body), sign("whsec_right", body, now=time.time() - 600)):
            headers = {} if header is None else {SIGNATURE_HEADER: header}
            assert httpx.post(url, content=body, headers=headers).status_code == 401
        assert httpx.post(url, content=body, headers={SIGNATURE_HEADER: sign("whsec_right", body)}).status_code == 200
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------------- registration


def test_a_webhook_is_set_at_registration_shown_to_its_owner_only_and_removed(hooks_api: Api) -> None:
    api = hooks_api
    answer = api.data(REGISTER, {"n": name(), "w": "http://127.0.0.1:9/hook"})["registerBot"]
    token, bot_id = answer["token"], answer["bot"]["id"]
    assert answer["webhookSecret"].startswith("whsec_")
    assert webhook_of(api, token) == {"url": "http://127.0.0.1:9/hook", "status": "ACTIVE", "failures": 0,
                                      "lastError": None, "lastErrorAt": None, "pausedUntil": None}
    other, _ = api.register()
    assert api.data("query($b: ID!) { bot(id: $b) { webhook { url } } }", {"b": bot_id}, other)["bot"]["webhook"] is None
    again = api.data(SET, {"u": "https://example.org/hook"}, token)["setWebhook"]
    assert again["secret"] != answer["webhookSecret"] and again["webhook"]["url"] == "https://example.org/hook"
    api.data("mutation { removeWebhook { id } }", {}, token)
    assert webhook_of(api, token) is None
    # a bad URL registers no bot
    missing = name()
    assert api.error_code(REGISTER, {"n": missing, "w": "ftp://example.org/"}) == "BAD_INPUT"
    assert api.data(REGISTER, {"n": missing})["registerBot"]["bot"]["id"]


def test_the_rest_routes_set_read_and_remove_a_webhook(hooks_api: Api) -> None:
    token, _ = hooks_api.register()
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=hooks_api.base) as http:
        put = http.put("/api/me/webhook", json={"url": "http://127.0.0.1:9/x"}, headers=auth)
        assert put.status_code == 200, put.text
        assert put.json()["secret"].startswith("whsec_") and put.json()["webhook"]["status"] == "ACTIVE"
        assert http.get("/api/me/webhook", headers=auth).json()["url"] == "http://127.0.0.1:9/x"
        assert http.delete("/api/me/webhook", headers=auth).status_code == 200
        assert http.get("/api/me/webhook", headers=auth).json() is None
        bad = http.put("/api/me/webhook", json={"url": "gopher://x"}, headers=auth)
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "BAD_INPUT"
        made = http.post("/api/bots", json={"name": name(), "webhook": "http://127.0.0.1:9/y"})
        assert made.status_code == 201 and made.json()["webhookSecret"].startswith("whsec_")


# ---------------------------------------------------------------------- SSRF


def test_private_addresses_are_refused_without_allow_private(start_api: Any) -> None:
    """An API with the default settings: no loopback, private, link-local or multicast address,
    no scheme but http(s), no credentials in the URL."""
    api = start_api(ARENA_WEBHOOK_ALLOW_PRIVATE="false")
    token, _ = api.register()
    for url in ("http://127.0.0.1:9000/", "http://10.1.2.3/", "http://169.254.169.254/latest", "http://[::1]/",
                "http://224.0.0.1/", "http://0.0.0.0/", "http://[::ffff:127.0.0.1]/", "file:///etc/passwd",
                "http://100.64.0.1/", "http://[2002:7f00:1::1]/", "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/",
                "http://[fe80::1]/", "http://192.0.2.1/", "ftp://example.org/", "http://user:pw@example.org/", "http://"):
        assert api.error_code(SET, {"u": url}, token) == "BAD_INPUT", url
    assert api.data(SET, {"u": "https://example.org/hook"}, token)["setWebhook"]["webhook"]["url"]
    assert api.data(SET, {"u": "http://[2002:5db8:d822::1]/"}, token)["setWebhook"]["webhook"]["url"]  # 6to4 of a public one


def test_a_name_is_checked_where_it_resolves_and_the_call_goes_to_that_address() -> None:
    """``localhost`` passes setWebhook (a name); the worker resolves it, refuses the loopback
    address without ALLOW_PRIVATE, and with it connects to the address it checked, naming the
    host in the Host header; a redirect is not followed."""
    seen: list[str] = []

    class Recorder(Misbehaving):
        def do_POST(self) -> None:
            seen.append(self.headers["Host"])
            super().do_POST()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    server.mode, server.calls = "redirect", 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    url = f"http://localhost:{port}/hook"
    assert checked_url(url, allow_private=False) == url
    with pytest.raises(BadInput):
        checked_url(f"http://127.0.0.1:{port}/", allow_private=False)

    async def post(allow_private: bool) -> tuple[int, bytes]:
        client = WebhookClient(1024, allow_private)
        try:
            return await client.post(url, b"{}", {}, 2.0)
        finally:
            await client.close()

    try:
        with pytest.raises(CallFailed, match="loopback"):
            asyncio.run(post(False))
        assert seen == []
        status, _ = asyncio.run(post(True))
        assert status == 302 and seen == [f"localhost:{port}"]  # the redirect is the answer, not followed
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------------- playing


def play_match(api: Api, bots: list[Any], timeout_ms: int = 5000) -> str:
    creator = bots[0].token
    match_id = api.create_match(creator, players=len(bots), moveTimeoutMs=timeout_ms)
    for bot in bots:
        api.join(bot.token, match_id)
    return match_id


def test_a_match_of_webhook_bots_is_played_to_the_end_without_a_timeout(hooks_api: Api, worker: Any) -> None:
    bots = [SdkBot(hooks_api) for _ in range(3)]
    try:
        match_id = play_match(hooks_api, bots)
        final = wait_until(lambda: (m := seats(hooks_api, match_id))["status"] == "FINISHED" and m,
                           "the webhook bots' match to finish", timeout=120)
        assert [s["timeouts"] for s in final["seats"]] == [0, 0, 0]
        for bot in bots:
            kinds = wait_until(lambda b=bot: (k := b.kinds(match_id))[-1:] == ["end"] and k, "the end call")
            assert kinds[0] == "start" and kinds.count("start") == 1 and kinds.count("end") == 1
            turns = [c for c in bot.calls if c["type"] == "turn" and c["match"]["id"] == match_id]
            assert turns and all(c["match"]["legalMoves"] and c["version"] == c["match"]["version"] for c in turns)
            # exactly once per (match, version, seat)
            assert len({c["version"] for c in turns}) == len(turns)
            assert all(c["match"]["mySeat"] is not None and c["match"]["hand"] is not None for c in turns)
            assert webhook_of(hooks_api, bot.token)["failures"] == 0
    finally:
        for bot in bots:
            bot.close()


def test_a_bot_that_sets_its_webhook_in_a_match_is_called_for_its_turns_from_then_on(hooks_api: Api,
                                                                                  worker: Any) -> None:
    """The seat's bot had no webhook when it joined: setting one marks the match (``hooked``),
    so its next turns are called (its start first); only a turn queued before that can time
    out. (Its webhook checks no signature, so no call can be refused while the secret is new.)"""
    bots = [SdkBot(hooks_api), SdkBot(hooks_api)]
    heard: list[tuple[str, str]] = []  # (match, kind) of each call to the late bot

    class Late(Misbehaving):
        def heard(self, call: dict[str, Any]) -> None:
            heard.append((call["match"]["id"], call["type"]))

    late = misbehaving("good", Late)
    late_token, _ = hooks_api.register()
    try:
        match_id = play_match(hooks_api, [*bots, SimpleNamespace(token=late_token)], timeout_ms=2000)
        hooks_api.data(SET, {"u": url_of(late)}, late_token)
        final = wait_until(lambda: (m := seats(hooks_api, match_id))["status"] == "FINISHED" and m,
                           "the match to finish", timeout=120)
        assert [s["timeouts"] for s in final["seats"]][:2] == [0, 0]
        assert final["seats"][2]["timeouts"] <= 1  # (its turn due before its webhook, if it was)
        kinds = wait_until(lambda: (k := [kind for m, kind in heard if m == match_id])[-1:] == ["end"] and k,
                           "the late bot's end call")
        assert kinds[0] == "start" and kinds.count("start") == 1 and kinds.count("turn") >= 5
    finally:
        for bot in bots:
            bot.close()
        late.shutdown()
        late.server_close()


# ---------------------------------------------------------------------- the matches' marks


def a_stand_in_match(client: redis.Redis, hooked: str | None = None) -> str:
    """A match's hash as far as its marks need it (a homed id: its own slot)."""
    match_id = new_match_id()
    client.hset(match_key(match_id), mapping={"version": 1, **({"hooked": hooked} if hooked else {})})
    return match_id


def hooked_of(client: redis.Redis, match_id: str) -> bytes | None:
    return client.hget(match_key(match_id), "hooked")  # type: ignore[return-value]


def test_a_matchs_mark_of_a_bot_is_added_and_removed_once_and_only_where_the_match_is(redis_url: str,
                                                                                     redis_client: redis.Redis) -> None:
    fresh, shared = a_stand_in_match(redis_client), a_stand_in_match(redis_client, "|other|")
    gone = new_match_id()

    async def run() -> list[bool]:
        services = Services.open(Settings(REDIS_URL=redis_url))
        store = services.matches.matches
        try:
            return [await store.set_hooked(fresh, "b1", True), await store.set_hooked(fresh, "b1", True),
                    await store.set_hooked(shared, "b1", True), await store.set_hooked(shared, "b2", True),
                    await store.set_hooked(shared, "b1", False), await store.set_hooked(shared, "b1", False),
                    await store.set_hooked(gone, "b1", True)]
        finally:
            await services.close()

    assert asyncio.run(run()) == [True] * 6 + [False]
    assert hooked_of(redis_client, fresh) == b"|b1|"
    assert hooked_of(redis_client, shared) == b"|other|b2|"
    assert not redis_client.exists(match_key(gone))  # (nothing made for a match not there)


def test_setting_and_removing_a_webhook_marks_and_unmarks_the_bots_live_matches(redis_url: str,
                                                                                redis_client: redis.Redis) -> None:
    """Its matches follow its webhook, the other bots' marks kept; a remove that lands while a
    set marks the matches (their bot-hash writes crossing) leaves them unmarked, as the bot is."""
    bot_id = f"marks-{os.urandom(4).hex()}"
    live = [a_stand_in_match(redis_client, "|other|"), a_stand_in_match(redis_client)]
    redis_client.sadd(bot_matches_key(bot_id), *live, new_match_id())  # (and one that left Redis)
    caller = Caller(bot_id, "marks")

    async def run() -> list[list[bytes | None]]:
        services = Services.open(Settings(REDIS_URL=redis_url))
        webhooks = services.webhooks
        seen = []
        try:
            await webhooks.set(caller, "http://127.0.0.1:9/hook")
            seen.append([hooked_of(redis_client, m) for m in live])
            await webhooks.remove(caller)
            seen.append([hooked_of(redis_client, m) for m in live])
            listed = webhooks.bots.open_matches
            crossed = False

            async def removed_meanwhile(bot: str) -> list[str]:
                nonlocal crossed
                if not crossed:  # another request's remove, its marks not made yet
                    crossed = True
                    await webhooks.store.remove(bot)
                return await listed(bot)

            webhooks.bots.open_matches = removed_meanwhile  # type: ignore[method-assign]
            await webhooks.set(caller, "http://127.0.0.1:9/hook")
            seen.append([hooked_of(redis_client, m) for m in live])
            return seen
        finally:
            await services.close()

    assert asyncio.run(run()) == [[b"|other|" + bot_id.encode() + b"|", b"|" + bot_id.encode() + b"|"],
                                  [b"|other|", b"|"], [b"|other|", b"|"]]


BAD_ANSWERS = {
    "not-json": "not JSON",
    "illegal": "was refused",
    "error": "answered 500",
    "redirect": "redirects are not followed",
    "slow": "did not answer",
    "big": "bytes long",
}


def test_each_bad_answer_is_refused_recorded_and_the_seat_times_out(hooks_api: Api, worker: Any) -> None:
    api = hooks_api
    servers = {mode: misbehaving(mode) for mode in BAD_ANSWERS}
    try:
        started = {}
        for mode, server in servers.items():
            token, _ = api.register()
            api.data(SET, {"u": url_of(server)}, token)
            match_id = api.create_match(token, players=3, moveTimeoutMs=1000)
            api.join(token, match_id, 0)
            api.add_house_bot(token, match_id)
            api.add_house_bot(token, match_id)
            started[mode] = (token, match_id)
        for mode, (token, match_id) in started.items():
            hook = wait_until(lambda t=token: (w := webhook_of(api, t))["lastError"] and w, f"{mode}'s error", 30)
            assert BAD_ANSWERS[mode] in hook["lastError"], (mode, hook)
            wait_until(lambda m=match_id: seats(api, m)["seats"][0]["timeouts"] >= 1, f"{mode}'s seat to time out", 30)
        # the dispatcher lives on: a good webhook still plays
        good = [SdkBot(api) for _ in range(3)]
        try:
            match_id = play_match(api, good)
            wait_until(lambda: seats(api, match_id)["status"] == "FINISHED", "a good match after the bad", 120)
        finally:
            for bot in good:
                bot.close()
    finally:
        for server in servers.values():
            server.shutdown()
            server.server_close()


def test_a_failing_webhook_is_paused_then_resumes_by_itself(hooks_api: Api, worker: Any) -> None:
    api = hooks_api
    server = misbehaving("error")
    try:
        token, _ = api.register()
        api.data(SET, {"u": url_of(server)}, token)
        match_id = api.create_match(token, players=3, moveTimeoutMs=300)
        api.join(token, match_id, 0)
        api.add_house_bot(token, match_id)
        api.add_house_bot(token, match_id)
        paused = wait_until(lambda: (w := webhook_of(api, token))["status"] == "PAUSED" and w, "the pause", 30)
        assert paused["failures"] >= 2 and "answered 500" in paused["lastError"] and paused["pausedUntil"]
        calls_when_paused = server.calls  # type: ignore[attr-defined]
        server.mode = "good"  # type: ignore[attr-defined]
        resumed = wait_until(lambda: (w := webhook_of(api, token))["status"] == "ACTIVE" and w, "the resumption", 30)
        assert resumed["failures"] == 0 and server.calls > calls_when_paused  # type: ignore[attr-defined]
        # timeouts were counted while it was paused (its seat got the fallback moves)
        assert seats(api, match_id)["seats"][0]["timeouts"] >= 1
    finally:
        server.shutdown()
        server.server_close()


def test_a_tournament_of_webhook_bots(hooks_api: Api, worker: Any) -> None:
    api = hooks_api
    bots = [SdkBot(api) for _ in range(3)]
    try:
        for bot in bots:
            api.data("mutation { setInvitationPolicy(policy: ACCEPT_ALL) }", {}, bot.token)
        spec = {"name": name(), "format": "ROUND_ROBIN", "rounds": 1, "playersPerMatch": 3, "moveTimeoutMs": 5000,
                "rated": False, "bots": [b.id for b in bots]}
        tid = api.data("mutation($i: CreateTournamentInput!) { createTournament(input: $i) { id } }", {"i": spec},
                       bots[0].token)["createTournament"]["id"]
        query = "query($t: ID!) { tournament(id: $t) { status matches { id seats { timeouts } } } }"
        done = wait_until(lambda: (t := api.data(query, {"t": tid})["tournament"])["status"] == "FINISHED" and t,
                          "the tournament to finish", 180)
        assert done["matches"] and all(s["timeouts"] == 0 for m in done["matches"] for s in m["seats"])
        for bot in bots:
            assert any(c["type"] == "turn" for c in bot.calls)
    finally:
        for bot in bots:
            bot.close()


# ---------------------------------------------------------------------- the bot authors' programs


def answering(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_the_serve_bot_command_and_the_example_webhook_bot_play_a_match_as_their_own_processes(
    hooks_api: Api, worker: Any, tmp_path: Path
) -> None:
    """What the README tells an author to run: ``wizard-arena serve-bot --bot file.py:Class``
    serving the SDK's example bot, and ``examples/webhook_bot.py`` (the standard library alone),
    each a process of its own given its webhook's secret; with a third webhook bot they play a
    match to its end, every move their own, every call's signature checked."""
    api = hooks_api
    root = Path(__file__).resolve().parents[2]
    commands = [
        [str(Path(sys.executable).parent / "wizard-arena"), "serve-bot", "--bot",
         f"{root / 'examples' / 'random_bot.py'}:RandomBot", "--log-level", "warning"],
        [sys.executable, str(root / "examples" / "webhook_bot.py")],
    ]
    processes: list[subprocess.Popen[bytes]] = []
    third = SdkBot(api)
    try:
        match_id = api.create_match(third.token, players=3, moveTimeoutMs=5000)
        tokens = []
        for command in commands:
            token, _ = api.register()
            port = free_port()
            secret = api.data(SET, {"u": f"http://127.0.0.1:{port}/"}, token)["setWebhook"]["secret"]
            processes.append(subprocess.Popen([*command, "--port", str(port), "--secret", secret], cwd=tmp_path))
            wait_until(lambda p=port: answering(p), f"{command[1]} to listen on port {port}")
            tokens.append(token)
            api.join(token, match_id)
        api.join(third.token, match_id)
        final = wait_until(lambda: (m := seats(api, match_id))["status"] == "FINISHED" and m,
                           "the match of the authors' webhook bots to finish", timeout=120)
        assert [s["timeouts"] for s in final["seats"]] == [0, 0, 0]
        for token in tokens:
            assert webhook_of(api, token)["failures"] == 0
        assert all(process.poll() is None for process in processes)  # each still serving
    finally:
        third.close()
        for process in processes:
            process.terminate()
            process.wait(10)
