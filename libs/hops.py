"""The hops between services on plain asyncio: an httpx transport for `http://` service URLs
(HTTP/1.1, kept-alive connections, answers read whole).

httpx's own transport runs on httpcore over anyio, which puts a cancel scope and a trip
round the event loop on every socket read and write, and anyio locks on the pool: on the
gateway, about 45 % of its CPU on a search went to its two hops (docs/benchmarks.md, issue
19). Here a request goes out in one `write` (its head and a body known in advance; a streamed
body as chunks, each as it comes), the answer is parsed by httptools (uvicorn's parser, the
server side of every hop) as it arrives, and a connection waits in its pool for the next
request, as httpcore's would (`httpx.Limits`: at most so many open, so many kept idle, for so
long).

What callers see does not change: an `httpx.Response` with the status, headers and body, and
httpx's exceptions (`ConnectError`, `ReadTimeout`, `RemoteProtocolError`, ...), the
`TransportError`s the retry policy retries (`libs.http`). Timeouts are the request's own
(`connect`, `read` between two pieces of the answer, `write` while the socket's buffer is
full, `pool` for a free connection). A connection whose request was cancelled or failed is
closed, never reused.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

import httptools
import httpx

# An answer as read: status, reason phrase, headers, body.
_Answer = tuple[int, bytes, list[tuple[bytes, bytes]], bytes]


class _Connection(asyncio.Protocol):
    """One kept-alive connection: at most one request at a time."""

    def __init__(self) -> None:
        self.transport: Any = None  # an asyncio or uvloop transport
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._answer: asyncio.Future[_Answer] | None = None
        self._request: httpx.Request | None = None
        self._status = 0
        self._reason = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._keep_alive = False
        self._read_timeout: float | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._drained: asyncio.Future[None] | None = None
        self._paused = False

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._answer is None or self._answer.done():
            self.close()  # bytes nobody asked for: the connection is no longer in step
            return
        self._arm_timer()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed answer: {exc}", request=self._req()))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._cancel_timer()
        self._fail(
            httpx.RemoteProtocolError(
                "the server closed the connection without sending a complete answer",
                request=self._req(),
            )
            if exc is None
            else httpx.ReadError(str(exc) or type(exc).__name__, request=self._req())
        )
        self._wake_writer(exc or ConnectionResetError("connection closed"))

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake_writer(None)

    # ------------------------------------------------------------------ httptools callbacks

    def on_message_begin(self) -> None:
        if self._answer is None or self._answer.done():
            self.close()  # a second answer to one request: the connection is out of step

    def on_status(self, status: bytes) -> None:
        self._reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()
        if self._req().method == "HEAD":  # no body follows, whatever the headers say
            self._finish()  # and the connection is not reused (not `_keep_alive`)

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self._keep_alive = self._parser.should_keep_alive()
        self._finish()

    # ------------------------------------------------------------------ one request

    async def send(self, request: httpx.Request, timeouts: dict[str, float | None]) -> _Answer:
        """Write `request` and read its whole answer; the connection stays usable only when
        the answer says so (`reusable`)."""
        loop = asyncio.get_running_loop()
        self._request = request
        self._answer = loop.create_future()
        self._status, self._reason, self._headers, self._body = 0, b"", [], []
        self._keep_alive = False
        self._read_timeout = timeouts.get("read")
        write_timeout = timeouts.get("write")
        head = _head(request)
        if isinstance(request.stream, httpx.ByteStream):  # known in advance: one write
            body = b"".join([part async for part in request.stream])
            await self._write(head + body, write_timeout)
        else:  # streamed: each part as it comes, framed as chunks unless its length is given
            chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
            await self._write(head, write_timeout)
            async for part in request.stream:  # type: ignore[union-attr]
                if part:
                    frame = b"%x\r\n%b\r\n" % (len(part), part) if chunked else part
                    await self._write(frame, write_timeout)
            if chunked:
                await self._write(b"0\r\n\r\n", write_timeout)
        self._arm_timer()
        return await self._answer

    @property
    def reusable(self) -> bool:
        return self._keep_alive and not self.closed

    def close(self) -> None:
        self.closed = True
        self._cancel_timer()
        if self._answer is not None and not self._answer.done():
            self._answer.cancel()  # nobody waits for it now (a write failed, or was cancelled)
        elif self._answer is not None and not self._answer.cancelled():
            self._answer.exception()  # a failure nobody will read is not reported as unread
        if self.transport is not None:
            self.transport.close()

    async def _write(self, data: bytes, timeout: float | None) -> None:
        if self.closed or self.transport is None:
            raise httpx.WriteError("the connection is closed", request=self._req())
        self.transport.write(data)
        if not self._paused:
            return
        self._drained = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(timeout):
                await self._drained
        except TimeoutError:
            raise httpx.WriteTimeout("timed out sending the request", request=self._req()) from None
        except OSError as exc:
            raise httpx.WriteError(str(exc), request=self._req()) from exc

    # ------------------------------------------------------------------ helpers

    def _req(self) -> httpx.Request:
        assert self._request is not None
        return self._request

    def _finish(self) -> None:
        """The answer is whole: handed over as it is now; bytes parsed after it (a server out
        of step) go to lists nobody reads."""
        self._cancel_timer()
        if self._answer is not None and not self._answer.done():
            body = b"".join(self._body)
            self._answer.set_result((self._status, self._reason, self._headers, body))
        self._headers, self._body = [], []

    def _fail(self, error: Exception) -> None:
        if self._answer is not None and not self._answer.done():
            self._answer.set_exception(error)

    def _wake_writer(self, error: Exception | None) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            if error is None:
                drained.set_result(None)
            else:
                drained.set_exception(error)

    def _arm_timer(self) -> None:
        self._cancel_timer()
        if self._read_timeout is not None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._read_timeout, self._timed_out)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        self._timer = None
        self._fail(httpx.ReadTimeout("timed out waiting for the answer", request=self._req()))
        self.close()


def _head(request: httpx.Request) -> bytes:
    target = request.url.raw_path or b"/"
    lines = [b"%b %b HTTP/1.1\r\n" % (request.method.encode(), target)]
    lines.extend(b"%b: %b\r\n" % (name, value) for name, value in request.headers.raw)
    lines.append(b"\r\n")
    return b"".join(lines)


class HopTransport(httpx.AsyncBaseTransport):
    """Pooled HTTP/1.1 connections to `http://` services on the running asyncio loop."""

    def __init__(self, limits: httpx.Limits) -> None:
        self._max_idle = limits.max_keepalive_connections or 0
        self._expiry = limits.keepalive_expiry
        self._slots = asyncio.Semaphore(limits.max_connections or 1_000_000)
        self._idle: dict[tuple[str, int], deque[_Connection]] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            raise httpx.UnsupportedProtocol(
                f"hops between services go over http://, not {request.url.scheme}://",
                request=request,
            )
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        try:
            async with asyncio.timeout(timeouts.get("pool")):
                await self._slots.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout("no free connection in time", request=request) from None
        try:
            key = (request.url.host, request.url.port or 80)
            connection = self._reused(key) or await _connect(key, timeouts.get("connect"), request)
            try:
                status, reason, headers, body = await connection.send(request, timeouts)
            except BaseException:
                connection.close()  # cancelled or failed half way: out of step
                raise
            if connection.reusable and not self._closed:
                self._keep(key, connection)
            else:
                connection.close()
        finally:
            self._slots.release()
        return httpx.Response(
            status,
            headers=headers,
            content=body,
            request=request,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": reason},
        )

    def _reused(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            connection = idle.pop()  # the most recently used first
            fresh = self._expiry is None or now - connection.idle_since < self._expiry
            if fresh and not connection.closed:
                return connection
            connection.close()
        return None

    def _keep(self, key: tuple[str, int], connection: _Connection) -> None:
        idle = self._idle.setdefault(key, deque())
        connection.idle_since = time.monotonic()
        idle.append(connection)
        while len(idle) > self._max_idle:
            idle.popleft().close()  # the longest idle goes

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            while idle:
                idle.pop().close()


async def _connect(
    key: tuple[str, int], timeout: float | None, request: httpx.Request
) -> _Connection:
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout):
            _, connection = await loop.create_connection(_Connection, *key)
    except TimeoutError:
        raise httpx.ConnectTimeout(
            f"could not connect to {key[0]}:{key[1]} in time", request=request
        ) from None
    except OSError as exc:
        raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
    return connection
