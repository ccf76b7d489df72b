"""Opening and creating the tables, and bringing older tables up to this release.

Opening is blocking work (listing tables, upgrading, building the text indexes, loading the
search indexes into the cache) and never runs on an event loop: the store is built in a
worker thread, writes and the blocking reads run in worker threads, and the coroutines
(`search`, `list_documents`) get their handles from `tables_async`, which looks again in a
worker thread while the store is still empty. That retry is what lets tables another process
created show up without a restart, at most once every `INDEX_READ_CONSISTENCY_S`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio.to_thread
import pyarrow as pa
from lancedb.index import BTree
from lancedb.table import Table

from libs.errors import MvdbError
from libs.malloc import release_free_memory
from libs.modelfiles import count_tokens
from services.index.filters import META_JSON, META_LIST, ZERO_AS_NULL, metadata_columns
from services.index.store import ann, cjk, meta
from services.index.store.rows import load_metadata
from services.index.store.schema import (
    ADDED_CHUNK_FIELDS,
    ADDED_DOCUMENT_FIELDS,
    CHUNKS,
    CJK_FTS_CONFIG,
    CJK_TERMS,
    DOCUMENTS,
    DOCUMENTS_SCHEMA,
    FTS_COLUMNS,
    FTS_CONFIG,
    HIT_DOCUMENT_ENTRY,
    JOBS,
    LIVE_ONLY,
    META,
    chunks_schema,
)
from services.index.store.state import StoreState

log = logging.getLogger(__name__)

Handles = tuple[Table | None, Table | None]


def open_tables(state: StoreState) -> None:
    """Open whichever tables exist; the first upsert creates the missing ones. A chunks
    table is upgraded, indexed and prewarmed before any reader gets its handle.

    A read-only store (INDEX_ROLE=reader) upgrades and indexes nothing: it takes a chunks
    table only once the writer has brought it up to this release, and keeps looking until
    then (as while the tables do not exist)."""
    with state.handles_lock:
        state.last_open_attempt = time.monotonic()
        names = set(state.db.list_tables().tables)
        if state.stamp is None and META in names:
            state.stamp = meta.read_stamp(state.db)
        if state.documents is None and DOCUMENTS in names:
            documents = state.db.open_table(DOCUMENTS)
            if state.read_only:
                if not _ready("documents", documents, ADDED_DOCUMENT_FIELDS, []):
                    return
            else:
                upgrade_documents(documents)
                ensure_document_index(documents)
            warm_hit_documents(state, documents)
            state.documents = documents
        if state.chunks is None and CHUNKS in names:
            chunks = state.db.open_table(CHUNKS)
            if state.read_only:
                if not _ready("chunks", chunks, ADDED_CHUNK_FIELDS, [*FTS_COLUMNS, "doc_id"]):
                    return
            else:
                null_for_zero(chunks)  # first: it finishes what it may have left half done
                upgrade_chunks(chunks)
                ensure_chunk_indexes(chunks)
            ann.read_partitions(state, chunks)
            ann.prewarm(state.settings, chunks)
            state.chunks = chunks


def warm_hit_documents(state: StoreState, documents: Table) -> None:
    """Fill the cache of hits' document columns from the documents table, up to its size, so
    that a search shows its hits' source, title and the rest without reading them at all. A
    doc_id's row never changes, so what is read now stays true; documents written later are
    added as they are written or first found (`search.materialize`)."""
    try:
        found = (
            documents.search()
            .where(LIVE_ONLY)
            .select(HIT_DOCUMENT_ENTRY)
            .limit(state.hit_documents.size)
            .to_arrow()
        )
    except Exception:
        log.warning("could not read the documents' columns ahead of searches", exc_info=True)
        return
    state.hit_documents.remember(found.to_pylist())


def _ready(name: str, table: Table, fields: list[pa.Field], indexed: list[str]) -> bool:
    """Whether the writer has given the table this release's columns and indexes."""
    names = set(table.schema.names)
    missing = [f.name for f in fields if f.name not in names]
    if indexed:
        present = indexed_columns(table)
        missing += [column for column in indexed if column not in present]
    if missing:
        log.warning(
            f"the {name} table is not ready to read yet (the writer adds it); looking again",
            extra={"fields": {"missing": missing}},
        )
    return not missing


def follow(state: StoreState) -> None:
    """A reader's periodic look at the writer's work: tables that appeared, and, once the
    writer has committed since the last look, its vector index's partitions (built or
    rebuilt, joined and split by folds: to probe it as the writer would). Then the pages
    this process's allocator holds free go back to the system: its searches read the new
    index segments and let the old ones go (`libs.malloc`; at a million chunks a reader's
    memory otherwise climbed commit after commit). Blocking: for worker threads."""
    _, chunks = tables(state)
    if chunks is None:
        return
    version = chunks.version
    if version == state.followed_version:
        return
    before = state.ivf_partitions
    ann.read_partitions(state, chunks)
    if state.ivf_partitions != before:
        ann.prewarm(state.settings, chunks)
    state.followed_version = version
    release_free_memory()


def catch_up(state: StoreState) -> None:
    """A writer's periodic look at the latest versions. Its handles move only when it moves
    them (`location.connect`): here under the write lock, so that a move never falls
    between a commit and LanceDB's report of the version that commit made. Its reads then
    see another process's commits (a misconfiguration, which the writer guard reports at the
    next write) within `INDEX_READ_CONSISTENCY_S`, as a reader's do. Blocking: for worker
    threads."""
    with state.write_lock:
        for _, table in both(state):
            if table is not None:
                table.checkout_latest()  # type: ignore[no-untyped-call]


def _open_due(state: StoreState) -> bool:
    if state.documents is not None and state.chunks is not None:
        return False
    return time.monotonic() >= state.last_open_attempt + state.settings.index_read_consistency_s


def tables(state: StoreState) -> Handles:
    """The (documents, chunks) handles, looking for the tables again now and then while the
    store is empty. Blocking: for worker threads."""
    if _open_due(state):
        open_tables(state)
    return state.documents, state.chunks


async def tables_async(state: StoreState) -> Handles:
    """`tables` for coroutines: the look for new tables runs in a worker thread."""
    if _open_due(state):
        await anyio.to_thread.run_sync(tables, state)
    return state.documents, state.chunks


def require_tables(state: StoreState) -> tuple[Table, Table]:
    documents, chunks = state.documents, state.chunks
    if documents is None or chunks is None:
        raise MvdbError("the index tables do not exist yet; the first upsert creates them")
    return documents, chunks


def ensure_tables(state: StoreState, model: str, dim: int) -> tuple[Table, Table]:
    """Create what is missing for a store of `model`/`dim`, or refuse another model. Runs
    under the write lock.

    Order matters for crash safety: `meta` first, so a chunks table never exists
    without the record of which model filled it.
    """
    if state.stamp is None or state.documents is None or state.chunks is None:
        open_tables(state)
    if state.stamp is None:
        state.stamp = meta.create_stamp(state.db, model, dim)
        state.guard.committed(META, state.db.open_table(META), None)
    meta.check_model(state.stamp, model, dim)
    # Created here: the versions are this process's own (`writer_guard`).
    if state.documents is None:
        documents = state.db.create_table(DOCUMENTS, schema=DOCUMENTS_SCHEMA, exist_ok=True)
        ensure_document_index(documents)
        state.guard.committed(DOCUMENTS, documents, None)
        state.documents = documents
    if state.chunks is None:
        chunks = state.db.create_table(CHUNKS, schema=chunks_schema(dim), exist_ok=True)
        ensure_chunk_indexes(chunks)
        state.guard.committed(CHUNKS, chunks, None)
        state.chunks = chunks
    return state.documents, state.chunks


def both(state: StoreState) -> list[tuple[str, Table | None]]:
    """The documents and chunks tables by name (for the writer guard); None where absent."""
    return [(DOCUMENTS, state.documents), (CHUNKS, state.chunks)]


def adopt_versions(state: StoreState) -> None:
    """A writer's start: the tables' versions now are its own (see `writer_guard`)."""
    names = set(state.db.list_tables().tables)
    found = {name: state.db.open_table(name) for name in (META, JOBS) if name in names}
    state.guard.adopt([*both(state), (META, found.get(META)), (JOBS, found.get(JOBS))])


def indexed_columns(table: Table) -> set[str]:
    """The columns that have an index of their own."""
    return {index.columns[0] for index in table.list_indices() if len(index.columns) == 1}


def ensure_chunk_indexes(chunks: Table) -> None:
    present = indexed_columns(chunks)
    if "content" not in present:
        chunks.create_index("content", config=FTS_CONFIG)
    if CJK_TERMS not in present:
        chunks.create_index(CJK_TERMS, config=CJK_FTS_CONFIG)
    if "doc_id" not in present:
        chunks.create_index("doc_id", config=BTree())


def ensure_document_index(documents: Table) -> None:
    """A B-tree over the documents' doc_id: a search reads the document columns of hits not
    in memory by doc_id (`search.materialize`), as `get` and `delete` do, and a scan for ten
    doc_ids took 10.7 ms at 100,000 documents, 4.0 ms with it (docs/benchmarks.md)."""
    if "doc_id" not in indexed_columns(documents):
        documents.create_index("doc_id", config=BTree())


def upgrade_documents(documents: Table) -> None:
    """Give a documents table from an older release the columns this one writes. One commit;
    the old rows keep NULL (their converter revision was never recorded: 0, stale)."""
    names = set(documents.schema.names)
    missing = [field for field in ADDED_DOCUMENT_FIELDS if field.name not in names]
    if missing:
        documents.add_columns(missing)
        log.warning(
            "added the columns an older documents table lacked",
            extra={"fields": {"columns": [f.name for f in missing]}},
        )


def _fill_cjk_terms(chunks: Table) -> None:
    """The CJK terms of the rows that hold CJK text and have none yet (see `cjk`)."""
    unfilled = (
        chunks.search()
        .where(f"{CJK_TERMS} IS NULL")
        .select(["chunk_id", "content"])
        .limit(None)
        .to_arrow()
    )
    if not unfilled.num_rows:
        return
    terms = [cjk.index_terms(text) for text in unfilled["content"].to_pylist()]
    update = pa.table({"chunk_id": unfilled["chunk_id"], CJK_TERMS: pa.array(terms, pa.string())})
    chunks.merge_insert("chunk_id").when_matched_update_all().execute(update)
    log.warning(
        "filled the CJK terms of an older chunks table",
        extra={"fields": {"rows": unfilled.num_rows}},
    )


def null_for_zero(chunks: Table) -> None:
    """NULL for the 0s that rows written before 0.8.13 hold for no page and no known line
    (`filters.ZERO_AS_NULL`: Lance reads a few rows of a column of one value by decoding
    all of it). Lance computes the new column from the old one beside it, then the old is
    dropped and the new renamed: three commits, one small data file, no row rewritten and
    no index touched (0.13 s at a million chunks, docs/benchmarks.md). Safe to interrupt:
    the next open takes up what it finds. One filtered pass a column per open, after that.
    """
    names = set(chunks.schema.names)
    staged = {column: f"{column}_nulled" for column in sorted(ZERO_AS_NULL)}
    if beside := [new for old, new in staged.items() if new in names and old in names]:
        chunks.drop_columns(beside)  # the old column is whole: start again from it
    if alone := [old for old, new in staged.items() if new in names and old not in names]:
        _rename(chunks, {staged[old]: old for old in alone})
    names = set(chunks.schema.names)  # a store from before 0.6.0 has no lines yet
    zeroed = [c for c in staged if c in names and chunks.count_rows(f"{c} = 0")]
    if not zeroed:
        return
    chunks.add_columns({staged[c]: f"CAST(NULLIF({c}, 0) AS INT)" for c in zeroed})
    chunks.drop_columns(zeroed)
    _rename(chunks, {staged[c]: c for c in zeroed})
    log.warning(
        "stored the chunks' 0 pages and lines as NULL", extra={"fields": {"columns": zeroed}}
    )


def _rename(table: Table, names: dict[str, str]) -> None:
    # LanceDB takes each rename as an argument of its own (its annotation says otherwise).
    renames: list[Any] = [{"path": old, "rename": new} for old, new in names.items()]
    table.alter_columns(*renames)


def upgrade_chunks(chunks: Table) -> None:
    """Give a chunks table from an older release the columns this one reads, filled.

    Two commits, each safe to interrupt: adding the columns (NULL in old rows), then one
    merge that fills every row still NULL in one of them: `meta_json` and `meta_list`
    derived from the `metadata` text the row carries, `token_count` counted with the
    bundled tokenizer, the measure the converter gives every new chunk (so a budget never
    meets an uncounted row). `start_line` and `end_line` stay NULL: where an old chunk lay
    in its Markdown was never recorded, and NULL reads as 0, unknown. `cjk_terms` is added
    apart, by an expression that gives "" to every row without CJK text, and its NULL rows
    are filled by a merge of their own (`_fill_cjk_terms`). Run again on the next open, it
    finishes whatever a crash left.
    Costs two filtered passes over the table per open; the rest only while rows are unfilled.
    """
    names = set(chunks.schema.names)
    missing = [f for f in ADDED_CHUNK_FIELDS if f.name not in names and f.name != CJK_TERMS]
    if missing:
        chunks.add_columns(missing)
    if CJK_TERMS not in names:
        chunks.add_columns({CJK_TERMS: cjk.WITHOUT_CJK_SQL})
    _fill_cjk_terms(chunks)
    unfilled = (
        chunks.search()
        .where(f"{META_JSON} IS NULL OR token_count IS NULL")
        .select(["chunk_id", "metadata", "content", "token_count"])
        .limit(None)
        .to_arrow()
    )
    if not unfilled.num_rows:
        return
    derived = [metadata_columns(load_metadata(text)) for text in unfilled["metadata"].to_pylist()]
    counts: list[int | None] = unfilled["token_count"].to_pylist()
    uncounted = [i for i, count in enumerate(counts) if count is None]
    contents = unfilled["content"].to_pylist()
    for i, count in zip(uncounted, count_tokens([contents[i] for i in uncounted]), strict=True):
        counts[i] = count
    update = pa.table(
        {
            "chunk_id": unfilled["chunk_id"],
            "token_count": pa.array(counts, type=pa.int32()),
            META_JSON: pa.array([d[0] for d in derived], type=pa.json_(pa.utf8())),
            META_LIST: pa.array([d[1] for d in derived], type=pa.list_(pa.string())),
        }
    )
    chunks.merge_insert("chunk_id").when_matched_update_all().execute(update)
    log.warning(
        "filled the columns an older chunks table lacked",
        extra={"fields": {"rows": unfilled.num_rows, "counted": len(uncounted)}},
    )
