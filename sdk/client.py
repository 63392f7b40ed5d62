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
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, NamedTuple, TypeVar

import httpx
import websockets
from websockets.asyncio.client import connect
from websockets.typing import Subprotocol

from contract import MATCH
from wizard import HOUSE_BOTS, MatchView, Move

PROTOCOL = "graphql-transport-ws"
#: HTTP statuses that answer a WebSocket upgrade where WebSockets are not carried at all
#: (5xx and the like are a server or proxy in trouble: try again, do not give WebSockets up)
WEBSOCKETS_REFUSED = frozenset({400, 403, 404, 405, 426})

log = logging.getLogger("wizard_arena.client")

#: Every field of ``Match``, as the API's contract describes it (``contract``)
MATCH_FIELDS = MATCH.selection()
#: what the organiser's commands show of a tournament
#: a ladder membership as the SDK reads it
LADDER_FIELDS = "bot { id name } ruleset players state joinedAt pausedAt pausedReason playing"
TOURNAMENT_FIELDS = (
    "id name status format ruleset variants playersPerMatch rounds durationMinutes startsAt startedAt finishedAt "
    "rated duplicate createdBy cancelledReason entrants { id name } standings { rank points matches bot { id name } }"
)
#: what the runner reads of an invitation
INVITATION_FIELDS = "id status tournament { id name }"
#: what the client reads of a challenge
CHALLENGE_FIELDS = (
    "id status open ruleset players variants moveTimeoutMs rated expiresAt matchId challenger { id name } "
    "bots { bot { id name } answer reason } accepted { id name }"
)

T = TypeVar("T")


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


class TurnWait(NamedTuple):
    """``nextTurn``'s answer: why the wait ended (``YOUR_TURN``, ``TIMED_OUT``, ``MATCH_OVER``,
    ``INVITATION``, ``CHALLENGE``), the match, with ``INVITATION`` the invitation (``{id status
    tournament {id name}}``) and with ``CHALLENGE`` the challenge (CHALLENGE_FIELDS)."""

    reason: str
    match: Match | None
    invitation: dict[str, Any] | None
    challenge: dict[str, Any] | None = None


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


def _raise_for_status(response: httpx.Response, url: str) -> None:
    """The API's error for an answer that carries none of its own (a proxy's 429 or 413 page)."""
    status = response.status_code
    if status == 429:
        retry_after = response.headers.get("retry-after", "1")
        wait = float(retry_after) if retry_after.replace(".", "", 1).isdigit() else 1.0
        raise ArenaError("RATE_LIMITED", f"HTTP 429 from {url}", wait)
    if status == 413:
        raise ArenaError("LIMIT_EXCEEDED", f"HTTP 413 from {url}: the request is too large")


def _match(data: Any) -> Match:
    try:
        return Match(data)
    except (KeyError, TypeError, ValueError) as e:
        raise BadAnswer(f"the server's Match could not be read ({type(e).__name__}: {e}); is the SDK up to date?") from e


def _turn(data: Any) -> Match | None:
    """A turn from a subscription; one this SDK cannot read (a newer server's ruleset, say) is
    logged and skipped (None): it times out, the others go on."""
    try:
        return Match(data)
    except (KeyError, TypeError, ValueError) as e:
        log.error("a turn this SDK cannot read was skipped (%s: %s): %.300s", type(e).__name__, e, data)
        return None


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
        return await self._sent_until_not_rate_limited(lambda: self._graphql_once(query, variables))

    async def _sent_until_not_rate_limited(self, send: Callable[[], Awaitable[T]]) -> T:
        """What ``send()`` answers, sent again after each ``RATE_LIMITED`` refusal (which changed
        nothing) once the wait the server names has passed; unless ``wait_when_rate_limited`` is
        False, then the refusal is raised."""
        while True:
            try:
                return await send()
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
            error = ArenaError.from_graphql(errors)
            if error.code == "UNAVAILABLE":
                # the server's Redis or database is away for a moment (a restart, say): to a bot
                # that is a lost connection, retried as one (nothing was done)
                raise ArenaUnavailable(f"{self.graphql_url}: {error.message}") from error
            raise error
        if isinstance(body, dict) and isinstance(body.get("data"), dict):
            return body["data"]
        # no GraphQL answer: a proxy's page, or a server in trouble
        _raise_for_status(response, self.graphql_url)
        raise ArenaUnavailable(
            f"{self.graphql_url} answered HTTP {response.status_code} with no GraphQL answer: is this a Wizard Arena server?"
        )

    async def record(self, match_id: str) -> dict[str, Any]:
        """A finished match's record (``GET /api/matches/{id}/record``): config, seed, every
        move, the result, the ``seedHash`` published at the start. ``RATE_LIMITED`` is waited
        out as :meth:`graphql` waits it out."""
        return await self._sent_until_not_rate_limited(lambda: self._record_once(match_id))

    async def _record_once(self, match_id: str) -> dict[str, Any]:
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
        _raise_for_status(response, url)
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

    async def invitation_policy(self) -> str | None:
        """The bot's standing answer to tournament invitations (None: no bot has this token)."""
        me = (await self.graphql("{ me { invitationPolicy } }"))["me"]
        return None if me is None else str(me["invitationPolicy"])

    async def set_invitation_policy(self, policy: str) -> str:
        """The bot's standing answer to tournament invitations: ACCEPT_ALL, DECLINE_ALL or ASK."""
        data = await self.graphql("mutation($p: InvitationPolicy!) { setInvitationPolicy(policy: $p) }", {"p": policy})
        return data["setInvitationPolicy"]

    async def pending_invitations(self) -> list[dict[str, Any]]:
        """The bot's invitations still waiting for an answer: ``{id, tournament {id name}}``."""
        data = await self.graphql("{ invitations(status: PENDING) { id tournament { id name } } }")
        return data["invitations"]

    async def answer_invitation(self, invitation_id: str, accept: bool) -> str:
        """Accept or decline an invitation: its status after."""
        field = "acceptInvitation" if accept else "declineInvitation"
        data = await self.graphql(f"mutation($i: ID!) {{ {field}(invitationId: $i) {{ status }} }}", {"i": invitation_id})
        return data[field]["status"]

    # ------------------------------------------------------------------ challenges
    async def create_challenge(self, bots: list[str], **terms: Any) -> dict[str, Any]:
        """``createChallenge``: ``bots`` (none: an open challenge) and createMatch's terms,
        camelCase (``players=3, rated=True``)."""
        data = await self.graphql(
            f"mutation($input: CreateChallengeInput!) {{ createChallenge(input: $input) {{ {CHALLENGE_FIELDS} }} }}",
            {"input": {"bots": bots, **terms}},
        )
        return dict(data["createChallenge"])

    async def challenges(self, status: str | None = None, first: int = 50) -> list[dict[str, Any]]:
        """The bot's challenges, newest first: made, named in, and the open ones offered to it."""
        data = await self.graphql(
            f"query($s: ChallengeStatus, $f: Int!) {{ challenges(status: $s, first: $f) {{ {CHALLENGE_FIELDS} }} }}",
            {"s": status, "f": first},
        )
        return list(data["challenges"])

    async def challenge(self, challenge_id: str) -> dict[str, Any] | None:
        data = await self.graphql(f"query($id: ID!) {{ challenge(id: $id) {{ {CHALLENGE_FIELDS} }} }}", {"id": challenge_id})
        return data["challenge"]

    async def answer_challenge(self, challenge_id: str, accept: bool, reason: str | None = None) -> dict[str, Any]:
        """Accept or decline a challenge (``reason``: why, when declining); the challenge after."""
        if accept:
            data = await self.graphql(
                f"mutation($id: ID!) {{ acceptChallenge(id: $id) {{ {CHALLENGE_FIELDS} }} }}", {"id": challenge_id}
            )
            return dict(data["acceptChallenge"])
        data = await self.graphql(
            f"mutation($id: ID!, $r: String) {{ declineChallenge(id: $id, reason: $r) {{ {CHALLENGE_FIELDS} }} }}",
            {"id": challenge_id, "r": reason},
        )
        return dict(data["declineChallenge"])

    async def cancel_challenge(self, challenge_id: str) -> dict[str, Any]:
        data = await self.graphql(
            f"mutation($id: ID!) {{ cancelChallenge(id: $id) {{ {CHALLENGE_FIELDS} }} }}", {"id": challenge_id}
        )
        return dict(data["cancelChallenge"])

    async def set_challenge_policy(self, policy: str) -> str:
        """The bot's standing rule for challenges: ACCEPT_ANY, REFUSE_RATED or REFUSE_ALL."""
        data = await self.graphql("mutation($p: ChallengePolicy!) { setChallengePolicy(policy: $p) }", {"p": policy})
        return str(data["setChallengePolicy"])
    # ------------------------------------------------------------------ the ladder
    async def join_ladder(self, ruleset: str, players: int) -> dict[str, Any]:
        """Join the continuous rated ladder (again: a pause is lifted): the membership."""
        data = await self.graphql(
            f"mutation($r: Ruleset!, $p: Int!) {{ joinLadder(ruleset: $r, players: $p) {{ {LADDER_FIELDS} }} }}",
            {"r": ruleset, "p": players},
        )
        return data["joinLadder"]

    async def leave_ladder(self, ruleset: str, players: int) -> dict[str, Any]:
        """Leave the ladder (its matches in play finish): the membership, LEFT."""
        data = await self.graphql(
            f"mutation($r: Ruleset!, $p: Int!) {{ leaveLadder(ruleset: $r, players: $p) {{ {LADDER_FIELDS} }} }}",
            {"r": ruleset, "p": players},
        )
        return data["leaveLadder"]

    async def ladder(self, ruleset: str, players: int, first: int = 100) -> list[dict[str, Any]]:
        """The ladder's members, each with its state and the ladder matches it sits in now."""
        data = await self.graphql(
            f"query($r: Ruleset!, $p: Int!, $f: Int!) {{ ladder(ruleset: $r, players: $p, first: $f) "
            f"{{ {LADDER_FIELDS} }} }}",
            {"r": ruleset, "p": players, "f": first},
        )
        return data["ladder"]

    # ------------------------------------------------------------------ tournaments and ratings
    async def create_tournament(self, **spec: Any) -> dict[str, Any]:
        """``createTournament`` with CreateTournamentInput's fields, camelCase."""
        data = await self.graphql(
            f"mutation($input: CreateTournamentInput!) {{ createTournament(input: $input) {{ {TOURNAMENT_FIELDS} }} }}",
            {"input": spec},
        )
        return dict(data["createTournament"])

    async def tournaments(self, status: str | None = None, first: int = 20, after: str | None = None) -> dict[str, Any]:
        """A page of tournaments, newest first: ``{edges [{cursor node}], pageInfo}``."""
        data = await self.graphql(
            "query($s: TournamentStatus, $f: Int!, $a: String) { tournaments(status: $s, first: $f, after: $a) { "
            "edges { node { id name status format ruleset startsAt } } "
            "pageInfo { hasNextPage endCursor } } }",
            {"s": status, "f": first, "a": after},
        )
        return dict(data["tournaments"])

    async def tournament(self, tournament_id: str) -> dict[str, Any] | None:
        data = await self.graphql(f"query($id: ID!) {{ tournament(id: $id) {{ {TOURNAMENT_FIELDS} }} }}", {"id": tournament_id})
        return data["tournament"]

    async def cancel_tournament(self, tournament_id: str, reason: str | None = None) -> dict[str, Any]:
        """Cancels a tournament its bot created; ``reason`` shows in its ``cancelledReason``."""
        data = await self.graphql(
            f"mutation($id: ID!, $reason: String) {{ cancelTournament(tournamentId: $id, reason: $reason) "
            f"{{ {TOURNAMENT_FIELDS} }} }}",
            {"id": tournament_id, "reason": reason},
        )
        return dict(data["cancelTournament"])

    async def leaderboard(
        self, ruleset: str, method: str = "ELO", first: int = 50, offset: int = 0, provisional: bool = True
    ) -> list[dict[str, Any]]:
        """Bots by rating, each with its deviation and provisional mark; ``provisional`` False
        leaves provisional bots out."""
        data = await self.graphql(
            "query($r: Ruleset!, $m: RatingMethod!, $f: Int!, $o: Int!, $p: Boolean!) { leaderboard(ruleset: $r, "
            "method: $m, first: $f, offset: $o, provisional: $p) "
            "{ rank rating games deviation provisional bot { id name house retired } } }",
            {"r": ruleset, "m": method, "f": first, "o": offset, "p": provisional},
        )
        return list(data["leaderboard"])

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

    async def submit_move(
        self, match_id: str, move: Move, expected_version: int | None = None, debug: str | None = None
    ) -> Moved:
        """The move made: the match's version and status just after it. A bot's next view comes
        with its next turn; asking for the whole view back would cost the server as much again.
        ``debug`` (at most 4096 bytes of UTF-8) is kept with the move for this bot's eyes only."""
        if debug is None:  # the document a server from before debug was kept reads too
            data = await self.graphql(
                "mutation($id: ID!, $move: MoveInput!, $v: Int) "
                "{ submitMove(matchId: $id, move: $move, expectedVersion: $v) { version status } }",
                {"id": match_id, "move": move.to_dict(), "v": expected_version},
            )
        else:
            data = await self.graphql(
                "mutation($id: ID!, $move: MoveInput!, $v: Int, $debug: String) "
                "{ submitMove(matchId: $id, move: $move, expectedVersion: $v, debug: $debug) { version status } }",
                {"id": match_id, "move": move.to_dict(), "v": expected_version, "debug": debug},
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

    async def next_turn_or_invitation(
        self, timeout_ms: int | None = None, invitations: bool = True, challenges: bool = False
    ) -> TurnWait:
        """``nextTurn(invitations: true)``: waits on all the bot's matches and its invitations
        (one pending answers at once), for bots that long-poll; with ``challenges``, on the
        challenges that name it and wait for its answer too."""
        data = await self.graphql(
            "query($t: Int, $i: Boolean!, $c: Boolean!) { nextTurn(timeoutMs: $t, invitations: $i, challenges: $c) "
            f"{{ reason match {{ {MATCH_FIELDS} }} invitation {{ {INVITATION_FIELDS} }} "
            f"challenge {{ {CHALLENGE_FIELDS} }} }} }}",
            {"t": timeout_ms, "i": invitations, "c": challenges},
        )
        wait = data.get("nextTurn")
        if not isinstance(wait, dict):
            raise BadAnswer(f"the server answered nextTurn with {wait!r}")
        match = wait.get("match")
        return TurnWait(str(wait.get("reason")), None if match is None else _match(match), wait.get("invitation"),
                        wait.get("challenge"))

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
            match = _turn(data.get("myTurns"))
            if match is not None:
                yield match

    async def my_turns_and_invitations(self, challenges: bool = False) -> AsyncIterator[Match | dict[str, Any]]:
        """``myTurnsAndInvitations``: what :meth:`my_turns` yields and, on the same stream, the
        bot's invitations (``{kind: "invitation", id status tournament {id name}}``): those
        pending when it subscribes, then each new one as it comes; with ``challenges``, its
        challenges too (``{kind: "challenge", ...CHALLENGE_FIELDS}``), each change of status."""
        # aliased: Invitation's status, Challenge's and Match's are different enums, which
        # GraphQL does not let share one name in a union's selection
        query = (
            "subscription($c: Boolean!) { myTurnsAndInvitations(challenges: $c) { __typename "
            f"... on Match {{ {MATCH_FIELDS} }} "
            "... on Invitation { invitationId: id invitationStatus: status tournament { id name } } "
            f"... on Challenge {{ {CHALLENGE_FIELDS.replace('id status', 'challengeId: id challengeStatus: status', 1)} }} }} }}"
        )
        async for data in self.subscribe(query, {"c": challenges}):
            item = data.get("myTurnsAndInvitations")
            kind = item.get("__typename") if isinstance(item, dict) else None
            if isinstance(item, dict) and kind == "Invitation":
                yield {"kind": "invitation", "id": item.get("invitationId"), "status": item.get("invitationStatus"),
                       "tournament": item.get("tournament") or {}}
                continue
            if isinstance(item, dict) and kind == "Challenge":
                fields = {k: v for k, v in item.items() if k not in ("__typename", "challengeId", "challengeStatus")}
                yield {"kind": "challenge", **fields, "id": item.get("challengeId"), "status": item.get("challengeStatus")}
                continue
            match = _turn(item)
            if match is not None:
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
    unknown = [kind for kind in kinds if kind not in HOUSE_BOTS]
    if unknown:
        raise ValueError(f"--house-bot {unknown[0]}: the house bots are {', '.join(HOUSE_BOTS)}")
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



# ---------------------------------------------------------------------- the organiser's commands
def _show(value: Any, as_json: bool, lines: list[str]) -> None:
    if as_json:
        print(json.dumps(value, separators=(",", ":")))
    else:
        print("\n".join(lines))


def _tournament_lines(t: dict[str, Any]) -> list[str]:
    plan = f"{t['rounds']} rounds" if t.get("rounds") is not None else f"{t.get('durationMinutes')} minutes"
    lines = [
        f"{t['id']}  {t['name']}  {t['status']}",
        f"  {t['format']} of {plan}, {t['ruleset']}{''.join(' +' + v for v in t.get('variants') or [])}, "
        f"{t['playersPerMatch']} per match{', rated' if t.get('rated') else ''}; starts {t['startsAt']}",
        f"  entrants: {', '.join(e['name'] for e in t.get('entrants') or []) or 'none yet'}",
    ]
    if t.get("cancelledReason"):
        lines.append(f"  {t['cancelledReason']}")
    for s in t.get("standings") or []:
        lines.append(f"  {s['rank']:>3}. {s['bot']['name']:<30} {s['points']:>7g} points in {s['matches']} matches")
    return lines


def tournament_command(args: argparse.Namespace) -> None:
    """``wizard-arena tournament create|list|show|cancel`` against a server."""
    action = args.tournament_command

    async def run() -> Any:
        token = _need_token(args, f"tournament {action}") if action in ("create", "cancel") else args.token
        async with ArenaClient(args.url, token) as client:
            if action == "create":
                spec: dict[str, Any] = {
                    "name": args.name, "ruleset": args.ruleset, "variants": args.variant or [],
                    "playersPerMatch": args.players, "format": args.format, "rated": not args.unrated,
                    "duplicate": args.duplicate, "bots": args.bot, "houseBots": [k.upper() for k in args.house_bot],
                }
                for key, value in (("rounds", args.rounds), ("durationMinutes", args.duration_minutes),
                                   ("startsAt", args.starts_at), ("moveTimeoutMs", args.move_timeout_ms)):
                    if value is not None:
                        spec[key] = value
                return await client.create_tournament(**spec)
            if action == "list":
                return await client.tournaments(args.status, args.first, args.after)
            if action == "show":
                found = await client.tournament(args.tournament_id)
                if found is None:
                    raise ArenaError("NOT_FOUND", f"no tournament with id {args.tournament_id!r}")
                return found
            return await client.cancel_tournament(args.tournament_id, args.reason)

    result = _run(run())
    if action == "list":
        nodes = [edge["node"] for edge in result["edges"]]
        lines = [f"{t['id']}  {t['status']:<9}  {t['format']:<11}  {t['ruleset']:<14}  {t['startsAt']}  {t['name']}"
                 for t in nodes] or ["no tournaments"]
        if result["pageInfo"]["hasNextPage"]:
            lines.append(f"more: --after {result['pageInfo']['endCursor']}")
        _show(result, args.json, lines)
    else:
        _show(result, args.json, _tournament_lines(result))


def leaderboard_command(args: argparse.Namespace) -> None:
    """``wizard-arena leaderboard``: bots by rating, highest first."""

    async def run() -> list[dict[str, Any]]:
        async with ArenaClient(args.url, args.token) as client:
            return await client.leaderboard(args.ruleset, args.method, args.first, args.offset, not args.established)

    rows = _run(run())
    lines = [
        f"{r['rank']:>4}. {r['bot']['name']:<32} {r['rating']:>8.1f} ± {r['deviation']:<5.0f} {r['games']:>5} games"
        + ("  (provisional)" if r["provisional"] else "")
        + ("  (house)" if r["bot"]["house"] else "") + ("  (retired)" if r["bot"]["retired"] else "")
        for r in rows
    ] or [f"no rated bots under {args.ruleset} ({args.method}) yet"]
    _show(rows, args.json, lines)
