"""Request body size limit for every service's HTTP app: one pure ASGI middleware.

A body over the limit is refused with 413 in the MCP error shape (`too_large`) before any
route sees it. A declared `Content-Length` is checked up front and then trusted, because the
HTTP server enforces that framing; a body without one (chunked) is counted as it arrives and
buffered up to the limit, then replayed to the app, so an endless stream cannot fill memory.
The `streamed` paths read their bodies as they arrive (`services.index.search_stream`):
theirs are counted as the app reads them, and a read past the limit raises `TooLargeError`,
which the app's error handler answers with the same 413.
Pure ASGI, so streaming responses (SSE) pass through untouched.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from libs.errors import TooLargeError

_WITH_BODY = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class BodyLimitMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        setting: str,
        streamed: Collection[str] = (),
    ) -> None:
        """`setting` names the environment variable that sets `max_bytes`, for the message."""
        self.app = app
        self.max_bytes = max_bytes
        self.setting = setting
        self.streamed = frozenset(streamed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in _WITH_BODY:
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit():
            if int(declared) > self.max_bytes:
                await self._refuse(send, declared.decode("latin-1"))
                return
            await self.app(scope, receive, send)
            return
        if scope.get("path") in self.streamed:
            await self.app(scope, self._counted(receive), send)
            return
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(send, f"more than {size}")
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    def _counted(self, receive: Receive) -> Receive:
        size = 0

        async def counted() -> Message:
            nonlocal size
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > self.max_bytes:
                    raise self._error(f"more than {size}")
            return message

        return counted

    def _error(self, size: str) -> TooLargeError:
        return TooLargeError(
            f"the request body ({size} bytes) is over the limit of {self.max_bytes} bytes "
            f"({self.setting}); send less per request or raise the limit"
        )

    async def _refuse(self, send: Send, size: str) -> None:
        error = self._error(size)
        body = json.dumps(error.to_payload()).encode()
        await send(
            {
                "type": "http.response.start",
                "status": error.http_status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
