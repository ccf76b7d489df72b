"""What every service's FastAPI app has in common: JSON logs, telemetry middleware, one error
handler (every `libs.errors` exception, request validation failure or crash becomes the MCP
error shape with the class's HTTP status), `/healthz`, `/readyz` and `/metrics`.

Readiness is one helper for the four services: each app's lifespan puts its named checks in
`app.state.ready_checks` (`{"lancedb": core.ready}`, ...); `/readyz` runs them and answers 200
only when all pass, 503 with every check's detail otherwise (and while the lifespan has not
set them yet).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from libs.contracts import ReadyStatus
from libs.errors import MvdbError, invalid_input
from libs.redaction import scrub
from libs.telemetry import ERRORS, TelemetryMiddleware, metrics_response

log = logging.getLogger(__name__)

ReadyCheck = Callable[[], Awaitable[tuple[bool, str]]]


def error_response(exc: MvdbError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    """The HTTP answer for an error: its payload with its class's status."""
    return JSONResponse(exc.to_payload(), status_code=exc.http_status, headers=headers)


async def readiness(checks: Mapping[str, ReadyCheck] | None) -> JSONResponse:
    """Run the named checks; 200 when every one passes, 503 with each detail otherwise."""
    if checks is None:
        body = ReadyStatus(status="not_ready", checks={"service": "starting"})
        return JSONResponse(body.model_dump(), status_code=503)
    results = await asyncio.gather(*(check() for check in checks.values()))
    ok = all(ready for ready, _ in results)
    body = ReadyStatus(
        status="ready" if ok else "not_ready",
        checks={name: scrub(detail) for name, (_, detail) in zip(checks, results, strict=True)},
    )
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


def install_common(app: FastAPI, service: str) -> None:
    app.add_middleware(TelemetryMiddleware, service=service)

    def answer(error: MvdbError) -> JSONResponse:
        ERRORS.labels(service, error.error_code).inc()
        return error_response(error)

    @app.exception_handler(MvdbError)
    async def _mvdb_error(request: Request, exc: MvdbError) -> JSONResponse:
        if exc.http_status >= 500:
            log.error("request failed", extra={"fields": {"error_code": exc.error_code}})
        return answer(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return answer(invalid_input(exc, "request"))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return answer(
            MvdbError(f"internal error in the {service} service: {type(exc).__name__}: {exc}")
        )

    @app.get("/healthz", include_in_schema=False)
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "service": service}

    @app.get("/readyz", response_model=ReadyStatus)
    async def readyz(request: Request) -> JSONResponse:
        checks: Mapping[str, ReadyCheck] | None = getattr(app.state, "ready_checks", None)
        return await readiness(checks)

    @app.get("/metrics", include_in_schema=False)
    async def metrics() -> object:
        # Collectors may read storage (the index's per-library counts): off the event loop.
        return await asyncio.to_thread(metrics_response)
