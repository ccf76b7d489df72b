"""The index service's FastAPI app: `create_app(settings)` builds it; the lifespan opens the
LanceDB store once (reconciling after any crash) and closes it on shutdown."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from libs import SERVER_VERSION
from libs.body_limit import BodyLimitMiddleware
from libs.service_app import install_common
from services.index import search_stream
from services.index.api import router
from services.index.core import IndexCore
from services.index.settings import IndexSettings

log = logging.getLogger(__name__)


def create_app(settings: IndexSettings | None = None) -> FastAPI:
    settings = settings or IndexSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        core = IndexCore(settings)
        app.state.core = core
        app.state.ready_checks = {"lancedb": core.ready}
        try:
            await core.start()
        except Exception:
            # Keep serving: /readyz says why, and the next call tries to open it again.
            log.exception("could not open the index store")
        try:
            yield
        finally:
            await core.aclose()

    app = FastAPI(title="mcpvectordb index", version=SERVER_VERSION, lifespan=lifespan)
    # Added before install_common so the telemetry middleware (outermost) counts the 413s.
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.index_max_body_bytes,
        setting="INDEX_MAX_BODY_BYTES",
        streamed=[search_stream.PATH],
    )
    install_common(app, "index")
    app.include_router(router)

    return app
