"""The approximate vector index: built once the table passes the configured size, kept
current by optimize, found again after a restart, and close to exact search."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from libs.contracts import IndexSearchRequest
from libs.vectors import encode
from services.index.core import IndexCore
from services.index.settings import IndexSettings
from tests.integration.test_index_api import document

DIM = 384


def clustered(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((20, DIM)).astype(np.float32)
    rows = centres[rng.integers(0, 20, n)] + rng.normal(0, 0.3, (n, DIM)).astype(np.float32)
    out: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


async def test_vector_index_is_built_past_the_threshold_and_stays_accurate(
    tmp_path: Path,
) -> None:
    settings = IndexSettings(
        lancedb_uri=str(tmp_path / "db"), index_vector_index_min_rows=600, index_vector_nprobes=4
    )
    vectors = clustered(800, 1)
    async with IndexCore(settings) as core:
        for d in range(8):
            part = vectors[d * 100 : (d + 1) * 100]
            texts = [f"doc {d} chunk {i}" for i in range(100)]
            request = document(
                f"src-{d}", texts, library="even" if d % 2 == 0 else "odd", vectors=part
            )
            await core.upsert(request)
            await core.optimize()
            built = core.store is not None and core.store._vector_partitions > 0
            assert built == ((d + 1) * 100 >= 600), d

        queries = clustered(30, 2)
        hits = 0
        for q in queries:
            exact = np.argsort(-(vectors @ q))[:10]
            truth = {(f"src-{i // 100}", i % 100) for i in exact}
            found = await core.search(
                IndexSearchRequest(query="", vector_b64=encode(q[None, :]), top_k=10, mode="vector")
            )
            hits += len(truth & {(h.source, h.chunk_index) for h in found.results})
        assert hits / 300 >= 0.95

        odd = await core.search(
            IndexSearchRequest(
                query="", vector_b64=encode(queries[:1]), top_k=10, library="odd", mode="vector"
            )
        )
        assert len(odd.results) == 10 and {h.library for h in odd.results} == {"odd"}

    async with IndexCore(settings) as reopened:
        assert reopened.store is not None and reopened.store._vector_partitions > 0
        again = await reopened.search(
            IndexSearchRequest(query="", vector_b64=encode(queries[:1]), top_k=5, mode="vector")
        )
        assert len(again.results) == 5
