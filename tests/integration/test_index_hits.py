"""How a search reads its hits, against a real LanceDB in tmp_path (seeded synthetic vectors,
no model): document columns from memory and where they come from when not there, and the one
version a search's legs and reads see while folds and writes move the table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from libs.contracts import IndexSearchRequest
from libs.vectors import encode
from services.index.store import IndexStore, lance
from services.index.store.state import DocumentColumns
from services.index.store.tables import indexed_columns
from tests.index_helpers import bm25, settings_for, unit_vectors, upsert_request

pytestmark = pytest.mark.integration


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
