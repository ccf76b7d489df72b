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
  cancelled request), and a resumed stream of a cancelled request stays open with nothing
  more to say, as the request's own stream does on a server that sends no such reply (a
  client that sees a stream with event IDs end unanswered reconnects, again and again).
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
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCResponse, jsonrpc_message_adapter
from starlette.routing import Route

from services.gateway.transports import REQUEST_CANCELLED

# What one stored event costs beyond its JSON text (its records in the buffer).
_OVERHEAD = 200


@dataclass(eq=False)
class _Stream:
    """One stream of one session (`home`, its streams by key): its events still kept, in
    order, as (number, JSON or None for a priming event); whether its answer was sent; the
    newest number dropped from it."""

    key: StreamId
    home: dict[StreamId, _Stream]
    events: deque[tuple[int, bytes | None]] = field(default_factory=deque)
    answered: bool = False
    dropped: int = 0
    changed: anyio.Event = field(default_factory=anyio.Event)

    def add(self, number: int, data: bytes | None) -> None:
        self.events.append((number, data))
        self.wake()

    def wake(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    def after(self, number: int) -> list[tuple[int, bytes | None]]:
        return [event for event in self.events if event[0] > number]

    def settle(self) -> None:
        """Leave the session's streams once answered with nothing kept (a request's ID may
        come again in a later request)."""
        if self.answered and not self.events and self.home.get(self.key) is self:
            del self.home[self.key]


class ResumeBuffer:
    """The recent events of every session's streams, within `max_bytes` (see the module)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._numbers = count(1)
        self._sessions = count(1)
        # Every kept event, oldest first: its number -> (session, stream, size).
        self._kept: OrderedDict[int, tuple[int, _Stream, int]] = OrderedDict()

    def session(self) -> SessionEvents:
        """A new session's view: its own streams; they are dropped when it is."""
        streams: dict[StreamId, _Stream] = {}
        events = SessionEvents(self, next(self._sessions), streams)
        weakref.finalize(events, self._forget, streams)
        return events

    def number(self) -> int:
        """The next event's number (numbers only grow, across all sessions)."""
        return next(self._numbers)

    def keep(self, session: int, stream: _Stream, data: bytes | None) -> int:
        """The number of a new event on `stream`; kept unless larger than the whole buffer."""
        number = self.number()
        size = _OVERHEAD + (len(data) if data else 0)
        if size > self.max_bytes:
            stream.dropped = number
            stream.wake()
            return number
        while self._kept and self.bytes + size > self.max_bytes:
            self._drop_oldest()
        self._kept[number] = (session, stream, size)
        self.bytes += size
        stream.add(number, data)
        return number

    def find(self, event_id: str, session: int) -> tuple[_Stream, int] | None:
        """The stream of a kept event of `session`, and the event's number."""
        try:
            number = int(event_id)
        except ValueError:
            return None
        kept = self._kept.get(number)
        if kept is None or kept[0] != session:
            return None
        return kept[1], number

    def _drop_oldest(self) -> None:
        number, (_, stream, size) = self._kept.popitem(last=False)
        self.bytes -= size
        stream.events.popleft()
        stream.dropped = number
        stream.settle()

    def _forget(self, streams: dict[StreamId, _Stream]) -> None:
        for stream in streams.values():
            for number, _ in stream.events:
                _, _, size = self._kept.pop(number)
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
        if stream is None or stream.answered or (message is None and stream_id != GET_STREAM_KEY):
            # A request's priming event, or its first event after an answered one of the same
            # ID (a client may number a later request the same), opens a new stream.
            stream = self._streams[stream_id] = _Stream(stream_id, self._streams)
        if isinstance(message, JSONRPCError) and message.error.code == REQUEST_CANCELLED:
            return str(self._buffer.number())  # left out of the stream and of any replay
        data = None if message is None else _json(message)
        number = self._buffer.keep(self._key, stream, data)
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            stream.answered = True  # before any waiter that `keep` woke runs
            stream.settle()
        return str(number)

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        found = self._buffer.find(last_event_id, self._key)
        if found is None:
            return None
        stream, last = found
        while True:
            changed = stream.changed
            if stream.dropped > last:  # what comes next is gone: the stream ends here
                return None
            pending = stream.after(last)
            for number, data in pending:
                last = number
                if data is not None:
                    message = jsonrpc_message_adapter.validate_json(data)
                    await send_callback(EventMessage(message, str(number)))
            if stream.key == GET_STREAM_KEY:
                return stream.key  # the SDK's live stream takes it from here
            if pending:
                continue  # more may have come while those were sent
            if stream.answered:
                return None  # answered: the stream ends, as the POST's would have
            await changed.wait()


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
    sessions = ResumableSessions(
        server, ResumeBuffer(buffer_bytes) if buffer_bytes else None, security_settings=security
    )
    return sessions, Route("/mcp", endpoint=StreamableHTTPASGIApp(sessions))
