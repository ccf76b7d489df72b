"""Search features of the index against a real LanceDB in tmp_path, with seeded synthetic
vectors: max_per_document, max_tokens with truncated / total_tokens, the fused score,
get_document windows, the same over HTTP, and a store written before the metadata filter
columns existed. Filters: `test_index_search_filters`."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from libs.clients import IndexClient
from libs.contracts import IndexSearchRequest
from libs.errors import InvalidInputError, NotFoundError
from libs.formats import CONVERTER_REVISION
from libs.http import RetryPolicy
from libs.modelfiles import count_tokens
from libs.vectors import encode
from services.index.app import create_app
from services.index.core import IndexCore
from services.index.settings import IndexSettings
from services.index.store import IndexStore
from tests.index_helpers import settings_for, unit_vectors, upsert_request, write_old_store
from tests.search_helpers import MODES, query

pytestmark = pytest.mark.integration


# ------------------------------------------------------------------ max_per_document


async def test_max_per_document_caps_chunks_and_fills_from_other_documents(
    library: IndexCore,
) -> None:
    everything = (await library.search(query("walrus", "hybrid", top_k=100))).results
    assert len(everything) == 9
    for cap in (1, 2):
        hits = (
            await library.search(query("walrus", "hybrid", top_k=100, max_per_document=cap))
        ).results
        per_doc: dict[str, int] = {}
        for hit in hits:
            per_doc[hit.doc_id] = per_doc.get(hit.doc_id, 0) + 1
        assert max(per_doc.values()) <= cap
        assert len(per_doc) == 5
        # The cap drops chunks, it does not reorder the ones it keeps.
        kept = [
            h.chunk_index
            for h in everything
            if (h.doc_id, h.chunk_index) in {(k.doc_id, k.chunk_index) for k in hits}
        ]
        assert [h.chunk_index for h in hits] == kept
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_max_per_document_looks_deeper_when_one_document_fills_the_candidates(
    tmp_path: Path,
) -> None:
    settings = IndexSettings(
        lancedb_uri=str(tmp_path / "lancedb"),
        index_candidates_min=4,
        index_candidates_per_result=1,
    )
    async with IndexCore(settings) as core:
        await core.upsert(upsert_request("big.md", ["walrus walrus walrus walrus"] * 30, seed=1))
        for i in range(3):
            await core.upsert(
                upsert_request(f"small{i}.md", [f"walrus and other words {i}"], seed=10 + i)
            )
        for mode in MODES:
            capped = await core.search(query("walrus", mode, top_k=4, max_per_document=1))
            assert len(capped.results) == 4, mode
            assert len({h.doc_id for h in capped.results}) == 4, mode


# ---------------------------------------------------------------------- max_tokens


async def test_max_tokens_keeps_the_best_results_that_fit_in_order(core: IndexCore) -> None:
    await core.upsert(
        upsert_request(
            "counted.md", ["walrus a", "walrus b", "walrus c"], seed=1, token_counts=[50, 30, 40]
        )
    )
    ranked = (await core.search(query("walrus", top_k=10))).results
    counts = [h.token_count for h in ranked]
    assert sorted(counts) == [30, 40, 50]

    full = await core.search(query("walrus", top_k=10, max_tokens=120))
    assert (full.truncated, full.total_tokens, len(full.results)) == (False, 120, 3)

    two = await core.search(query("walrus", top_k=10, max_tokens=counts[0] + counts[1]))
    assert [h.chunk_index for h in two.results] == [h.chunk_index for h in ranked[:2]]
    assert (two.truncated, two.total_tokens) == (True, counts[0] + counts[1])

    # Stops at the first result that does not fit, even if a later, smaller one would.
    just_short = await core.search(query("walrus", top_k=10, max_tokens=counts[0] + 29))
    assert len(just_short.results) == 1 and just_short.truncated

    none_fit = await core.search(query("walrus", top_k=10, max_tokens=counts[0] - 1))
    assert (none_fit.results, none_fit.truncated, none_fit.total_tokens) == ([], True, 0)

    unbounded = await core.search(query("walrus", top_k=2))
    assert (unbounded.truncated, unbounded.total_tokens) == (False, counts[0] + counts[1])


async def test_chunks_without_a_token_count_are_counted_with_the_model_tokenizer(
    core: IndexCore,
) -> None:
    texts = ["The walrus (Odobenus rosmarus) hauls out onto sea ice.", "walrus"]
    await core.upsert(upsert_request("uncounted.md", texts, seed=1))
    expected = dict(zip(texts, count_tokens(texts), strict=True))
    result = await core.search(query("walrus", top_k=10))
    assert {h.content: h.token_count for h in result.results} == expected
    assert result.total_tokens == sum(expected.values())
    assert count_tokens(["ice"]) == [3]  # [CLS] ice [SEP]


async def test_budget_and_cap_combine(library: IndexCore) -> None:
    result = await library.search(
        query("walrus", "hybrid", top_k=10, max_per_document=1, max_tokens=20)
    )
    assert len({h.doc_id for h in result.results}) == len(result.results)
    assert result.total_tokens == sum(h.token_count for h in result.results) <= 20
    assert result.truncated


# --------------------------------------------------------------------------- score


async def test_hybrid_score_is_the_reciprocal_rank_fusion_of_both_legs(core: IndexCore) -> None:
    vectors = unit_vectors(3, 5)
    await core.upsert(
        upsert_request("fused.md", ["narwhal tusk", "walrus", "seal"], seed=5, vectors=vectors)
    )
    request = IndexSearchRequest(
        query="narwhal", vector_b64=encode(vectors[:1]), mode="hybrid", top_k=3
    )
    hits = (await core.search(request)).results
    k = IndexSettings().index_rrf_k
    assert hits[0].content == "narwhal tusk"
    # First in both legs: 1/(k+1) twice. The others appear only in the vector leg.
    assert hits[0].score == pytest.approx(2 / (k + 1))
    assert sorted(h.score for h in hits[1:]) == pytest.approx([1 / (k + 3), 1 / (k + 2)])
    assert hits[0].headings == ["Top", "Part 0"]


# ------------------------------------------------------------------ get_document window

MARKDOWN = "# Guide\n\nAlpha part.\n\nBeta part.\n\n| a |\n|---|\n\nGamma part.\n\nDelta part.\n"
WINDOW_CHUNKS = [
    "# Guide\n\nAlpha part.",
    "Alpha part.\n\nBeta part.",
    "Gamma part.",
    "Delta part.",
]


async def test_get_document_returns_a_window_of_chunks(core: IndexCore) -> None:
    stored = await core.upsert(
        upsert_request(
            "guide.md",
            WINDOW_CHUNKS,
            seed=1,
            title="guide.md",
            markdown=MARKDOWN,
            pages=[1, 1, 2, 2],
        )
    )
    whole = await core.get(stored.doc_id)
    assert whole.content == MARKDOWN and whole.chunks is None

    middle = await core.get(stored.doc_id, chunk_index=1, context=1)
    assert middle.chunks is not None
    assert [c.chunk_index for c in middle.chunks] == [0, 1, 2]
    assert [c.content for c in middle.chunks] == WINDOW_CHUNKS[:3]
    assert [c.page for c in middle.chunks] == [1, 1, 2]
    assert middle.chunks[2].headings == ["Top", "Part 2"]
    # The window's own Markdown: overlaps once, the skipped table rule kept.
    assert middle.content == "# Guide\n\nAlpha part.\n\nBeta part.\n\n| a |\n|---|\n\nGamma part."
    assert (middle.title, middle.chunk_count) == ("guide.md", 4)

    alone = await core.get(stored.doc_id, chunk_index=3)
    assert [c.chunk_index for c in alone.chunks or []] == [3]
    assert alone.content == "Delta part."

    edge = await core.get(stored.doc_id, chunk_index=0, context=20)
    assert [c.chunk_index for c in edge.chunks or []] == [0, 1, 2, 3]
    assert edge.content == MARKDOWN.strip()

    with pytest.raises(
        NotFoundError, match=r"has no chunk with chunk_index 4; it has chunk_index 0\.\.3"
    ):
        await core.get(stored.doc_id, chunk_index=4)
    with pytest.raises(NotFoundError, match="no document with doc_id 'nope'"):
        await core.get("nope", chunk_index=0)
    with pytest.raises(InvalidInputError, match="context must be between 0 and 20"):
        await core.get(stored.doc_id, chunk_index=0, context=21)


async def test_a_window_whose_chunks_are_not_slices_joins_their_texts(core: IndexCore) -> None:
    stored = await core.upsert(
        upsert_request(
            "other.md", ["first piece", "second piece"], seed=1, markdown="unrelated text"
        )
    )
    window = await core.get(stored.doc_id, chunk_index=0, context=1)
    assert window.content == "first piece\n\nsecond piece"


# ------------------------------------------------------------------------ over HTTP


async def test_the_new_parameters_cross_the_wire(tmp_path: Path) -> None:
    app = create_app(settings_for(tmp_path))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        client = IndexClient("http://index", transport=transport, policy=RetryPolicy(attempts=1))
        try:
            stored = await client.upsert(
                upsert_request(
                    "wire.md", WINDOW_CHUNKS, seed=1, markdown=MARKDOWN, metadata={"n": 7}
                )
            )
            found = await client.search(
                query(
                    "part",
                    "hybrid",
                    top_k=10,
                    filter={"metadata.n": {"$gte": 7}, "chunk_index": {"$in": [1, 2]}},
                    max_per_document=1,
                    max_tokens=1000,
                )
            )
            assert len(found.results) == 1 and found.results[0].chunk_index in (1, 2)
            assert found.total_tokens == found.results[0].token_count > 0
            assert found.truncated is False
            window = await client.get(stored.doc_id, chunk_index=2, context=1)
            assert [c.chunk_index for c in window.chunks or []] == [1, 2, 3]
            assert (await client.get(stored.doc_id)).content == MARKDOWN
            with pytest.raises(NotFoundError, match=r"chunk_index 0\.\.3"):
                await client.get(stored.doc_id, chunk_index=9)
            with pytest.raises(InvalidInputError, match=r"\$in needs a non-empty list"):
                await client.search(query("part", filter={"page": {"$in": []}}))
            async with httpx.AsyncClient(transport=transport, base_url="http://index") as http:
                bad = await http.get(f"/documents/{stored.doc_id}", params={"context": 99})
            assert bad.status_code == 400 and bad.json()["error_code"] == "invalid_input"
        finally:
            await client.aclose()


# ------------------------------------------------------------- stores from before 0.5.0


async def test_a_store_from_before_the_filter_columns_is_upgraded_on_open(
    tmp_path: Path,
) -> None:
    uri = str(tmp_path / "lancedb")
    write_old_store(uri)
    async with IndexCore(IndexSettings(lancedb_uri=uri)) as core:
        for filters in ({"metadata.author": "Alice"}, {"metadata.tags": {"$contains": "old"}}):
            hits = (await core.search(query("walrus", "hybrid", top_k=5, filter=filters))).results
            assert {h.chunk_index for h in hits} == {0, 1}
        counted = await core.search(query("walrus", top_k=5, max_tokens=1000))
        assert counted.total_tokens == sum(count_tokens(["walrus from before", "second walrus"]))
        window = await core.get("old-doc", chunk_index=1, context=1)
        assert window.content == "walrus from before\n\nsecond walrus"
        assert window.chunks is not None
        assert [(c.start_line, c.end_line) for c in window.chunks] == [(0, 0), (0, 0)]
        # New writes go into the upgraded table next to the old rows.
        await core.upsert(
            upsert_request("new.md", ["walrus today"], seed=4, metadata={"author": "Alice"})
        )
        hits = await core.search(query("walrus", top_k=10, filter={"metadata.author": "Alice"}))
        assert {h.source for h in hits.results} == {"old.md", "new.md"}
        # The old document's converter revision was never recorded: stale, made anew when
        # its bytes come again; the new one's is this release's.
        old, new = await core.lookup("default", "old.md"), await core.lookup("default", "new.md")
        assert (old.conversion, old.current) == (0, False)
        assert (new.conversion, new.current) == (CONVERTER_REVISION, True)
        manifest = (await core.list_sources("default", "", None, 10)).sources
        assert [(e.source, e.stale) for e in manifest] == [("new.md", False), ("old.md", True)]

    # Opening again finds nothing left to upgrade and keeps the data.
    store = IndexStore(IndexSettings(lancedb_uri=uri))
    try:
        chunks = store.state.chunks
        assert chunks is not None
        assert chunks.count_rows("meta_json IS NULL") == 0
        # The old rows' token counts were filled on open, with the converter's measure.
        assert chunks.count_rows("token_count IS NULL") == 0
        stored = chunks.search().where("doc_id = 'old-doc'").select(["content", "token_count"])
        rows = stored.limit(None).to_arrow().to_pylist()
        assert {r["content"]: r["token_count"] for r in rows} == dict(
            zip(
                ["walrus from before", "second walrus"],
                count_tokens(["walrus from before", "second walrus"]),
                strict=True,
            )
        )
        assert chunks.count_rows() == 3
        documents = store.state.documents
        assert documents is not None and documents.schema.names[-1] == "conversion"
        assert documents.count_rows("conversion IS NULL") == 1
        names = chunks.schema.names
        assert names[-6:] == [
            *("token_count", "meta_json", "meta_list", "start_line", "end_line", "cjk_terms")
        ]
        # Its 0 pages made NULL into a new column, after the old ones (`null_for_zero`).
        assert names[-7] == "page" and chunks.count_rows("page IS NULL") == 3
        assert chunks.count_rows("cjk_terms = ''") == 3  # none holds CJK text
        # Where an old chunk lay in its Markdown was never recorded: stored NULL, read as 0
        # (the window above), and not taken for a row the upgrade left unfilled.
        assert chunks.count_rows("doc_id = 'old-doc' AND start_line IS NULL") == 2
        assert chunks.count_rows("doc_id = 'old-doc' AND end_line IS NULL") == 2
    finally:
        store.close()
