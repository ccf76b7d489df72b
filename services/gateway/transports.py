"""The MCP transports over HTTP: SSE (`GET /sse` + `POST /messages/`) and streamable HTTP
(`/mcp`) for the server in `services.gateway.tools`, with three corrections in front of `/mcp`.

- A request whose `MCP-Protocol-Version` header names no revision this server speaks gets
  400 with a JSON-RPC error listing every revision it does speak: the handshake revisions that
  `initialize` negotiates and the per-request ones. (The SDK routes unknown values to its
  per-request entry, which lists only the latter.)
- No response for a cancelled request. The SDK ends a cancelled request's stream with a
  `-32800 Request cancelled` error; MCP says the receiver of a cancellation should not answer,
  and clients then report a response for an id they no longer know. The event is dropped from
  the stream, which still ends.
- A client that accepts only one of the two answer types MCP names gets that one. The SDK
  refuses (406) a POST whose `Accept` does not list both `application/json` and
  `text/event-stream`, though MCP lets a server answer either way. A client that accepts only
  JSON gets the JSON-RPC response alone, as a JSON body (the notifications the stream would
  have carried before it, progress and log messages, cannot travel in one); one that accepts
  only an event stream gets the stream.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.sse import SseServerTransport
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types.jsonrpc import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SPOKEN_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
REQUEST_CANCELLED = -32800
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
# Media ranges under which each answer type is accepted, and the `Accept` the SDK asks for.
_JSON_RANGES = frozenset({"application/json", "application/*", "*/*"})
_STREAM_RANGES = frozenset({"text/event-stream", "text/*", "*/*"})
_BOTH = b"application/json, text/event-stream"
# An event stream's own headers, left out when another response is sent in its place.
_STREAM_HEADERS = frozenset(
    {b"content-type", b"content-length", b"transfer-encoding", b"connection", b"x-accel-buffering"}
)


class _SseEndpoint:
    """`GET /sse` as a plain ASGI app: one MCP connection for the life of the stream."""

    def __init__(self, server: Server[Any], transport: SseServerTransport) -> None:
        self.server = server
        self.transport = transport

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with self.transport.connect_sse(scope, receive, send) as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())


def sse_routes(server: Server[Any], security: TransportSecuritySettings) -> list[BaseRoute]:
    transport = SseServerTransport("/messages/", security_settings=security)
    return [
        Route("/sse", endpoint=_SseEndpoint(server, transport), methods=["GET"]),
        Mount("/messages/", app=transport.handle_post_message),
    ]


class StreamableGuards:
    """The three corrections of the module docstring, as ASGI middleware on `/mcp`."""

    def __init__(self, app: ASGIApp, path: str = "/mcp") -> None:
        self.app = app
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(self.path):
            await self.app(scope, receive, send)
            return
        requested = header(scope, b"mcp-protocol-version")
        if requested is not None and requested not in SPOKEN_VERSIONS:
            await _unsupported_version(requested)(scope, receive, send)
            return
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        ranges = accepted(scope)
        takes_json = not ranges.isdisjoint(_JSON_RANGES)
        takes_stream = not ranges.isdisjoint(_STREAM_RANGES)
        if takes_json != takes_stream:  # one of the two: the SDK is asked with both
            headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"accept"]
            scope = {**scope, "headers": [*headers, (b"accept", _BOTH)]}
        if takes_json and not takes_stream:
            await self.app(scope, receive, _as_json_reply(send))
        else:
            await self.app(scope, receive, _without_cancelled_replies(send))


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def accepted(scope: Scope) -> set[str]:
    """The media ranges a request's `Accept` header lists (lower case, without parameters;
    a range the client gives `q=0` is refused, so left out). No header accepts anything."""
    value = header(scope, b"accept")
    if value is None:
        return {"*/*"}
    ranges: set[str] = set()
    for part in value.split(","):
        kind, *parameters = (piece.strip().lower() for piece in part.split(";"))
        refused = any(
            name.strip() == "q" and _number(quality) == 0
            for name, _, quality in (p.partition("=") for p in parameters)
        )
        if kind and not refused:
            ranges.add(kind)
    return ranges


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def jsonrpc_error(status: int, code: int, message: str, data: Any = None) -> JSONResponse:
    """A refusal in JSON-RPC's shape (no request id: the request was not taken)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=status)


def _unsupported_version(requested: str) -> JSONResponse:
    return jsonrpc_error(
        400,
        UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version {requested!r}; this server speaks "
        + ", ".join(SPOKEN_VERSIONS),
        {"supported": list(SPOKEN_VERSIONS), "requested": requested},
    )


def _data_of(event: bytes) -> bytes:
    """One SSE event's data: its `data:` lines, joined."""
    return b"\n".join(
        line.removeprefix(b"data:").strip()
        for line in event.splitlines()
        if line.startswith(b"data:")
    )


def _message_of(event: bytes) -> Any:
    try:
        return json.loads(_data_of(event))
    except ValueError:
        return None


def _is_cancelled(message: Any) -> bool:
    error = message.get("error") if isinstance(message, dict) else None
    return isinstance(error, dict) and error.get("code") == REQUEST_CANCELLED


def _is_cancelled_reply(event: bytes) -> bool:
    """Whether one SSE event carries the JSON-RPC error for a cancelled request."""
    if b"-32800" not in event:  # the cheap test first: nearly every event fails it
        return False
    return _is_cancelled(_message_of(event))


def replies_in(stream: bytes) -> list[bytes]:
    """The JSON-RPC responses a whole event stream carries (each as its event's data), but
    a cancelled request's."""
    replies = []
    for event in _EVENT_END.split(stream):
        data = _data_of(event)
        try:
            message = json.loads(data) if data else None
        except ValueError:
            continue
        if (
            isinstance(message, dict)
            and "id" in message
            and ("result" in message or "error" in message)
            and not _is_cancelled(message)
        ):
            replies.append(data)
    return replies


def rewriting(
    send: Send,
    holds: Callable[[Message], bool],
    rewrite: Callable[[Message, bytes], tuple[int, list[tuple[bytes, bytes]], bytes]],
    limit: int | None = None,
) -> Send:
    """`send` for one response: one whose start `holds` is held to its end and sent as the
    status, headers and body `rewrite` makes of its start and body (the length set); one
    longer than `limit` bytes goes on as it was, as does any other."""
    start: Message | None = None
    body = bytearray()

    async def rewritten(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            if holds(message):
                start = message
                return
            await send(message)
            return
        if start is None or message["type"] != "http.response.body":
            await send(message)
            return
        held = start
        body.extend(message.get("body", b""))
        if limit is not None and len(body) > limit:
            start = None
            await send(held)
            await send({**message, "body": bytes(body)})
            return
        if message.get("more_body", False):
            return
        start = None
        status, headers, data = rewrite(held, bytes(body))
        headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
        if status not in (204, 304):  # the two that have no body and say no length
            headers.append((b"content-length", b"%d" % len(data)))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    return rewritten


def is_event_stream(start: Message) -> bool:
    """Whether a response's start (`http.response.start`) announces an event stream."""
    content_type = dict(start.get("headers") or []).get(b"content-type", b"")
    return bytes(content_type).startswith(b"text/event-stream")


def without_stream_headers(start: Message) -> list[tuple[bytes, bytes]]:
    """An event stream's response headers but its own, for the response sent in its place."""
    return [(k, v) for k, v in start.get("headers") or [] if k.lower() not in _STREAM_HEADERS]


def _one_json_reply(start: Message, stream: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The JSON-RPC response an event stream carries, as a JSON body (an array when it carries
    several; 202 and no body when none, a cancelled request's)."""
    headers = without_stream_headers(start)
    replies = replies_in(stream)
    if not replies:
        return 202, headers, b""
    data = replies[0] if len(replies) == 1 else b"[" + b",".join(replies) + b"]"
    return start["status"], [*headers, (b"content-type", b"application/json")], data


def _as_json_reply(send: Send) -> Send:
    """`send` for one POST whose client accepts JSON but no event stream: an event-stream
    response is held to its end and sent as the JSON-RPC response it carries
    (`_one_json_reply`). Any other response (202 for a notification, an error) goes through
    as it is."""
    return rewriting(send, is_event_stream, _one_json_reply)


def _without_cancelled_replies(send: Send) -> Send:
    """`send` for one POST's response that leaves out the event of a cancelled request's
    reply when the response is an event stream (whole events only, so nothing is cut)."""
    streaming = False
    pending = b""

    async def filtered(message: Message) -> None:
        nonlocal streaming, pending
        if message["type"] == "http.response.start":
            streaming = is_event_stream(message)
            await send(message)
            return
        if message["type"] != "http.response.body" or not streaming:
            await send(message)
            return
        pending += message.get("body", b"")
        kept: list[bytes] = []
        start = 0
        for end in _EVENT_END.finditer(pending):
            event = pending[start : end.end()]
            if not _is_cancelled_reply(event):
                kept.append(event)
            start = end.end()
        pending = pending[start:]
        more = bool(message.get("more_body", False))
        if not more:
            kept.append(pending)
            pending = b""
        await send({"type": "http.response.body", "body": b"".join(kept), "more_body": more})

    return filtered
