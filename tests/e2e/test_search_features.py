"""The 0.5.0 search features on real files through the four services and the MCP SDK client
over SSE: filter operators on chunk fields and metadata keys, max_per_document, max_tokens
with truncated / total_tokens, score and headings, and get_document windows.

Three small real files (31 chunks in all) go into their own library, so these tests neither
depend on nor disturb the documents of test_product.py that share the cluster."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.e2e.conftest import Cluster, ingest_shared
from tests.mcp_client import Tools, sse_tools

pytestmark = pytest.mark.e2e

LIBRARY = "features"
FILES = {
    "readme": (
        "markitdown/markitdown-project-README.md",
        {"team": "docs", "year": 2024, "tags": ["python", "markdown"]},
    ),
    "invoice": (
        "markitdown/REPAIR-2022-INV-001_multipage.pdf",
        {"team": "finance", "year": 2022, "reviewed": True},
    ),
    "slides": ("markitdown/test.pptx", {"team": "sales", "year": 2023.0, "tags": ["slides"]}),
}
QUERY = "convert documents to markdown with markitdown"


@pytest.fixture(scope="module")
def docs(cluster: Cluster) -> dict[str, dict[str, Any]]:
    out = ingest_shared(cluster, FILES, LIBRARY)
    for result in out.values():
        assert result.get("status") in ("indexed", "skipped"), result
    return out


async def _search(tools: Tools, **args: Any) -> dict[str, Any]:
    result = await tools.call("search", library=LIBRARY, **args)
    assert "results" in result, result
    return result


def test_filters_with_operators_and_metadata_keys(
    cluster: Cluster, docs: dict[str, dict[str, Any]]
) -> None:
    ids = {key: result["doc_id"] for key, result in docs.items()}

    async def found(tools: Tools, filters: dict[str, Any], query: str = QUERY) -> set[str]:
        hits = (await _search(tools, query=query, top_k=50, filter=filters))["results"]
        return {key for key, doc_id in ids.items() if doc_id in {h["doc_id"] for h in hits}}

    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            pages = await _search(
                tools,
                query="repair invoice total",
                top_k=50,
                filter={"file_type": "pdf", "page": {"$gte": 2, "$lte": 3}},
            )
            assert pages["results"]
            assert {h["page"] for h in pages["results"]} <= {2, 3}
            assert {h["doc_id"] for h in pages["results"]} == {ids["invoice"]}

            assert await found(tools, {"metadata.team": "docs"}) == {"readme"}
            assert await found(tools, {"metadata.team": {"$in": ["finance", "sales"]}}) == {
                "invoice",
                "slides",
            }
            assert await found(tools, {"metadata.team": {"$ne": "docs"}}) == {"invoice", "slides"}
            assert await found(tools, {"metadata.year": {"$lt": 2023}}) == {"invoice"}
            assert await found(tools, {"metadata.year": {"$gte": 2023, "$lt": 2024.5}}) == {
                "slides",
                "readme",
            }
            assert await found(tools, {"metadata.reviewed": True}) == {"invoice"}
            assert await found(tools, {"metadata.tags": "python"}) == {"readme"}
            assert await found(tools, {"metadata.tags": {"$contains": "slides"}}) == {"slides"}
            assert await found(tools, {"file_type": {"$in": ["pptx", "md"]}}) == {
                "slides",
                "readme",
            }
            assert await found(tools, {"source": {"$contains": "REPAIR-2022"}}) == {"invoice"}
            assert await found(tools, {"source": {"$contains": "repair-2022"}}) == set()
            assert await found(tools, {"chunk_index": {"$gt": 10}}) == {"readme"}
            assert await found(tools, {"last_modified": {"$gt": "1970"}}) == set(ids)

            for value in ("') OR 1=1 --", "%", "_", "\\", "x' OR '1'='1"):
                assert await found(tools, {"metadata.team": value}) == set(), value
                assert await found(tools, {"title": {"$in": [value]}}) == set(), value

            bad = await tools.call("search", query=QUERY, filter={"page": {"$between": [1, 2]}})
            assert bad["status"] == "error" and bad["error_code"] == "invalid_input"
            assert "unknown operator '$between' on filter field 'page'" in bad["error"]
            bad_in = await tools.call("search", query=QUERY, filter={"page": {"$in": []}})
            assert "$in needs a non-empty list" in bad_in["error"]

    asyncio.run(go())


def test_max_per_document_score_and_headings(
    cluster: Cluster, docs: dict[str, dict[str, Any]]
) -> None:
    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            plain = (await _search(tools, query=QUERY, top_k=10))["results"]
            per_doc = [h["doc_id"] for h in plain].count(docs["readme"]["doc_id"])
            assert per_doc > 2, "the README should dominate this query"
            scores = [h["score"] for h in plain]
            assert scores == sorted(scores, reverse=True)
            assert scores[-1] > 0 and scores[0] <= 2 / 61
            assert any(h["headings"] for h in plain)

            capped = (await _search(tools, query=QUERY, top_k=10, max_per_document=2))["results"]
            counts: dict[str, int] = {}
            for hit in capped:
                counts[hit["doc_id"]] = counts.get(hit["doc_id"], 0) + 1
            assert max(counts.values()) == 2
            assert len(counts) == 3 and len(capped) == 6
            assert capped[0] == plain[0]

    asyncio.run(go())


def test_max_tokens_returns_the_best_results_that_fit(
    cluster: Cluster, docs: dict[str, dict[str, Any]]
) -> None:
    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            full = await _search(tools, query=QUERY, top_k=8)
            tokens = [h["token_count"] for h in full["results"]]
            assert all(0 < t <= 256 for t in tokens)
            assert full["total_tokens"] == sum(tokens) and full["truncated"] is False

            budget = tokens[0] + tokens[1] + tokens[2] - 1
            fitted = await _search(tools, query=QUERY, top_k=8, max_tokens=budget)
            assert fitted["truncated"] is True
            assert fitted["results"] == full["results"][:2]
            assert fitted["total_tokens"] == tokens[0] + tokens[1] <= budget

            roomy = await _search(tools, query=QUERY, top_k=8, max_tokens=100_000)
            assert roomy["results"] == full["results"] and roomy["truncated"] is False

    asyncio.run(go())


def test_get_document_window_around_a_search_hit(
    cluster: Cluster, docs: dict[str, dict[str, Any]]
) -> None:
    readme = docs["readme"]

    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            hits = await _search(tools, query=QUERY, top_k=5, filter={"doc_id": readme["doc_id"]})
            hit = next(h for h in hits["results"] if 0 < h["chunk_index"] < 20)
            whole = await tools.call("get_document", doc_id=readme["doc_id"])
            assert whole["chunks"] is None

            window = await tools.call(
                "get_document", doc_id=readme["doc_id"], chunk_index=hit["chunk_index"], context=1
            )
            index = hit["chunk_index"]
            chunks = window["chunks"]
            assert [c["chunk_index"] for c in chunks] == [index - 1, index, index + 1]
            assert chunks[1]["content"] == hit["content"]
            assert chunks[1]["headings"] == hit["headings"]
            # The window's Markdown is one exact span of the converted document.
            assert window["content"] in whole["content"]
            assert len(window["content"]) < len(whole["content"])
            assert all(c["content"] in window["content"] for c in chunks)
            assert window["chunk_count"] == readme["chunk_count"]

            last = readme["chunk_count"] - 1
            missing = await tools.call(
                "get_document", doc_id=readme["doc_id"], chunk_index=last + 1
            )
            assert missing["status"] == "error" and missing["error_code"] == "not_found"
            assert f"chunk_index 0..{last}" in missing["error"]

    asyncio.run(go())
