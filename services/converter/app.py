"""Converter app factory: one `Converter` (and its worker processes) per app, created in the
lifespan and shut down with it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from libs.body_limit import BodyLimitMiddleware
from libs.service_app import install_common
from services.converter.api import router
from services.converter.core import Converter
from services.converter.settings import ConverterSettings


def create_app(settings: ConverterSettings | None = None) -> FastAPI:
    settings = settings or ConverterSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        converter = Converter(settings)
        await converter.start()
        app.state.converter = converter
        app.state.ready_checks = {"workers": converter.ready}
        try:
            yield
        finally:
            await converter.aclose()

    app = FastAPI(title="mcpvectordb converter", lifespan=lifespan)
    app.state.settings = settings
    # Refuses oversized bodies before a route runs (the routes also count as they read);
    # inside the telemetry middleware that install_common adds, so the 413s are counted.
    app.add_middleware(
        BodyLimitMiddleware, max_bytes=settings.max_convert_bytes, setting="MAX_CONVERT_BYTES"
    )
    install_common(app, "converter")
    app.include_router(router)
    return app
