"""The floor of an idle WebSocket's memory in the API's server: uvicorn with the options
`serve` runs it with (the same HTTP protocol and its deadlines, the sans-I/O WebSocket
protocol, no permessage-deflate), and an ASGI app that accepts each WebSocket and waits for
it to close: no middleware, no GraphQL, no subscription. ``bench waiting idle`` opens as many
WebSockets on it as it subscribed bots on `serve`, so the service's memory per waiter is read
beside what the server alone costs per connection.

Run as ``python -m bench.ws_floor PORT``."""

from __future__ import annotations

import sys
from typing import Any

import uvicorn

from service.api.http_limits import slow_client_protocol
from service.settings import Settings


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})
    elif scope["type"] == "websocket":
        await receive()  # websocket.connect
        await send({"type": "websocket.accept", "subprotocol": "graphql-transport-ws"})
        while (await receive())["type"] != "websocket.disconnect":
            pass


def main() -> None:
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning", lifespan="off",
                http=slow_client_protocol(Settings()),  # type: ignore[arg-type]  # (a partial of the class, as serve)
                ws="websockets-sansio", ws_per_message_deflate=False)


if __name__ == "__main__":
    main()
