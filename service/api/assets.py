"""Files a page loads (scripts, stylesheets, images), served by the app itself from a folder of
the package: no page of ours loads anything from another origin.

Each file's URL carries its digest (``<prefix><file>?v=<sha256 prefix>``): a browser keeps it
for a year and a new build gets a new URL. A file is read, hashed and gzipped on first use (in a
thread), not when the app is made, and kept for the life of the process."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

MEDIA_TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    gzipped: bytes
    media_type: str
    etag: str


class Assets:
    """The files under ``folder`` whose suffix is in :data:`MEDIA_TYPES`, at ``prefix``."""

    def __init__(self, folder: Path, prefix: str) -> None:
        self.folder = folder.resolve()
        self.prefix = prefix
        self._files: dict[str, Asset] = {}
        self._lock = asyncio.Lock()

    def url(self, name: str) -> str:
        """The file's URL with its digest; loads the file if it was not yet (a blocking read:
        call it from a thread, or after :meth:`load` has run). A missing file is a bug of the
        page that names it: :class:`FileNotFoundError`."""
        found = self._files.get(name) or self._load(name)
        if found is None:
            raise FileNotFoundError(f"a page names {name}, which {self.folder} lacks")
        return f"{self.prefix}{name}?v={found.etag.strip(chr(34))}"

    def preload(self) -> None:
        """Reads every file there is to serve (blocking: from a thread)."""
        for path in sorted(self.folder.rglob("*")):
            if path.suffix in MEDIA_TYPES and path.is_file():
                self._load(path.relative_to(self.folder).as_posix())

    async def file(self, request: Request) -> Response:
        """The route's endpoint: ``<prefix>{name:path}``."""
        name = request.path_params["name"]
        found = self._files.get(name)
        if found is None:
            async with self._lock:
                found = self._files.get(name) or await asyncio.to_thread(self._load, name)
        if found is None:
            return PlainTextResponse(f"no such file: {self.prefix}{name}", 404)
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

    def _load(self, name: str) -> Asset | None:
        media_type = MEDIA_TYPES.get(Path(name).suffix)
        path = (self.folder / name).resolve()
        if media_type is None or not path.is_relative_to(self.folder) or not path.is_file():
            return None
        body = path.read_bytes()
        found = Asset(body, gzip.compress(body, 6, mtime=0), media_type, f'"{hashlib.sha256(body).hexdigest()[:16]}"')
        self._files[name] = found
        return found
