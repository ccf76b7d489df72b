"""The index core and store against a real LanceDB in tmp_path, with seeded synthetic vectors
(no model): upsert/replace/delete, the three search modes, filters, the model stamp, crash
recovery, and what concurrent readers and writers may see."""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
import pyarrow as pa
import pytest
from pydantic import ValidationError

from libs.contracts import IndexSearchRequest, SearchMode, UpsertRequest
from libs.errors import InvalidInputError, ModelMismatchError, NotFoundError, StoreError
from libs.vectors import encode
from services.index.core import IndexCore
from services.index.settings import IndexSettings
from services.index.store import IndexStore, StoreState, Writes, lance, tables
from services.index.store.rows import chunk_rows, document_row
from services.index.store.schema import PENDING
from services.index.store.state import DocumentColumns
from services.index.store.tables import indexed_columns
from services.index.store.writes import guarded_delete
from tests.index_helpers import DIM, MODEL, unit_vectors, upsert_request

pytestmark = pytest.mark.integration


def settings_for(path: Path, **overrides: Any) -> IndexSettings:
    return IndexSettings(lancedb_uri=str(path / "lancedb"), **overrides)


@pytest.fixture
async def core(tmp_path: Path) -> AsyncIterator[IndexCore]:
    async with IndexCore(settings_for(tmp_path)) as opened:
        yield opened


def opened_store(core: IndexCore) -> IndexStore:
    store = core.store
    assert store is not None
    return store


def bm25(query: str, **kwargs: Any) -> IndexSearchRequest:
    return IndexSearchRequest(query=query, mode="bm25", **kwargs)


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


# --------------------------------------------------------------- atomicity


async def test_concurrent_upserts_of_one_source_end_with_one_document(core: IndexCore) -> None:
    requests = [upsert_request("same.md", [f"version {i}"] * (i + 1), seed=i) for i in range(6)]
    responses = await asyncio.gather(*(core.upsert(r) for r in requests))
    assert sorted(r.status for r in responses) == ["indexed"] + ["replaced"] * 5
    listed = (await core.list_documents(None, 10, 0)).documents
    assert len(listed) == 1
    winner = next(r for r in responses if r.doc_id == listed[0].doc_id)
    assert (await core.info()).chunks == winner.chunk_count == listed[0].chunk_count


async def test_readers_never_see_both_versions_or_neither(tmp_path: Path) -> None:
    # The writer replaces in a worker thread, as the service runs it; searches and listings
    # are awaited on the loop and lookups run in worker threads, as the service runs them.
    store = await anyio.to_thread.run_sync(IndexStore, settings_for(tmp_path))
    query_vector = unit_vectors(1, seed=99)
    store.upsert(upsert_request("s.md", ["shared word first"], vectors=query_vector))
    store.upsert(upsert_request("t.md", ["shared word other"], seed=5))
    stop = threading.Event()
    problems: list[str] = []
    rounds = [0]

    def replace() -> None:
        try:
            for i in range(15):
                texts = ["shared word again"] * (1 + i % 3)
                vectors = np.repeat(query_vector, len(texts), axis=0)
                store.upsert(upsert_request("s.md", texts, vectors=vectors))
        finally:
            stop.set()

    async def read() -> None:
        modes: tuple[SearchMode, ...] = ("hybrid", "bm25", "vector")
        i = 0
        while not stop.is_set():
            mode = modes[i % 3]
            i += 1
            request = IndexSearchRequest(
                query="shared word", vector_b64=encode(query_vector), mode=mode, top_k=10
            )
            hits = (await store.search(request)).results
            doc_ids = {h.doc_id for h in hits if h.source == "s.md"}
            if len(doc_ids) != 1:
                problems.append(f"{mode} search saw {len(doc_ids)} versions")
            page = await store.list_documents(None, 10, 0)
            listed = [d for d in page.documents if d.source == "s.md"]
            if len(listed) != 1:
                problems.append(f"list saw {len(listed)} versions")
            if await anyio.to_thread.run_sync(store.lookup, "default", "s.md") is None:
                problems.append("lookup saw no version")
            rounds[0] += 1

    async with anyio.create_task_group() as readers:
        readers.start_soon(read)
        readers.start_soon(read)
        await anyio.to_thread.run_sync(replace)
    assert problems == []
    assert rounds[0] > 2  # the readers ran while the versions were being replaced
    assert store.info().documents == 2


class _FailingSwap(Writes):
    """Writes whose chunk commit fails, as a full disk would make it."""

    def swap_chunks(
        self, library: str, source: str, rows: pa.Table, *, replacing: bool = True
    ) -> None:
        raise OSError("No space left on device")


class _FailingPublishOnce(Writes):
    failures = 0

    def publish(self, row: pa.Table) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError("transient I/O error")
        super().publish(row)


def failing_publish(store: IndexStore, failures: int) -> None:
    assert isinstance(store.writes, _FailingPublishOnce)
    store.writes.failures = failures


def pending_rows(path: Path) -> int:
    import lancedb

    return int(
        lancedb.connect(str(path / "lancedb"))
        .open_table("documents")
        .count_rows(f"state = '{PENDING}'")
    )


async def test_a_failed_reingest_leaves_the_old_version(tmp_path: Path) -> None:
    IndexStore(settings_for(tmp_path)).upsert(upsert_request("a.md", ["original words"]))
    failing = IndexStore(settings_for(tmp_path), writes=_FailingSwap)
    with pytest.raises(StoreError, match="previous version"):
        failing.upsert(upsert_request("a.md", ["replacement words"], seed=1))
    assert pending_rows(tmp_path) == 0
    found = failing.lookup("default", "a.md").document
    assert found is not None
    assert failing.get(found.doc_id).content == "original words"
    hits = (await failing.search(bm25("words"))).results
    assert [h.content for h in hits] == ["original words"]


async def test_an_unpublished_version_is_finished_by_the_next_write(tmp_path: Path) -> None:
    store = IndexStore(settings_for(tmp_path), writes=_FailingPublishOnce)
    store.upsert(upsert_request("a.md", ["original words"]))
    failing_publish(store, 1)
    with pytest.raises(StoreError, match="completed on the next write"):
        store.upsert(upsert_request("a.md", ["replacement words"], seed=1))
    store.upsert(upsert_request("b.md", ["unrelated"], seed=2))
    documents = (await store.list_documents(None, 10, 0)).documents
    assert sorted(d.source for d in documents) == ["a.md", "b.md"]
    found = store.lookup("default", "a.md").document
    assert found is not None and store.get(found.doc_id).content == "replacement words"
    assert pending_rows(tmp_path) == 0


async def test_a_first_version_whose_publish_failed_is_replaced_not_duplicated(
    tmp_path: Path,
) -> None:
    # A new identity is appended without a merge; once a row of it exists (here a version
    # stored but not listed), the next ingest must go through the replace path.
    store = IndexStore(settings_for(tmp_path), writes=_FailingPublishOnce)
    failing_publish(store, 1)
    with pytest.raises(StoreError, match="completed on the next write"):
        store.upsert(upsert_request("a.md", ["first words"]))
    store.upsert(upsert_request("a.md", ["second words"], seed=1))
    documents = (await store.list_documents(None, 10, 0)).documents
    assert [(d.source, d.chunk_count) for d in documents] == [("a.md", 1)]
    assert [h.content for h in (await store.search(bm25("words"))).results] == ["second words"]
    assert pending_rows(tmp_path) == 0


async def test_reopening_reconciles_every_interrupted_write(tmp_path: Path) -> None:
    store = IndexStore(settings_for(tmp_path))
    writes = store.writes
    kept = store.upsert(upsert_request("kept.md", ["kept words"], seed=1))
    old = store.upsert(upsert_request("swapped.md", ["old words"], seed=2))
    emptied = store.upsert(upsert_request("emptied.md", ["emptied words"], seed=3))

    # Crash after step 1: a pending row, no chunks.
    lost = upsert_request("lost.md", ["lost words"], seed=4)
    writes.stage(document_row(lost, "lost-doc", "{}"))
    # Crash after step 2: the new chunks are in, the new row is still pending.
    new = upsert_request("swapped.md", ["new words", "more new words"], seed=5)
    writes.stage(document_row(new, "new-doc", "{}"))
    writes.swap_chunks(
        "default", "swapped.md", chunk_rows(new, "new-doc", "{}", unit_vectors(2, 5))
    )
    # Crash in a delete, after the chunks went: a live row without chunks.
    assert store.state.chunks is not None
    guarded_delete(store.state, "chunks", store.state.chunks, f"doc_id = '{emptied.doc_id}'")
    # Orphan chunks: chunks whose document row never got written.
    orphan = upsert_request("orphan.md", ["orphan words"], seed=6)
    writes.swap_chunks(
        "default", "orphan.md", chunk_rows(orphan, "orphan-doc", "{}", unit_vectors(1, 6))
    )
    store.close()

    reopened = IndexStore(settings_for(tmp_path))
    documents = (await reopened.list_documents(None, 10, 0)).documents
    assert sorted((d.source, d.doc_id) for d in documents) == [
        ("kept.md", kept.doc_id),
        ("swapped.md", "new-doc"),
    ]
    assert reopened.get("new-doc").content == new.document.markdown
    with pytest.raises(NotFoundError):
        reopened.get(old.doc_id)
    info = reopened.info()
    assert (info.documents, info.chunks) == (2, sum(d.chunk_count for d in documents))
    hits = (await reopened.search(bm25("words", top_k=20))).results
    assert sorted(h.doc_id for h in hits) == sorted([kept.doc_id, "new-doc", "new-doc"])
    assert pending_rows(tmp_path) == 0
    # A second reconcile finds nothing left to do.
    assert not reopened.reconcile().changed


async def test_optimize_folds_new_rows_into_the_text_index(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, index_optimize_every_writes=2)
    async with IndexCore(settings) as core:
        await core.upsert(upsert_request("a", ["alpha words"]))
        await core.upsert(upsert_request("b", ["beta words"], seed=1))
        store = opened_store(core)
        for _ in range(200):
            if not store.optimize_due():
                break
            await asyncio.sleep(0.05)
        assert not store.optimize_due()
        assert store.state.chunks is not None
        stats = store.state.chunks.index_stats("content_idx")
        assert stats is not None and stats.num_unindexed_rows == 0
        assert len((await core.search(bm25("words"))).results) == 2


async def test_hits_read_again_from_memory_match_the_stored_rows(tmp_path: Path) -> None:
    # The second search takes the document columns from memory; both must equal the store.
    store = IndexStore(settings_for(tmp_path))
    store.upsert(upsert_request("a.md", ["alpha words", "beta words"], metadata={"k": 1}))
    store.upsert(upsert_request("b.md", ["gamma words"], seed=1, file_type="pdf"))
    first = await store.search(bm25("words", top_k=5))
    second = await store.search(bm25("words", top_k=5))
    assert second == first
    assert {(h.source, h.title, h.file_type) for h in first.results} == {
        ("a.md", "Title of a.md", "md"),
        ("b.md", "Title of b.md", "pdf"),
    }
    assert [h.metadata for h in first.results if h.source == "a.md"] == [{"k": 1}, {"k": 1}]
    # A new version is a new doc_id: its hits show its own columns, never the old ones.
    store.upsert(upsert_request("a.md", ["alpha words"], seed=2, metadata={"k": 2}))
    replaced = [h for h in (await store.search(bm25("alpha"))).results if h.source == "a.md"]
    assert [h.metadata for h in replaced] == [{"k": 2}]


async def test_hits_of_remembered_and_new_documents_together(tmp_path: Path) -> None:
    # A reader opened after a.md was written has it in memory from the start; b.md, written
    # afterwards by the writer, is read from the documents table when a search first finds it.
    writer = IndexStore(settings_for(tmp_path, index_role="writer"))
    a = writer.upsert(upsert_request("a.md", ["alpha words"], metadata={"k": 1})).doc_id
    reader = IndexStore(settings_for(tmp_path, index_role="reader", index_read_consistency_s=0))
    b = writer.upsert(upsert_request("b.md", ["gamma words"], seed=1, file_type="pdf")).doc_id
    remembered = reader.state.hit_documents
    assert set(remembered.get_many([a, b])) == {a}
    assert [h.source for h in (await reader.search(bm25("alpha"))).results] == ["a.md"]
    mixed = (await reader.search(bm25("words", top_k=5))).results
    assert {(h.source, h.title, h.file_type, str(h.metadata)) for h in mixed} == {
        ("a.md", "Title of a.md", "md", "{'k': 1}"),
        ("b.md", "Title of b.md", "pdf", "{}"),
    }
    assert set(remembered.get_many([a, b])) == {a, b}


async def test_hits_not_in_memory_read_the_documents_table_then_the_chunk_rows(
    tmp_path: Path,
) -> None:
    store = IndexStore(settings_for(tmp_path))
    a = store.upsert(upsert_request("a.md", ["alpha words"])).doc_id
    b = store.upsert(upsert_request("b.md", ["beta words"], seed=1)).doc_id
    documents = store.state.documents
    assert documents is not None
    assert "doc_id" in indexed_columns(documents)
    # Told apart by their titles: a's documents row says otherwise than its chunk rows, and
    # b's documents row is gone (as a delete between a search's reads leaves it).
    documents.update(where=f"doc_id = '{a}'", values={"title": "From the documents table"})
    documents.delete(f"doc_id = '{b}'")
    store.state.hit_documents = DocumentColumns()
    titles = {h.source: h.title for h in (await store.search(bm25("words", top_k=5))).results}
    assert titles == {"a.md": "From the documents table", "b.md": "Title of b.md"}


async def test_a_reopened_store_knows_every_documents_columns_before_a_search(
    tmp_path: Path,
) -> None:
    # Hits need no read of their document columns: a store that opens reads them ahead, and
    # a write adds its own; a deleted document is no longer among them.
    first = IndexStore(settings_for(tmp_path))
    ids = [
        first.upsert(upsert_request(f"{name}.md", [f"{name} words"], seed=n)).doc_id
        for n, name in enumerate(("a", "b", "c"))
    ]
    assert set(first.state.hit_documents.get_many(ids)) == set(ids)
    first.delete(ids[2])
    again = IndexStore(settings_for(tmp_path))
    kept = again.state.hit_documents.get_many(ids)
    assert set(kept) == set(ids[:2])
    assert kept[ids[0]]["source"] == "a.md" and kept[ids[0]]["title"] == "Title of a.md"
    hits = (await again.search(bm25("words", top_k=5))).results
    assert sorted(h.source for h in hits) == ["a.md", "b.md"]


class _AlwaysMovingVersion:
    """An async table handle whose version moves on every look, as if a write landed in the
    middle of every attempt at a read."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self.looks = 0

    async def version(self) -> int:
        self.looks += 1
        return int(await self._handle.version()) + self.looks

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


class _StaleFirstVersion:
    """An async table handle whose first look at the version gives `stale`: the version
    before a fold that committed between that look and the legs."""

    def __init__(self, handle: Any, stale: int) -> None:
        self._handle = handle
        self._stale: int | None = stale

    async def version(self) -> int:
        stale, self._stale = self._stale, None
        return stale if stale is not None else int(await self._handle.version())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


async def test_a_fold_between_the_version_and_the_legs_makes_the_search_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The legs pick rows of the fold's new fragments; read at the version seen before, they
    are not there (Lance's read by row id fails, or panics when the ids are out of order):
    the read is voided and runs again at the new version."""
    store = IndexStore(settings_for(tmp_path))
    texts = [f"otters and rivers, note {i}" for i in range(6)]
    for i in range(4):
        store.upsert(upsert_request(f"{i}.md", texts, seed=i))
    before = store.state.chunks.version
    store.optimize()  # compacts the four writes' fragments into new ones
    real_handle = lance.async_handle
    monkeypatch.setattr(lance, "async_handle", lambda t: _StaleFirstVersion(real_handle(t), before))
    query = unit_vectors(1, seed=2)
    request = IndexSearchRequest(query="otters rivers", vector_b64=encode(query), top_k=8)
    found = (await store.search(request)).results
    assert len(found) == 8 and all(hit.content in texts for hit in found)


async def test_a_search_that_never_sees_a_still_table_waits_for_the_write_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = IndexStore(settings_for(tmp_path))
    store.upsert(upsert_request("a.md", ["alpha words"]))
    moving: list[_AlwaysMovingVersion] = []
    # The versions seen are made up: the picked rows are read at the real one.
    real_read = store.state.picked_rows.read

    def read(table: Any, version: int, row_ids: list[int], columns: list[str]) -> Any:
        return real_read(table, table.version, row_ids, columns)

    monkeypatch.setattr(store.state.picked_rows, "read", read)
    real_handle = lance.async_handle

    def handle(table: Any) -> _AlwaysMovingVersion:
        moving.append(_AlwaysMovingVersion(real_handle(table)))
        return moving[-1]

    monkeypatch.setattr(lance, "async_handle", handle)
    for request in (bm25("alpha"), bm25("alpha")):
        hits = (await store.search(request)).results
        assert [h.source for h in hits] == ["a.md"]
    # Every attempt saw the version move, then the read ran once more under the lock.
    assert [m.looks for m in moving] == [2 * 3 + 1] * 2
    # A document listing, the other read of one version, takes the same way.
    listed = await store.list_documents(None, 10, 0)
    assert [d.source for d in listed.documents] == ["a.md"]
    assert moving[-1].looks == 2 * 3 + 1 and len(moving) == 3
