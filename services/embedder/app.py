"""Embedder app factory: the model is loaded once in the lifespan and shared by requests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from libs.body_limit import BodyLimitMiddleware
from libs.service_app import install_common
from services.embedder.api import router
from services.embedder.core import EmbedderCore
from services.embedder.settings import EmbedderSettings


def create_app(settings: EmbedderSettings | None = None) -> FastAPI:
    settings = settings or EmbedderSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.core = EmbedderCore(settings)
        app.state.ready_checks = {"model": app.state.core.ready}
        try:
            yield
        finally:
            await app.state.core.aclose()

    app = FastAPI(title="mcpvectordb embedder", lifespan=lifespan)
    app.state.settings = settings
    # Inside the telemetry middleware that install_common adds, so the 413s are counted.
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.embed_max_body_bytes,
        setting="EMBED_MAX_BODY_BYTES",
    )
    install_common(app, "embedder")
    app.include_router(router)
    return app
