"""The index service's FastAPI app: `create_app(settings)` builds it; the lifespan opens the
LanceDB store once (reconciling after any crash) and closes it on shutdown."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from libs.contracts import ReadyStatus
from libs.errors import TooLargeError
from libs.service_app import install_common
from services.index.api import router
from services.index.core import IndexCore
from services.index.settings import IndexSettings

log = logging.getLogger(__name__)


class BodyLimitMiddleware:
    """Refuse request bodies over `max_bytes` with 413 in the MCP error shape, whether or not
    the client sent a Content-Length (chunked bodies are counted as they arrive)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        # Buffer up to the limit, then replay: the routes parse the whole body anyway.
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.max_bytes:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        error = TooLargeError(
            f"request body is larger than {self.max_bytes} bytes (INDEX_MAX_BODY_BYTES); "
            "split the document or raise the limit"
        )
        body = json.dumps(error.to_payload()).encode()
        await send(
            {
                "type": "http.response.start",
                "status": error.http_status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def create_app(settings: IndexSettings | None = None) -> FastAPI:
    settings = settings or IndexSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        core = IndexCore(settings)
        app.state.core = core
        try:
            await core.start()
        except Exception:
            # Keep serving: /readyz says why, and the next call tries to open it again.
            log.exception("could not open the index store")
        try:
            yield
        finally:
            await core.aclose()

    app = FastAPI(title="mcpvectordb index", version="0.3.0", lifespan=lifespan)
    # Added before install_common so the telemetry middleware (outermost) counts the 413s.
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.index_max_body_bytes)
    install_common(app, "index")
    app.include_router(router)

    @app.get("/readyz", response_model=ReadyStatus)
    async def readyz() -> JSONResponse:
        core: IndexCore = app.state.core
        ok, detail = await core.ready()
        status = ReadyStatus(status="ready" if ok else "not_ready", checks={"lancedb": detail})
        return JSONResponse(status.model_dump(), status_code=200 if ok else 503)

    return app
