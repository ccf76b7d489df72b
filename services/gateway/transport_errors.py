"""Refusals of the MCP transports over HTTP that say what went wrong and what to do.

The SDK's transports refuse a request that reaches no session, or that is not JSON, with a
few words (`Missing session ID`, `Could not find session`, `Invalid Content-Type header`),
some in plain text. A client's author reads them while writing the client; here each becomes
a JSON-RPC error (`-32600`) that names the problem and the fix, with the same status, but
415 for a body that is not JSON. What the SDK answers is matched by its words: a refusal not
in `REWRITES` goes through as it is (a test sends each of them).
"""

from __future__ import annotations

import json

from mcp_types.jsonrpc import INVALID_REQUEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.transports import header, jsonrpc_error, rewriting

# The SDK's words in a refusal → the status and the message sent instead.
REWRITES: dict[bytes, tuple[int, str]] = {
    b"Invalid Content-Type header": (
        415,
        "Content-Type must be application/json (this request sent {content_type}): each POST "
        "carries JSON-RPC as JSON",
    ),
    b"Missing session ID": (
        400,
        "no Mcp-Session-Id header: send initialize first, then the session id its answer "
        "carries (the Mcp-Session-Id header) with every later request",
    ),
    b"Session not found": (
        404,
        "session not found: it ended (closed by the client, or the gateway restarted); send "
        "initialize again to open a new session",
    ),
    b"session_id is required": (
        400,
        "no session_id: open the SSE stream with GET /sse; its first event (endpoint) is the "
        "URL to post messages to, session_id included",
    ),
    b"Invalid session ID": (
        400,
        "session_id is not a session id: post to the URL the SSE stream's endpoint event gave",
    ),
    b"Could not find session": (
        404,
        "session not found: its SSE stream is closed (or the gateway restarted); open a new "
        "one with GET /sse",
    ),
}
_LONGEST = 512  # the SDK's refusals are short; a longer answer is never one of them


class TransportErrors:
    """ASGI middleware on the MCP transport paths; see the module docstring."""

    def __init__(self, app: ASGIApp, paths: tuple[str, ...] = ("/mcp", "/messages/")) -> None:
        self.app = app
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(self.paths):
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _clearer(scope, send))


def _content_type(scope: Scope) -> str:
    sent = header(scope, b"content-type")
    return repr(sent) if sent is not None else "none"


def _clearer(scope: Scope, send: Send) -> Send:
    def clearer(start: Message, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        headers = list(start.get("headers") or [])
        rewrite = _rewrite(body)
        if rewrite is None:
            return start["status"], headers, body
        status, text = rewrite
        message = text.format(content_type=_content_type(scope))
        data = bytes(jsonrpc_error(status, INVALID_REQUEST, message).body)
        headers = [(k, v) for k, v in headers if k.lower() != b"content-type"]
        return status, [*headers, (b"content-type", b"application/json")], data

    return rewriting(send, lambda start: start["status"] in (400, 404), clearer, _LONGEST)


def _rewrite(body: bytes) -> tuple[int, str] | None:
    """The rewrite of a refusal whose body is, or whose JSON-RPC error says, one of the SDK's
    words in `REWRITES`."""
    words = body.strip()
    try:
        parsed = json.loads(words)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        message = parsed["error"].get("message")
        words = message.encode() if isinstance(message, str) else b""
    for known, rewrite in REWRITES.items():
        if words == known or words == b"Bad Request: " + known:
            return rewrite
    return None
