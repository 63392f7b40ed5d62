"""GraphiQL's page (``GET /graphql`` from a browser) and its files, all served by the app
itself: the builds in ``service/static/graphiql/vendor/`` are pinned copies from npm (see the
README there), so the page loads nothing from any other origin, which its
Content-Security-Policy also enforces.

Each file's URL carries its digest (``/graphiql/<file>?v=<sha256 prefix>``): a browser keeps
it for a year and a new build gets a new URL. Files are read, hashed and gzipped on first
use, not when the app is made."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

FOLDER = Path(__file__).resolve().parent / "static" / "graphiql"
#: the route the files are served under
PREFIX = "/graphiql/"

_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
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


@dataclass(frozen=True)
class _File:
    body: bytes
    gzipped: bytes
    media_type: str
    etag: str


class GraphiQL:
    """The page and the files it loads; one per app."""

    def __init__(self, folder: Path = FOLDER) -> None:
        self.folder = folder
        self._files: dict[str, _File] = {}
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
        name = request.path_params["name"]
        found = self._files.get(name)
        if found is None:
            async with self._lock:
                found = self._files.get(name) or await asyncio.to_thread(self._load, name)
        if found is None:
            return PlainTextResponse(f"no such file: {PREFIX}{name}", 404)
        headers = {
            "Cache-Control": "public, max-age=31536000, immutable",
            "ETag": found.etag,
            "Vary": "Accept-Encoding",
            "X-Content-Type-Options": "nosniff",
        }
        if found.etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        body = found.body
        if "gzip" in request.headers.get("accept-encoding", ""):
            body = found.gzipped
            headers["Content-Encoding"] = "gzip"
        return Response(body, media_type=found.media_type, headers=headers)

    # ------------------------------------------------------------------ internals
    def _render(self) -> str:
        template = (self.folder / "index.html").read_text()

        def url(match: re.Match[str]) -> str:
            name = match[1]
            found = self._files.get(name) or self._load(name)
            if found is None:
                raise FileNotFoundError(f"index.html names {name}, which {self.folder} lacks")
            return f"{PREFIX}{name}?v={found.etag.strip(chr(34))}"

        return _SLOT.sub(url, template)

    def _load(self, name: str) -> _File | None:
        media_type = _TYPES.get(Path(name).suffix)
        path = (self.folder / name).resolve()
        if media_type is None or not path.is_relative_to(self.folder) or not path.is_file():
            return None
        body = path.read_bytes()
        found = _File(body, gzip.compress(body, 6, mtime=0), media_type, f'"{hashlib.sha256(body).hexdigest()[:16]}"')
        self._files[name] = found
        return found
