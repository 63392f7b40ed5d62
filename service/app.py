"""The ASGI app: ``create_app(settings)``. Nothing connects at import time; the lifespan
opens the Redis pool and closes it."""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import orjson
from cross_web import HTTPException
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocketDisconnect
from strawberry.asgi import ASGIWebSocketAdapter, GraphQL
from strawberry.exceptions import ConnectionRejectionError
from strawberry.http.exceptions import WebSocketDisconnected
from strawberry.subscriptions import GRAPHQL_TRANSPORT_WS_PROTOCOL
from strawberry.subscriptions.protocols.graphql_transport_ws.handlers import BaseGraphQLTransportWSHandler

from service import rest
from service.errors import BodyTooLarge, ServiceError
from service.graphql.context import RequestContext
from service.graphql.schema import build_schema
from service.metrics import Metrics
from service.services import Services
from service.settings import Settings

log = logging.getLogger("wizard_arena.app")


#: allocations between collections of the youngest generation, for the API process
GEN0_THRESHOLD = 10_000

HOW_TO_POST = 'send GraphQL as POST /graphql with a JSON body {"query": ..., "variables": ...}'


class TextFrames(ASGIWebSocketAdapter):
    """Sends every graphql-transport-ws message as a text frame, as the protocol has them (JSON
    text): strawberry sends bytes as binary frames, which standard clients (graphql-ws, gql)
    refuse, and the view's encoder gives bytes (orjson's, kept for HTTP's speed)."""

    async def send_json(self, message: Any) -> None:
        try:
            await self.ws.send_text(self.view.encode_json(message).decode())
        except WebSocketDisconnect as exc:
            raise WebSocketDisconnected from exc


class ArenaTransportWS(BaseGraphQLTransportWSHandler):  # type: ignore[type-arg]
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
            error = {
                "message": f"this connection already runs {cap} operations: complete one, or open another connection",
                "extensions": {"code": "LIMIT_EXCEEDED"},
            }
            await self.send_message({"id": message["id"], "type": "error", "payload": [error]})
            return
        await super().handle_subscribe(message)


class ArenaGraphQL(GraphQL):  # type: ignore[type-arg]
    """strawberry's ASGI view with our context, WebSocket auth and JSON-coded HTTP errors."""

    graphql_transport_ws_handler_class = ArenaTransportWS
    websocket_adapter_class = TextFrames  # type: ignore[assignment]

    def __init__(self, services_of: Any, settings: Settings) -> None:
        super().__init__(
            build_schema(settings),
            allow_queries_via_get=False,
            subscription_protocols=(GRAPHQL_TRANSPORT_WS_PROTOCOL,),
            connection_init_wait_timeout=timedelta(seconds=settings.ws_init_timeout_seconds),
            max_subscriptions_per_connection=settings.ws_max_operations,
            keep_alive=True,
            keep_alive_interval=15,
        )
        self._services_of = services_of

    def parse_json(self, data: str | bytes) -> Any:
        parsed = super().parse_json(data)
        if not isinstance(parsed, dict | list):  # strawberry would fail on it with a 500
            raise HTTPException(400, "the body is not a JSON object")
        return parsed

    def encode_json(self, data: object) -> bytes:
        return orjson.dumps(data)

    def decode_json(self, data: str | bytes) -> object:
        return orjson.loads(data)

    async def get_context(self, request: Any, response: Any) -> RequestContext:  # type: ignore[override]
        services: Services = self._services_of(request)
        if request.scope["type"] == "websocket":
            return RequestContext(services, None, request, response)
        return RequestContext.for_http(services, request, response)

    async def on_ws_connect(self, context: RequestContext) -> Any:  # type: ignore[override]
        try:
            await context.optional_caller()
        except ServiceError as error:
            raise ConnectionRejectionError({"message": error.message, **error.graphql_extensions()}) from None
        return await super().on_ws_connect(context)

    async def run(self, request: Any, context: Any = None, root_value: Any = None) -> Any:  # type: ignore[override]
        from strawberry.types.unset import UNSET

        try:
            return await super().run(request, UNSET if context is None else context, UNSET if root_value is None else root_value)
        except ServiceError as error:  # raised while building the context (a bad Authorization header)
            return JSONResponse(
                {"errors": [{"message": error.message, "extensions": error.graphql_extensions()}]}, error.http_status
            )
        except HTTPException as error:
            code = "BAD_INPUT" if error.status_code < 500 else "INTERNAL_ERROR"
            message = error.reason
            if error.status_code == 405:
                message = HOW_TO_POST
            elif message.startswith("subscriptions are not allowed"):
                message = "subscriptions run over a WebSocket at /graphql (protocol graphql-transport-ws), not plain HTTP"
            elif error.status_code == 400:
                message = f"{message.rstrip('.')}: {HOW_TO_POST}"
            return JSONResponse({"errors": [{"message": message, "extensions": {"code": code}}]}, error.status_code)


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


class RequestMetrics:
    """Counts requests by route and status and times them."""

    def __init__(self, app: ASGIApp, metrics_of: Any) -> None:
        self.app = app
        self.metrics_of = metrics_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status = 500

        async def observed(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, observed)
        finally:
            metrics: Metrics | None = self.metrics_of(scope)
            if metrics is not None:
                route = _route_label(scope["path"])
                metrics.requests.labels(route, str(status)).inc()
                metrics.latency.labels(route).observe(time.perf_counter() - started)


def _route_label(path: str) -> str:
    if path.startswith("/api/matches/"):
        return "/api/matches/{id}/record" if path.endswith("/record") else (
            "/api/matches/{id}/moves" if path.endswith("/moves") else "/api/matches/{id}"
        )
    return path if path in ("/graphql", "/healthz", "/metrics", "/api/turns") else "other"


def create_app(settings: Settings | None = None) -> Starlette:
    settings = settings or Settings()
    metrics = Metrics()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        services = Services.open(settings, metrics)
        app.state.services = services
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
            await services.close()

    def services_of(request: Request) -> Services:
        return request.app.state.services  # type: ignore[no-any-return]

    async def healthz(request: Request) -> Response:
        try:
            await services_of(request).redis.ping()
        except Exception as error:  # noqa: BLE001 - any failure means "not healthy"
            return JSONResponse({"status": "unavailable", "redis": str(error) or type(error).__name__}, 503)
        return JSONResponse({"status": "ok"})

    async def metrics_endpoint(request: Request) -> Response:
        return PlainTextResponse(metrics.render(), media_type=Metrics.content_type)

    graphql = ArenaGraphQL(services_of, settings)
    routes = [
        Route("/graphql", graphql, methods=["GET", "POST"]),
        WebSocketRoute("/graphql", graphql),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics_endpoint, methods=["GET"]),
        *rest.routes(services_of),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(RequestMetrics, metrics_of=lambda scope: metrics)
    app.state.settings = settings
    return app
