"""The ASGI app: ``create_app(settings)``. Nothing connects at import time; the lifespan
opens the Redis pool and closes it."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from typing import Any

import orjson
from cross_web import HTTPException
from graphql import GraphQLFormattedError
from redis.asyncio import Redis as AsyncRedis
from starlette.applications import Starlette
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect
from strawberry.asgi import ASGIWebSocketAdapter, GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.schema.exceptions import InvalidOperationTypeError
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import BaseGraphQLTransportWSHandler
from strawberry.subscriptions.protocols.graphql_transport_ws.types import ErrorMessage
from strawberry.types.graphql import OperationType

from service import logs
from service.api import rest, rest_api
from service.api.draining import GoingAway
from service.api.graphiql import PREFIX as GRAPHIQL_FILES
from service.api.graphiql import GraphiQL
from service.api.graphql.context import RequestContext
from service.api.graphql.schema import OPERATION_SCOPE_KEY, build_schema, root_fields
from service.api.pages import Pages
from service.api.rate_limit_headers import EXPOSED, RateLimitHeaders
from service.domain.services import Services, StoppedWhileStarting
from service.errors import (
    ARCHIVE_AWAY,
    REDIS_AWAY,
    BodyTooLarge,
    ServiceError,
    Unavailable,
    retry_after_header,
    service_error,
)
from service.health import heartbeat_ages
from service.metrics import OTHER_OPERATION, SCRAPE_REDIS_SECONDS, TURN_COMMITTED_SCOPE_KEY, Metrics
from service.settings import Settings
from service.store.redis_client import QueueUrlMissing, queue_url, serving

log = logging.getLogger("wizard_arena.app")


#: allocations between collections of the youngest generation, for the API process
GEN0_THRESHOLD = 10_000

HOW_TO_POST = 'send GraphQL as POST /graphql with a JSON body {"query": ..., "variables": ...}'
HOW_TO_GET = (
    "send a query as GET /graphql?query=...&variables=... (variables as URL-encoded JSON), or any "
    'operation as POST /graphql with a JSON body {"query": ..., "variables": ...}; a browser gets GraphiQL here'
)

JSON = "application/json"
#: GraphQL over HTTP's own media type: answered to clients that ask for it (see ``media_for``)
GRAPHQL_RESPONSE = "application/graphql-response+json"
#: how long a shared cache may keep the answer to a query over GET without a token (public
#: data only: the leaderboard, a spectator's view of a match, a tournament)
PUBLIC_MAX_AGE_SECONDS = 5


def media_for(accept: str | None) -> str:
    """The media type of a GraphQL answer for an ``Accept`` header (GraphQL over HTTP):
    ``application/graphql-response+json`` when the client names it and likes it at least as
    much as ``application/json``; ``application/json`` otherwise, also for ``*/*`` and for no
    header at all, as for every client before the new type existed."""
    if accept is None or "graphql-response" not in accept:  # nearly every request
        return JSON
    best: dict[str, tuple[int, float]] = {}  # media type: (specificity of the range, q)
    for item in accept.lower().split(","):
        kind, *params = (part.strip() for part in item.split(";"))
        q = 1.0
        for param in params:
            if param.startswith("q="):
                try:
                    q = float(param[2:])
                except ValueError:
                    q = 0.0
        for media in (JSON, GRAPHQL_RESPONSE):
            specificity = 2 if kind == media else 1 if kind == "application/*" else 0 if kind == "*/*" else -1
            if specificity >= 0 and specificity >= best.get(media, (-1, 0.0))[0]:
                best[media] = (specificity, q)
    named, q = best.get(GRAPHQL_RESPONSE, (0, 0.0))
    return GRAPHQL_RESPONSE if named == 2 and q > 0 and q >= best.get(JSON, (0, 0.0))[1] else JSON


#: a GraphQL-over-HTTP request's parameters: name, the JSON kinds it may be (or null), in words
_PARAMETERS = (
    ("query", str, "a string (the GraphQL document)"),
    ("operationName", str, "a string naming an operation of the document, or null"),
    ("variables", dict, "a JSON object, or null"),
    ("extensions", dict, "a JSON object, or null"),
)


class Refused(HTTPException):
    """An HTTP request refused before GraphQL ran it, answered as it is (its message says what
    to do instead) with the given extra headers."""

    def __init__(self, status_code: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(status_code, message)
        self.headers = headers or {}


class TextFrames(ASGIWebSocketAdapter):
    """Sends every graphql-transport-ws message as a text frame, as the protocol has them (JSON
    text): strawberry sends bytes as binary frames, which standard clients (graphql-ws, gql)
    refuse, and the view's encoder gives bytes (orjson's, kept for HTTP's speed)."""

    async def send_json(self, message: Any) -> None:
        try:
            await self.ws.send_text(orjson.dumps(message).decode())
        except WebSocketDisconnect as exc:
            raise WebSocketDisconnected from exc


class Answer(Response):
    """The response object strawberry gives each HTTP request (resolvers may set headers and a
    status on it), here also carrying what the answer depends on: the negotiated media type,
    and for GET whether the request carried a token."""

    media = JSON
    get = False
    with_token = False


class ArenaTransportWS(BaseGraphQLTransportWSHandler[RequestContext, None]):
    """graphql-transport-ws, with the cap on operations per connection answered like every
    other error (strawberry's own answer has no ``extensions.code``)."""

    async def handle_subscribe(self, message: Any) -> None:
        cap = self.max_subscriptions_per_connection
        if (
            self.connection_acknowledged
            and message["id"] not in self.operations
            and cap is not None
            and len(self.operations) >= cap
        ):
            error: GraphQLFormattedError = {
                "message": f"this connection already runs {cap} operations: complete one, or open another connection",
                "extensions": {"code": "LIMIT_EXCEEDED"},
            }
            await self.send_message(ErrorMessage(id=message["id"], type="error", payload=[error]))
            return
        await super().handle_subscribe(message)


class ArenaGraphQL(GraphQL[RequestContext, None]):
    """strawberry's ASGI view with our context, WebSocket auth and JSON-coded HTTP errors."""

    graphql_transport_ws_handler_class = ArenaTransportWS
    websocket_adapter_class = TextFrames

    def __init__(self, services_of: Any, settings: Settings) -> None:
        super().__init__(
            build_schema(settings),
            # queries (never mutations) over GET too: public reads can then be cached
            allow_queries_via_get=True,
            subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL,),
            connection_init_wait_timeout=timedelta(seconds=settings.ws_init_timeout_seconds),
            max_subscriptions_per_connection=settings.ws_max_operations,
            keep_alive=True,
            keep_alive_interval=15,
        )
        self._services_of = services_of
        self.graphiql = GraphiQL()

    # ------------------------------------------------------------------ HTTP
    def should_render_graphql_ide(self, request: Any) -> bool:
        # A browser asks for HTML (also with ?query=…, which then fills the editor); other
        # clients' GETs are queries (strawberry's own rule also shows the page for */*).
        return request.method == "GET" and "text/html" in request.headers.get("accept", "")

    async def render_graphql_ide(self, request: Request) -> Response:
        return await self.graphiql.page(request)

    async def get_sub_response(self, request: Request) -> Answer:  # type: ignore[override]
        answer = Answer()
        answer.status_code = None  # type: ignore[assignment]
        del answer.headers["content-length"]
        headers = request.headers
        answer.media = media_for(headers.get("accept"))
        if request.method == "GET":
            answer.get = True
            answer.with_token = "authorization" in headers
        return answer

    def create_response(self, response_data: Any, sub_response: Answer) -> Response:  # type: ignore[override]
        if response_data.get("errors"):
            unavailable = _unavailable(response_data["errors"])
            if unavailable is not None:  # Redis or the archive away: 503, and when to try again
                sub_response.status_code = Unavailable.http_status
                sub_response.headers["Retry-After"] = retry_after_header(unavailable)
        if sub_response.media is JSON and not sub_response.get:  # POST as it always was: the move path
            return super().create_response(response_data, sub_response)
        status = 200
        errors = response_data.get("errors")
        if sub_response.media is GRAPHQL_RESPONSE and response_data.get("data") is None and not any(
            "path" in error for error in errors or ()
        ):
            # Never executed (a document that does not parse or validate, variables that do
            # not coerce, a limit): no data entry, and a 4xx (GraphQL over HTTP, 6.4.2).
            response_data = {key: value for key, value in response_data.items() if key != "data"}
            codes = {(error.get("extensions") or {}).get("code") for error in errors or ()}
            status = 500 if "INTERNAL_ERROR" in codes else 400
        response = super().create_response(response_data, sub_response)
        if sub_response.status_code is None:
            response.status_code = status
        if sub_response.media is GRAPHQL_RESPONSE:
            response.headers["content-type"] = f"{GRAPHQL_RESPONSE}; charset=utf-8"
        if sub_response.get:
            public = not sub_response.with_token and not errors and response.status_code == 200
            response.headers["cache-control"] = f"public, max-age={PUBLIC_MAX_AGE_SECONDS}" if public else "no-store"
            response.headers["vary"] = "Accept, Authorization"
        return response

    async def execute_single(self, request: Any, request_adapter: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super().execute_single(request, request_adapter, *args, **kwargs)
        except HTTPException as error:
            cause = error.__cause__
            if (
                request_adapter.method == "GET"
                and isinstance(cause, InvalidOperationTypeError)
                and cause.operation_type is OperationType.MUTATION
            ):
                raise Refused(405, f"mutations are not allowed over GET: {HOW_TO_POST}", {"Allow": "POST"}) from error
            raise

    def parse_query_params(self, params: Any) -> dict[str, Any]:
        try:
            return super().parse_query_params(params)
        except HTTPException:  # strawberry's message speaks of the body
            raise HTTPException(400, "the variables and extensions parameters must be JSON objects") from None

    def parse_json(self, data: str | bytes) -> Any:
        parsed = super().parse_json(data)
        if not isinstance(parsed, dict | list):  # strawberry would fail on it with a 500
            raise HTTPException(400, "the body is not a JSON object")
        if isinstance(parsed, dict):  # a request whose parameters are of the wrong kinds never runs
            for name, kinds, what in _PARAMETERS:
                if parsed.get(name) is not None and not isinstance(parsed[name], kinds):
                    raise HTTPException(400, f"{name} must be {what}")
        return parsed

    async def process_result(self, request: Any, result: Any) -> Any:
        if result.errors:  # the request's metrics count the operation as answered with errors
            request.scope[ERRORS_SCOPE_KEY] = True
        return await super().process_result(request, result)

    def encode_json(self, data: object) -> bytes:
        return orjson.dumps(data)

    def decode_json(self, data: str | bytes) -> object:
        return orjson.loads(data)

    async def get_context(self, request: Any, response: Any) -> RequestContext:
        services: Services = self._services_of(request)
        if request.scope["type"] == "websocket":
            return RequestContext(services, None, request, response)
        return RequestContext.for_http(services, request, response)

    async def on_ws_connect(self, context: RequestContext) -> Any:
        try:
            await context.optional_caller()
        except Exception as error:  # noqa: BLE001 - _mapped re-raises what is not a client's answer
            mapped = _mapped(context.services, error)
            raise ConnectionRejectionError({"message": mapped.message, **mapped.graphql_extensions()}) from None
        return await super().on_ws_connect(context)

    async def run(self, request: Any, context: Any = None, root_value: Any = None) -> Any:
        from strawberry.types.unset import UNSET

        try:
            return await super().run(request, UNSET if context is None else context, UNSET if root_value is None else root_value)
        except ServiceError as error:  # raised while building the context (a bad Authorization header)
            return self._refusal(request, error.message, error.graphql_extensions(), error.http_status)
        except REDIS_AWAY + ARCHIVE_AWAY as error:  # the same, Redis being away
            mapped = _mapped(self._services_of(request), error)
            headers = {"Retry-After": retry_after_header(mapped.extensions["retryAfterSeconds"])}
            return self._refusal(request, mapped.message, mapped.graphql_extensions(), mapped.http_status, headers)
        except Refused as error:
            code = "BAD_INPUT" if error.status_code < 500 else "INTERNAL_ERROR"
            return self._refusal(request, error.reason, {"code": code}, error.status_code, error.headers)
        except HTTPException as error:
            code = "BAD_INPUT" if error.status_code < 500 else "INTERNAL_ERROR"
            message = error.reason
            if error.status_code == 405:
                message = HOW_TO_POST
            elif message.startswith("subscriptions are not allowed"):
                message = "subscriptions run over a WebSocket at /graphql (protocol graphql-transport-ws), not plain HTTP"
            elif error.status_code == 400:
                message = f"{message.rstrip('.')}: {HOW_TO_GET if request.method == 'GET' else HOW_TO_POST}"
            return self._refusal(request, message, {"code": code}, error.status_code)

    @staticmethod
    def _refusal(request: Any, message: str, extensions: dict[str, Any], status: int,
                 headers: dict[str, str] | None = None) -> Response:
        """The answer to a request GraphQL did not run: an ``errors`` entry, no ``data``."""
        response = JSONResponse({"errors": [{"message": message, "extensions": extensions}]}, status, headers)
        if media_for(request.headers.get("accept")) is GRAPHQL_RESPONSE:
            response.headers["content-type"] = f"{GRAPHQL_RESPONSE}; charset=utf-8"
        if request.method == "GET":
            response.headers["cache-control"] = "no-store"
        return response


def _unavailable(errors: list[Any]) -> float | None:
    """The longest ``retryAfterSeconds`` of a result's UNAVAILABLE errors (None: none)."""
    waits = [
        float((error.get("extensions") or {}).get("retryAfterSeconds") or 1)
        for error in errors if isinstance(error, dict) and (error.get("extensions") or {}).get("code") == Unavailable.code
    ]
    return max(waits) if waits else None


def _mapped(services: Services, error: Exception) -> ServiceError:
    """``error`` as a client sees it, outside GraphQL's execution (which codes its own): a
    ServiceError as it is, an outage reported and UNAVAILABLE; anything else re-raised (a bug)."""
    mapped = service_error(error)
    if mapped is None:
        raise error
    if services.outages is not None:
        services.outages.report(error)
    return mapped


class BodyLimit:
    """Refuses request bodies over the limit (by Content-Length, or while streaming)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = True
                if too_big:
                    return await self._refuse(scope, receive, send)
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        try:
            await self.app(scope, limited, send)
        except BodyTooLarge:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = BodyTooLarge(self.max_bytes)
        body = (
            {"error": error.to_dict()} if scope["path"].startswith("/api/")
            else {"errors": [{"message": error.message, "extensions": error.graphql_extensions()}]}
        )
        await JSONResponse(body, error.http_status)(scope, receive, send)


class ApiCors:
    """CORS for the API's paths (``/graphql``, ``/api/*``): Starlette's CORSMiddleware, which
    answers preflights itself; the web pages and the operator's paths (``/metrics``) stay
    same-origin. No credentials mode: a token travels in the Authorization header, never a
    cookie, so ``*`` may stand for any origin."""

    def __init__(self, app: ASGIApp, origins: list[str]) -> None:
        self.app = app
        self.cors = CORSMiddleware(
            app, allow_origins=origins, allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Accept"], expose_headers=[*EXPOSED, rest.TURN_REASON],
            allow_credentials=False, max_age=600,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == "/graphql" or path.startswith("/api/")):
            return await self.cors(scope, receive, send)
        await self.app(scope, receive, send)


#: the request scope's key saying that a GraphQL answer had errors (ArenaGraphQL.process_result)
ERRORS_SCOPE_KEY = "wizard_arena.graphql_errors"


def _request_id_header(scope: Scope) -> bytes | None:
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            return value
    return None


class RequestMetrics:
    """Counts requests by route and status and times them, GraphQL's also by operation;
    counts open WebSockets; gives each request its id (``X-Request-Id``: the client's when
    well-formed, else a new one), sent back and named in its log lines (``service.logs``)."""

    def __init__(self, app: ASGIApp, metrics_of: Any) -> None:
        self.app = app
        self.metrics_of = metrics_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "websocket":
            return await self._websocket(scope, receive, send)
        if kind != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status = 500
        request_id = logs.request_id_from(_request_id_header(scope))
        logs.request_id.set(request_id)
        id_header = (b"x-request-id", request_id.encode())

        async def observed(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), id_header]
            await send(message)

        try:
            await self.app(scope, receive, observed)
        finally:
            metrics: Metrics | None = self.metrics_of(scope)
            if metrics is not None:
                route = _route_label(scope["path"])
                elapsed = time.perf_counter() - started
                metrics.requests.labels(route, str(status)).inc()
                metrics.latency.labels(route).observe(elapsed)
                if status == 200:  # a long poll's answer that carried a turn, written by now
                    metrics.turn_written(scope.get(TURN_COMMITTED_SCOPE_KEY), "http")
                if route == "/graphql":  # not GraphiQL's page: a GET that ran no operation
                    operation = scope.get(OPERATION_SCOPE_KEY)
                    if operation is not None or scope["method"] == "POST":
                        operation = operation or OTHER_OPERATION
                        outcome = "error" if status >= 400 or scope.get(ERRORS_SCOPE_KEY) else "ok"
                        metrics.graphql.labels(operation, outcome).inc()
                        metrics.graphql_latency.labels(operation).observe(elapsed)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        logs.request_id.set(logs.request_id_from(_request_id_header(scope)))
        metrics: Metrics | None = self.metrics_of(scope)
        if metrics is None:
            return await self.app(scope, receive, send)
        opened = False

        async def observed(message: Message) -> None:
            nonlocal opened
            if message["type"] == "websocket.accept" and not opened:
                opened = True
                metrics.websockets.inc()
            await send(message)

        try:
            await self.app(scope, receive, observed)
        finally:
            if opened:
                metrics.websockets.dec()


#: the web pages' routes, by their first segment (``/`` itself is the home page)
PAGE_ROUTES = {"matches": "/matches/{id}", "bots": "/bots/{id}", "leaderboard": "/leaderboard/{ruleset}",
               "tournaments": "/tournaments", "static": "/static/{file}", "graphiql": "/graphiql/{file}"}


def _route_label(path: str) -> str:
    if path.startswith("/api/matches/"):
        for tail in ("record", "replay", "moves"):
            if path.endswith("/" + tail):
                return f"/api/matches/{{id}}/{tail}"
        return "/api/matches/{id}"
    if path.startswith("/api/bots/"):
        for tail in ("records", "stats"):
            if path.endswith("/" + tail):
                return f"/api/bots/{{id}}/{tail}"
    if path in ("/", "/graphql", "/healthz", "/livez", "/readyz", "/metrics", "/api/turns", "/api/matches"):
        return path
    if path.startswith("/tournaments/"):
        return "/tournaments/{id}"
    return PAGE_ROUTES.get(path.split("/")[1], "other")


class OpenAPI:
    """The REST API's OpenAPI document (``GET /api/openapi.json``), made once, on first use, off
    the event loop (it takes some tens of ms)."""

    def __init__(self, schema: Any) -> None:
        self.schema = schema
        self._made: str | None = None

    async def text(self) -> str:
        if self._made is None:
            self._made = await asyncio.to_thread(openapi_json, self.schema)
        return self._made

    async def document(self) -> dict[str, Any]:
        return orjson.loads(await self.text())

    async def endpoint(self, request: Request) -> Response:
        return Response(await self.text(), media_type="application/json", headers={"Cache-Control": "public, max-age=300"})


def openapi_json(schema: Any) -> str:
    from importlib.metadata import version

    from service.api.openapi import document_json

    return document_json(schema._schema, version("wizard-arena"))


async def database_state(services: Services) -> str:
    """The archive's database as the health answers say it: "ok", "not configured", or
    "unavailable: <why>" (no answer within 2 s counts as away)."""
    if services.archive is None:
        return "not configured"
    return await _state_of(services.archive.ping)


async def redis_state(services: Services) -> str:
    """Redis as the health answers say it: "ok" or "unavailable: <why>" (2 s at most)."""
    return await _state_of(functools.partial(serving, services.redis))


async def _state_of(ping: Callable[[], Awaitable[object]]) -> str:
    try:
        async with asyncio.timeout(2):
            await ping()
    except Exception as error:  # noqa: BLE001 - any failure means "not reachable"
        return f"unavailable: {str(error) or type(error).__name__}"
    return "ok"


def job_queue_client(settings: Settings) -> AsyncRedis | None:
    """A client of RQ's Redis, for the metrics' queue length (None, and said once, when a
    cluster's ``ARENA_QUEUE_URL`` is not set: the API itself queues nothing)."""
    assert settings.redis_url
    try:
        url = queue_url(settings.redis_url, settings.queue_url)
    except QueueUrlMissing as error:
        log.warning("the metrics will not show the job queue's length: %s", error)
        return None
    return AsyncRedis.from_url(url, socket_timeout=SCRAPE_REDIS_SECONDS, socket_connect_timeout=SCRAPE_REDIS_SECONDS)


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings()

    #: set when the process is told to stop before its start-up is over (DrainingServer)
    stopping = asyncio.Event()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            services = await Services.start(settings, metrics, stopping=stopping)
        except StoppedWhileStarting as stopped:
            log.info("stopped before serving: %s", stopped)
            yield  # nothing started: uvicorn, told to exit, stops after its start-up
            return
        app.state.services = services
        app.state.queue = job_queue_client(settings)
        # Everything imported so far lives as long as the process: keep it out of the
        # collector's way, so that collections during requests stay short.
        gc.collect()
        gc.freeze()
        # A request allocates a few thousand objects, nearly all freed by reference counting;
        # collecting the youngest generation every 700 allocations (the default) ran a
        # collection every few moves, each walking what the requests in flight hold. Every
        # GEN0_THRESHOLD allocations costs ~10 % less CPU per move (BENCHMARKS.md).
        gc.set_threshold(GEN0_THRESHOLD, *gc.get_threshold()[1:])
        try:
            yield
        finally:
            if app.state.queue is not None:
                await app.state.queue.aclose()
            await services.close()

    def services_of(request: Request) -> Services:
        return request.app.state.services

    async def healthz(request: Request) -> Response:
        """Alive: 200 whenever the process answers, so a liveness probe restarts a hung process
        and never a healthy one over a dependency that a restart cannot bring back. The body
        has a line each for Redis and the archive, for the humans reading it: "degraded" when
        either is away. Whether to send this process traffic is ``/readyz``'s question."""
        services = services_of(request)
        redis, database = await asyncio.gather(redis_state(services), database_state(services))
        away = redis.startswith("unavailable") or database.startswith("unavailable")
        return JSONResponse({"status": "degraded" if away else "ok", "redis": redis, "database": database})

    async def readyz(request: Request) -> Response:
        """Ready to serve, the service as a whole: Redis, the archive (when configured) and
        a worker's clock that has gone round within ARENA_CLOCK_STALE_SECONDS. 503 with the
        reasons when any is not."""
        services = services_of(request)
        answer: dict[str, Any] = {"status": "ready", "redis": "ok", "database": await database_state(services),
                                  "clock": "ok"}
        try:
            async with asyncio.timeout(2):
                ages = await heartbeat_ages(services.redis)
            newest = min(ages.values(), default=None)
            answer["clockAgeSeconds"] = None if newest is None else round(newest, 3)
            if newest is None:
                answer["clock"] = "no worker's clock has ever beaten: start `wizard-arena worker`"
            elif newest > settings.clock_stale_seconds:
                answer["clock"] = f"stale: no clock has gone round for {newest:.1f} s (check the workers)"
        except Exception as error:  # noqa: BLE001 - any failure means "not reachable"
            answer["redis"] = answer["clock"] = f"unavailable: {str(error) or type(error).__name__}"
        if any(answer[part] not in ("ok", "not configured") for part in ("redis", "database", "clock")):
            answer["status"] = "not ready"
        return JSONResponse(answer, 200 if answer["status"] == "ready" else 503)

    async def metrics_endpoint(request: Request) -> Response:
        await metrics.read_service(services_of(request).redis, settings.clock_stale_seconds, request.app.state.queue)
        return PlainTextResponse(metrics.render(), media_type=Metrics.content_type)

    graphql = ArenaGraphQL(services_of, settings)
    metrics = Metrics(root_fields(graphql.schema._schema))  # type: ignore[attr-defined]
    going_away = GoingAway(graphql)
    openapi = OpenAPI(graphql.schema)
    pages = Pages(services_of, openapi.document)
    routes = [
        Route("/graphql", graphql, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", going_away),
        Route(GRAPHIQL_FILES + "{name:path}", graphql.graphiql.file, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/livez", healthz, methods=["GET"]),  # an alias: probes set up on it keep working
        Route("/readyz", readyz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
        *rest.routes(services_of),
        *rest_api.routes(graphql.schema, services_of),
        Route("/api/openapi.json", openapi.endpoint, methods=["GET"]),
        *pages.routes(),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={
        404: pages.not_found, 405: pages.not_found,
    })
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(RateLimitHeaders)
    if settings.cors_allowed_origins:
        app.add_middleware(ApiCors, origins=settings.cors_allowed_origins)
    app.add_middleware(RequestMetrics, metrics_of=lambda scope: metrics)
    app.state.settings = settings

    async def drain() -> None:
        """The process is stopping (service.api.draining): long polls answer now, WebSockets close."""
        services: Services | None = getattr(app.state, "services", None)
        if services is not None:
            services.matches.feed.drain()
        await going_away.drain()

    def stop_starting() -> None:
        """Called from a signal handler, on the loop's thread: wakes the start-up's wait."""
        asyncio.get_running_loop().call_soon_threadsafe(stopping.set)

    app.state.drain = drain
    app.state.stop_starting = stop_starting
    return app
