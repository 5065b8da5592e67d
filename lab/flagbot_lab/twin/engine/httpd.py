"""A small asyncio HTTP/1.1 server: the twin's stand-in for uvicorn (standard library only).

Why not `http.server`: it is thread-per-connection and cannot stream thousands of SSE responses
from one scheduler loop. Why an `asyncio.Protocol` rather than streams: the scheduler emits
tokens synchronously from one timer callback, so a streamed response must be writable with a
plain method call (`Stream.send`) that goes straight to the transport, with no task switch per
token. One task per request runs the handler; nothing runs per token but `transport.write`.

What it speaks: HTTP/1.1 keep-alive (HTTP/1.0 closes unless asked), pipelined requests answered
in order, request bodies by Content-Length or chunked, `Expect: 100-continue`, fixed-length
responses, and chunked streaming responses. A client that disconnects cancels its handler
task, which is how the scheduler learns to abort the request (as SGLang aborts on disconnect).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qsl

__all__ = ["HttpError", "HttpServer", "Request", "Response", "Stream", "reason_phrase"]

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
JSON = "application/json"
SSE = "text/event-stream; charset=utf-8"
_PHRASES = {s.value: s.phrase for s in HTTPStatus}


def reason_phrase(status: int) -> str:
    return _PHRASES.get(status, "")


class HttpError(Exception):
    """Raised by a handler (or the parser) to answer with a FastAPI-style `{"detail": ...}`."""

    def __init__(self, status: int, detail: str | None = None) -> None:
        super().__init__(detail or reason_phrase(status))
        self.status = status
        self.detail = detail or reason_phrase(status)


class Request:
    """One parsed request; `headers` keys are lower-case."""

    __slots__ = ("body", "client", "headers", "method", "path", "query", "target", "version")

    def __init__(
        self,
        method: str,
        target: str,
        version: str,
        headers: dict[str, str],
        body: bytes,
        client: str,
    ) -> None:
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        self.body = body
        self.client = client
        path, _, query = target.partition("?")
        self.path = path
        self.query = query

    def params(self) -> dict[str, str]:
        return dict(parse_qsl(self.query))

    def json(self) -> Any:
        """The body as JSON; a malformed body is the client's error (400), not ours."""
        if not self.body:
            return None
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise HttpError(400, f"Invalid JSON body: {exc}") from None


class Response:
    """A complete response with a Content-Length."""

    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(
        self,
        status: int = 200,
        body: bytes = b"",
        content_type: str | None = None,
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers or []

    @classmethod
    def json(cls, obj: Any, status: int = 200) -> Response:
        return cls(status, json.dumps(obj, separators=(",", ":")).encode(), JSON)

    @classmethod
    def text(cls, text: str, status: int = 200, content_type: str = "text/plain; charset=utf-8") -> Response:
        return cls(status, text.encode(), content_type)


class Stream:
    """A chunked response in progress. `send` writes one chunk now; `end` finishes it.

    Writes after the client went away are dropped silently: the handler learns of the
    disconnect through cancellation, and the scheduler may still hold a reference for a tick.
    """

    __slots__ = ("_conn", "_done", "closed")

    def __init__(self, conn: _Connection) -> None:
        self._conn = conn
        self._done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.closed = False

    def send(self, data: bytes) -> None:
        if self.closed or not data:
            return
        transport = self._conn.transport
        if transport is None:
            self.closed = True
            return
        transport.write(b"%x\r\n%b\r\n" % (len(data), data))

    def end(self, data: bytes = b"") -> None:
        if self.closed:
            return
        if data:
            self.send(data)
        self.closed = True
        if self._conn.transport is not None:
            self._conn.transport.write(b"0\r\n\r\n")
        if not self._done.done():
            self._done.set_result(None)

    def abort(self) -> None:
        """The connection is gone: wake whoever waits, write nothing."""
        self.closed = True
        if not self._done.done():
            self._done.set_result(None)

    async def wait(self) -> None:
        await asyncio.shield(self._done)


Handler = Callable[[Request, "Responder"], Awaitable[Response | Stream]]
AccessLog = Callable[[Request, int], None]


class Responder:
    """Given to a handler so it can start a streaming response on its own connection."""

    __slots__ = ("_conn", "_req")

    def __init__(self, conn: _Connection, req: Request) -> None:
        self._conn = conn
        self._req = req

    def stream(self, status: int = 200, content_type: str = SSE) -> Stream:
        head = self._conn.server.head(status, content_type, None, self._conn.keep_alive, chunked=True)
        self._conn.server.log_access(self._req, status)
        if self._conn.transport is not None:
            self._conn.transport.write(head)
        stream = Stream(self._conn)
        self._conn.stream = stream
        return stream


class _Connection(asyncio.Protocol):
    __slots__ = ("buf", "busy", "client", "continued", "keep_alive", "server", "stream", "task", "transport")

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False
        self.continued = False
        self.keep_alive = True
        self.client = "-"
        self.stream: Stream | None = None
        self.task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.client = f"{peer[0]}:{peer[1]}"
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.server.connections.discard(self)
        if self.stream is not None:
            self.stream.abort()
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if not self.busy:
            self._next()

    def _fail(self, status: int, detail: str) -> None:
        if self.transport is not None:
            body = json.dumps({"detail": detail}).encode()
            self.transport.write(self.server.head(status, JSON, len(body), False) + body)
            self.transport.close()
        self.buf.clear()

    def _next(self) -> None:
        """Parse one complete request from the buffer, if there is one, and start its handler."""
        buf = self.buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEAD:
                self._fail(431, "Request header fields too large")
            return
        try:
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            self._fail(400, "Invalid HTTP request line")
            return
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                self._fail(400, "Invalid HTTP header")
                return
            headers[name.strip().lower()] = value.strip()
        start = end + 4
        if headers.get("transfer-encoding", "").lower() == "chunked":
            try:
                parsed = _dechunk(buf, start)
            except HttpError as exc:
                self._fail(exc.status, exc.detail)
                return
            if parsed is None:
                return
            body, consumed = parsed
        else:
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                self._fail(400, "Invalid Content-Length")
                return
            if length > MAX_BODY:
                self._fail(413, "Request body too large")
                return
            if len(buf) - start < length:
                expects = headers.get("expect", "").lower() == "100-continue"
                if expects and not self.continued and self.transport is not None:
                    self.continued = True
                    self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                return
            body = bytes(buf[start : start + length])
            consumed = start + length
        del buf[:consumed]
        self.continued = False
        conn_hdr = headers.get("connection", "").lower()
        if version == "HTTP/1.0":
            self.keep_alive = conn_hdr == "keep-alive"
        else:
            self.keep_alive = conn_hdr != "close"
        req = Request(method, target, version, headers, body, self.client)
        self.busy = True
        self.task = asyncio.get_running_loop().create_task(self._handle(req))

    async def _handle(self, req: Request) -> None:
        server = self.server
        try:
            result = await server.handler(req, Responder(self, req))
        except HttpError as exc:
            result = Response.json({"detail": exc.detail}, exc.status)
        except asyncio.CancelledError:
            return
        except Exception as exc:  # the twin must keep serving whatever one handler does
            server.on_error(req, exc)
            result = Response.text("Internal Server Error", 500)
        if isinstance(result, Stream):
            try:
                await result.wait()
            except asyncio.CancelledError:
                return
            self.stream = None
        elif self.transport is not None:
            server.log_access(req, result.status)
            head = server.head(
                result.status, result.content_type, len(result.body), self.keep_alive, result.headers
            )
            self.transport.write(head + result.body if len(result.body) < 65536 else head)
            if len(result.body) >= 65536:
                self.transport.write(result.body)
        self.busy = False
        self.task = None
        if self.transport is None:
            return
        if not self.keep_alive:
            self.transport.close()
        elif self.buf:
            self._next()


def _dechunk(buf: bytearray, pos: int) -> tuple[bytes, int] | None:
    """Decode a chunked request body starting at `pos`; None while it is incomplete."""
    out = bytearray()
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        try:
            size = int(bytes(buf[pos:eol]).split(b";", 1)[0], 16)
        except ValueError:
            raise HttpError(400, "Invalid chunk size") from None
        if size == 0:
            trailer_end = buf.find(b"\r\n\r\n", eol)
            if buf[eol : eol + 4] == b"\r\n\r\n":
                return bytes(out), eol + 4
            if trailer_end < 0:
                return None
            return bytes(out), trailer_end + 4
        if len(buf) < eol + 2 + size + 2:
            return None
        out += buf[eol + 2 : eol + 2 + size]
        pos = eol + 2 + size + 2
        if len(out) > MAX_BODY:
            raise HttpError(413, "Request body too large")


class HttpServer:
    """Binds only when `start` is called: before that the port refuses connections, as SGLang's does."""

    def __init__(
        self,
        handler: Handler,
        *,
        access_log: AccessLog | None = None,
        on_error: Callable[[Request, BaseException], None] | None = None,
        server_header: str = "uvicorn",
    ) -> None:
        self.handler = handler
        self._access_log = access_log
        self._on_error = on_error
        self._server_header = server_header
        self.connections: set[_Connection] = set()
        self._server: asyncio.base_events.Server | None = None
        self._date_sec = -1
        self._date = ""

    async def start(self, host: str, port: int) -> None:
        """Raises OSError (asyncio's own 'error while attempting to bind' wording) on a busy port."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Connection(self), host or None, port, reuse_address=True, backlog=4096
        )

    @property
    def port(self) -> int:
        assert self._server is not None
        sockname = self._server.sockets[0].getsockname()
        return int(sockname[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.abort()
        if self._server is not None:
            await self._server.wait_closed()

    def log_access(self, req: Request, status: int) -> None:
        if self._access_log is not None:
            self._access_log(req, status)

    def on_error(self, req: Request, exc: BaseException) -> None:
        if self._on_error is not None:
            self._on_error(req, exc)

    def head(
        self,
        status: int,
        content_type: str | None,
        length: int | None,
        keep_alive: bool,
        extra: list[tuple[str, str]] | None = None,
        *,
        chunked: bool = False,
    ) -> bytes:
        now = int(time.time())
        if now != self._date_sec:
            self._date_sec = now
            self._date = formatdate(now, usegmt=True)
        parts = [
            f"HTTP/1.1 {status} {reason_phrase(status)}\r\n"
            f"date: {self._date}\r\nserver: {self._server_header}\r\n"
        ]
        if content_type:
            parts.append(f"content-type: {content_type}\r\n")
        if chunked:
            parts.append("transfer-encoding: chunked\r\n")
        elif length is not None:
            parts.append(f"content-length: {length}\r\n")
        for name, value in extra or ():
            parts.append(f"{name}: {value}\r\n")
        if not keep_alive:
            parts.append("connection: close\r\n")
        parts.append("\r\n")
        return "".join(parts).encode("latin-1")
