"""No page and no known line are NULL in the chunk rows (`filters.ZERO_AS_NULL`), and the 0s
that rows written before 0.8.13 hold are made NULL when a writer opens the store
(`tables.null_for_zero`), whole or after an interruption, without touching an index."""

from __future__ import annotations

from pathlib import Path

import lancedb
from lancedb.table import Table

from libs.contracts import IndexSearchRequest
from services.index.settings import IndexSettings
from services.index.store import IndexStore
from tests.index_helpers import upsert_request

LINES = ("start_line", "end_line")


def store_at(path: Path) -> IndexStore:
    store = IndexStore(IndexSettings(lancedb_uri=str(path / "lancedb")))
    store.upsert(upsert_request("a.pdf", ["walrus one", "walrus two"], pages=[0, 2], seed=1))
    store.upsert(upsert_request("b.md", ["walrus notes"], seed=2))
    store.optimize()
    return store


def chunks_of(store: IndexStore) -> Table:
    chunks = store.state.chunks
    assert chunks is not None
    return chunks


def as_before_0813(path: Path) -> Table:
    """The chunk rows as 0.8.12 wrote them, 0 for no page and no known line, rewritten by
    another process with the store closed and folded into the indexes."""
    chunks = lancedb.connect(str(path / "lancedb")).open_table("chunks")
    for column in ("page", *LINES):
        chunks.update(where=f"{column} IS NULL", values={column: 0})
    chunks.optimize()
    return chunks


def unindexed(chunks: Table) -> dict[str, int]:
    stats = {index.name: chunks.index_stats(index.name) for index in chunks.list_indices()}
    return {name: s.num_unindexed_rows for name, s in stats.items() if s is not None}


async def pages(store: IndexStore, **filters: object) -> list[tuple[str, int, int]]:
    request = IndexSearchRequest(query="walrus", mode="bm25", top_k=10, filter=filters or None)
    hits = (await store.search(request)).results
    return sorted((h.source, h.page, h.start_line) for h in hits)


async def test_new_rows_hold_null_and_read_as_zero(tmp_path: Path) -> None:
    store = store_at(tmp_path)
    chunks = chunks_of(store)
    assert chunks.count_rows("page IS NULL") == 2 and chunks.count_rows("page = 2") == 1
    assert chunks.count_rows("start_line IS NULL") == 3  # the helper sends no lines
    assert await pages(store) == [("a.pdf", 0, 0), ("a.pdf", 2, 0), ("b.md", 0, 0)]
    assert await pages(store, page=0) == [("a.pdf", 0, 0), ("b.md", 0, 0)]
    assert await pages(store, page={"$ne": 0}) == [("a.pdf", 2, 0)]
    assert await pages(store, page={"$lte": 2, "$gte": 0}) == await pages(store)
    store.close()


async def test_a_store_from_before_gets_null_on_open_with_its_indexes_as_they_were(
    tmp_path: Path,
) -> None:
    store_at(tmp_path).close()
    chunks = as_before_0813(tmp_path)
    before = unindexed(chunks)
    assert chunks.count_rows("page = 0") == 2 and chunks.count_rows("start_line = 0") == 3

    again = IndexStore(IndexSettings(lancedb_uri=str(tmp_path / "lancedb")))
    chunks = chunks_of(again)
    assert chunks.count_rows("page = 0") == 0 and chunks.count_rows("page IS NULL") == 2
    assert chunks.count_rows("page = 2") == 1
    for column in LINES:
        assert chunks.count_rows(f"{column} IS NULL") == 3
    assert not [name for name in chunks.schema.names if name.endswith("_nulled")]
    assert unindexed(chunks) == before == {name: 0 for name in before}
    assert await pages(again) == [("a.pdf", 0, 0), ("a.pdf", 2, 0), ("b.md", 0, 0)]
    assert await pages(again, page=0) == [("a.pdf", 0, 0), ("b.md", 0, 0)]
    version = chunks.version
    again.close()
    # Nothing left to do: the next open commits nothing.
    third = IndexStore(IndexSettings(lancedb_uri=str(tmp_path / "lancedb")))
    assert chunks_of(third).version == version
    third.close()


async def test_an_interrupted_change_is_finished_on_the_next_open(tmp_path: Path) -> None:
    store_at(tmp_path).close()
    chunks = as_before_0813(tmp_path)
    chunks.update(where="source = 'b.md'", values={"start_line": 5, "end_line": 6})
    # Stopped after the new page column was added beside the old one, and after the old
    # start_line was dropped before the new one took its name.
    chunks.add_columns({"page_nulled": "CAST(NULLIF(page, 0) AS INT)"})
    chunks.add_columns({"start_line_nulled": "CAST(NULLIF(start_line, 0) AS INT)"})
    chunks.drop_columns(["start_line"])

    again = IndexStore(IndexSettings(lancedb_uri=str(tmp_path / "lancedb")))
    chunks = chunks_of(again)
    names = chunks.schema.names
    assert {"page", *LINES} <= set(names) and not [n for n in names if n.endswith("_nulled")]
    assert chunks.count_rows("page IS NULL") == 2 and chunks.count_rows("page = 2") == 1
    assert all(chunks.count_rows(f"{column} IS NULL") == 2 for column in LINES)
    assert chunks.count_rows("start_line = 5 AND end_line = 6") == 1  # kept, not lost
    assert await pages(again) == [("a.pdf", 0, 0), ("a.pdf", 2, 0), ("b.md", 0, 5)]
    again.close()
