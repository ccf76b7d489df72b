"""The search-feature tests' shared pieces: the three search modes, a search request with a
seeded query vector (`query`), the sources of a list of hits, and a library of five documents
about walruses that differ in every filterable field (`add_walrus_library`)."""

from __future__ import annotations

from typing import Any

from libs.contracts import IndexSearchRequest, SearchHit, SearchMode
from libs.vectors import encode
from services.index.core import IndexCore
from tests.index_helpers import unit_vectors, upsert_request

MODES: list[SearchMode] = ["bm25", "vector", "hybrid"]


def query(
    text: str, mode: SearchMode = "bm25", *, seed: int = 99, **kwargs: Any
) -> IndexSearchRequest:
    vector = None if mode == "bm25" else encode(unit_vectors(1, seed))
    return IndexSearchRequest(query=text, vector_b64=vector, mode=mode, **kwargs)


def sources(hits: list[SearchHit]) -> set[str]:
    return {h.source for h in hits}


async def add_walrus_library(core: IndexCore) -> IndexCore:
    """Five documents about walruses that differ in every filterable field, upserted into
    `core`, which is returned."""
    await core.upsert(
        upsert_request(
            "reports/2023-annual.pdf",
            ["walrus census page one", "walrus census page two", "walrus census page three"],
            seed=1,
            title="Annual Report 2023",
            file_type="pdf",
            last_modified="2023-12-31T10:00:00+00:00",
            pages=[1, 2, 3],
            metadata={"author": "Alice", "year": 2023, "draft": False, "tags": ["arctic", "ice"]},
        )
    )
    await core.upsert(
        upsert_request(
            "notes/walrus.md",
            ["walrus notes", "more walrus notes"],
            seed=2,
            title="walrus notes",
            last_modified="2024-05-01T08:00:00+00:00",
            metadata={"author": "Bob", "year": 2024, "draft": True, "rating": 4.5},
        )
    )
    await core.upsert(
        upsert_request(
            "odd/100%_a\\b'quote.txt",
            ["walrus with odd characters"],
            seed=3,
            title="100% walrus_under\\score's",
            file_type="txt",
            last_modified="2025-02-02T00:00:00+00:00",
            metadata={"author": "O'Brien", "year": "2025", "tags": ["ice"], "a.b": "dotted"},
        )
    )
    await core.upsert(
        upsert_request(
            "slides/deck.pptx",
            ["walrus slide one", "walrus slide two"],
            seed=4,
            title="Deck",
            file_type="pptx",
            last_modified="2025-07-07T00:00:00+00:00",
            pages=[1, 2],
            metadata={"author": ["Carol", "Dan"], "year": 2025.0, "status": "final"},
        )
    )
    await core.upsert(
        upsert_request(
            "plain.md",
            ["walrus without metadata"],
            seed=5,
            title="Plain",
            last_modified="2022-01-01T00:00:00+00:00",
        )
    )
    return core
