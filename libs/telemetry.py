"""Logging and Prometheus helpers used by every service.

- JSON log lines carrying the request id of the call being served (`X-Request-ID`), which
  the typed clients pass on to the next service.
- Module-level metrics with low-cardinality labels: route templates, status codes, stages,
  target services, error codes; never document ids, paths or URLs.
- `tell_caller`: what the caller of the MCP call being served should hear about while it runs
  (a retried service, a file of a folder that failed). The MCP adapter sets `caller_notices`
  for each tool call and turns notices into log notifications; elsewhere they go nowhere.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from libs.redaction import scrub

REQUEST_ID_HEADER = "X-Request-ID"
request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")

NoticeLevel = Literal["info", "warning", "error"]
Notice = Callable[[NoticeLevel, str], Awaitable[None]]
caller_notices: contextvars.ContextVar[Notice | None] = contextvars.ContextVar(
    "caller_notices", default=None
)


async def tell_caller(level: NoticeLevel, text: str) -> None:
    """Pass `text` to the caller of the MCP call being served, if there is one."""
    notice = caller_notices.get()
    if notice is not None:
        await notice(level, text)


HTTP_REQUESTS = Counter(
    "mvdb_http_requests_total", "HTTP requests served", ["service", "route", "method", "status"]
)
HTTP_LATENCY = Histogram(
    "mvdb_http_request_duration_seconds",
    "HTTP request latency",
    ["service", "route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
RETRIES = Counter("mvdb_client_retries_total", "Retried inter-service calls", ["target"])
ERRORS = Counter("mvdb_errors_total", "Errors returned to callers", ["service", "error_code"])
STAGE_SECONDS = Histogram(
    "mvdb_ingest_stage_seconds",
    "Time spent per ingest stage",
    ["stage"],
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)


class JsonFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
            "request_id": request_id_var.get(),
        }
        extra = getattr(record, "fields", None)
        if isinstance(extra, dict):
            entry.update(extra)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        # Credentials never reach a log line, whichever library's text carries them.
        return scrub(json.dumps(entry, ensure_ascii=False, default=str))


def configure_logging(service: str, level: str = "INFO") -> None:
    """JSON lines on stderr (stdout may be an MCP stdio channel)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def new_request_id() -> str:
    return uuid.uuid4().hex[:16]


def _route_template(scope: Scope) -> str:
    app = scope.get("app")
    router = getattr(app, "router", None)
    for route in getattr(router, "routes", []):
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return str(getattr(route, "path", "unmatched"))
        if match is Match.PARTIAL:
            return str(getattr(route, "path", "unmatched"))
    return "unmatched"


class TelemetryMiddleware:
    """Pure ASGI middleware (safe for SSE streams): request id propagation plus request count
    and latency by route template."""

    def __init__(self, app: ASGIApp, service: str) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        incoming = headers.get(REQUEST_ID_HEADER.lower().encode(), b"").decode("latin-1")
        rid = (incoming or new_request_id())[:64]
        token = request_id_var.set(rid)
        route = _route_template(scope)
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"],
                    (REQUEST_ID_HEADER.lower().encode(), rid.encode("latin-1")),
                ]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            HTTP_REQUESTS.labels(self.service, route, scope.get("method", ""), str(status)).inc()
            HTTP_LATENCY.labels(self.service, route, scope.get("method", "")).observe(
                time.perf_counter() - started
            )
            request_id_var.reset(token)


def metrics_response() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
