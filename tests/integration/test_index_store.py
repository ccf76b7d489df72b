"""The index core and store against a real LanceDB in tmp_path, with seeded synthetic vectors
(no model): upsert/replace/delete, listings, the three search modes, filters and the model
stamp. What failed and concurrent writes leave: `test_index_store_writes`; how a search reads
its hits: `test_index_hits`."""

from __future__ import annotations

import base64
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from libs.contracts import IndexSearchRequest, UpsertRequest
from libs.errors import InvalidInputError, ModelMismatchError, NotFoundError
from libs.vectors import encode
from services.index.core import IndexCore
from services.index.store import IndexStore, StoreState, tables
from tests.index_helpers import DIM, MODEL, bm25, settings_for, unit_vectors, upsert_request

pytestmark = pytest.mark.integration


# ------------------------------------------------------------------ documents


async def test_upsert_then_lookup_get_list_and_info(core: IndexCore) -> None:
    markdown = "# Café notes\r\n\n  indented  \n\ttab\u00a0nbsp\n\n| a | b |\n|---|---|\n"
    response = await core.upsert(
        upsert_request(
            "/docs/notes.md",
            ["Café notes about espresso", "tables and tabs"],
            markdown=markdown,
            metadata={"author": "Alice", "tags": ["x", "y"], "n": 3},
        )
    )
    assert response.status == "indexed"
    assert response.chunk_count == 2

    found = (await core.lookup("default", "/docs/notes.md")).document
    assert found is not None
    assert found.doc_id == response.doc_id
    assert found.content_hash == "hash-0"
    assert found.metadata == {"author": "Alice", "tags": ["x", "y"], "n": 3}
    assert found.chunk_count == 2
    assert found.created_at.endswith("+00:00")
    assert (await core.lookup("default", "/docs/other.md")).document is None
    assert (await core.lookup("elsewhere", "/docs/notes.md")).document is None

    document = await core.get(response.doc_id)
    assert document.content == markdown
    assert document.title == "Title of /docs/notes.md"
    assert document.chunk_count == 2
    assert document.metadata["author"] == "Alice"

    listed = await core.list_documents(None, 20, 0)
    assert [d.doc_id for d in listed.documents] == [response.doc_id]
    assert (listed.count, listed.total) == (1, 1)

    info = await core.info()
    assert (info.model, info.dim, info.documents, info.chunks) == (MODEL, DIM, 1, 2)


async def test_list_is_newest_first_and_paginates(core: IndexCore) -> None:
    ids = []
    for i in range(5):
        library = "even" if i % 2 == 0 else "odd"
        ids.append(
            (await core.upsert(upsert_request(f"s{i}", [f"text {i}"], library=library))).doc_id
        )
    newest_first = ids[::-1]

    first = await core.list_documents(None, 2, 0)
    second = await core.list_documents(None, 2, 2)
    third = await core.list_documents(None, 2, 4)
    assert [d.doc_id for d in first.documents] == newest_first[:2]
    assert [d.doc_id for d in second.documents] == newest_first[2:4]
    assert [d.doc_id for d in third.documents] == newest_first[4:]
    assert (first.count, first.total, third.count, third.total) == (2, 5, 1, 5)

    beyond = await core.list_documents(None, 10, 50)
    assert (beyond.documents, beyond.count, beyond.total) == ([], 0, 5)

    even = await core.list_documents("even", 10, 0)
    assert [d.doc_id for d in even.documents] == [ids[4], ids[2], ids[0]]
    assert even.total == 3
    assert (await core.list_documents("none", 10, 0)).total == 0

    with pytest.raises(InvalidInputError):
        await core.list_documents(None, 0, 0)
    with pytest.raises(InvalidInputError):
        await core.list_documents(None, 10, -1)


async def test_libraries_count_documents_and_chunks(core: IndexCore) -> None:
    await core.upsert(upsert_request("a", ["one", "two", "three"], library="beta"))
    await core.upsert(upsert_request("b", ["one"], library="beta"))
    await core.upsert(upsert_request("c", ["one", "two"], library="alpha"))
    libraries = (await core.list_libraries()).libraries
    assert [(lib.library, lib.document_count, lib.chunk_count) for lib in libraries] == [
        ("alpha", 1, 2),
        ("beta", 2, 4),
    ]


async def test_delete_removes_the_document_and_its_chunks(core: IndexCore) -> None:
    kept = await core.upsert(upsert_request("keep", ["zebra crossing"], seed=1))
    gone = await core.upsert(upsert_request("gone", ["zebra stripes", "more zebra"], seed=2))

    result = await core.delete(gone.doc_id)
    assert (result.status, result.doc_id, result.deleted_chunks) == ("deleted", gone.doc_id, 2)

    hits = (await core.search(bm25("zebra"))).results
    assert {h.doc_id for h in hits} == {kept.doc_id}
    assert [d.doc_id for d in (await core.list_documents(None, 10, 0)).documents] == [kept.doc_id]
    assert (await core.lookup("default", "gone")).document is None
    assert (await core.info()).chunks == 1

    with pytest.raises(NotFoundError, match=gone.doc_id):
        await core.get(gone.doc_id)
    with pytest.raises(NotFoundError, match="no document with doc_id 'nope'"):
        await core.delete("nope")


async def test_replace_keeps_exactly_one_document_with_only_the_new_chunks(
    core: IndexCore,
) -> None:
    old = await core.upsert(upsert_request("a.md", ["aardvark one", "aardvark two"], seed=1))
    new = await core.upsert(
        upsert_request("a.md", ["buffalo one", "buffalo two", "buffalo three"], seed=2)
    )
    assert (old.status, new.status) == ("indexed", "replaced")
    assert new.doc_id != old.doc_id

    listed = await core.list_documents(None, 10, 0)
    assert [(d.doc_id, d.chunk_count) for d in listed.documents] == [(new.doc_id, 3)]
    found = (await core.lookup("default", "a.md")).document
    assert found is not None and found.doc_id == new.doc_id
    assert (await core.search(bm25("aardvark"))).results == []
    assert {h.doc_id for h in (await core.search(bm25("buffalo"))).results} == {new.doc_id}
    assert (await core.info()).chunks == 3
    with pytest.raises(NotFoundError):
        await core.get(old.doc_id)

    # The same source in another library is another document.
    other = await core.upsert(upsert_request("a.md", ["camel"], library="zoo", seed=3))
    assert other.status == "indexed"
    assert (await core.list_documents(None, 10, 0)).total == 2


async def test_bad_upserts_are_refused_before_anything_is_written(core: IndexCore) -> None:
    # The contract refuses them when the request is built (over HTTP: 400, test_index_api).
    valid = upsert_request("a", ["x"]).model_dump()
    with pytest.raises(ValidationError, match="at least one chunk"):
        UpsertRequest.model_validate({**valid, "chunks": []})
    with pytest.raises(ValidationError, match="expected 2 vectors"):
        upsert_request("a", ["x", "y"], vectors=unit_vectors(1, 0))
    with pytest.raises(ValidationError, match="not base64"):
        UpsertRequest.model_validate({**valid, "vectors_b64": "not base64!"})
    nan = unit_vectors(1, 0)
    nan[0, 0] = np.nan
    with pytest.raises(ValidationError, match="NaN"):
        upsert_request("a", ["x"], vectors=nan)
    with pytest.raises(ValidationError, match="non-empty source and library"):
        upsert_request("", ["x"])
    with pytest.raises(ValidationError, match="non-empty source and library"):
        upsert_request("a", ["x"], library="")
    with pytest.raises(ValidationError, match="embedding model name"):
        upsert_request("a", ["x"], model="")
    with pytest.raises(ValidationError, match="positive vector width"):
        UpsertRequest.model_validate({**valid, "dim": 0})
    assert (await core.info()).documents == 0


# ------------------------------------------------------------------------ search


async def test_each_mode_finds_the_obvious_match(core: IndexCore) -> None:
    target_vectors = unit_vectors(3, seed=7)
    target = await core.upsert(
        upsert_request(
            "animals.md",
            ["The quick brown fox jumps", "Penguins swimming in icy water", "Cows graze"],
            vectors=target_vectors,
            headings=["H1"],
        )
    )
    for i in range(4):
        await core.upsert(upsert_request(f"noise{i}.md", [f"filler text number {i}"], seed=100 + i))
    penguin = encode(target_vectors[1:2])

    keyword = (await core.search(bm25("penguin swims"))).results
    assert keyword[0].doc_id == target.doc_id
    assert keyword[0].content == "Penguins swimming in icy water"
    assert keyword[0].score > 0
    assert keyword[0].headings == ["H1"]

    vector = await core.search(IndexSearchRequest(query="", vector_b64=penguin, mode="vector"))
    assert vector.results[0].content == "Penguins swimming in icy water"
    assert vector.results[0].score == pytest.approx(1.0, abs=1e-4)
    assert len(vector.results) == 5

    hybrid = await core.search(IndexSearchRequest(query="penguins", vector_b64=penguin, top_k=3))
    assert hybrid.results[0].content == "Penguins swimming in icy water"
    # Top of both legs: 2 / (k + 1) with the default k = 60.
    assert hybrid.results[0].score == pytest.approx(2 / 61)
    assert len(hybrid.results) == 3
    assert [h.score for h in hybrid.results] == sorted(
        (h.score for h in hybrid.results), reverse=True
    )


async def test_full_text_stems_folds_case_and_accents_and_ignores_syntax(
    core: IndexCore,
) -> None:
    await core.upsert(upsert_request("cafe.md", ["Running to the CAFÉ"]))
    for query in ["runs", "cafe", "Café", "RUNNING cafe"]:
        assert len((await core.search(bm25(query))).results) == 1, query
    for query in ['"unbalanced', "content:cafe OR x", "cafe AND NOT running", "*", "(((", "~!^"]:
        # Parsed as plain words: never a syntax error; matching words still match.
        result = await core.search(bm25(query))
        assert len(result.results) == (1 if "cafe" in query else 0), query


async def test_search_scoping_by_library_and_filters(core: IndexCore) -> None:
    await core.upsert(
        upsert_request(
            "a.pdf",
            ["walrus page one", "walrus page two"],
            library="sea",
            file_type="pdf",
            pages=[1, 2],
            seed=1,
        )
    )
    await core.upsert(upsert_request("b.md", ["walrus notes"], library="land", seed=2))

    def sources(hits: list[Any]) -> list[tuple[str, int]]:
        return sorted((h.source, h.page) for h in hits)

    assert sources((await core.search(bm25("walrus", library="sea"))).results) == [
        ("a.pdf", 1),
        ("a.pdf", 2),
    ]
    assert sources((await core.search(bm25("walrus", library="land"))).results) == [("b.md", 0)]
    assert (await core.search(bm25("walrus", library="air"))).results == []
    by_page = await core.search(bm25("walrus", filter={"file_type": "pdf", "page": 2}))
    assert sources(by_page.results) == [("a.pdf", 2)]
    assert sources((await core.search(bm25("walrus", filter={"chunk_index": 0}))).results) == [
        ("a.pdf", 1),
        ("b.md", 0),
    ]
    by_source = await core.search(bm25("walrus", filter={"source": "b.md", "library": "land"}))
    assert sources(by_source.results) == [("b.md", 0)]
    # No page is stored as NULL (`filters.ZERO_AS_NULL`) and still reads and filters as 0.
    store = await core.start()
    assert store.state.chunks is not None
    assert store.state.chunks.count_rows("page IS NULL") == 1
    assert store.state.chunks.count_rows("page = 0") == 0
    for unpaged in ({"page": 0}, {"page": {"$lt": 1}}, {"page": {"$in": [0, 7]}}):
        found = await core.search(bm25("walrus", filter=unpaged))
        assert sources(found.results) == [("b.md", 0)], unpaged
    not_two = await core.search(bm25("walrus", filter={"page": {"$ne": 2}}))
    assert sources(not_two.results) == [("a.pdf", 1), ("b.md", 0)]
    window = await core.get(by_source.results[0].doc_id, chunk_index=0, context=1)
    assert window.chunks is not None and [c.page for c in window.chunks] == [0]

    vector = encode(unit_vectors(1, seed=5))
    for mode in ("bm25", "vector", "hybrid"):
        injected = IndexSearchRequest(
            query="walrus", vector_b64=vector, mode=mode, filter={"source": "x' OR '1'='1"}
        )
        assert (await core.search(injected)).results == [], mode
        scoped = IndexSearchRequest(query="walrus", vector_b64=vector, mode=mode, library="land")
        assert {h.library for h in (await core.search(scoped)).results} == {"land"}, mode

    with pytest.raises(InvalidInputError, match="unknown filter field 'author'"):
        await core.search(bm25("walrus", filter={"author": "x"}))
    with pytest.raises(InvalidInputError, match="needs an integer"):
        await core.search(bm25("walrus", filter={"page": "2"}))


async def test_search_needs_what_its_mode_uses(core: IndexCore) -> None:
    await core.upsert(upsert_request("a", ["text"]))
    with pytest.raises(InvalidInputError, match="vector_b64"):
        await core.search(IndexSearchRequest(query="text", mode="vector"))
    with pytest.raises(InvalidInputError, match="vector_b64"):
        await core.search(IndexSearchRequest(query="text"))
    with pytest.raises(InvalidInputError, match="query text"):
        await core.search(IndexSearchRequest(query="  ", mode="bm25"))
    # Hybrid with no usable words falls back to the vector leg alone.
    only_vector = IndexSearchRequest(query=" ", vector_b64=encode(unit_vectors(1, 0)))
    assert len((await core.search(only_vector)).results) == 1


async def test_a_query_vector_must_be_finite_float32_of_the_store_width(
    core: IndexCore,
) -> None:
    await core.upsert(upsert_request("a", ["text"]))

    def vector(data: str) -> IndexSearchRequest:
        return IndexSearchRequest(query="text", vector_b64=data, mode="vector")

    with pytest.raises(InvalidInputError, match="not base64 float32 data"):
        await core.search(vector("not base64!"))
    with pytest.raises(InvalidInputError, match="not base64 float32 data"):
        await core.search(vector(base64.b64encode(b"12345").decode()))
    nan = unit_vectors(1, 0)
    nan[0, 7] = np.inf
    with pytest.raises(InvalidInputError, match="NaN or infinite"):
        await core.search(vector(encode(nan)))
    with pytest.raises(ModelMismatchError, match="100-d"):
        await core.search(vector(encode(np.ones((1, 100), dtype=np.float32))))


async def test_empty_store_searches_return_nothing(core: IndexCore) -> None:
    vector = encode(unit_vectors(1, seed=1))
    for mode in ("bm25", "vector", "hybrid"):
        request = IndexSearchRequest(query="anything", vector_b64=vector, mode=mode)
        assert (await core.search(request)).results == []
    assert (await core.list_documents(None, 10, 0)).total == 0
    assert (await core.list_libraries()).libraries == []
    info = await core.info()
    assert (info.model, info.dim, info.documents, info.chunks) == (None, None, 0, 0)


async def test_another_model_or_dimension_is_refused(core: IndexCore) -> None:
    await core.upsert(upsert_request("a", ["text"]))
    with pytest.raises(ModelMismatchError) as caught:
        await core.upsert(upsert_request("b", ["text"], model="nomic-ai/nomic-embed-text-v1.5"))
    message = caught.value.message
    assert MODEL in message and "nomic-ai/nomic-embed-text-v1.5" in message
    assert "LANCEDB_URI" in message and "EMBEDDING_MODEL" in message

    wide = np.ones((1, 768), dtype=np.float32) / np.sqrt(768)
    with pytest.raises(ModelMismatchError, match="768"):
        await core.upsert(upsert_request("b", ["text"], vectors=wide, dim=768))
    with pytest.raises(ModelMismatchError, match="768-d"):
        await core.search(IndexSearchRequest(query="text", vector_b64=encode(wide)))
    assert (await core.info()).documents == 1


async def test_the_model_stamp_survives_a_restart(tmp_path: Path) -> None:
    async with IndexCore(settings_for(tmp_path)) as first:
        await first.upsert(upsert_request("a", ["text"]))
    async with IndexCore(settings_for(tmp_path)) as second:
        assert (await second.info()).model == MODEL
        with pytest.raises(ModelMismatchError):
            await second.upsert(upsert_request("b", ["text"], model="other"))


async def test_tables_another_writer_creates_show_up_and_are_opened_off_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_for(tmp_path, index_read_consistency_s=0)
    reader = IndexStore(settings)
    writer = IndexStore(settings)  # another process, in production
    opened_in: list[int] = []
    real_open = tables.open_tables

    def open_tables(state: StoreState) -> None:
        if state is reader.state:
            opened_in.append(threading.get_ident())
        real_open(state)

    monkeypatch.setattr(tables, "open_tables", open_tables)
    assert (await reader.search(bm25("walrus"))).results == []
    writer.upsert(upsert_request("a.md", ["walrus notes"]))
    assert [h.source for h in (await reader.search(bm25("walrus"))).results] == ["a.md"]
    assert (await reader.list_documents(None, 10, 0)).total == 1
    # The empty store looked for tables on each search, in a worker thread every time.
    assert len(opened_in) >= 2
    assert threading.get_ident() not in opened_in
