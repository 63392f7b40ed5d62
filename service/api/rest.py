"""The REST mirror for the simplest bots: the same domain calls as GraphQL, the same
``Match`` built by the same code, rendered as JSON with GraphQL's field names."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import gzip
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from service.api.graphql.types import match_type
from service.api.rate_limit_headers import request_allowance
from service.domain.bots import bearer_token
from service.domain.listings import DEFAULT_FIRST, MAX_FIRST, MatchFilter, one_of
from service.domain.matches import Caller, WaitEnd
from service.domain.replays import replay_frames
from service.domain.services import Services
from service.errors import BadInput, NotFound, ServiceError, retry_after_header, service_error
from service.metrics import time_turn_when_written
from service.model.live_match import LiveMatch
from service.store.exports import RecordFilter, bot_records
from wizard import Ruleset

log = logging.getLogger("wizard_arena.rest")

#: what `GET /api/matches` reads (a listing: the filter, then the page)
MATCH_LISTING_PARAMS = ("status", "botId", "tournamentId", "ruleset", "rated", "first", "after")
#: the header of `GET /api/turns` that says why the wait ended (nextTurn's `reason`)
TURN_REASON = "X-Turn-Reason"
#: newline-delimited JSON: the exports' media type
NDJSON = "application/x-ndjson"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


_PLAIN = frozenset({str, int, float, bool})


@functools.cache
def _json_fields(cls: Any) -> tuple[tuple[str, str], ...] | None:
    """A dataclass's (attribute, JSON name) pairs; None for a class that is not one (a view
    a bot is sent is ~300 values: reflecting on each class once keeps it cheap)."""
    if not dataclasses.is_dataclass(cls):
        return None
    return tuple((f.name, _camel(f.name)) for f in dataclasses.fields(cls))


def _json(value: Any) -> Any:
    if value is None or type(value) in _PLAIN:  # (exactly: an enum is a str or an int too)
        return value
    kind: Any = type(value)
    fields = _json_fields(kind)
    if fields is not None:
        return {name: _json(getattr(value, attribute)) for attribute, name in fields}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def match_json(live: LiveMatch, caller: Caller | None) -> dict[str, Any]:
    """The caller's ``Match`` as JSON, field for field what GraphQL would answer."""
    document = _json(match_type(live, live.seat_of(caller.bot_id) if caller else None))
    for seat in document["seats"]:  # Bot.ratings is a resolver in GraphQL; REST leaves it out
        if seat["bot"] is not None:
            seat["bot"] = {"id": seat["bot"]["id"], "name": seat["bot"]["name"]}
    return document


def epoch_ms(name: str, value: str | None) -> int | None:
    """A time parameter of an export in milliseconds since the epoch: given as a whole number
    of milliseconds since the epoch, or as an ISO 8601 date or date-time (UTC unless it names
    its offset)."""
    if value is None or value == "":
        return None
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise BadInput(
            f"{name} must be an ISO 8601 date-time (2026-11-25T12:00:00Z) or milliseconds since the epoch "
            f"(1795608000000), not {value!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def record_filter(params: Any) -> RecordFilter:
    """An export's filter from its query parameters ``since``, ``until``, ``ruleset``."""
    unknown = sorted(set(params) - {"since", "until", "ruleset"})
    if unknown:
        raise BadInput(f"unknown parameter {unknown[0]!r}: the records take since, until and ruleset")
    since, until = epoch_ms("since", params.get("since")), epoch_ms("until", params.get("until"))
    if since is not None and until is not None and since >= until:
        raise BadInput(f"since must come before until (since {params['since']!r}, until {params['until']!r})")
    ruleset = one_of(params.get("ruleset") or None, [r.value for r in Ruleset], "ruleset")
    return RecordFilter(since, until, ruleset)


def error_response(error: ServiceError) -> JSONResponse:
    """The REST form of an error: its code's status, ``{"error": {...}}``, and for a request
    refused for a while (RATE_LIMITED, UNAVAILABLE), when to try again."""
    headers = {}
    if "retryAfterSeconds" in error.extensions:  # RATE_LIMITED, UNAVAILABLE
        headers["Retry-After"] = retry_after_header(error.extensions["retryAfterSeconds"])
    return JSONResponse({"error": error.to_dict()}, error.http_status, headers=headers)


@dataclasses.dataclass(frozen=True)
class _Answer:
    body: bytes
    gzipped: bytes
    etag: str


class Replays:
    """Finished matches' replays (``GET /api/matches/{id}/replay``) as answered, the latest
    ``kept`` of them kept: building one replays the whole match through the engine (about 100 ms
    of CPU for a 4-player WIZARD match, in a thread, one match at a time, and once however many
    ask for it at the same time), and a finished match never changes."""

    def __init__(self, kept: int = 32) -> None:
        self.kept = kept
        self._answers: OrderedDict[str, asyncio.Future[_Answer]] = OrderedDict()
        #: one build at a time: builds of several matches at once would only share the GIL
        #: with each other and with the requests being served
        self._building = asyncio.Semaphore(1)

    async def answer(self, request: Request, match: LiveMatch) -> Response:
        built = self._answers.get(match.id)
        if built is None:
            built = asyncio.ensure_future(self._built(match))
            self._answers[match.id] = built
            while len(self._answers) > self.kept:
                self._answers.popitem(last=False)
        else:
            self._answers.move_to_end(match.id)
        try:
            answer = await asyncio.shield(built)
        except BaseException:
            if built.done() and self._answers.get(match.id) is built:
                del self._answers[match.id]  # a failed build is not kept
            raise
        headers = {"ETag": answer.etag, "Cache-Control": "public, max-age=86400", "Vary": "Accept-Encoding"}
        if answer.etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        if "gzip" in request.headers.get("accept-encoding", ""):
            headers["Content-Encoding"] = "gzip"
            return Response(answer.gzipped, media_type="application/json", headers=headers)
        return Response(answer.body, media_type="application/json", headers=headers)

    async def _built(self, match: LiveMatch) -> _Answer:
        async with self._building:
            return await asyncio.to_thread(self._build, match)

    @staticmethod
    def _build(match: LiveMatch) -> _Answer:
        body = json.dumps(
            {"match": match_json(match, None), "frames": replay_frames(match.state)}, separators=(",", ":")
        ).encode()
        return _Answer(body, gzip.compress(body, 6, mtime=0), f'"{hashlib.sha256(body).hexdigest()[:16]}"')


def routes(services_of: Callable[[Request], Services]) -> list[Route]:
    replays = Replays()

    def endpoint(handler: Callable[..., Any]) -> Callable[[Request], Any]:
        async def run(request: Request) -> Response:
            services = services_of(request)
            try:
                token = bearer_token(request.headers.get("authorization"))
                caller = await services.bots.authenticate(token, request_allowance(request.scope))
                return await handler(request, services, caller)
            except Exception as error:
                mapped = service_error(error)
                if services.outages is not None:
                    services.outages.report(error)
                if mapped is None:
                    log.exception("REST %s %s", request.method, request.url.path)
                    return JSONResponse(
                        {"error": {"code": "INTERNAL_ERROR", "message": "internal error: logged on the server"}}, 500
                    )
                services.metrics.error(mapped.code)
                return error_response(mapped)

        return run

    def need(caller: Caller | None) -> Caller:
        if caller is None:
            from service.errors import Unauthenticated

            raise Unauthenticated("send `Authorization: Bearer <token>` (registerBot gives one)")
        return caller

    async def get_match(request: Request, services: Services, caller: Caller | None) -> Response:
        live = await services.matches.get(request.path_params["match_id"])
        return JSONResponse(match_json(live, caller))

    async def post_move(request: Request, services: Services, caller: Caller | None) -> Response:
        caller = need(caller)
        try:
            body = json.loads(await request.body())
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deep
            raise BadInput('the body must be JSON: {"bid": 2}, {"card": "R7"} or {"trump": "BLUE"}') from None
        if not isinstance(body, dict):
            raise BadInput('the body must be a JSON object: {"bid": 2}, {"card": "R7"} or {"trump": "BLUE"}')
        expected = body.pop("expectedVersion", None)
        debug = body.pop("debug", None)
        live = await services.matches.submit_move(caller, request.path_params["match_id"], body, expected, debug)
        return JSONResponse(match_json(live, caller))

    async def get_turns(request: Request, services: Services, caller: Caller | None) -> Response:
        caller = need(caller)
        timeout = request.query_params.get("timeoutMs")
        try:
            timeout_ms = None if timeout is None else int(timeout)
        except ValueError:
            raise BadInput(f"timeoutMs must be a whole number of milliseconds, not {timeout!r}") from None
        wait = await services.matches.next_turn(caller, request.query_params.get("matchId"), timeout_ms)
        # the body as it always was (the match where it is your turn, else null); the header
        # says why the wait ended, as nextTurn's reason
        live = wait.match if wait.reason is WaitEnd.YOUR_TURN else None
        if live is not None:
            time_turn_when_written(request.scope, wait.committed_at)
        return JSONResponse(None if live is None else match_json(live, caller), headers={TURN_REASON: wait.reason.value})

    async def get_record(request: Request, services: Services, caller: Caller | None) -> Response:
        return JSONResponse(await services.matches.record(request.path_params["match_id"], caller))

    async def get_replay(request: Request, services: Services, caller: Caller | None) -> Response:
        return await replays.answer(request, await services.matches.published(request.path_params["match_id"]))

    async def list_matches(request: Request, services: Services, caller: Caller | None) -> Response:
        query = request.query_params
        unknown = sorted(set(query) - set(MATCH_LISTING_PARAMS))
        if unknown:
            raise BadInput(f"unknown parameter {unknown[0]!r}: the parameters are {', '.join(MATCH_LISTING_PARAMS)}")
        first = query.get("first")
        try:
            first_n = DEFAULT_FIRST if first is None else int(first)
        except ValueError:
            raise BadInput(f"first must be a whole number from 1 to {MAX_FIRST}, not {first!r}") from None
        rated = query.get("rated")
        if rated not in (None, "true", "false"):
            raise BadInput(f"rated must be true or false, not {rated!r}")
        where = MatchFilter(
            status=query.get("status"), bot_id=query.get("botId"), tournament_id=query.get("tournamentId"),
            ruleset=query.get("ruleset"), rated=None if rated is None else rated == "true",
        )
        page = await services.listings.match_page(where, first_n, query.get("after"))
        return JSONResponse({
            "edges": [{"cursor": cursor, "node": match_json(live, caller)} for cursor, live in page.entries],
            "pageInfo": {"hasNextPage": page.has_next, "endCursor": page.end_cursor},
        })

    async def bot_stats(request: Request, services: Services, caller: Caller | None) -> Response:
        ruleset = request.query_params.get("ruleset")
        if ruleset is None:
            raise BadInput(f"ruleset is required: one of {', '.join(r.value for r in Ruleset)}")
        bot_id = request.path_params["bot_id"]
        if await services.bots.get(bot_id) is None:
            raise NotFound(f"no bot with id {bot_id!r}")
        return JSONResponse(_json(await services.listings.bot_stats(bot_id, ruleset)))

    async def get_bot_records(request: Request, services: Services, caller: Caller | None) -> Response:
        """The records of the bot's finished matches as NDJSON, newest first (see service.store.exports)."""
        where = record_filter(request.query_params)
        bot_id = request.path_params["bot_id"]
        if services.archive is None:
            raise NotFound("exports read the archive, and this server has none: set DATABASE_URL")
        if await services.bots.get(bot_id) is None:
            raise NotFound(f"no bot {bot_id!r}")
        # the bot itself gets its records with the debug text of its moves, as its match records show them
        chunks = bot_records(services.archive, bot_id, where, with_debug=caller is not None and caller.bot_id == bot_id)
        # the first chunk before the answer starts: a database that cannot answer is an error
        # response, not an empty export
        try:
            first = await anext(chunks)
        except StopAsyncIteration:
            return Response(b"", media_type=NDJSON)

        async def body() -> Any:
            try:
                yield first
                async for chunk in chunks:
                    yield chunk
            except Exception:
                log.exception("export of bot %s cut short", bot_id)  # the answer has begun: it just ends
            finally:
                await chunks.aclose()

        return StreamingResponse(body(), media_type=NDJSON)

    return [
        Route("/api/matches", endpoint(list_matches), methods=["GET"]),
        Route("/api/bots/{bot_id}/stats", endpoint(bot_stats), methods=["GET"]),
        Route("/api/matches/{match_id}", endpoint(get_match), methods=["GET"]),
        Route("/api/matches/{match_id}/moves", endpoint(post_move), methods=["POST"]),
        Route("/api/matches/{match_id}/record", endpoint(get_record), methods=["GET"]),
        Route("/api/matches/{match_id}/replay", endpoint(get_replay), methods=["GET"]),
        Route("/api/turns", endpoint(get_turns), methods=["GET"]),
        Route("/api/bots/{bot_id}/records", endpoint(get_bot_records), methods=["GET"]),
    ]
