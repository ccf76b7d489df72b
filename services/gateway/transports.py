"""The MCP transports over HTTP: SSE (`GET /sse` + `POST /messages/`) and streamable HTTP
(`/mcp`) for the server in `services.gateway.tools`, with two corrections in front of `/mcp`.

- A request whose `MCP-Protocol-Version` header names no revision this server speaks gets
  400 with a JSON-RPC error listing every revision it does speak: the handshake revisions that
  `initialize` negotiates and the per-request ones. (The SDK routes unknown values to its
  per-request entry, which lists only the latter.)
- No response for a cancelled request. The SDK ends a cancelled request's stream with a
  `-32800 Request cancelled` error; MCP says the receiver of a cancellation should not answer,
  and clients then report a response for an id they no longer know. The event is dropped from
  the stream, which still ends.
"""

from __future__ import annotations

import json
import re
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
    """The two corrections of the module docstring, as ASGI middleware on `/mcp`."""

    def __init__(self, app: ASGIApp, path: str = "/mcp") -> None:
        self.app = app
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(self.path):
            await self.app(scope, receive, send)
            return
        requested = _header(scope, b"mcp-protocol-version")
        if requested is not None and requested not in SPOKEN_VERSIONS:
            await _unsupported_version(requested)(scope, receive, send)
            return
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _without_cancelled_replies(send))


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _unsupported_version(requested: str) -> JSONResponse:
    return JSONResponse(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": UNSUPPORTED_PROTOCOL_VERSION,
                "message": (
                    f"Unsupported protocol version {requested!r}; this server speaks "
                    + ", ".join(SPOKEN_VERSIONS)
                ),
                "data": {"supported": list(SPOKEN_VERSIONS), "requested": requested},
            },
        },
        status_code=400,
    )


def _is_cancelled_reply(event: bytes) -> bool:
    """Whether one SSE event carries the JSON-RPC error for a cancelled request."""
    if b"-32800" not in event:  # the cheap test first: nearly every event fails it
        return False
    data = b"".join(
        line.removeprefix(b"data:").strip()
        for line in event.splitlines()
        if line.startswith(b"data:")
    )
    try:
        message = json.loads(data)
    except ValueError:
        return False
    error = message.get("error") if isinstance(message, dict) else None
    return isinstance(error, dict) and error.get("code") == REQUEST_CANCELLED


def _without_cancelled_replies(send: Send) -> Send:
    """`send` for one POST's response that leaves out the event of a cancelled request's
    reply when the response is an event stream (whole events only, so nothing is cut)."""
    streaming = False
    pending = b""

    async def filtered(message: Message) -> None:
        nonlocal streaming, pending
        if message["type"] == "http.response.start":
            content_type = dict(message.get("headers") or []).get(b"content-type", b"")
            streaming = bytes(content_type).startswith(b"text/event-stream")
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
