"""A webhook bot in the standard library alone: the server calls it when it must act.

    python examples/webhook_bot.py --port 9000 --secret whsec_...

Give the server its URL first (the answer's secret is shown once):

    mutation { setWebhook(url: "https://my-bot.example.org/") { secret } }

Each call is a POST of JSON, ``{"type": "turn", "match": {...}, "version": n, "deadline": "..."}``
(or ``"start"`` / ``"end"``, which need no answer), signed in the ``Wizard-Signature`` header
as ``t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">``. This bot checks the signature,
refuses calls older than five minutes, and answers each turn with its first legal move. With
the SDK, ``wizard-arena serve-bot --bot file.py:Class`` serves any ``sdk.Bot`` the same way.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOLERANCE_SECONDS = 300


def verified(secret: str, body: bytes, header: str) -> bool:
    """Whether ``header`` (Wizard-Signature) signs ``body`` with ``secret``, made in the last 5 minutes."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - timestamp) > TOLERANCE_SECONDS:
        return False
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, fields.get("v1", ""))


def first_legal(match: dict) -> dict:  # type: ignore[type-arg]
    move = match["legalMoves"][0]
    return {k: v for k, v in move.items() if v is not None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--secret", required=True)
    args = parser.parse_args()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the server reuses its connection

        def do_POST(self) -> None:  # (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not verified(args.secret, body, self.headers.get("Wizard-Signature", "")):
                self.answer(401, {"error": "bad signature"})
                return
            call = json.loads(body)
            self.answer(200, first_legal(call["match"]) if call["type"] == "turn" else {})

        def answer(self, status: int, payload: dict) -> None:  # type: ignore[type-arg]
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    ThreadingHTTPServer(("0.0.0.0", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
