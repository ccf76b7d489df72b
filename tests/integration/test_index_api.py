"""The index service over HTTP: the real FastAPI app with its lifespan and a real LanceDB in
tmp_path, driven by `libs.clients.IndexClient` (so the client and the routes cannot drift
apart) and by raw httpx for status codes and error bodies."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from libs import SERVER_VERSION
from libs.clients import IndexClient
from libs.contracts import IndexSearchRequest
from libs.errors import InvalidInputError, ModelMismatchError, NotFoundError
from libs.http import RetryPolicy
from libs.vectors import encode
from services.index.app import create_app
from services.index.settings import IndexSettings
from tests.index_helpers import DIM, MODEL, unit_vectors, upsert_request

pytestmark = pytest.mark.integration


@asynccontextmanager
async def running(settings: IndexSettings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://index") as http:
            yield app, http


@pytest.fixture
def settings(tmp_path: Path) -> IndexSettings:
    return IndexSettings(lancedb_uri=str(tmp_path / "lancedb"), index_max_body_bytes=256 * 1024)


@pytest.fixture
async def http(settings: IndexSettings) -> AsyncIterator[httpx.AsyncClient]:
    async with running(settings) as (_, client):
        yield client


@pytest.fixture
async def client(settings: IndexSettings) -> AsyncIterator[IndexClient]:
    async with running(settings) as (app, _):
        index = IndexClient(
            "http://index",
            transport=httpx.ASGITransport(app=app),
            policy=RetryPolicy(attempts=1),
        )
        try:
            yield index
        finally:
            await index.aclose()


async def test_the_typed_client_drives_every_route(client: IndexClient) -> None:
    empty = await client.search(IndexSearchRequest(query="anything", mode="bm25"))
    assert empty.results == []
    assert (await client.lookup("default", "a.md")).document is None

    vectors = unit_vectors(2, seed=3)
    first = await client.upsert(
        upsert_request("a.md", ["Otters hold hands", "Rivers"], vectors=vectors)
    )
    second = await client.upsert(
        upsert_request(
            "a.md",
            ["Otters sleep", "Rivers flow"],
            vectors=vectors,
            metadata={"seed": 0},
            markdown="# Otters sleep\n\nRivers flow\n",
            headings=["Top"],
        )
    )
    other = await client.upsert(
        upsert_request("b.md", ["Beavers build dams"], library="dam", seed=9)
    )
    assert (first.status, second.status, other.status) == ("indexed", "replaced", "indexed")

    found = (await client.lookup("default", "a.md")).document
    assert found is not None and found.doc_id == second.doc_id
    assert found.metadata == {"seed": 0}

    hits = await client.search(
        IndexSearchRequest(query="otters", vector_b64=encode(vectors[:1]), top_k=2)
    )
    assert hits.results[0].content == "Otters sleep"
    assert hits.results[0].headings == ["Top"]
    assert {h.doc_id for h in hits.results} == {second.doc_id}
    scoped = await client.search(IndexSearchRequest(query="dams", mode="bm25", library="dam"))
    assert [h.source for h in scoped.results] == ["b.md"]

    listed = await client.list_documents(None, 1, 0)
    assert (listed.count, listed.total) == (1, 2)
    assert listed.documents[0].doc_id == other.doc_id
    assert [d.doc_id for d in (await client.list_documents("default", 10, 0)).documents] == [
        second.doc_id
    ]
    libraries = (await client.list_libraries()).libraries
    assert [(x.library, x.document_count, x.chunk_count) for x in libraries] == [
        ("dam", 1, 1),
        ("default", 1, 2),
    ]

    got = await client.get(second.doc_id)
    assert got.content == "# Otters sleep\n\nRivers flow\n"
    assert got.chunk_count == 2

    info = await client.info()
    assert (info.model, info.dim, info.documents, info.chunks) == (MODEL, DIM, 2, 3)

    deleted = await client.delete(other.doc_id)
    assert deleted.deleted_chunks == 1
    with pytest.raises(NotFoundError, match=other.doc_id):
        await client.get(other.doc_id)
    with pytest.raises(NotFoundError, match="no document"):
        await client.delete(other.doc_id)


async def test_typed_errors_cross_the_wire(client: IndexClient) -> None:
    await client.upsert(upsert_request("a.md", ["text"]))
    with pytest.raises(ModelMismatchError, match="other/model"):
        await client.upsert(upsert_request("b.md", ["text"], model="other/model"))
    with pytest.raises(InvalidInputError, match="unknown filter field 'colour'"):
        await client.search(IndexSearchRequest(query="text", mode="bm25", filter={"colour": "x"}))
    with pytest.raises(InvalidInputError, match="vector_b64"):
        await client.search(IndexSearchRequest(query="text", mode="vector"))


async def test_error_bodies_have_the_mcp_shape_and_status(http: httpx.AsyncClient) -> None:
    missing = await http.get("/documents/no-such-id")
    assert missing.status_code == 404
    assert missing.json() == {
        "status": "error",
        "error": missing.json()["error"],
        "error_code": "not_found",
    }
    assert "no-such-id" in missing.json()["error"]
    assert (await http.delete("/documents/no-such-id")).status_code == 404

    bad_limit = await http.get("/documents", params={"limit": 0})
    assert bad_limit.status_code == 400
    assert bad_limit.json()["error_code"] == "invalid_input"

    no_source = await http.get("/documents/lookup", params={"library": "default"})
    assert no_source.status_code == 400

    bad_filter = await http.post(
        "/search", json={"query": "x", "mode": "bm25", "filter": {"page": "1"}}
    )
    assert bad_filter.status_code == 400
    assert "needs an integer" in bad_filter.json()["error"]

    request = upsert_request("a.md", ["text"])
    assert (await http.post("/documents", json=request.model_dump())).status_code == 200
    mismatch = upsert_request("b.md", ["text"], model="other")
    conflict = await http.post("/documents", json=mismatch.model_dump())
    assert (conflict.status_code, conflict.json()["error_code"]) == (409, "model_mismatch")


async def test_an_invalid_upsert_is_a_400_that_says_what_is_wrong(http: httpx.AsyncClient) -> None:
    valid = upsert_request("a.md", ["text", "more"]).model_dump()
    nan = unit_vectors(2, 0)
    nan[1, 3] = float("nan")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"chunks": []}, "needs at least one chunk; nothing was indexed for 'a.md'"),
        ({"vectors_b64": encode(unit_vectors(1, 0))}, "expected 2 vectors, got 1"),
        ({"vectors_b64": "not base64!"}, "vectors_b64 is not base64 float32 data"),
        ({"vectors_b64": encode(nan)}, "NaN or infinite"),
        ({"document": {**valid["document"], "source": ""}}, "non-empty source and library"),
        ({"model": ""}, "embedding model name"),
        ({"dim": 0}, "positive vector width"),
    ]
    for change, words in cases:
        refused = await http.post("/documents", json={**valid, **change})
        assert refused.status_code == 400, change
        assert refused.json()["error_code"] == "invalid_input", change
        assert words in refused.json()["error"], change
    assert (await http.get("/info")).json()["documents"] == 0


async def test_an_id_that_is_no_uuid_is_not_found_and_names_no_other_route(
    client: IndexClient,
) -> None:
    """`lookup`, `..` or `a/b` as a doc_id would reach another route (or none) by its path."""
    stored = await client.upsert(upsert_request("a.md", ["text"]))
    for doc_id in ("lookup", "..", "a/b", "../info", "x?y=1", "does-not-exist"):
        with pytest.raises(NotFoundError, match="a doc_id is a UUID"):
            await client.get(doc_id)
        with pytest.raises(NotFoundError, match="a doc_id is a UUID"):
            await client.delete(doc_id)
    with pytest.raises(NotFoundError, match="a job_id is a UUID"):
        await client.get_job("../documents")
    missing = "00000000-0000-4000-8000-000000000000"
    with pytest.raises(NotFoundError, match="list_documents shows"):
        await client.get(missing)
    found = await client.get(stored.doc_id.upper())
    assert found.doc_id == stored.doc_id


async def test_lookup_is_not_taken_for_a_doc_id(http: httpx.AsyncClient) -> None:
    response = await http.get("/documents/lookup", params={"library": "x", "source": "y"})
    assert response.status_code == 200
    assert response.json() == {"document": None, "conversion": 0}


async def test_oversized_bodies_get_413(http: httpx.AsyncClient) -> None:
    big: dict[str, Any] = upsert_request("a.md", ["text"]).model_dump()
    big["document"]["markdown"] = "x" * (300 * 1024)
    declared = await http.post("/documents", json=big)
    assert (declared.status_code, declared.json()["error_code"]) == (413, "too_large")

    async def chunked() -> AsyncIterator[bytes]:
        for _ in range(40):
            yield b" " * 8192

    streamed = await http.post(
        "/documents", content=chunked(), headers={"content-type": "application/json"}
    )
    assert (streamed.status_code, streamed.json()["error_code"]) == (413, "too_large")
    assert (await http.get("/info")).json()["documents"] == 0


async def test_health_and_readiness(http: httpx.AsyncClient) -> None:
    assert (await http.get("/healthz")).status_code == 200
    assert (await http.get("/openapi.json")).json()["info"]["version"] == SERVER_VERSION
    ready = await http.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"
    assert "lancedb" in ready.json()["checks"]
    metrics = await http.get("/metrics")
    assert "mvdb_http_requests_total" in metrics.text


async def test_readiness_is_503_when_the_store_cannot_open(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    settings = IndexSettings(lancedb_uri=str(blocker / "lancedb"))
    async with running(settings) as (_, http):
        ready = await http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["status"] == "not_ready"
        assert "LANCEDB_URI" in ready.json()["checks"]["lancedb"]
        failed = await http.get("/info")
        assert (failed.status_code, failed.json()["error_code"]) == (500, "store_error")


async def test_info_says_the_largest_write(client: IndexClient, settings: IndexSettings) -> None:
    assert (await client.info()).max_body_bytes == settings.index_max_body_bytes == 256 * 1024


async def test_stored_vectors_come_once_per_text_with_the_model(client: IndexClient) -> None:
    vectors = unit_vectors(3, seed=5)
    written = await client.upsert(
        upsert_request("v.md", ["Otters", "Rivers", "Otters"], vectors=vectors)
    )
    stored = await client.stored_vectors(written.doc_id)
    assert (stored.model, stored.dim) == (MODEL, DIM)
    by_digest = stored.by_digest()
    digest = {t: hashlib.sha256(t.encode()).digest() for t in ("Otters", "Rivers")}
    assert set(by_digest) == set(digest.values())  # a repeated text comes once
    assert (by_digest[digest["Otters"]] == vectors[0]).all()
    assert (by_digest[digest["Rivers"]] == vectors[1]).all()
    # A document this index does not hold has none, and so has one being replaced: after
    # the replace the old doc_id's chunks are gone.
    assert (await client.stored_vectors(str(uuid.uuid4()))).hashes == []
    await client.upsert(upsert_request("v.md", ["Beavers"], seed=2))
    assert (await client.stored_vectors(written.doc_id)).hashes == []
