"""What every service's FastAPI app has in common: JSON logs, telemetry middleware, the MVDB
error handler (errors become the MCP error shape with the class's HTTP status), request
validation errors in the same shape, `/healthz` and `/metrics`."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from libs.errors import MvdbError
from libs.telemetry import ERRORS, TelemetryMiddleware, metrics_response

log = logging.getLogger(__name__)


def describe_validation(exc: RequestValidationError | Exception) -> str:
    errors: list[Any] = getattr(exc, "errors", lambda: [])()
    parts = []
    for err in errors[:5]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p not in ("body", "query"))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{where or 'input'}: {msg}")
    return "; ".join(parts) or str(exc)


def install_common(app: FastAPI, service: str) -> None:
    app.add_middleware(TelemetryMiddleware, service=service)

    @app.exception_handler(MvdbError)
    async def _mvdb_error(request: Request, exc: MvdbError) -> JSONResponse:
        ERRORS.labels(service, exc.error_code).inc()
        if exc.http_status >= 500:
            log.error("request failed", extra={"fields": {"error_code": exc.error_code}})
        return JSONResponse(exc.to_payload(), status_code=exc.http_status)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        ERRORS.labels(service, "invalid_input").inc()
        payload = {
            "status": "error",
            "error": f"invalid request: {describe_validation(exc)}",
            "error_code": "invalid_input",
        }
        return JSONResponse(payload, status_code=400)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        ERRORS.labels(service, "internal_error").inc()
        log.exception("unexpected error")
        payload = {
            "status": "error",
            "error": f"internal error in the {service} service: {type(exc).__name__}: {exc}",
            "error_code": "internal_error",
        }
        return JSONResponse(payload, status_code=500)

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "service": service}

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> object:
        # Collectors may read storage (the index's per-library counts): off the event loop.
        return await asyncio.to_thread(metrics_response)
