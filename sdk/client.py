"""A client of the Wizard Arena API: GraphQL over HTTP (httpx) and subscriptions over
``graphql-transport-ws`` (websockets), with the API's errors as :class:`ArenaError`.

>>> client = ArenaClient("http://127.0.0.1:8000", token="...")
>>> client.graphql_url, client.ws_url
('http://127.0.0.1:8000/graphql', 'ws://127.0.0.1:8000/graphql')
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

import httpx
import websockets
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from contract import MATCH
from wizard import MatchView, Move

PROTOCOL = "graphql-transport-ws"
#: HTTP statuses that answer a WebSocket upgrade where WebSockets are not carried at all
#: (5xx and the like are a server or proxy in trouble: try again, do not give WebSockets up)
WEBSOCKETS_REFUSED = frozenset({400, 403, 404, 405, 426})

log = logging.getLogger("wizard_arena.client")

#: Every field of ``Match``, as the API's contract describes it (``contract``)
MATCH_FIELDS = MATCH.selection()


class ArenaError(Exception):
    """The server refused a request: ``code`` is API.md's ``extensions.code``; the message
    says what to do. ``retry_after`` (seconds) comes with ``RATE_LIMITED``."""

    def __init__(self, code: str, message: str, retry_after: float | None = None, extensions: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retry_after = retry_after
        self.extensions = extensions or {}

    @classmethod
    def from_graphql(cls, errors: Any) -> ArenaError:
        """The first error of a GraphQL ``errors`` value (or the REST mirror's ``error``,
        whose code stands beside the message), whatever its shape."""
        error = errors[0] if isinstance(errors, list) and errors else errors
        if not isinstance(error, dict):
            return cls("INTERNAL_ERROR", f"the server answered an error of no known shape: {error!r}")
        extensions = error.get("extensions")
        extensions = extensions if isinstance(extensions, dict) else error
        retry_after = extensions.get("retryAfterSeconds")
        return cls(
            str(extensions.get("code", "INTERNAL_ERROR")), str(error.get("message", "")),
            retry_after if isinstance(retry_after, int | float) else None, extensions,
        )


class ArenaUnavailable(Exception):
    """The server could not be reached, or the connection was lost (the request may or may
    not have been applied: resend moves with ``expectedVersion``)."""


class BadAnswer(ArenaUnavailable):
    """The server's answer could not be read (a proxy's page, a newer server, a bug)."""


class WebSocketsUnavailable(ArenaUnavailable):
    """The server (or a proxy in the way) does not speak graphql-transport-ws: long-poll instead."""


class Moved(NamedTuple):
    """What a move answers: the match's version and status just after it."""

    version: int
    status: str

    @property
    def is_over(self) -> bool:
        return self.status in ("FINISHED", "ABORTED")


class Match:
    """One ``Match`` as the API answered it: the engine's view plus the live fields."""

    __slots__ = ("data", "view")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.view = MatchView.from_dict(data)

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def version(self) -> int:
        return int(self.data["version"])

    @property
    def status(self) -> str:
        return str(self.data["status"])

    @property
    def is_over(self) -> bool:
        return self.status in ("FINISHED", "ABORTED")

    @property
    def my_turn(self) -> bool:
        return self.view.my_seat is not None and self.view.my_seat in self.view.awaiting

    def names(self) -> list[str | None]:
        """Each seat's bot name (``house-heuristic`` for a house bot; None while empty)."""
        return [
            (s.get("bot") or {}).get("name") or (f"house-{s['houseBot'].lower()}" if s.get("houseBot") else None)
            for s in self.data["seats"]
        ]

    def timeouts(self) -> list[int]:
        return [int(s["timeouts"]) for s in self.data["seats"]]


async def rate_limit_wait(error: ArenaError) -> None:
    """Waits as long as a ``RATE_LIMITED`` answer asks."""
    wait = error.retry_after or 1.0
    log.info("rate limited: waiting %.3f s as the server asks", wait)
    await asyncio.sleep(wait)


def _match(data: Any) -> Match:
    try:
        return Match(data)
    except (KeyError, TypeError, ValueError) as e:
        raise BadAnswer(f"the server's Match could not be read ({type(e).__name__}: {e}); is the SDK up to date?") from e


def _message(raw: str | bytes) -> dict[str, Any]:
    try:
        message = json.loads(raw)
    except ValueError:
        raise BadAnswer(f"a WebSocket message that is not JSON: {raw[:200]!r}") from None
    if not isinstance(message, dict):
        raise BadAnswer(f"a WebSocket message that is not an object: {raw[:200]!r}")
    return message


class ArenaClient:
    """One bot's (or an anonymous) connection to a server. Use it as an async context
    manager, or call :meth:`close`."""

    def __init__(
        self, url: str, token: str | None = None, timeout: float = 30.0, wait_when_rate_limited: bool = True
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        #: a request refused with RATE_LIMITED was not carried out, so it is sent again after
        #: the wait the server names; False: the ArenaError is raised instead
        self.wait_when_rate_limited = wait_when_rate_limited
        self.graphql_url = f"{self.url}/graphql"
        scheme, _, rest = self.url.partition("://")
        self.ws_url = f"{'wss' if scheme == 'https' else 'ws'}://{rest}/graphql"
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # an awaitTurn long-poll holds its request up to the server's bound (60 s at most)
        self._http = httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(timeout, read=timeout + 65))

    async def __aenter__(self) -> ArenaClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    # ------------------------------------------------------------------ GraphQL over HTTP
    async def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``data`` of one operation; the first error as :class:`ArenaError`, but for
        ``RATE_LIMITED``, which is waited out and sent again (see ``wait_when_rate_limited``)."""
        while True:
            try:
                return await self._graphql_once(query, variables)
            except ArenaError as e:
                if e.code != "RATE_LIMITED" or not self.wait_when_rate_limited:
                    raise
                await rate_limit_wait(e)

    async def _graphql_once(self, query: str, variables: dict[str, Any] | None) -> dict[str, Any]:
        try:
            response = await self._http.post(self.graphql_url, json={"query": query, "variables": variables or {}})
        except httpx.TransportError as e:
            raise ArenaUnavailable(f"{self.graphql_url}: {type(e).__name__}: {e}") from e
        try:
            body = response.json()
        except ValueError:
            body = None
        errors = body.get("errors") or body.get("error") if isinstance(body, dict) else None
        if errors:
            raise ArenaError.from_graphql(errors)
        if isinstance(body, dict) and isinstance(body.get("data"), dict):
            return body["data"]
        # no GraphQL answer: a proxy's page, or a server in trouble
        status = response.status_code
        if status == 429:
            retry_after = response.headers.get("retry-after", "1")
            wait = float(retry_after) if retry_after.replace(".", "", 1).isdigit() else 1.0
            raise ArenaError("RATE_LIMITED", f"HTTP 429 from {self.graphql_url}", wait)
        if status == 413:
            raise ArenaError("LIMIT_EXCEEDED", f"HTTP 413 from {self.graphql_url}: the request is too large")
        raise ArenaUnavailable(
            f"{self.graphql_url} answered HTTP {status} with no GraphQL answer: is this a Wizard Arena server?"
        )

    async def record(self, match_id: str) -> dict[str, Any]:
        """A finished match's record (``GET /api/matches/{id}/record``): config, seed, every
        move, the result, the ``seedHash`` published at the start."""
        url = f"{self.url}/api/matches/{match_id}/record"
        try:
            response = await self._http.get(url)
        except httpx.TransportError as e:
            raise ArenaUnavailable(f"{url}: {type(e).__name__}: {e}") from e
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            raise ArenaError.from_graphql(body["error"])
        if response.is_error or not isinstance(body, dict):
            raise ArenaUnavailable(f"{url} answered HTTP {response.status_code} with no record: is this a Wizard Arena server?")
        return body

    async def seed_hash(self, match_id: str) -> str | None:
        """The ``seedHash`` match ``match_id`` published at its start (None: no such match)."""
        data = await self.graphql("query($id: ID!) { match(id: $id) { seedHash } }", {"id": match_id})
        match = data.get("match")
        return match.get("seedHash") if isinstance(match, dict) else None

    async def register(self, name: str, secret: str | None = None) -> dict[str, Any]:
        """``{token, bot {id name}}``: keep the token, the server shows it only this once."""
        data = await self.graphql(
            "mutation($name: String!, $secret: String) { registerBot(name: $name, secret: $secret) { token bot { id name } } }",
            {"name": name, "secret": secret},
        )
        return data["registerBot"]

    async def me(self) -> dict[str, Any] | None:
        return (await self.graphql("{ me { id name } }"))["me"]

    async def create_match(self, **spec: Any) -> Match:
        """``createMatch`` with CreateMatchInput's fields, camelCase (``moveTimeoutMs=...``)."""
        data = await self.graphql(
            f"mutation($input: CreateMatchInput!) {{ createMatch(input: $input) {{ {MATCH_FIELDS} }} }}", {"input": spec}
        )
        return _match(data.get("createMatch"))

    async def join_match(self, match_id: str, seat: int | None = None) -> Match:
        data = await self.graphql(
            f"mutation($id: ID!, $seat: Int) {{ joinMatch(matchId: $id, seat: $seat) {{ {MATCH_FIELDS} }} }}",
            {"id": match_id, "seat": seat},
        )
        return _match(data.get("joinMatch"))

    async def add_house_bot(self, match_id: str, kind: str) -> Match:
        data = await self.graphql(
            f"mutation($id: ID!, $kind: HouseBotKind!) {{ addHouseBot(matchId: $id, kind: $kind) {{ {MATCH_FIELDS} }} }}",
            {"id": match_id, "kind": kind.upper()},
        )
        return _match(data.get("addHouseBot"))

    async def match(self, match_id: str) -> Match | None:
        data = await self.graphql(f"query($id: ID!) {{ match(id: $id) {{ {MATCH_FIELDS} }} }}", {"id": match_id})
        return None if data.get("match") is None else _match(data["match"])

    async def submit_move(self, match_id: str, move: Move, expected_version: int | None = None) -> Moved:
        """The move made: the match's version and status just after it. A bot's next view comes
        with its next turn; asking for the whole view back would cost the server as much again."""
        data = await self.graphql(
            "mutation($id: ID!, $move: MoveInput!, $v: Int) { submitMove(matchId: $id, move: $move, expectedVersion: $v) "
            "{ version status } }",
            {"id": match_id, "move": move.to_dict(), "v": expected_version},
        )
        moved = data.get("submitMove")
        if not isinstance(moved, dict):
            raise ArenaError("INTERNAL_ERROR", f"the server answered a move with {moved!r}")
        return Moved(int(moved["version"]), str(moved["status"]))

    async def await_turn(self, match_id: str | None = None, timeout_ms: int | None = None) -> Match | None:
        data = await self.graphql(
            f"query($id: ID, $t: Int) {{ awaitTurn(matchId: $id, timeoutMs: $t) {{ {MATCH_FIELDS} }} }}",
            {"id": match_id, "t": timeout_ms},
        )
        return None if data.get("awaitTurn") is None else _match(data["awaitTurn"])

    # ------------------------------------------------------------------ subscriptions
    async def subscribe(self, query: str, variables: dict[str, Any] | None = None) -> AsyncIterator[dict[str, Any]]:
        """Each ``data`` of one subscription over its own graphql-transport-ws connection,
        until the server completes it. Raises :class:`ArenaError` for an error message,
        :class:`WebSocketsUnavailable` when the server does not speak the protocol and
        :class:`ArenaUnavailable` when the connection fails or drops."""
        try:
            async with connect(
                self.ws_url, subprotocols=[Subprotocol(PROTOCOL)], open_timeout=10, ping_interval=20, max_size=2**22
            ) as ws:
                if ws.subprotocol != PROTOCOL:
                    raise WebSocketsUnavailable(f"{self.ws_url} did not agree to {PROTOCOL}")
                await ws.send(json.dumps({"type": "connection_init", "payload": {"token": self.token} if self.token else {}}))
                async with asyncio.timeout(10):
                    while True:
                        message = _message(await ws.recv())
                        if message.get("type") == "connection_ack":
                            break
                        if message.get("type") == "ping":
                            await ws.send(json.dumps({"type": "pong"}))
                operation = "1"
                await ws.send(json.dumps({"id": operation, "type": "subscribe", "payload": {"query": query, "variables": variables or {}}}))
                async for raw in ws:
                    message = _message(raw)
                    kind = message.get("type")
                    if kind == "ping":
                        await ws.send(json.dumps({"type": "pong"}))
                    elif message.get("id") != operation:
                        continue
                    elif kind == "next":
                        payload = message.get("payload")
                        payload = payload if isinstance(payload, dict) else {}
                        if payload.get("errors"):
                            raise ArenaError.from_graphql(payload["errors"])
                        if not isinstance(payload.get("data"), dict):
                            raise ArenaUnavailable(f"{self.ws_url}: a next message without data: {message!r}")
                        yield payload["data"]
                    elif kind == "error":
                        raise ArenaError.from_graphql(message.get("payload"))
                    elif kind == "complete":
                        return
                raise ArenaUnavailable(f"{self.ws_url}: the server closed the connection ({ws.close_code} {ws.close_reason})")
        except websockets.exceptions.InvalidStatus as e:
            # refused by something that does not carry WebSockets there, or just down for now
            if e.response.status_code in WEBSOCKETS_REFUSED:
                raise WebSocketsUnavailable(f"{self.ws_url}: {e}") from e
            raise ArenaUnavailable(f"{self.ws_url}: {e}") from e
        except websockets.exceptions.InvalidHandshake as e:
            raise ArenaUnavailable(f"{self.ws_url}: {type(e).__name__}: {e}") from e
        except (OSError, TimeoutError, websockets.exceptions.ConnectionClosed) as e:
            raise ArenaUnavailable(f"{self.ws_url}: {type(e).__name__}: {e}") from e

    async def my_turns(self) -> AsyncIterator[Match]:
        """``myTurns``: the bot's view of each match where it now has to move (pending ones
        first). A turn this SDK cannot read (a newer server's ruleset, say) is logged and
        skipped: it times out, the others go on."""
        async for data in self.subscribe(f"subscription {{ myTurns {{ {MATCH_FIELDS} }} }}"):
            try:
                match = Match(data["myTurns"])
            except (KeyError, TypeError, ValueError) as e:
                log.error("a turn this SDK cannot read was skipped (%s: %s): %.300s", type(e).__name__, e, data)
                continue
            yield match

    async def match_updates(self, match_id: str) -> AsyncIterator[Match]:
        """``matchUpdates``: the caller's view after every change, until the match ends."""
        query = f"subscription($id: ID!) {{ matchUpdates(matchId: $id) {{ {MATCH_FIELDS} }} }}"
        async for data in self.subscribe(query, {"id": match_id}):
            yield _match(data.get("matchUpdates"))


# ---------------------------------------------------------------------- commands
def _need_token(args: argparse.Namespace, command: str) -> str:
    if not args.token:
        raise ValueError(f"{command} needs the bot's token: --token T or WIZARD_ARENA_TOKEN (from `wizard-arena register NAME`)")
    return str(args.token)


def _run(coroutine: Any) -> Any:
    try:
        return asyncio.run(coroutine)
    except ArenaError as e:
        raise ValueError(f"the server refused: {e.code}: {e.message}") from None
    except ArenaUnavailable as e:
        raise ValueError(f"cannot reach the server: {e}") from None


def register_command(args: argparse.Namespace) -> None:
    async def register() -> dict[str, Any]:
        async with ArenaClient(args.url) as client:
            return await client.register(args.name, args.secret)

    registration = _run(register())
    if args.json:
        print(json.dumps(registration, separators=(",", ":")))
        return
    bot = registration["bot"]
    print(f"registered {bot['name']} (id {bot['id']})")
    print(f"token: {registration['token']}")
    print("Keep the token: the server keeps only its hash and shows it this once. Use it as")
    print(f"  export WIZARD_ARENA_TOKEN={registration['token']}")


def match_new_command(args: argparse.Namespace) -> None:
    token = _need_token(args, "match new")
    kinds = [kind.upper() for kind in args.house_bot]
    unknown = [kind for kind in kinds if kind not in ("RANDOM", "HEURISTIC")]
    if unknown:
        raise ValueError(f"--house-bot {unknown[0]}: the house bots are RANDOM and HEURISTIC")
    seats_taken = len(kinds) + (1 if args.join else 0)
    if seats_taken > args.players:
        raise ValueError(f"{seats_taken} seats asked for (house bots and --join) but the match has {args.players}")

    async def create() -> Match:
        spec: dict[str, Any] = {"ruleset": args.ruleset, "players": args.players, "variants": args.variant or [], "rated": args.rated}
        if args.move_timeout_ms is not None:
            spec["moveTimeoutMs"] = args.move_timeout_ms
        if args.seed is not None:
            spec["seed"] = args.seed
        async with ArenaClient(args.url, token) as client:
            match = await client.create_match(**spec)
            if args.join:
                match = await client.join_match(match.id)
            for kind in kinds:
                match = await client.add_house_bot(match.id, kind)
            return match

    match = _run(create())
    if args.json:
        print(json.dumps(match.data, separators=(",", ":")))
        return
    print(match.id)

