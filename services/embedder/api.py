"""Embedder HTTP routes: thin adapters over `EmbedderCore`."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from libs.contracts import EmbedRequest, EmbedResponse, ModelInfo, ReadyStatus
from libs.vectors import encode
from services.embedder.core import EmbedderCore

router = APIRouter()


def _core(request: Request) -> EmbedderCore:
    core: EmbedderCore = request.app.state.core
    return core


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    core: EmbedderCore | None = getattr(request.app.state, "core", None)
    if core is None:
        body = ReadyStatus(status="not_ready", checks={"model": "loading"})
        return JSONResponse(body.model_dump(), status_code=503)
    ok, detail = await core.ready()
    body = ReadyStatus(status="ready" if ok else "not_ready", checks={"model": detail})
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


@router.get("/info")
async def info(request: Request) -> ModelInfo:
    return await _core(request).info()


@router.post("/embed")
async def embed(body: EmbedRequest, request: Request) -> EmbedResponse:
    core = _core(request)
    vectors = await core.embed(body.texts, body.kind)
    model = await core.info()
    return EmbedResponse(
        model=model.name, dim=model.dim, count=int(vectors.shape[0]), vectors_b64=encode(vectors)
    )
