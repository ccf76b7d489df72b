"""The index service's /metrics: stored documents and chunks per library, search time by
mode, and the maintenance route."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from libs.vectors import encode
from services.index.settings import IndexSettings
from tests.index_helpers import unit_vectors, upsert_request
from tests.integration.test_index_api import running


def _value(text: str, name: str, library: str) -> float | None:
    match = re.search(rf'^{name}{{library="{library}"}} ([0-9.e+]+)$', text, re.MULTILINE)
    return float(match.group(1)) if match else None


async def test_stored_counts_and_search_time_are_exported(tmp_path: Path) -> None:
    settings = IndexSettings(lancedb_uri=str(tmp_path / "lancedb"))
    async with running(settings) as (_, http):
        for source, library in (("a", "alpha"), ("b", "alpha"), ("c", "beta")):
            body = upsert_request(
                source,
                [f"{source} one", f"{source} two", f"{source} three"],
                library=library,
                seed=ord(source),
            )
            assert (await http.post("/documents", json=body.model_dump())).status_code == 200
        vector = encode(unit_vectors(1, 99))
        search = {"query": "one", "vector_b64": vector, "top_k": 3, "mode": "hybrid"}
        assert (await http.post("/search", json=search)).status_code == 200
        optimized = await http.post("/optimize")
        assert optimized.status_code == 200 and optimized.json()["chunks"] == 9

        text = (await http.get("/metrics")).text
        assert _value(text, "mvdb_index_documents", "alpha") == 2
        assert _value(text, "mvdb_index_chunks", "alpha") == 6
        assert _value(text, "mvdb_index_documents", "beta") == 1
        assert re.search(r'^mvdb_index_search_seconds_count\{mode="hybrid"\} [1-9]', text, re.M)
        assert re.search(r"^mvdb_index_optimize_seconds_count [1-9]", text, re.M)

        deleted = await http.get("/documents", params={"library": "beta"})
        doc_id = deleted.json()["documents"][0]["doc_id"]
        assert (await http.delete(f"/documents/{doc_id}")).status_code == 200
        after = (await http.get("/metrics")).text
        assert _value(after, "mvdb_index_documents", "beta") is None


async def test_metrics_need_no_store(tmp_path: Path) -> None:
    settings = IndexSettings(lancedb_uri=str(tmp_path / "empty"))
    async with running(settings) as (_, http):
        response = await http.get("/metrics")
        assert response.status_code == 200 and "mvdb_index_documents" in response.text
        assert isinstance(http, httpx.AsyncClient)
