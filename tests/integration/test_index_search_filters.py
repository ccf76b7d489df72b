"""Search filters against a real LanceDB in tmp_path, with seeded synthetic vectors: every
operator on chunk fields and metadata keys, in every search mode, as prefilters so top_k stays
exact; injection attempts, which are only values; invalid filters refused by name."""

from __future__ import annotations

from typing import Any

import pytest

from libs.contracts import SearchMode
from libs.errors import InvalidInputError
from services.index.core import IndexCore
from tests.index_helpers import upsert_request
from tests.search_helpers import MODES, query, sources

pytestmark = pytest.mark.integration


ALL = {
    "reports/2023-annual.pdf",
    "notes/walrus.md",
    "odd/100%_a\\b'quote.txt",
    "slides/deck.pptx",
    "plain.md",
}

FILTER_CASES: list[tuple[dict[str, Any], set[str]]] = [
    ({"file_type": "pdf"}, {"reports/2023-annual.pdf"}),
    ({"file_type": {"$ne": "md"}}, ALL - {"notes/walrus.md", "plain.md"}),
    ({"file_type": {"$in": ["txt", "pptx"]}}, {"odd/100%_a\\b'quote.txt", "slides/deck.pptx"}),
    ({"page": {"$gte": 2}}, {"reports/2023-annual.pdf", "slides/deck.pptx"}),
    ({"page": {"$gt": 2}}, {"reports/2023-annual.pdf"}),
    ({"page": {"$gte": 1, "$lt": 2}, "file_type": "pptx"}, {"slides/deck.pptx"}),
    ({"page": {"$lte": 0}}, {"notes/walrus.md", "odd/100%_a\\b'quote.txt", "plain.md"}),
    ({"chunk_index": {"$in": [2]}}, {"reports/2023-annual.pdf"}),
    ({"chunk_index": {"$ne": 0}, "file_type": "md"}, {"notes/walrus.md"}),
    (
        {"last_modified": {"$gte": "2024-01-01", "$lt": "2025-03-01"}},
        {"notes/walrus.md", "odd/100%_a\\b'quote.txt"},
    ),
    ({"last_modified": {"$lt": "2023"}}, {"plain.md"}),
    ({"title": {"$contains": "Report"}}, {"reports/2023-annual.pdf"}),
    ({"title": {"$contains": "report"}}, set()),
    ({"title": {"$contains": "100%"}}, {"odd/100%_a\\b'quote.txt"}),
    ({"title": {"$contains": "_under\\score's"}}, {"odd/100%_a\\b'quote.txt"}),
    ({"title": {"$contains": "%"}}, {"odd/100%_a\\b'quote.txt"}),
    ({"source": {"$contains": "_"}}, {"odd/100%_a\\b'quote.txt"}),
    ({"source": "odd/100%_a\\b'quote.txt"}, {"odd/100%_a\\b'quote.txt"}),
    ({"source": {"$gt": "p"}}, {"plain.md", "reports/2023-annual.pdf", "slides/deck.pptx"}),
    # metadata: text, numbers, booleans, lists, missing keys
    ({"metadata.author": "Alice"}, {"reports/2023-annual.pdf"}),
    ({"metadata.author": "O'Brien"}, {"odd/100%_a\\b'quote.txt"}),
    ({"metadata.author": "Carol"}, {"slides/deck.pptx"}),
    ({"metadata.author": {"$in": ["Bob", "Dan"]}}, {"notes/walrus.md", "slides/deck.pptx"}),
    ({"metadata.author": {"$contains": "li"}}, {"reports/2023-annual.pdf"}),
    ({"metadata.author": {"$contains": "Dan"}}, {"slides/deck.pptx"}),
    ({"metadata.author": {"$contains": "Da"}}, set()),
    (
        {"metadata.author": {"$ne": "Alice"}},
        ALL - {"reports/2023-annual.pdf"},
    ),
    ({"metadata.author": {"$ne": "Carol"}}, ALL - {"slides/deck.pptx"}),
    ({"metadata.year": 2023}, {"reports/2023-annual.pdf"}),
    ({"metadata.year": {"$gte": 2024}}, ALL - {"reports/2023-annual.pdf", "plain.md"}),
    (
        {"metadata.year": {"$gt": 2024, "$lte": 2025}},
        {"odd/100%_a\\b'quote.txt", "slides/deck.pptx"},
    ),
    ({"metadata.year": "2025"}, {"odd/100%_a\\b'quote.txt", "slides/deck.pptx"}),
    ({"metadata.year": {"$in": [2023, 2024]}}, {"reports/2023-annual.pdf", "notes/walrus.md"}),
    ({"metadata.rating": {"$gt": 4.25}}, {"notes/walrus.md"}),
    ({"metadata.rating": 4.5}, {"notes/walrus.md"}),
    ({"metadata.draft": True}, {"notes/walrus.md"}),
    ({"metadata.draft": False}, {"reports/2023-annual.pdf"}),
    ({"metadata.draft": {"$ne": True}}, ALL - {"notes/walrus.md"}),
    ({"metadata.tags": "ice"}, {"reports/2023-annual.pdf", "odd/100%_a\\b'quote.txt"}),
    ({"metadata.tags": {"$contains": "arctic"}}, {"reports/2023-annual.pdf"}),
    (
        {"metadata.tags": {"$ne": "ice"}},
        ALL - {"reports/2023-annual.pdf", "odd/100%_a\\b'quote.txt"},
    ),
    ({"metadata.a.b": "dotted"}, {"odd/100%_a\\b'quote.txt"}),
    ({"metadata.status": {"$ne": "final"}}, ALL - {"slides/deck.pptx"}),
    ({"metadata.missing": "x"}, set()),
    ({"metadata.author": {"$gt": "B"}, "metadata.year": {"$lt": 2025}}, {"notes/walrus.md"}),
]


@pytest.mark.parametrize("mode", MODES)
async def test_each_operator_selects_exactly_the_matching_chunks(
    library: IndexCore, mode: SearchMode
) -> None:
    # One store for every case (five upserts each would dominate the run time).
    wrong = []
    for filters, expected in FILTER_CASES:
        hits = (await library.search(query("walrus", mode, top_k=100, filter=filters))).results
        if sources(hits) != expected:
            wrong.append((filters, sorted(sources(hits)), sorted(expected)))
    assert wrong == []


INJECTION_VALUES = ["') OR 1=1 --", "x' OR '1'='1", "%", "_", "\\", "'", "walrus' --"]


@pytest.mark.parametrize("value", INJECTION_VALUES)
async def test_injection_attempts_are_values_that_match_nothing(
    library: IndexCore, value: str
) -> None:
    for filters in (
        {"source": value},
        {"title": {"$in": [value, "nope"]}},
        {"metadata.author": value},
        {"metadata.author": {"$in": [value]}},
        {"doc_id": {"$contains": value}},
    ):
        hits = (await library.search(query("walrus", "hybrid", top_k=100, filter=filters))).results
        assert hits == [], filters
    # A value that does occur is found literally, wildcards and quotes included.
    contains = await library.search(
        query("walrus", top_k=100, filter={"source": {"$contains": value}})
    )
    odd = "odd/100%_a\\b'quote.txt"
    assert sources(contains.results) == ({odd} if value in odd else set())


async def test_filters_are_prefilters_so_top_k_is_exact(core: IndexCore) -> None:
    # 40 chunks rank above the one that the filter keeps: a post-filter would return nothing.
    await core.upsert(
        upsert_request("crowd.md", [f"walrus walrus walrus {i}" for i in range(40)], seed=7)
    )
    await core.upsert(upsert_request("rare.md", ["walrus once"], seed=8, metadata={"keep": "yes"}))
    for mode in MODES:
        hits = await core.search(query("walrus", mode, top_k=1, filter={"metadata.keep": "yes"}))
        assert [h.source for h in hits.results] == ["rare.md"], mode


async def test_invalid_filters_are_refused_with_the_field_and_operator(library: IndexCore) -> None:
    with pytest.raises(InvalidInputError, match=r"unknown operator '\$like' on filter field"):
        await library.search(query("walrus", filter={"title": {"$like": "%x%"}}))
    with pytest.raises(InvalidInputError, match=r"'page' \$gt needs an integer"):
        await library.search(query("walrus", filter={"page": {"$gt": "2"}}))
    with pytest.raises(InvalidInputError, match="metadata keys are 1 to 64 characters"):
        await library.search(query("walrus", filter={"metadata.a b": 1}))
