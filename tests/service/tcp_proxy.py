"""A real TCP proxy between a client process and the API, for tests of lost connections:
:meth:`TcpProxy.cut` closes every connection through it at once (as a network drop
would), and ``refuse_websockets`` answers WebSocket upgrades with 403 (as a proxy that does
not carry WebSockets would) while plain HTTP passes."""

from __future__ import annotations

import socket
import threading

REFUSED = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class TcpProxy:
    def __init__(self, upstream_port: int, refuse_websockets: bool = False, port: int = 0) -> None:
        self.upstream_port = upstream_port
        self.refuse_websockets = refuse_websockets
        self.connections = 0
        self.websockets_refused = 0
        self._listener = socket.create_server(("127.0.0.1", port))
        self.port = int(self._listener.getsockname()[1])
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> int:
        """Closes every open connection (both sides); answers how many sockets it closed."""
        with self._lock:
            sockets, self._open = self._open, set()
        for s in sockets:
            _close(s)
        return len(sockets)

    def close(self) -> None:
        self._closed = True
        _close(self._listener)
        self.cut()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            first = client.recv(65536)
        except OSError:
            _close(client)
            return
        if self.refuse_websockets and b"upgrade: websocket" in first.lower():
            self.websockets_refused += 1
            try:
                client.sendall(REFUSED)
            finally:
                _close(client)
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            upstream.sendall(first)
        except OSError:
            _close(client)
            return
        with self._lock:
            self.connections += 1
            self._open.update((client, upstream))
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
        _pump(client, upstream)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        _close(source)
        _close(sink)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
