"""Webhook bots: the server calls the bot. What the server signs, how a bot checks it, and
``wizard-arena serve-bot``, which serves any SDK :class:`~sdk.bot.Bot` as a webhook endpoint.

Every call is a POST of JSON with the header ``Wizard-Signature: t=<unix seconds>,v1=<hex>``,
where ``v1`` is the HMAC-SHA256, keyed with the bot's webhook secret, of ``<t>.<body>`` (as
Stripe and GitHub sign theirs). A verifier refuses a signature that does not match, and one
older (or further ahead) than :data:`TOLERANCE_SECONDS`, so a call recorded on the way cannot
be replayed later.

>>> secret = "whsec_test"
>>> header = sign(secret, b'{"type":"start"}', now=1_800_000_000)
>>> verify(secret, b'{"type":"start"}', header, now=1_800_000_060)
>>> verify(secret, b'{"type":"start"}', header, now=1_800_000_301)
Traceback (most recent call last):
...
sdk.webhook.SignatureError: the signature is 301 s old; at most 300 s are accepted
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sdk.bot import Bot
from wizard import MatchView

#: the header that carries the signature
SIGNATURE_HEADER = "Wizard-Signature"
#: how far a signature's time may be from the verifier's clock
TOLERANCE_SECONDS = 300
#: the largest call body serve-bot reads
MAX_BODY_BYTES = 1 << 20

log = logging.getLogger("wizard_arena.serve_bot")


class SignatureError(ValueError):
    """A call whose signature is missing, malformed, wrong or too old: answer it 401."""


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``<timestamp>.<body>`` keyed with ``secret``."""
    return hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, now: float | None = None) -> str:
    """The ``Wizard-Signature`` header's value for ``body`` sent now."""
    timestamp = int(time.time() if now is None else now)
    return f"t={timestamp},v1={signature(secret, timestamp, body)}"


def verify(secret: str, body: bytes, header: str | None, now: float | None = None,
           tolerance: int = TOLERANCE_SECONDS) -> None:
    """Check a call's signature (the raw body, as received); :class:`SignatureError` if not good."""
    if not header:
        raise SignatureError(f"no {SIGNATURE_HEADER} header")
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        key, _, value = item.strip().partition("=")
        parts.setdefault(key, []).append(value)
    try:
        timestamp = int(parts["t"][0])
    except (KeyError, ValueError):
        raise SignatureError(f"the {SIGNATURE_HEADER} header has no t=<unix seconds>") from None
    age = int(time.time() if now is None else now) - timestamp
    if abs(age) > tolerance:
        raise SignatureError(f"the signature is {age} s old; at most {tolerance} s are accepted")
    expected = signature(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, given) for given in parts.get("v1", [])):
        raise SignatureError("the signature does not match the body (is the secret the one setWebhook gave?)")


def answer(bot: Bot, call: dict[str, Any]) -> dict[str, Any]:
    """What a bot answers a call: for a turn, its move as ``{"bid": n}``, ``{"card": code}`` or
    ``{"trump": suit}``; for anything else (start, end), nothing to say."""
    if call.get("type") != "turn":
        return {}
    match = call["match"]
    return bot.act(MatchView.from_dict(match), match.get("id")).to_dict()


def make_server(bot: Bot, secret: str, host: str = "127.0.0.1", port: int = 9000,
                on_call: Callable[[dict[str, Any]], None] | None = None) -> ThreadingHTTPServer:
    """An HTTP server (a thread per connection, keep-alive) that answers the server's calls
    with ``bot``'s moves, after checking each call's signature (``on_call`` hears each call
    that passed)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # the answer goes out as two writes (headers, then body): with Nagle's algorithm on, the
        # body waits for the caller's delayed ACK of the headers, 40 ms on Linux, every move
        disable_nagle_algorithm = True

        def do_POST(self) -> None:  # (http.server's name)
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self._send(413, {"error": "too big"})
                return
            body = self.rfile.read(length)
            try:
                verify(secret, body, self.headers.get(SIGNATURE_HEADER))
            except SignatureError as error:
                self._send(401, {"error": str(error)})
                return
            try:
                call = json.loads(body)
                if on_call is not None:
                    on_call(call)
                self._send(200, answer(bot, call))
            except Exception as error:  # the bot's own failure: this call only
                log.exception("the bot failed")
                self._send(500, {"error": f"{type(error).__name__}: {error}"})

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # (http.server's name)
            log.debug(format, *args)

    class Server(ThreadingHTTPServer):
        request_queue_size = 256  # (socketserver's 5 refuses a worker opening its connections at once)
        daemon_threads = True

    return Server((host, port), Handler)


def serve_bot(bot: Bot, secret: str, host: str = "127.0.0.1", port: int = 9000) -> None:
    """Serve ``bot`` until interrupted."""
    server = make_server(bot, secret, host, port)
    print(f"serving {bot.label} at http://{host}:{server.server_address[1]}/", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


def serve_in_thread(bot: Bot, secret: str, host: str = "127.0.0.1", port: int = 0,
                    on_call: Callable[[dict[str, Any]], None] | None = None) -> ThreadingHTTPServer:
    """The server of :func:`make_server`, running in a daemon thread (``shutdown()`` stops it)."""
    server = make_server(bot, secret, host, port, on_call)
    threading.Thread(target=server.serve_forever, name="serve-bot", daemon=True).start()
    return server
