"""A real HTTP server (the standard library's, in a thread) that answers each request with
what a function of the request's method and path says: for tests of clients against
answers a Wizard Arena server does not give, but proxies and other servers do."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: status, body (a dict is sent as JSON), extra headers
Answer = tuple[int, "bytes | dict[str, Any]", dict[str, str]]


@contextmanager
def http_stub(answer: Callable[[str, str], Answer]) -> Iterator[str]:
    """Serves ``answer(method, path)`` for every request; yields the server's base URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # what a WebSocket client expects, as any proxy speaks

        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            status, body, headers = answer(self.command, self.path)
            data = json.dumps(body).encode() if isinstance(body, dict) else body
            kind = "application/json" if isinstance(body, dict) else "text/html"
            self.send_response(status)
            for name, value in {"Content-Type": kind, "Content-Length": str(len(data)), **headers}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
