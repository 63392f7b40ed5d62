"""The pages' frame: templates, rendering, errors, routes (see the package's docstring)."""


from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from service.api.assets import Assets
from service.api.pages import api_docs, listing_pages, match_page
from service.api.rest import error_response
from service.domain.services import Services
from service.errors import MethodNotAllowed, NotFound, ServiceError, service_error

log = logging.getLogger("wizard_arena.pages")

FOLDER = Path(__file__).resolve().parent
#: the route the pages' files are served under
STATIC = "/static/"

#: everything from this origin only, and no inline script or style; 'self' covers the match
#: page's WebSocket to this origin; data: for the pages' icon
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])

Handler = Callable[[Request, Services], Awaitable[Response]]


class Pages:
    """The pages' frame: one per app."""

    def __init__(self, services_of: Callable[[Request], Services], api_document: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        self.services_of = services_of
        #: the REST API's OpenAPI document, for its reference page
        self.api_document = api_document
        self.assets = Assets(FOLDER / "static", STATIC)
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(FOLDER / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.globals["asset"] = self.assets.url
        self.templates.filters["when"] = when
        self.templates.filters["code_spans"] = code_spans
        self._loaded = False

    def render(self, name: str, status: int = 200, *, refresh_seconds: int | None = None, **context: Any) -> Response:
        """A page from its template; ``refresh_seconds`` reloads it by itself (live listings)."""
        html = self.templates.get_template(name).render(refresh_seconds=refresh_seconds, **context)
        return HTMLResponse(html, status, headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        })

    def page(self, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        """A route's endpoint: the handler's page, or a page that says what went wrong (a
        service error's code and message, with its HTTP status)."""

        async def run(request: Request) -> Response:
            await self.ready()
            try:
                return await handler(request, self.services_of(request))
            except Exception as error:
                mapped = service_error(error)
                if mapped is None:
                    log.exception("page %s", request.url.path)
                    return self.render("error.html", 500, code="INTERNAL_ERROR",
                                       message="the server failed to build this page; the failure is logged there")
                return self.render("error.html", mapped.http_status, code=mapped.code, message=mapped.message)

        return run

    async def ready(self) -> None:
        """The templates and the files they name, read once, off the event loop."""
        if not self._loaded:
            await asyncio.to_thread(self._load)

    async def not_found(self, request: Request, error: Exception) -> Response:
        """No route for the request's path (404) or method (405): for the REST API its JSON
        error, for anything else a page saying so."""
        assert isinstance(error, HTTPException)
        method, path = request.method, request.url.path
        headers = dict(error.headers or {})
        if error.status_code == 405:
            refusal: ServiceError = MethodNotAllowed(
                f"{path} does not take {method}: it takes {headers.get('Allow', 'other methods')}"
            )
        elif path.startswith("/api/"):
            refusal = NotFound(f"no REST route {method} {path}: the routes are in /api/openapi.json and on /api/docs")
        else:
            refusal = NotFound(f"there is no page at {path}")
        if path.startswith("/api/"):
            answer = error_response(refusal)
            answer.headers.update(headers)
            return answer
        await self.ready()
        page = self.render("error.html", refusal.http_status, code=refusal.code, message=refusal.message)
        page.headers.update(headers)
        return page

    def routes(self) -> list[Route]:
        return [
            *listing_pages.routes(self),
            *match_page.routes(self),
            *api_docs.routes(self, self.api_document),
            Route(STATIC + "{name:path}", self.assets.file, methods=["GET"]),
        ]

    def _load(self) -> None:
        self.assets.preload()
        for name in self.templates.list_templates():
            self.templates.get_template(name)
        self._loaded = True


def when(value: datetime | str | int | None) -> str:
    """A moment as people read it, in UTC: ``2026-11-25 14:03 UTC`` (ints: epoch ms)."""
    if value is None:
        return "—"
    if isinstance(value, int):
        value = datetime.fromtimestamp(value / 1000, UTC)
    elif isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def code_spans(text: str) -> Markup:
    """Text whose `backticked` parts are code, the rest escaped."""
    return Markup("").join(
        Markup("<code>{}</code>").format(part) if i % 2 else escape(part) for i, part in enumerate(text.split("`"))
    )
