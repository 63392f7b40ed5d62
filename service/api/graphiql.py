"""GraphiQL's page (``GET /graphql`` from a browser) and its files, all served by the app
itself (:mod:`service.api.assets`): the builds in ``service/static/graphiql/vendor/`` are pinned
copies from npm (see the README there), so the page loads nothing from any other origin, which
its Content-Security-Policy also enforces."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from service.api.assets import Assets

FOLDER = Path(__file__).resolve().parent / "static" / "graphiql"
#: the route the files are served under
PREFIX = "/graphiql/"

_SLOT = re.compile(r"\{\{([\w./-]+)\}\}")

#: everything from this origin only; inline styles for the editors' and React's style
#: attributes; data: URLs for the fonts and icons GraphiQL's stylesheet embeds; 'self'
#: covers the WebSocket to this origin
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "font-src 'self' data:",
    "img-src 'self' data:",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
])


class GraphiQL:
    """The page and the files it loads; one per app."""

    def __init__(self, folder: Path = FOLDER) -> None:
        self.folder = folder
        self.assets = Assets(folder, PREFIX)
        self._page: str | None = None
        self._lock = asyncio.Lock()

    async def page(self, request: Request) -> Response:
        if self._page is None:
            async with self._lock:
                if self._page is None:
                    self._page = await asyncio.to_thread(self._render)
        return HTMLResponse(self._page, headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "Cache-Control": "no-cache",
            "Vary": "Accept",
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
        })

    async def file(self, request: Request) -> Response:
        return await self.assets.file(request)

    def _render(self) -> str:
        template = (self.folder / "index.html").read_text()
        return _SLOT.sub(lambda match: self.assets.url(match[1]), template)
