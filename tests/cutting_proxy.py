"""A TCP proxy on loopback that drops a connection in the middle of an MCP call's event stream,
the way a tunnel, a proxy or a network change does, for the resumption tests.

Every byte goes through untouched, except on a connection whose request is a `tools/call`
while cuts are left (`cuts`): its response is read chunk by chunk (uvicorn sends each event as
one chunk of a chunked body) and the connection is closed, both ways,

- `before_answer`: just before the chunk that carries the call's JSON-RPC answer, or
- `after_first_id`: just after the first chunk that carries an event ID (the priming event).

`requests` records each request line with its `Last-Event-ID`, so a test sees the client
resume.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

_CALL = re.compile(rb'"method"\s*:\s*"tools/call"')
_ANSWER = re.compile(rb'"(result|error)"\s*:')
_EVENT_ID = re.compile(rb"(^|\n)id:", re.MULTILINE)
_LAST_EVENT_ID = re.compile(rb"\r\nlast-event-id:\s*([^\r\n]*)", re.IGNORECASE)


@dataclass
class Cutter:
    mode: str = "before_answer"
    cuts: int = 1
    cut: int = 0
    requests: list[tuple[str, str | None]] = field(default_factory=list)

    def resumed(self) -> list[str]:
        """The `Last-Event-ID`s clients came back with."""
        return [last for _, last in self.requests if last]


_REQUEST = re.compile(rb"(GET|POST|DELETE) (\S+) HTTP/1\.1\r\n(.*?)\r\n\r\n", re.DOTALL)


async def _pump_requests(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cutter: Cutter, armed: list[bool]
) -> None:
    tail = b""  # the end of what came before, for a marker split between two reads
    while data := await reader.read(65536):
        text = tail + data
        for request in _REQUEST.finditer(text):
            if request.end() > len(tail):
                last = _LAST_EVENT_ID.search(b"\r\n" + request.group(3))
                line = f"{request.group(1).decode()} {request.group(2).decode()}"
                cutter.requests.append((line, last.group(1).decode() if last else None))
        calls = [m for m in _CALL.finditer(text) if m.end() > len(tail)]
        if calls and cutter.cut < cutter.cuts:
            cutter.cut += 1
            armed[0] = True
        tail = text[-256:]
        writer.write(data)
        await writer.drain()


_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)


async def _pump_responses(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cutter: Cutter, armed: list[bool]
) -> None:
    """Response by response (a request is sent whole before its response starts, so whether
    it is to be cut is known at its start), a chunked body chunk by chunk."""
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return
        cutting, armed[0] = armed[0], False
        writer.write(head)
        if b"transfer-encoding: chunked" not in head.lower():
            length = _LENGTH.search(head)
            writer.write(await reader.readexactly(int(length.group(1)) if length else 0))
            await writer.drain()
            continue
        while True:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            chunk = await reader.readexactly(size + 2)
            if cutting and cutter.mode == "before_answer" and _ANSWER.search(chunk):
                return
            writer.write(size_line + chunk)
            await writer.drain()
            if cutting and cutter.mode == "after_first_id" and _EVENT_ID.search(chunk):
                return
            if size == 0:
                break


async def _serve(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream: tuple[str, int],
    cutter: Cutter,
) -> None:
    up_reader, up_writer = await asyncio.open_connection(*upstream)
    armed = [False]
    pumps = [
        asyncio.ensure_future(_pump_requests(client_reader, up_writer, cutter, armed)),
        asyncio.ensure_future(_pump_responses(up_reader, client_writer, cutter, armed)),
    ]
    try:
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pump in pumps:
            pump.cancel()
        for writer in (client_writer, up_writer):
            writer.close()


@contextmanager
def cutting_proxy(url: str, cutter: Cutter) -> Iterator[str]:
    """A proxy in front of the server at `url`, cutting as `cutter` says; its base URL."""
    parts = urlsplit(url)
    upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
    loop = asyncio.new_event_loop()
    started: list[asyncio.AbstractServer] = []

    async def start() -> None:
        started.append(
            await asyncio.start_server(lambda r, w: _serve(r, w, upstream, cutter), "127.0.0.1", 0)
        )

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
    port = started[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:

        async def stop() -> None:
            started[0].close()
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
