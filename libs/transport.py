"""A lean HTTP/1.1 transport for the calls between services.

httpx's own transport (httpcore) spends about half a millisecond of Python on each request
and writes it in several pieces (head, body, end); with every service a process of its own on
2 cores, each piece wakes the receiving service once more. This transport writes a request in
one piece and parses the answer with httptools (the parser uvicorn already uses), over a pool
of kept-alive connections. Measured on the whole search path (MCP client -> gateway ->
embedder -> index, 100k chunks): see docs/benchmarks.md.

It is an `httpx.AsyncBaseTransport`, so the clients keep httpx's API, timeouts and errors
(the retry policy in `libs.http` retries on `httpx.TransportError`). Plain `http://` only:
`make_http_client` gives an `https://` base URL httpx's own transport.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

import httptools
import httpx

_READ_SIZE = 256 * 1024
_JOIN_LIMIT = 64 * 1024


class _Stale(Exception):
    """A kept-alive connection the server had closed before this request reached it."""


@dataclass
class _Answer:
    """What the httptools callbacks collect for one response."""

    head_only: bool
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: list[bytes] = field(default_factory=list)
    headers_done: bool = False
    complete: bool = False
    keep_alive: bool = False
    parser: httptools.HttpResponseParser | None = None

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.headers_done = True
        if self.head_only:
            self.complete = True

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.complete = True
        # Only meaningful while the parser is still on this message.
        self.keep_alive = self.parser is not None and self.parser.should_keep_alive()

    def delimited_by_close(self) -> bool:
        names = {name.lower() for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def usable(self) -> bool:
        return not (self.reader.at_eof() or self.writer.is_closing())

    def close(self) -> None:
        self.writer.close()


class LeanTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over pooled keep-alive TCP connections, for `http://` URLs."""

    def __init__(self, limits: httpx.Limits) -> None:
        """`limits` read as httpx reads them: None is no limit."""
        unlimited = 1 << 30
        connections, keepalive = limits.max_connections, limits.max_keepalive_connections
        self._idle: dict[tuple[str, int], deque[_Connection]] = {}
        self._max_keepalive = unlimited if keepalive is None else keepalive
        self._slots = asyncio.Semaphore(unlimited if connections is None else connections)
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            raise httpx.UnsupportedProtocol(
                f"LeanTransport speaks plain http, not {request.url.scheme!r}", request=request
            )
        if self._closed:
            raise httpx.ConnectError("the transport was closed", request=request)
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        body = b"".join([part async for part in request.stream])  # type: ignore[union-attr]
        head = _head(request, body)
        # A small request leaves in one piece; a large body is not copied to get there.
        data = [head + body] if len(body) < _JOIN_LIMIT else [head, body]
        if self._slots.locked():
            try:
                async with asyncio.timeout(timeouts.get("pool")):
                    await self._slots.acquire()
            except TimeoutError as exc:
                message = "no free connection to the service"
                raise httpx.PoolTimeout(message, request=request) from exc
        else:
            await self._slots.acquire()
        try:
            key = (request.url.host, request.url.port or 80)
            connection, reused = self._take(key), True
            if connection is None:
                connection, reused = await _connect(request, key, timeouts.get("connect")), False
            try:
                answer, status = await _exchange(request, connection, data, timeouts, reused)
            except _Stale:
                connection.close()
                connection = await _connect(request, key, timeouts.get("connect"))
                answer, status = await _exchange(request, connection, data, timeouts, False)
            self._give_back(key, connection, answer)
        finally:
            self._slots.release()
        return httpx.Response(
            status,
            headers=answer.headers,
            stream=httpx.ByteStream(b"".join(answer.body)),
            extensions={"http_version": b"HTTP/1.1"},
            request=request,
        )

    def _take(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if connection.usable():
                return connection
            connection.close()
        return None

    def _give_back(self, key: tuple[str, int], connection: _Connection, answer: _Answer) -> None:
        keep = not self._closed and answer.keep_alive and connection.usable()
        idle = self._idle.setdefault(key, deque())
        if keep and len(idle) < self._max_keepalive:
            idle.append(connection)
        else:
            connection.close()

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            while idle:
                idle.pop().close()


def _head(request: httpx.Request, body: bytes) -> bytes:
    target = request.url.raw_path
    lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
    for name, value in request.headers.raw:
        if name.lower() not in (b"content-length", b"transfer-encoding"):
            lines.append(name + b": " + value)
    if body or request.method in ("POST", "PUT", "PATCH"):
        lines.append(b"Content-Length: " + str(len(body)).encode("ascii"))
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def _connect(
    request: httpx.Request, key: tuple[str, int], timeout: float | None
) -> _Connection:
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(*key, limit=_READ_SIZE)
    except TimeoutError as exc:
        raise httpx.ConnectTimeout(
            f"connecting to {key[0]}:{key[1]} timed out", request=request
        ) from exc
    except OSError as exc:
        raise httpx.ConnectError(
            f"cannot connect to {key[0]}:{key[1]}: {exc}", request=request
        ) from exc
    return _Connection(reader, writer)


async def _exchange(
    request: httpx.Request,
    connection: _Connection,
    data: list[bytes],
    timeouts: dict[str, float | None],
    reused: bool,
) -> tuple[_Answer, int]:
    """Send `data`, read one whole response. On any failure the connection is closed."""
    answer = _Answer(head_only=request.method == "HEAD")
    parser = answer.parser = httptools.HttpResponseParser(answer)
    received = 0
    try:
        try:
            for piece in data:
                connection.writer.write(piece)
            async with asyncio.timeout(timeouts.get("write")):
                await connection.writer.drain()
        except TimeoutError as exc:
            raise httpx.WriteTimeout("sending the request timed out", request=request) from exc
        except OSError as exc:
            if reused:
                raise _Stale from exc
            raise httpx.WriteError(f"sending the request failed: {exc}", request=request) from exc
        while not answer.complete:
            try:
                async with asyncio.timeout(timeouts.get("read")):
                    chunk = await connection.reader.read(_READ_SIZE)
            except TimeoutError as exc:
                raise httpx.ReadTimeout(
                    "the service did not answer in time", request=request
                ) from exc
            except OSError as exc:
                if reused and not received:
                    raise _Stale from exc
                raise httpx.ReadError(f"reading the answer failed: {exc}", request=request) from exc
            if not chunk:
                if reused and not received:
                    raise _Stale
                if answer.headers_done and answer.delimited_by_close():
                    answer.complete = True
                    break
                raise httpx.RemoteProtocolError(
                    "the service closed the connection before its answer was complete",
                    request=request,
                )
            received += len(chunk)
            try:
                parser.feed_data(chunk)
            except httptools.HttpParserUpgrade as exc:
                raise httpx.RemoteProtocolError(
                    "unexpected protocol upgrade", request=request
                ) from exc
            except httptools.HttpParserError as exc:
                raise httpx.RemoteProtocolError(
                    f"malformed answer: {exc}", request=request
                ) from exc
    except BaseException:
        connection.close()
        raise
    answer.parser = None
    return answer, parser.get_status_code()
