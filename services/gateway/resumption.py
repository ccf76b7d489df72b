"""Resumable streams on streamable HTTP (`/mcp`): a client whose connection drops in the middle
of a call (a tunnel or proxy that cuts a long response, a laptop changing networks, a
gateway pod's connection reset) reconnects with `GET /mcp` and `Last-Event-ID`, and gets what
it missed: the progress notifications, the log messages and the answer.

The SDK gives every event it sends an ID from an `EventStore` and, for a client that
negotiated 2025-11-25 or later, opens each request's stream with a priming event that carries
one, so the client can resume even before the first message. This module is that store:

- `ResumeBuffer` keeps the recent events of every session, oldest dropped first once they take
  more than `MCP_RESUME_BUFFER_BYTES` (0 turns resumption off), and a session's events go
  with the session. A message larger than the whole buffer is not kept.
- Each session sees only its own events (`SessionEvents`): the SDK names a request's stream by
  the JSON-RPC request ID, which every session numbers from the start, so one store shared by
  all sessions would replay one caller's answers to another. `ResumableSessions` gives each
  new session its own view.
- A resumed request stream is followed to its answer: the events stored after the client's
  last one, then each new one as it comes, up to the response; then the stream ends, as the
  POST's would have. (The SDK's own hand-over from replay to the live stream leaves a window
  in which an event is neither replayed nor sent.) A resumed standalone stream (`GET /mcp`,
  server notifications) gets the stored events and then the SDK's live stream.
- A cancelled request's `Request cancelled` reply is not stored: the guards in
  `services.gateway.transports` leave it out of the live stream (MCP: no answer to a
  cancelled request). Its stream is over all the same.
- An event's ID names its stream as well as its place (`serial-number`), so a client whose
  last event is no longer kept still resumes its stream while the stream is held (by its
  session, or by an event kept): what is kept after that event, then the live stream.
- A resumption with nothing more to come (its stream answered or cancelled and nothing
  after the client's event, or an event ID of no stream held) is answered `204 No Content`
  (`NothingMore`), not with a stream that ends at once: both SDK clients reconnect to a
  stream that ends without an answer, the Python one without end, and the TypeScript one
  (1.x) counts only results as answers, so it came back after every JSON-RPC error and
  then reported a 409 for a second standalone stream. On a 204 the TypeScript client stops;
  the Python one gives up after its two retries and fails the call.
- An answer no longer kept (dropped from the buffer, or larger than all of it) is not
  silently missing from a resumed stream: the stream ends with a JSON-RPC error for the
  request that says so (`answer_lost`). Lost notifications are skipped.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import count
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import (
    GET_STREAM_KEY,
    EventCallback,
    EventId,
    EventMessage,
    EventStore,
    StreamId,
)
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import (
    INTERNAL_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.transports import (
    REQUEST_CANCELLED,
    header,
    is_event_stream,
    rewriting,
    without_stream_headers,
)

# What one stored event costs beyond its JSON text (its records in the buffer).
_OVERHEAD = 200


@dataclass(eq=False)
class _Stream:
    """One stream of one session (`session`; `home`, its streams by key), `serial` in the
    buffer: its events still kept, in order, as (number, JSON or None for a priming event);
    whether it is over (answered or cancelled) and its answer's number; the newest number
    dropped from it."""

    key: StreamId
    home: dict[StreamId, _Stream]
    session: int
    serial: int
    events: deque[tuple[int, bytes | None]] = field(default_factory=deque)
    over: bool = False
    answer: int | None = None
    dropped: int = 0
    changed: anyio.Event = field(default_factory=anyio.Event)

    def add(self, number: int, data: bytes | None) -> None:
        self.events.append((number, data))
        self.wake()

    def event_id(self, number: int) -> str:
        """An event's ID names its stream too, so that a client whose last event is no longer
        kept still resumes the stream (what is kept after it, or the live stream)."""
        return f"{self.serial}-{number}"

    def wake(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    def after(self, number: int) -> list[tuple[int, bytes | None]]:
        return [event for event in self.events if event[0] > number]

    def lost(self, number: int) -> bool:
        """Whether its answer came after event `number` and is no longer kept."""
        return self.answer is not None and self.answer > number and self.dropped >= self.answer

    def end(self, answer: int | None) -> None:
        self.over, self.answer = True, answer
        self.settle()
        self.wake()

    def settle(self) -> None:
        """Leave the session's streams once over with nothing kept (a request's ID may come
        again in a later request)."""
        if self.over and not self.events and self.home.get(self.key) is self:
            del self.home[self.key]


class ResumeBuffer:
    """The recent events of every session's streams, within `max_bytes` (see the module)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._numbers = count(1)
        self._sessions = count(1)
        self._serials = count(1)
        # Every kept event, oldest first: its number -> (stream, size).
        self._kept: OrderedDict[int, tuple[_Stream, int]] = OrderedDict()
        # Every stream still held (by its session, or by an event kept), by serial.
        self._streams: weakref.WeakValueDictionary[int, _Stream] = weakref.WeakValueDictionary()

    def session(self) -> SessionEvents:
        """A new session's view: its own streams; they are dropped when it is."""
        streams: dict[StreamId, _Stream] = {}
        events = SessionEvents(self, next(self._sessions), streams)
        weakref.finalize(events, self._forget, streams)
        return events

    def number(self) -> int:
        """The next event's number (numbers only grow, across all sessions)."""
        return next(self._numbers)

    def stream(self, key: StreamId, home: dict[StreamId, _Stream], session: int) -> _Stream:
        """A new stream of `session`, in its `home`."""
        stream = home[key] = _Stream(key, home, session, next(self._serials))
        self._streams[stream.serial] = stream
        return stream

    def keep(self, stream: _Stream, data: bytes | None) -> int:
        """The number of a new event on `stream`; kept unless larger than the whole buffer."""
        number = self.number()
        size = _OVERHEAD + (len(data) if data else 0)
        if size > self.max_bytes:
            stream.dropped = number
            stream.wake()
            return number
        while self._kept and self.bytes + size > self.max_bytes:
            self._drop_oldest()
        self._kept[number] = (stream, size)
        self.bytes += size
        stream.add(number, data)
        return number

    def find(self, event_id: str, session: int | None) -> tuple[_Stream, int] | None:
        """The stream of an event of `session` (of any session: None), still held, and the
        event's number."""
        serial, _, number = event_id.partition("-")
        try:
            stream, after = self._streams.get(int(serial)), int(number)
        except ValueError:
            return None
        if stream is None or session not in (None, stream.session):
            return None
        return stream, after

    def nothing_more(self, event_id: str) -> bool:
        """Whether a replay after `event_id` ends at once with nothing to send: an event of
        no stream held, or one after which its stream, over, holds nothing and lost no
        answer."""
        found = self.find(event_id, None)
        if found is None:
            return True
        stream, number = found
        return stream.over and not stream.after(number) and not stream.lost(number)

    def _drop_oldest(self) -> None:
        number, (stream, size) = self._kept.popitem(last=False)
        self.bytes -= size
        stream.events.popleft()
        stream.dropped = number
        stream.settle()

    def _forget(self, streams: dict[StreamId, _Stream]) -> None:
        for stream in streams.values():
            for number, _ in stream.events:
                _, size = self._kept.pop(number)
                self.bytes -= size
            stream.events.clear()
        streams.clear()


class SessionEvents(EventStore):
    """One session's events in the `ResumeBuffer`: the SDK's `EventStore` for its transport."""

    def __init__(self, buffer: ResumeBuffer, key: int, streams: dict[StreamId, _Stream]) -> None:
        self._buffer = buffer
        self._key = key
        self._streams = streams

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        stream = self._streams.get(stream_id)
        if stream is None or stream.over or (message is None and stream_id != GET_STREAM_KEY):
            # A request's priming event, or its first event after the end of one of the same
            # ID (a client may number a later request the same), opens a new stream.
            stream = self._buffer.stream(stream_id, self._streams, self._key)
        if isinstance(message, JSONRPCError) and message.error.code == REQUEST_CANCELLED:
            stream.end(None)
            # Left out of the stream and of any replay.
            return stream.event_id(self._buffer.number())
        data = None if message is None else _json(message)
        number = self._buffer.keep(stream, data)
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            stream.end(number)  # before any waiter that `keep` woke runs
        return stream.event_id(number)

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        found = self._buffer.find(last_event_id, self._key)
        if found is None:
            return None
        stream, last = found
        while True:
            changed = stream.changed
            pending = stream.after(last)  # what was dropped in between is skipped
            for number, data in pending:
                last = number
                if data is not None:
                    message = jsonrpc_message_adapter.validate_json(data)
                    await send_callback(EventMessage(message, stream.event_id(number)))
            if stream.key == GET_STREAM_KEY:
                return stream.key  # the SDK's live stream takes it from here
            if pending:
                continue  # more may have come while those were sent
            if stream.lost(last):
                lost = answer_lost(stream.key, self._buffer.max_bytes)
                await send_callback(EventMessage(lost, stream.event_id(self._buffer.number())))
            if stream.over:
                return None  # the stream ends, as the POST's would have
            await changed.wait()


def answer_lost(key: StreamId, kept_bytes: int) -> JSONRPCError:
    """The error that ends a resumed stream whose answer is no longer kept."""
    error = ErrorData(
        code=INTERNAL_ERROR,
        message="the answer to this request was sent while the connection was down and is no "
        f"longer kept for resumption (the gateway keeps the last {kept_bytes} bytes of events, "
        "MCP_RESUME_BUFFER_BYTES); send the request again",
        data={"error_code": "answer_lost"},
    )
    # The SDK names a request's stream by str(its ID); both SDK clients match the answer
    # to their request whatever the ID's type.
    request = int(key) if key.isdecimal() else key
    return JSONRPCError(jsonrpc="2.0", id=request, error=error)


class NothingMore:
    """`app` (the `/mcp` endpoint) with a resumption that has nothing more to come answered
    `204 No Content` instead of an event stream that ends at once (see the module)."""

    def __init__(self, app: ASGIApp, buffer: ResumeBuffer) -> None:
        self.app = app
        self.buffer = buffer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        last = header(scope, b"last-event-id") if scope.get("method") == "GET" else None
        if last is not None and self.buffer.nothing_more(last):
            # The SDK still checks the session, its owner and the headers first: only the
            # stream it would have sent is replaced.
            send = rewriting(send, is_event_stream, _no_content)
        await self.app(scope, receive, send)


def _no_content(start: Message, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    if body.strip():  # not the stream the buffer foresaw: it goes as it is
        return start["status"], list(start.get("headers") or []), body
    return 204, without_stream_headers(start), b""


def _json(message: JSONRPCMessage) -> bytes:
    """The message as the SDK sends it (as bytes: a copy into `str` would cost as much again)."""
    return jsonrpc_message_adapter.dump_json(message, by_alias=True, exclude_unset=True)


class ResumableSessions(StreamableHTTPSessionManager):
    """The SDK's session manager, each new session with its own `SessionEvents` (the
    manager reads `event_store` once for every transport it makes)."""

    def __init__(self, app: Server[Any], buffer: ResumeBuffer | None, **options: Any) -> None:
        self._views: Callable[[], SessionEvents] | None = buffer.session if buffer else None
        super().__init__(app, **options)

    @property
    def event_store(self) -> EventStore | None:
        return self._views() if self._views is not None else None

    @event_store.setter
    def event_store(self, value: EventStore | None) -> None:
        if value is not None:
            raise TypeError("ResumableSessions makes each session's store from its buffer")


def streamable_http(
    server: Server[Any], security: TransportSecuritySettings, buffer_bytes: int
) -> tuple[ResumableSessions, Route]:
    """The session manager for `/mcp` (run it for the app's life) and its route; resumable
    unless `buffer_bytes` is 0."""
    buffer = ResumeBuffer(buffer_bytes) if buffer_bytes else None
    sessions = ResumableSessions(server, buffer, security_settings=security)
    endpoint: ASGIApp = StreamableHTTPASGIApp(sessions)
    return sessions, Route("/mcp", endpoint=NothingMore(endpoint, buffer) if buffer else endpoint)
