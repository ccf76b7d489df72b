"""Embedder HTTP routes: thin adapters over `EmbedderCore`."""

from __future__ import annotations

from fastapi import APIRouter, Request

from libs.contracts import EmbedRequest, EmbedResponse, ModelInfo
from libs.vectors import encode
from services.embedder.core import EmbedderCore

router = APIRouter()


def _core(request: Request) -> EmbedderCore:
    core: EmbedderCore = request.app.state.core
    return core


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
