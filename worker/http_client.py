"""A small HTTP/1.1 client for webhook calls: POST only, kept-alive connections pooled by
origin (scheme, address, port, server name, Host header), answers read within a size cap, redirects never followed.

Why not httpx: a webhook call must go to the address the SSRF check approved (connect to an
IP, name the host in ``Host`` and in TLS's SNI), and httpx's pool spends more CPU per call
than the whole rest of a move (it scans every pooled connection per request); the dispatcher's
figures (BENCHMARKS.md) need a call to cost little more than the bytes it sends.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import defaultdict

#: longest status line and headers of an answer
MAX_HEAD_BYTES = 16_384
#: idle connections kept per origin
IDLE_PER_ORIGIN = 64


class ConnectFailed(Exception):
    """No connection could be opened (worth one more try)."""


class AnswerError(Exception):
    """The answer broke the rules (too big, malformed) or the connection failed under it."""


#: scheme, the address connected to, port, the name for TLS (SNI, certificate), the Host header
Origin = tuple[str, str, int, str, str]
Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class HttpPool:
    def __init__(self, max_answer_bytes: int) -> None:
        self.max_answer_bytes = max_answer_bytes
        self._idle: defaultdict[Origin, list[Stream]] = defaultdict(list)
        self._tls = ssl.create_default_context()

    async def close(self) -> None:
        streams = [s for idle in self._idle.values() for s in idle]
        self._idle.clear()
        for _, writer in streams:
            writer.close()
        for _, writer in streams:
            try:
                await writer.wait_closed()
            except (OSError, ssl.SSLError):
                pass

    async def post(self, origin: Origin, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        """POST ``body`` to ``origin``; the status and the answer's body."""
        head = [f"POST {path} HTTP/1.1", f"Host: {origin[4]}", f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        idle = self._idle.get(origin)
        while idle:  # a kept-alive connection; one the bot closed meanwhile fails at once
            stream = idle.pop()
            try:
                return await self._exchange(origin, stream, request)
            except (ConnectionError, asyncio.IncompleteReadError) as error:
                if getattr(error, "partial", b""):
                    raise AnswerError(f"the connection failed during the answer: {error}") from None
                stream[1].close()
        return await self._exchange(origin, await self._connect(origin), request)

    async def _connect(self, origin: Origin) -> Stream:
        scheme, address, port, server_name, _ = origin
        try:
            if scheme == "https":
                return await asyncio.open_connection(address, port, ssl=self._tls, server_hostname=server_name)
            return await asyncio.open_connection(address, port)
        except (OSError, ssl.SSLError) as error:
            raise ConnectFailed(str(error) or type(error).__name__) from None

    async def _exchange(self, origin: Origin, stream: Stream, request: bytes) -> tuple[int, bytes]:
        reader, writer = stream
        keep = False
        try:
            writer.write(request)
            await writer.drain()
            status, body, keep = await self._answer(reader)
            return status, body
        except (ssl.SSLError, asyncio.LimitOverrunError) as error:
            raise AnswerError(str(error)) from None
        finally:
            if keep and len(self._idle[origin]) < IDLE_PER_ORIGIN:
                self._idle[origin].append(stream)
            elif keep or not writer.is_closing():
                writer.close()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > MAX_HEAD_BYTES:
                raise AnswerError(f"the answer's headers are over {MAX_HEAD_BYTES} bytes long")
            lines = head.decode("latin-1").split("\r\n")
            parts = lines[0].split(" ", 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
                raise AnswerError(f"not an HTTP answer: {lines[0][:60]!r}")
            status = int(parts[1])
            if status >= 200 or status == 101:
                break  # (1xx answers before the real one are skipped)
        fields: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                fields[name.strip().lower()] = value.strip()
        keep = parts[0] == "HTTP/1.1" and fields.get("connection", "").lower() != "close"
        cap = self.max_answer_bytes
        if "chunked" in fields.get("transfer-encoding", "").lower():
            return status, await self._chunked(reader), keep
        length = fields.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise AnswerError(f"a bad Content-Length: {length!r}")
            if int(length) > cap:
                raise AnswerError(f"the answer is {length} bytes long; at most {cap} are read")
            return status, await reader.readexactly(int(length)), keep
        if status in (204, 304):
            return status, b"", keep
        body = await reader.read(cap + 1)  # delimited by the connection's end
        while len(body) <= cap:
            more = await reader.read(cap + 1 - len(body))
            if not more:
                break
            body += more
        if len(body) > cap:
            raise AnswerError(f"the answer is over {cap} bytes long")
        return status, body, False

    async def _chunked(self, reader: asyncio.StreamReader) -> bytes:
        body = b""
        while True:
            size_line = (await reader.readuntil(b"\r\n")).split(b";")[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                raise AnswerError(f"a bad chunk size: {size_line[:20]!r}") from None
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                    pass
                return body
            if len(body) + size > self.max_answer_bytes:
                raise AnswerError(f"the answer is over {self.max_answer_bytes} bytes long")
            body += await reader.readexactly(size)
            await reader.readexactly(2)
