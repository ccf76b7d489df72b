"""What writes leave in a real LanceDB in tmp_path (seeded synthetic vectors, no model):
concurrent upserts of one source, readers during a replace (never both versions, never
neither), a failed or unpublished write, the reconciling of interrupted ones on reopening, and
the fold of new rows into the text index."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import anyio
import anyio.to_thread
import numpy as np
import pyarrow as pa
import pytest

from libs.contracts import IndexSearchRequest, SearchMode
from libs.errors import NotFoundError, StoreError
from libs.vectors import encode
from services.index.core import IndexCore
from services.index.store import IndexStore, Writes
from services.index.store.rows import chunk_rows, document_row
from services.index.store.schema import PENDING
from services.index.store.writes import guarded_delete
from tests.index_helpers import bm25, opened_store, settings_for, unit_vectors, upsert_request

pytestmark = pytest.mark.integration


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
