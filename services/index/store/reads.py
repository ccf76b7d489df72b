"""Reads of documents: lookup by identity, get (whole or a window of chunks), listings of
documents and libraries, and the store's counts.

`list_documents` is a coroutine awaited on the caller's loop, like search (a count and one
sorted page, in one table version); the others block and run in worker threads. Lists and
counts read only the documents table, never the chunks.
"""

from __future__ import annotations

from typing import Any

from lancedb.table import AsyncTable, Table

from libs.contracts import (
    DocumentChunk,
    GetDocumentResult,
    IndexInfo,
    LibraryInfo,
    ListDocumentsResult,
    ListLibrariesResult,
    LookupResponse,
    SourceEntry,
    SourceList,
    StoredVectors,
    encode_cursor,
)
from libs.tables import header_length
from libs.tasks import to_the_end
from services.index.errors import ChunkNotFound, DocumentNotFound
from services.index.filters import equals, quote
from services.index.store import snapshot
from services.index.store.rows import document_chunk, document_info, load_metadata
from services.index.store.schema import (
    BY_SOURCE,
    DOCUMENT_INFO_COLUMNS,
    GET_COLUMNS,
    LIVE_ONLY,
    NEWEST_FIRST,
    SOURCE_COLUMNS,
    WINDOW_COLUMNS,
    key_filter,
)
from services.index.store.state import StoreState
from services.index.store.tables import tables, tables_async


def lookup(state: StoreState, library: str, source: str) -> LookupResponse:
    """The live document at (library, source), if any, and its converter revision."""
    documents, _ = tables(state)
    if documents is None:
        return LookupResponse()
    rows = (
        documents.search()
        .where(f"{LIVE_ONLY} AND {key_filter(library, source)}")
        .select([*DOCUMENT_INFO_COLUMNS, "conversion"])
        .limit(None)
        .to_arrow()
        .to_pylist()
    )
    if not rows:
        return LookupResponse()
    newest = max(rows, key=lambda r: (r["created_at"], r["doc_id"]))
    return LookupResponse(document=document_info(newest), conversion=newest["conversion"] or 0)


def get(
    state: StoreState, doc_id: str, chunk_index: int | None = None, context: int = 0
) -> GetDocumentResult:
    """The document; with `chunk_index`, only the window of that chunk and `context`
    neighbours on each side (by chunk_index), its Markdown in `content`."""
    documents, chunks = tables(state)
    if documents is None:
        raise DocumentNotFound(doc_id)
    rows = (
        documents.search()
        .where(f"{LIVE_ONLY} AND {equals('doc_id', doc_id)}")
        .select(GET_COLUMNS)
        .limit(1)
        .to_arrow()
        .to_pylist()
    )
    if not rows:
        raise DocumentNotFound(doc_id)
    row = rows[0]
    result = GetDocumentResult(
        doc_id=row["doc_id"],
        source=row["source"],
        title=row["title"],
        library=row["library"],
        content=row["markdown"],
        chunk_count=row["chunk_count"],
        metadata=load_metadata(row["metadata"]),
        file_type=row["file_type"],
        created_at=row["created_at"],
    )
    if chunk_index is None:
        return result
    window = _window(chunks, doc_id, chunk_index, context)
    result.content = window_markdown(row["markdown"], [c.content for c in window])
    result.chunks = window
    return result


def stored_vectors(state: StoreState, doc_id: str) -> StoredVectors:
    """The vectors the chunks of `doc_id` are stored with, once per distinct text (see
    `StoredVectors`); empty for a document with no chunks here."""
    _, chunks = tables(state)
    stamp = state.stamp
    if chunks is None or stamp is None:
        return StoredVectors()
    rows = (
        chunks.search()
        .where(equals("doc_id", doc_id))
        .select(["content", "vector"])
        .limit(None)
        .to_arrow()
    )
    if not rows.num_rows:
        return StoredVectors()
    vectors = rows.column("vector").combine_chunks().flatten().to_numpy()
    matrix = vectors.reshape(rows.num_rows, stamp.dim)
    return StoredVectors.of(stamp.model, stamp.dim, rows.column("content").to_pylist(), matrix)


def _window(
    chunks: Table | None, doc_id: str, chunk_index: int, context: int
) -> list[DocumentChunk]:
    # A doc_id names one version, whose chunks never change: no version check needed.
    owned = equals("doc_id", doc_id)
    first, last = max(0, chunk_index - context), chunk_index + context
    rows: list[dict[str, Any]] = []
    if chunks is not None:
        rows = (
            chunks.search()
            .where(f"{owned} AND chunk_index >= {first} AND chunk_index <= {last}")
            .select(WINDOW_COLUMNS)
            .limit(None)
            .to_arrow()
            .sort_by("chunk_index")
            .to_pylist()
        )
    if not any(r["chunk_index"] == chunk_index for r in rows):
        present: list[int] = []
        if chunks is not None:
            column = chunks.search().where(owned).select(["chunk_index"]).limit(None)
            present = column.to_arrow()["chunk_index"].to_pylist()
        raise ChunkNotFound(doc_id, chunk_index, min(present, default=0), max(present, default=-1))
    return [document_chunk(r) for r in rows]


def window_markdown(markdown: str, texts: list[str]) -> str:
    """The span of `markdown` from the first of `texts` to the end of the last.

    Chunks are slices of the converted Markdown (a long table's chunks after their repeated
    header), so the span is exact and shows overlapping chunks once. Where a text is not
    found in order, or the span would be far longer than the chunks (the first text also
    occurs earlier), the texts joined by blank lines.
    """
    start = position = _find(markdown, texts[0], 0)[0] if texts else -1
    end = start
    for text in texts:
        if position < 0:
            break
        position, length = _find(markdown, text, position)
        end = max(end, position + length)
    if start >= 0 and position >= 0 and end - start <= 2 * sum(map(len, texts)) + 200:
        return markdown[start:end]
    return "\n\n".join(texts)


def _find(markdown: str, text: str, after: int) -> tuple[int, int]:
    """Where `text` is in `markdown` from `after` on, and how long it is there; a chunk that
    repeats its table's header (`libs.tables`) is found by the rows after the header."""
    found = markdown.find(text, after)
    if found < 0 and (header := header_length(text)):
        return markdown.find(text[header:], after), len(text) - header
    return found, len(text)


async def list_documents(
    state: StoreState, library: str | None, limit: int, offset: int
) -> ListDocumentsResult:
    """A page of live documents, newest first, with the total they are a page of."""
    documents, _ = await tables_async(state)
    if documents is None:
        return ListDocumentsResult(documents=[], count=0, total=0)
    where = LIVE_ONLY if library is None else f"{LIVE_ONLY} AND {equals('library', library)}"

    async def read(table: AsyncTable, version: int) -> ListDocumentsResult:
        # The sort, offset and limit run inside Lance (a top-k sort): only the page's
        # rows are materialised, however many documents the store holds.
        total = await to_the_end(table.count_rows(where))
        if offset >= total:
            return ListDocumentsResult(documents=[], count=0, total=total)
        query = table.query().where(where).select(DOCUMENT_INFO_COLUMNS)
        page = query.order_by(NEWEST_FIRST).offset(offset).limit(limit)
        rows = (await to_the_end(page.to_arrow())).to_pylist()
        infos = [document_info(row) for row in rows]
        return ListDocumentsResult(documents=infos, count=len(infos), total=total)

    return await snapshot.in_one_version(state, documents, read)


async def list_sources(
    state: StoreState, library: str, prefix: str, after: str | None, limit: int
) -> SourceList:
    """A page of the library's live sources that start with `prefix`, by source, after the
    source `after` (keyset pagination: stable while documents come and go)."""
    documents, _ = await tables_async(state)
    if documents is None:
        return SourceList(sources=[])
    where = f"{LIVE_ONLY} AND {equals('library', library)}"
    if prefix:
        where += f" AND starts_with(source, {quote(prefix)})"
    if after is not None:
        where += f" AND source > {quote(after)}"

    async def read(table: AsyncTable, version: int) -> SourceList:
        # One more row than asked tells whether another page follows.
        query = table.query().where(where).select(SOURCE_COLUMNS).order_by(BY_SOURCE)
        rows = (await to_the_end(query.limit(limit + 1).to_arrow())).to_pylist()
        page = [
            SourceEntry(
                source=row["source"],
                doc_id=row["doc_id"],
                content_sha256=row["content_hash"],
                chunk_count=row["chunk_count"],
                file_type=row["file_type"] or "",
                last_modified=row["last_modified"] or "",
                conversion=row["conversion"] or 0,
            )
            for row in rows[:limit]
        ]
        more = len(rows) > limit
        return SourceList(
            sources=page, next_cursor=encode_cursor(page[-1].source) if more else None
        )

    return await snapshot.in_one_version(state, documents, read)


def list_libraries(state: StoreState) -> ListLibrariesResult:
    documents, _ = tables(state)
    if documents is None:
        return ListLibrariesResult(libraries=[])
    rows = documents.search().where(LIVE_ONLY).select(["library", "chunk_count"])
    table = rows.limit(None).to_arrow()
    grouped = table.group_by("library").aggregate(
        [("chunk_count", "sum"), ("chunk_count", "count")]
    )
    libraries = [
        LibraryInfo(
            library=row["library"],
            document_count=row["chunk_count_count"],
            chunk_count=row["chunk_count_sum"] or 0,
        )
        for row in grouped.to_pylist()
    ]
    libraries.sort(key=lambda lib: lib.library)
    return ListLibrariesResult(libraries=libraries)


def info(state: StoreState) -> IndexInfo:
    documents, chunks = tables(state)
    stamp = state.stamp
    return IndexInfo(
        uri=state.uri,
        model=stamp.model if stamp else None,
        dim=stamp.dim if stamp else None,
        documents=documents.count_rows(LIVE_ONLY) if documents is not None else 0,
        chunks=chunks.count_rows() if chunks is not None else 0,
        role=state.settings.index_role,
        max_body_bytes=state.settings.index_max_body_bytes,
        # A reader says its own settings too: the gateway asks whichever index answers
        # `info`, and readers run with the writer's configuration.
        max_staged_bytes=state.settings.index_staged_max_bytes,
    )
