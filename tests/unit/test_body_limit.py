"""The shared request body limit: the middleware itself on a small app, then each service's
real app (no lifespan needed: the limit refuses before any route or resource is reached)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from libs.body_limit import BodyLimitMiddleware
from libs.errors import TooLargeError


def _echo_app(limit: int, calls: list[int]) -> BodyLimitMiddleware:
    async def echo(request: Request) -> JSONResponse:
        body = await request.body()
        calls.append(len(body))
        return JSONResponse({"received": len(body)})

    app = Starlette(routes=[Route("/", echo, methods=["GET", "POST"])])
    return BodyLimitMiddleware(app, max_bytes=limit, setting="TEST_LIMIT")


def _client(app: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://127.0.0.1:8000")  # type: ignore[arg-type]


async def _stream(parts: int, size: int) -> AsyncIterator[bytes]:
    for _ in range(parts):
        yield b"x" * size


async def test_declared_and_streamed_bodies_over_the_limit_get_413() -> None:
    calls: list[int] = []
    async with _client(_echo_app(100, calls)) as http:
        declared = await http.post("/", content=b"x" * 101)
        assert declared.status_code == 413
        body = declared.json()
        assert body["status"] == "error" and body["error_code"] == "too_large"
        assert "TEST_LIMIT" in body["error"] and "101" in body["error"]

        streamed = await http.post("/", content=_stream(10, 30))  # no Content-Length
        assert "content-length" not in streamed.request.headers
        assert streamed.status_code == 413 and streamed.json()["error_code"] == "too_large"
    assert calls == []


async def test_a_streamed_path_reads_its_body_as_it_comes_and_past_the_limit_gets_413() -> None:
    """A `streamed` path's app reads the body itself: within the limit it gets each part as it
    arrives (nothing buffered first); past it, the read raises the 413's error."""
    seen: list[list[int]] = []

    async def parts(request: Request) -> JSONResponse:
        sizes = [len(part) async for part in request.stream() if part]
        seen.append(sizes)
        return JSONResponse({"parts": sizes})

    inner = Starlette(routes=[Route("/stream", parts, methods=["POST"])])
    app = BodyLimitMiddleware(inner, max_bytes=100, setting="TEST_LIMIT", streamed=["/stream"])

    async def refused(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, TooLargeError)
        return JSONResponse(exc.to_payload(), status_code=exc.http_status)

    inner.add_exception_handler(TooLargeError, refused)
    async with _client(app) as http:
        within = await http.post("/stream", content=_stream(4, 25))
        assert within.json() == {"parts": [25, 25, 25, 25]}
        over = await http.post("/stream", content=_stream(5, 25))
        assert over.status_code == 413 and over.json()["error_code"] == "too_large"
        assert "TEST_LIMIT" in over.json()["error"]
        declared = await http.post("/stream", content=b"x" * 101)
        assert declared.status_code == 413
    assert seen == [[25, 25, 25, 25]]


async def test_bodies_within_the_limit_reach_the_app_whole() -> None:
    calls: list[int] = []
    async with _client(_echo_app(100, calls)) as http:
        assert (await http.post("/", content=b"x" * 100)).json() == {"received": 100}
        assert (await http.post("/", content=_stream(4, 25))).json() == {"received": 100}
        assert (await http.get("/")).json() == {"received": 0}
    assert calls == [100, 100, 0]


def _embedder(tmp: Path) -> FastAPI:
    from services.embedder.app import create_app
    from services.embedder.settings import EmbedderSettings

    return create_app(EmbedderSettings(_env_file=None, var_dir=tmp, embed_max_body_bytes=1024))  # type: ignore[call-arg]


def _converter(tmp: Path) -> FastAPI:
    from services.converter.app import create_app
    from services.converter.settings import ConverterSettings

    return create_app(ConverterSettings(_env_file=None, var_dir=tmp, max_convert_bytes=1024))  # type: ignore[call-arg]


def _index(tmp: Path) -> FastAPI:
    from services.index.app import create_app
    from services.index.settings import IndexSettings

    return create_app(
        IndexSettings(_env_file=None, lancedb_uri=str(tmp / "db"), index_max_body_bytes=1024)  # type: ignore[call-arg]
    )


def _gateway(tmp: Path) -> FastAPI:
    from services.gateway.app import create_app
    from services.gateway.settings import GatewaySettings

    return create_app(GatewaySettings(_env_file=None, var_dir=tmp, max_upload_bytes=1024))  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("build", "path", "setting", "size"),
    [
        (_embedder, "/embed", "EMBED_MAX_BODY_BYTES", 2048),
        (_converter, "/convert?filename=a.txt", "MAX_CONVERT_BYTES", 2048),
        (_converter, "/chunk", "MAX_CONVERT_BYTES", 2048),
        (_index, "/documents", "INDEX_MAX_BODY_BYTES", 2048),
        (_index, "/search", "INDEX_MAX_BODY_BYTES", 2048),
        (_index, "/search/stream", "INDEX_MAX_BODY_BYTES", 2048),
        # The gateway bounds MCP messages and /ingest_folder by MAX_UPLOAD_BYTES + 1 MiB.
        (_gateway, "/ingest_folder", "MAX_UPLOAD_BYTES", 2 * 1024 * 1024),
        (_gateway, "/messages/?session_id=0", "MAX_UPLOAD_BYTES", 2 * 1024 * 1024),
        (_gateway, "/mcp", "MAX_UPLOAD_BYTES", 2 * 1024 * 1024),
    ],
)
async def test_every_service_refuses_oversized_bodies(
    tmp_path: Path, build: Callable[[Path], FastAPI], path: str, setting: str, size: int
) -> None:
    async with _client(build(tmp_path)) as http:
        for content in (b"{" + b" " * size + b"}", _stream(size // 512 + 1, 512)):
            response = await http.post(
                path, content=content, headers={"Content-Type": "application/json"}
            )
            assert response.status_code == 413, response.text[:200]
            assert response.json()["error_code"] == "too_large"
            assert setting in response.json()["error"]
