"""The LanceDB store: documents, chunks, hybrid search, crash recovery. Synchronous; the
service runs it off the event loop and is its only writer.

Tables
- `documents`: one row per document version, `state` 'pending' (being written, invisible to
  list/get/lookup) or 'live'. Holds the Markdown exactly as converted.
- `chunks`: the searchable pieces with their vectors, full-text indexed on `content`; each row
  repeats the document fields that search results and filters need, so a search never joins:
  besides the metadata as JSON text, `meta_json` and `meta_list` hold it in the shapes that
  metadata filters read (see `services.index.filters`), and `token_count` the chunk's length
  in model tokens. A chunks table from before those columns gets them on open
  (`_upgrade_chunks`).
- `meta`: the embedding model and dimension the store was built with.

Atomic replace of the document at (library, source), writes serialised by one lock:
1. add the new `documents` row as 'pending';
2. one `chunks` commit that inserts the new chunks and deletes every other chunk of
   (library, source): this is the moment the new version becomes the searchable one;
3. one `documents` commit that makes the new row 'live' and deletes the other rows of
   (library, source).
A crash before 2 leaves an invisible pending row; after 2, a pending row whose chunks exist.
`reconcile` (run on open) deletes the first kind and finishes step 3 for the second, and
clears what a crash in the middle of a delete leaves (orphan chunks, documents without
chunks). Every read runs against a single table version; a hybrid search, which queries the
chunks table twice, checks that the version did not move in between.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

import anyio.to_thread
import lancedb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lancedb.background_loop import LOOP
from lancedb.index import FTS, BTree, IvfSq
from lancedb.query import (
    AsyncFTSQuery,
    AsyncVectorQuery,
    ColumnOrdering,
    FullTextOperator,
    MatchQuery,
)
from lancedb.table import AsyncTable, Table

from libs.contracts import (
    DeleteResult,
    DocumentChunk,
    DocumentInfo,
    GetDocumentResult,
    IndexInfo,
    IndexSearchRequest,
    LibraryInfo,
    ListDocumentsResult,
    ListLibrariesResult,
    SearchHit,
    SearchResult,
    UpsertRequest,
    UpsertResponse,
)
from libs.errors import InvalidInputError, MvdbError
from libs.vectors import Matrix
from services.index.errors import (
    ChunkNotFound,
    DocumentNotFound,
    StoreModelMismatch,
    WriteFailed,
)
from services.index.filters import (
    META_JSON,
    META_LIST,
    compile_filter,
    equals,
    metadata_columns,
    quote,
)
from services.index.settings import IndexSettings
from services.index.tokens import TokenCounter

log = logging.getLogger(__name__)

T = TypeVar("T")

DOCUMENTS = "documents"
CHUNKS = "chunks"
META = "meta"
# The `meta` key under which the vector index's partition count is kept.
IVF_PARTITIONS_KEY = "ivf_partitions"
PENDING = "pending"
LIVE = "live"
LIVE_ONLY = equals("state", LIVE)

DOCUMENTS_SCHEMA = pa.schema(
    [
        ("doc_id", pa.string()),
        ("source", pa.string()),
        ("library", pa.string()),
        ("title", pa.string()),
        ("file_type", pa.string()),
        ("content_hash", pa.string()),
        ("created_at", pa.string()),
        ("last_modified", pa.string()),
        ("metadata", pa.string()),
        ("chunk_count", pa.int32()),
        ("markdown", pa.large_string()),
        ("state", pa.string()),
    ]
)

# Everything but the Markdown, which only `get` needs.
DOCUMENT_INFO_COLUMNS = [
    "doc_id",
    "source",
    "title",
    "library",
    "content_hash",
    "created_at",
    "metadata",
    "chunk_count",
    "file_type",
    "last_modified",
]

# list_documents order: newest first, ties broken by doc_id so pages never overlap.
NEWEST_FIRST = [
    ColumnOrdering(column_name="created_at", ascending=False),
    ColumnOrdering(column_name="doc_id", ascending=True),
]

GET_COLUMNS = [
    "doc_id",
    "source",
    "title",
    "library",
    "markdown",
    "chunk_count",
    "metadata",
    "file_type",
    "created_at",
]

HIT_COLUMNS = [
    "chunk_id",
    "doc_id",
    "source",
    "title",
    "library",
    "file_type",
    "last_modified",
    "page",
    "content",
    "chunk_index",
    "metadata",
    "headings",
    "token_count",
]

# The document-level columns of a hit. A doc_id names one version of one document and its
# row never changes (a replace writes a new doc_id), so they are kept per doc_id in memory
# and a search reads only the chunk's own columns for documents it has seen before.
HIT_DOCUMENT_COLUMNS = ["source", "title", "library", "file_type", "last_modified", "metadata"]
HIT_CHUNK_COLUMNS = [c for c in HIT_COLUMNS if c not in HIT_DOCUMENT_COLUMNS]
_DOCUMENT_CACHE_SIZE = 20_000

WINDOW_COLUMNS = ["chunk_index", "content", "page", "headings"]

FTS_CONFIG = FTS(
    with_position=False,
    base_tokenizer="simple",
    language="English",
    stem=True,
    remove_stop_words=True,
    lower_case=True,
    ascii_folding=True,
)

# A hybrid search retries this often when a write lands between its two legs, then waits
# for the write lock (writes take tens of milliseconds, so this is rare and short).
_READ_ATTEMPTS = 3

# With max_per_document, a search whose candidates hold too few documents asks each leg for
# this many times more, up to _MAX_CANDIDATES, before it returns fewer than top_k results.
_DEEPEN_FACTOR = 4
_MAX_CANDIDATES = 1000

# Columns added after the first release, last in the schema: `add_columns` appends, so new
# and upgraded tables keep one column order. `token_count` is NULL in upgraded rows (counted
# when a search returns them); `meta_json` NULL marks a row `_upgrade_chunks` has not filled.
ADDED_CHUNK_FIELDS = [
    pa.field("token_count", pa.int32()),
    pa.field(META_JSON, pa.json_(pa.utf8())),
    pa.field(META_LIST, pa.list_(pa.string())),
]


def chunks_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            ("chunk_id", pa.string()),
            ("doc_id", pa.string()),
            ("source", pa.string()),
            ("library", pa.string()),
            ("title", pa.string()),
            ("file_type", pa.string()),
            ("last_modified", pa.string()),
            ("page", pa.int32()),
            ("chunk_index", pa.int32()),
            ("content", pa.string()),
            ("headings", pa.list_(pa.string())),
            ("metadata", pa.string()),
            ("vector", pa.list_(pa.float32(), dim)),
            *ADDED_CHUNK_FIELDS,
        ]
    )


def key_filter(library: str, source: str) -> str:
    """The rows of one document identity, every version of it."""
    return f"{equals('library', library)} AND {equals('source', source)}"


def in_list(column: str, values: Iterable[str]) -> str:
    return f"{column} IN ({', '.join(quote(v) for v in values)})"


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _dump_metadata(metadata: dict[str, Any]) -> str:
    try:
        return json.dumps(metadata, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"metadata must be plain JSON (objects, lists, text, numbers): {exc}"
        ) from exc


def _load_metadata(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


# ------------------------------------------------------------------- search legs
# Each leg reads, per candidate, its row id and score (plus `columns`): enough to fuse, rank
# and cap per document. The columns a hit shows are read afterwards for the picked rows only,
# by row id, so a search reads the text of top_k chunks rather than of every candidate.


def _async_handle(table: Table) -> AsyncTable:
    """The async handle inside a sync LanceDB table. The same handle, not a second one opened
    beside it, so a search sees this process's writes at once (lancedb is pinned: the
    attribute is checked by the search tests)."""
    handle: AsyncTable = table._table  # type: ignore[attr-defined]
    return handle


def _key_values(meta: Table) -> dict[str, str]:
    """The `meta` table as a dict."""
    rows = meta.search().limit(None).to_arrow().to_pylist()
    return {str(r["key"]): str(r["value"]) for r in rows}


def _on_lance_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` on the event loop LanceDB's sync API runs its own calls on."""
    return cast(T, LOOP.run(coroutine))  # type: ignore[no-untyped-call]


async def _fts_leg(
    table: AsyncTable, text: str, where: str | None, depth: int, columns: list[str]
) -> list[dict[str, Any]]:
    # A MatchQuery is tokenised like the indexed text and never parsed as query syntax,
    # so operators, quotes or field names in the user's words are just words.
    match = MatchQuery(
        text,
        "content",
        boost=1.0,
        fuzziness=0,
        max_expansions=50,
        operator=FullTextOperator.OR,
        prefix_length=0,
        document_granularity=None,
    )
    query = table.query().nearest_to_text(match)
    return await _candidates(query, where, depth, columns, "_score", float)


async def _vector_leg(
    table: AsyncTable,
    vector: Matrix,
    where: str | None,
    depth: int,
    columns: list[str],
    nprobes: int,
    refine_factor: int,
) -> list[dict[str, Any]]:
    query = table.query().nearest_to(vector[0]).column("vector").distance_type("cosine")
    if nprobes:  # approximate search over the IVF index
        query = query.nprobes(nprobes).maximum_nprobes(nprobes).refine_factor(refine_factor)
    return await _candidates(query, where, depth, columns, "_distance", lambda d: 1.0 - d)


async def _candidates(
    query: AsyncFTSQuery | AsyncVectorQuery,
    where: str | None,
    depth: int,
    columns: list[str],
    score_column: str,
    score: Callable[[float], float],
) -> list[dict[str, Any]]:
    """A leg's best `depth` rows, each with its row id, `columns` and `_leg_score` (higher is
    better), `where` applied before the search (prefilter)."""
    if where:
        query = query.where(where)
    found = await query.select([*columns, score_column]).with_row_id().limit(depth).to_arrow()
    rows: list[dict[str, Any]] = found.to_pylist()
    for row in rows:
        row["_leg_score"] = score(float(row.pop(score_column)))
    return rows


def _cap_per_document(
    ranked: list[tuple[dict[str, Any], float]], top_k: int, per_document: int | None
) -> list[tuple[dict[str, Any], float]]:
    """The first `top_k` of `ranked`, skipping a document's chunks past `per_document`."""
    if per_document is None:
        return ranked[:top_k]
    taken: dict[str, int] = {}
    picked = []
    for row, score in ranked:
        doc_id = row["doc_id"]
        if taken.get(doc_id, 0) < per_document:
            taken[doc_id] = taken.get(doc_id, 0) + 1
            picked.append((row, score))
            if len(picked) == top_k:
                break
    return picked


def _within_budget(hits: list[SearchHit], max_tokens: int | None) -> SearchResult:
    """The leading hits whose token counts add up to at most `max_tokens` (all without it)."""
    total = 0
    for kept, hit in enumerate(hits):
        if max_tokens is not None and total + hit.token_count > max_tokens:
            return SearchResult(results=hits[:kept], truncated=True, total_tokens=total)
        total += hit.token_count
    return SearchResult(results=hits, truncated=False, total_tokens=total)


def _window_markdown(markdown: str, texts: list[str]) -> str:
    """The span of `markdown` from the first of `texts` to the end of the last.

    Chunks are slices of the converted Markdown, so the span is exact and shows overlapping
    chunks once. Where a text is not found in order, or the span would be far longer than
    the chunks (the first text also occurs earlier), the texts joined by blank lines.
    """
    start = position = markdown.find(texts[0]) if texts else -1
    end = start
    for text in texts:
        if position < 0:
            break
        position = markdown.find(text, position)
        end = max(end, position + len(text))
    if start >= 0 and position >= 0 and end - start <= 2 * sum(map(len, texts)) + 200:
        return markdown[start:end]
    return "\n\n".join(texts)


@dataclass(frozen=True)
class ModelStamp:
    """The embedding model a store was built with; every vector in it comes from this one."""

    model: str
    dim: int


@dataclass(frozen=True)
class ReconcileReport:
    published: int = 0
    discarded_pending: int = 0
    dropped_empty_documents: int = 0
    dropped_orphan_chunks: int = 0

    @property
    def changed(self) -> bool:
        return self != ReconcileReport()


class IndexStore:
    """One LanceDB database. Thread-safe: reads run concurrently, writes take `_write_lock`."""

    def __init__(self, settings: IndexSettings) -> None:
        self.settings = settings
        self.uri = settings.lancedb_uri
        self._write_lock = threading.RLock()
        self._handles_lock = threading.Lock()
        # Bounded caches: Lance's defaults let index and manifest caches grow with every
        # table version a busy ingest writes.
        session = lancedb.Session(
            index_cache_size_bytes=settings.index_cache_mb * 1024 * 1024,
            metadata_cache_size_bytes=settings.index_metadata_cache_mb * 1024 * 1024,
        )
        self._db = lancedb.connect(
            self.uri,
            read_consistency_interval=timedelta(seconds=settings.index_read_consistency_s),
            session=session,
        )
        self._documents: Table | None = None
        self._chunks: Table | None = None
        self._stamp: ModelStamp | None = None
        self._last_open_attempt = 0.0
        # Documents whose chunks were committed but whose step 3 failed: finished first
        # thing on the next write, so a transient error does not wait for a restart.
        self._unpublished: set[str] = set()
        self._writes_since_optimize = 0
        self._dirty_since: float | None = None
        self._tokens = TokenCounter()
        self._ivf_partitions = 0
        self._selectivity_cache: dict[tuple[int, str], float] = {}
        self._hit_documents: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._hit_documents_lock = threading.Lock()
        self._open_tables()
        self.reconcile()

    # ----------------------------------------------------------------------- handles

    def _open_tables(self) -> None:
        """Open whichever tables exist; the first upsert creates the missing ones."""
        with self._handles_lock:
            self._last_open_attempt = time.monotonic()
            names = set(self._db.list_tables().tables)
            if self._stamp is None and META in names:
                self._stamp = self._read_stamp(self._db.open_table(META))
            if self._documents is None and DOCUMENTS in names:
                self._documents = self._db.open_table(DOCUMENTS)
            if self._chunks is None and CHUNKS in names:
                chunks = self._db.open_table(CHUNKS)
                self._upgrade_chunks(chunks)
                self._ensure_chunk_indexes(chunks)
                self._read_vector_index(chunks)
                self._prewarm(chunks)
                self._chunks = chunks

    def _tables(self) -> tuple[Table | None, Table | None]:
        """The table handles, retrying the open now and then while the store is empty, so
        tables created by another process show up without a restart."""
        if self._chunks is None or self._documents is None:
            due = self._last_open_attempt + self.settings.index_read_consistency_s
            if time.monotonic() >= due:
                self._open_tables()
        return self._documents, self._chunks

    @staticmethod
    def _read_stamp(meta: Table) -> ModelStamp | None:
        rows = _key_values(meta)
        if "model" not in rows or "dim" not in rows:
            return None
        return ModelStamp(model=str(rows["model"]), dim=int(rows["dim"]))

    @staticmethod
    def _upgrade_chunks(chunks: Table) -> None:
        """Give a chunks table from an older release the columns this one reads.

        Two commits, each safe to interrupt: adding the columns (NULL in old rows), then one
        merge that fills the metadata columns of every row still NULL, derived from the
        `metadata` text those rows carry. Run again on the next open, it finishes whatever a
        crash left. Costs one pass over `chunk_id` and `metadata`, only while rows are unfilled.
        """
        names = set(chunks.schema.names)
        missing = [field for field in ADDED_CHUNK_FIELDS if field.name not in names]
        if missing:
            chunks.add_columns(missing)
        unfilled = (
            chunks.search()
            .where(f"{META_JSON} IS NULL")
            .select(["chunk_id", "metadata"])
            .limit(None)
            .to_arrow()
        )
        if not unfilled.num_rows:
            return
        derived = [
            metadata_columns(_load_metadata(text)) for text in unfilled["metadata"].to_pylist()
        ]
        update = pa.table(
            {
                "chunk_id": unfilled["chunk_id"],
                META_JSON: pa.array([d[0] for d in derived], type=pa.json_(pa.utf8())),
                META_LIST: pa.array([d[1] for d in derived], type=pa.list_(pa.string())),
            }
        )
        chunks.merge_insert("chunk_id").when_matched_update_all().execute(update)
        log.warning(
            "added the metadata filter columns to an older chunks table",
            extra={"fields": {"rows": unfilled.num_rows}},
        )

    @staticmethod
    def _ensure_chunk_indexes(chunks: Table) -> None:
        present = {tuple(index.columns) for index in chunks.list_indices()}
        if ("content",) not in present:
            chunks.create_index("content", config=FTS_CONFIG)
        if ("doc_id",) not in present:
            chunks.create_index("doc_id", config=BTree())

    def _ensure_tables(self, model: str, dim: int) -> tuple[Table, Table]:
        """Create what is missing for a store of `model`/`dim`, or refuse another model.

        Order matters for crash safety: `meta` first, so a chunks table never exists
        without the record of which model filled it.
        """
        if self._stamp is None or self._documents is None or self._chunks is None:
            self._open_tables()
        if self._stamp is None:
            stamp = ModelStamp(model=model, dim=dim)
            meta = pa.table(
                {"key": ["model", "dim", "schema"], "value": [model, str(dim), "1"]},
                schema=pa.schema([("key", pa.string()), ("value", pa.string())]),
            )
            self._db.create_table(META, data=meta, exist_ok=True)
            self._stamp = self._read_stamp(self._db.open_table(META)) or stamp
        self._check_model(model, dim)
        if self._documents is None:
            self._documents = self._db.create_table(
                DOCUMENTS, schema=DOCUMENTS_SCHEMA, exist_ok=True
            )
        if self._chunks is None:
            self._chunks = self._db.create_table(CHUNKS, schema=chunks_schema(dim), exist_ok=True)
            self._ensure_chunk_indexes(self._chunks)
        return self._documents, self._chunks

    def _check_model(self, model: str | None, dim: int) -> None:
        stamp = self._stamp
        if stamp is None:
            return
        if dim != stamp.dim or (model is not None and model != stamp.model):
            raise StoreModelMismatch(stamp.model, stamp.dim, model, dim)

    @property
    def stamp(self) -> ModelStamp | None:
        return self._stamp

    def close(self) -> None:
        with self._handles_lock:
            self._documents = None
            self._chunks = None

    def ping(self) -> str:
        names = self._db.list_tables().tables
        return f"ok ({len(names)} tables)"

    # ------------------------------------------------------------------------- reads

    def lookup(self, library: str, source: str) -> DocumentInfo | None:
        documents, _ = self._tables()
        if documents is None:
            return None
        rows = (
            documents.search()
            .where(f"{LIVE_ONLY} AND {key_filter(library, source)}")
            .select(DOCUMENT_INFO_COLUMNS)
            .limit(None)
            .to_arrow()
            .to_pylist()
        )
        if not rows:
            return None
        newest = max(rows, key=lambda r: (r["created_at"], r["doc_id"]))
        return self._document_info(newest)

    @staticmethod
    def _document_info(row: dict[str, Any]) -> DocumentInfo:
        return DocumentInfo(
            doc_id=row["doc_id"],
            source=row["source"],
            title=row["title"],
            library=row["library"],
            content_hash=row["content_hash"],
            created_at=row["created_at"],
            metadata=_load_metadata(row["metadata"]),
            chunk_count=row["chunk_count"],
            file_type=row["file_type"],
            last_modified=row["last_modified"],
        )

    def get(
        self, doc_id: str, chunk_index: int | None = None, context: int = 0
    ) -> GetDocumentResult:
        """The document; with `chunk_index`, only the window of that chunk and `context`
        neighbours on each side (by chunk_index), its Markdown in `content`."""
        documents, chunks = self._tables()
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
            metadata=_load_metadata(row["metadata"]),
            file_type=row["file_type"],
            created_at=row["created_at"],
        )
        if chunk_index is None:
            return result
        window = self._window(chunks, doc_id, chunk_index, context)
        result.content = _window_markdown(row["markdown"], [c.content for c in window])
        result.chunks = window
        return result

    @staticmethod
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
            raise ChunkNotFound(
                doc_id, chunk_index, min(present, default=0), max(present, default=-1)
            )
        return [
            DocumentChunk(
                chunk_index=r["chunk_index"],
                content=r["content"],
                page=r["page"],
                headings=list(r["headings"] or []),
            )
            for r in rows
        ]

    def list_documents(self, library: str | None, limit: int, offset: int) -> ListDocumentsResult:
        """`list_documents_async` for callers without an event loop of their own."""
        return _on_lance_loop(self.list_documents_async(library, limit, offset))

    async def list_documents_async(
        self, library: str | None, limit: int, offset: int
    ) -> ListDocumentsResult:
        documents, _ = self._tables()
        if documents is None:
            return ListDocumentsResult(documents=[], count=0, total=0)
        where = LIVE_ONLY if library is None else f"{LIVE_ONLY} AND {equals('library', library)}"

        async def read(table: AsyncTable, version: int) -> ListDocumentsResult:
            # The sort, offset and limit run inside Lance (a top-k sort): only the page's
            # rows are materialised, however many documents the store holds.
            total = await table.count_rows(where)
            if offset >= total:
                return ListDocumentsResult(documents=[], count=0, total=total)
            query = table.query().where(where).select(DOCUMENT_INFO_COLUMNS)
            page = query.order_by(NEWEST_FIRST).offset(offset).limit(limit)
            rows = (await page.to_arrow()).to_pylist()
            infos = [self._document_info(row) for row in rows]
            return ListDocumentsResult(documents=infos, count=len(infos), total=total)

        return await self._stable(documents, read)

    def list_libraries(self) -> ListLibrariesResult:
        documents, _ = self._tables()
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

    def info(self) -> IndexInfo:
        documents, chunks = self._tables()
        stamp = self._stamp
        return IndexInfo(
            uri=self.uri,
            model=stamp.model if stamp else None,
            dim=stamp.dim if stamp else None,
            documents=documents.count_rows(LIVE_ONLY) if documents is not None else 0,
            chunks=chunks.count_rows() if chunks is not None else 0,
        )

    # ------------------------------------------------------------------------ search

    def search(self, request: IndexSearchRequest) -> SearchResult:
        """`search_async` for callers without an event loop of their own."""
        return _on_lance_loop(self.search_async(request))

    async def search_async(self, request: IndexSearchRequest) -> SearchResult:
        """Hybrid, vector or BM25 search. Any event loop may await it: LanceDB's async API
        works from any loop, and nothing here blocks it but a filter's compilation and the
        fusion of at most a few hundred candidates (and, while the store is still empty,
        a look for tables another process created)."""
        text = request.query.strip()
        mode = request.mode
        if mode in ("hybrid", "vector") and not request.vector_b64:
            raise InvalidInputError(
                f"search mode {mode!r} needs vector_b64 (the embedded query); "
                "use mode 'bm25' for a keyword-only search"
            )
        if mode == "bm25" and not text:
            raise InvalidInputError("search mode 'bm25' needs query text")
        where = compile_filter(request.filter, library=request.library)
        _, chunks = self._tables()
        if chunks is None:
            return SearchResult(results=[])
        vector = self._query_vector(request.vector_b64) if mode != "bm25" else None
        top_k, per_document = request.top_k, request.max_per_document
        depth_start = max(
            self.settings.index_candidates_min,
            self.settings.index_candidates_per_result * top_k,
        )
        # The legs read row ids and scores, plus doc_id when results are capped per
        # document; the columns a hit shows are read afterwards for the picked rows alone.
        rank_columns = ["doc_id"] if per_document is not None else []

        async def read(table: AsyncTable, version: int) -> list[tuple[dict[str, Any], float]]:
            nprobes = await self._nprobes(table, version, where) if vector is not None else 0
            depth = depth_start
            while True:
                legs: list[Awaitable[list[dict[str, Any]]]] = []
                if mode != "vector" and text:
                    legs.append(_fts_leg(table, text, where, depth, rank_columns))
                if vector is not None:
                    legs.append(
                        _vector_leg(
                            table,
                            vector,
                            where,
                            depth,
                            rank_columns,
                            nprobes,
                            self.settings.index_vector_refine_factor,
                        )
                    )
                # Lance runs the two legs side by side on its own threads.
                ranked_legs = list(await asyncio.gather(*legs))
                # Hybrid fuses the two legs; the other modes run exactly one leg.
                ranked = (
                    self._fuse(ranked_legs) if mode == "hybrid" else self._leg_ranking(ranked_legs)
                )
                picked = _cap_per_document(ranked, top_k, per_document)
                exhausted = all(len(leg) < depth for leg in ranked_legs)
                if len(picked) >= top_k or exhausted or depth >= _MAX_CANDIDATES:
                    return await self._materialize(table, picked)
                depth = min(depth * _DEEPEN_FACTOR, _MAX_CANDIDATES)

        # Legs, fusion and the read of the picked rows see one table version: row ids are
        # only meaningful within it.
        picked = await self._stable(chunks, read)
        self._fill_token_counts([row for row, _ in picked])
        return _within_budget([self._hit(row, score) for row, score in picked], request.max_tokens)

    async def _stable(self, table: Table, read: Callable[[AsyncTable, int], Awaitable[T]]) -> T:
        """Run `read` (several queries, through LanceDB's async API, given the version it runs
        against) so that all of them see one version of `table`. Awaited on the caller's loop,
        a read costs no hand-over to a worker thread and back for each query (on 2 cores each
        is a wake-up that costs more than planning the query it carries). After
        `_READ_ATTEMPTS` writes landing in the middle, the read waits for the write lock in a
        worker thread, not on the loop."""
        handle = _async_handle(table)
        for _ in range(_READ_ATTEMPTS):
            before = await handle.version()
            try:
                result = await read(handle, before)
            except Exception:
                if await handle.version() == before:
                    raise
                continue  # a write landed in the middle: the row ids read are void
            if await handle.version() == before:
                return result

        async def current() -> T:
            return await read(handle, await handle.version())

        def locked() -> T:
            with self._write_lock:
                return _on_lance_loop(current())

        return await anyio.to_thread.run_sync(locked)

    async def _materialize(
        self, table: AsyncTable, picked: list[tuple[dict[str, Any], float]]
    ) -> list[tuple[dict[str, Any], float]]:
        """The picked candidates with every column a hit shows, in the same order. Document
        columns come from the per-doc_id cache; only documents not in it are read."""
        if not picked:
            return []
        take = table.take_row_ids([row["_rowid"] for row, _ in picked])
        rows = (await take.select(HIT_CHUNK_COLUMNS).with_row_id().to_arrow()).to_pylist()
        documents = self._cached_documents({row["doc_id"] for row in rows})
        first_of: dict[str, int] = {}
        for row in rows:
            if row["doc_id"] not in documents:
                first_of.setdefault(row["doc_id"], row["_rowid"])
        if first_of:
            take = table.take_row_ids(list(first_of.values()))
            fetched = await take.select(["doc_id", *HIT_DOCUMENT_COLUMNS]).to_arrow()
            documents.update(self._remember_documents(fetched.to_pylist()))
        by_id = {}
        for row in rows:
            document = documents.get(row["doc_id"])
            if document is None:  # the table moved between the two reads: read again
                continue
            row.update(document)
            by_id[row.pop("_rowid")] = row
        return [(by_id[r["_rowid"]], score) for r, score in picked if r["_rowid"] in by_id]

    def _cached_documents(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The cached document columns of those of `doc_ids` that are cached."""
        found: dict[str, dict[str, Any]] = {}
        with self._hit_documents_lock:
            for doc_id in doc_ids:
                entry = self._hit_documents.get(doc_id)
                if entry is not None:
                    self._hit_documents.move_to_end(doc_id)
                    found[doc_id] = entry
        return found

    def _remember_documents(self, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        entries = {row["doc_id"]: {c: row[c] for c in HIT_DOCUMENT_COLUMNS} for row in rows}
        with self._hit_documents_lock:
            for doc_id, entry in entries.items():
                self._hit_documents[doc_id] = entry
                self._hit_documents.move_to_end(doc_id)
            while len(self._hit_documents) > _DOCUMENT_CACHE_SIZE:
                self._hit_documents.popitem(last=False)
        return entries

    def _fill_token_counts(self, rows: list[dict[str, Any]]) -> None:
        """Count the rows stored before token counts were kept (NULL)."""
        missing = [row for row in rows if row.get("token_count") is None]
        counts = self._tokens.count([row["content"] for row in missing])
        for row, count in zip(missing, counts, strict=True):
            row["token_count"] = count

    @staticmethod
    def _leg_ranking(legs: list[list[dict[str, Any]]]) -> list[tuple[dict[str, Any], float]]:
        return [(row, row["_leg_score"]) for leg in legs for row in leg]

    def _query_vector(self, data: str | None) -> Matrix:
        try:
            raw = base64.b64decode((data or "").encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError) as exc:
            raise InvalidInputError(f"vector_b64 is not base64 float32 data: {exc}") from exc
        if not raw or len(raw) % 4:
            raise InvalidInputError(f"vector_b64 holds {len(raw)} bytes, not float32 values")
        stamp = self._stamp
        if stamp is not None and len(raw) != 4 * stamp.dim:
            raise StoreModelMismatch(stamp.model, stamp.dim, None, len(raw) // 4)
        vector = np.frombuffer(raw, dtype="<f4").astype(np.float32).reshape(1, -1)
        if not np.isfinite(vector).all():
            raise InvalidInputError("the query vector contains NaN or infinite values")
        return vector

    async def _nprobes(self, table: AsyncTable, version: int, where: str | None) -> int:
        """IVF partitions to probe, 0 while vector search is exact. More when a filter keeps
        few rows, since the nearest allowed rows may then sit in partitions the default
        probes miss."""
        partitions = self._vector_partitions
        if not partitions:
            return 0
        nprobes = self.settings.index_vector_nprobes
        if where:
            nprobes = math.ceil(nprobes / await self._selectivity(table, version, where))
        return min(nprobes, partitions)

    async def _selectivity(self, table: AsyncTable, version: int, where: str) -> float:
        """Share of rows a filter keeps, counted once per table version and filter."""
        key = (version, where)
        share = self._selectivity_cache.get(key)
        if share is None:
            total = max(await table.count_rows(), 1)
            share = max(await table.count_rows(where), 1) / total
            if len(self._selectivity_cache) >= 256:
                self._selectivity_cache.clear()
            self._selectivity_cache[key] = share
        return share

    @property
    def _vector_partitions(self) -> int:
        """IVF partitions of the vector index, 0 while vector search is exact."""
        return self._ivf_partitions

    def _maybe_build_vector_index(self, chunks: Table) -> None:
        """Past `index_vector_index_min_rows`, build the IVF-SQ index with about sqrt(rows)
        partitions; `optimize` then folds new rows into it incrementally (rows not yet folded
        are searched exactly). Folding keeps the partitions trained on the rows of the build,
        so they fill up as the table grows: once sqrt(rows) reaches twice their number, the
        index is built again (at 10k rows and then 40k, 160k, 640k...), and a probe keeps
        reading between about sqrt(rows) and 2 * sqrt(rows) rows."""
        rows = chunks.count_rows()
        if rows < self.settings.index_vector_index_min_rows:
            return
        partitions = max(16, int(math.sqrt(rows)))
        if self._ivf_partitions and partitions < 2 * self._ivf_partitions:
            return
        started = time.perf_counter()
        chunks.create_index(
            "vector", config=IvfSq(distance_type="cosine", num_partitions=partitions)
        )
        before, self._ivf_partitions = self._ivf_partitions, partitions
        self._record_meta(IVF_PARTITIONS_KEY, str(partitions))
        log.info(
            "rebuilt the approximate vector index"
            if before
            else "built the approximate vector index",
            extra={
                "fields": {
                    "rows": rows,
                    "partitions": partitions,
                    "previous_partitions": before,
                    "seconds": round(time.perf_counter() - started, 2),
                }
            },
        )

    def _prewarm(self, chunks: Table) -> None:
        """Load the search indexes into Lance's cache when they fit in half of it, so the
        first searches after a start or an optimize do not read them piece by piece."""
        try:
            indexes = [i for i in chunks.list_indices() if i.index_type in ("FTS", "IvfSq")]
            size = sum(int(getattr(i, "size_bytes", 0) or 0) for i in indexes)
            if size > self.settings.index_cache_mb * 1024 * 1024 // 2:
                return
            prewarm: Callable[[str], None] | None = getattr(chunks, "prewarm_index", None)
            if prewarm is None:  # local tables have it
                return
            for index in indexes:
                prewarm(index.name)
        except Exception:
            log.warning("could not prewarm the search indexes", exc_info=True)

    def _read_vector_index(self, chunks: Table) -> None:
        """The partitions of an existing vector index, as recorded in `meta` when it was
        built (Lance's index statistics do not tell); an index from a release that did not
        record them is taken to have about sqrt(rows)."""
        for index in chunks.list_indices():
            if tuple(index.columns) == ("vector",):
                recorded = self._meta().get(IVF_PARTITIONS_KEY)
                self._ivf_partitions = (
                    int(recorded) if recorded else max(16, int(math.sqrt(chunks.count_rows())))
                )
                return

    def _meta(self) -> dict[str, str]:
        return _key_values(self._db.open_table(META))

    def _record_meta(self, key: str, value: str) -> None:
        row = pa.table(
            {"key": [key], "value": [value]},
            schema=pa.schema([("key", pa.string()), ("value", pa.string())]),
        )
        meta = self._db.open_table(META)
        meta.merge_insert("key").when_matched_update_all().when_not_matched_insert_all().execute(
            row
        )

    def _fuse(self, legs: list[list[dict[str, Any]]]) -> list[tuple[dict[str, Any], float]]:
        """Reciprocal rank fusion: each leg adds 1 / (k + rank) for every row it found;
        every candidate, best first (ties by row id, so one version always gives one order)."""
        k = self.settings.index_rrf_k
        scores: dict[int, float] = {}
        rows: dict[int, dict[str, Any]] = {}
        for leg in legs:
            for rank, row in enumerate(leg, start=1):
                row_id = row["_rowid"]
                scores[row_id] = scores.get(row_id, 0.0) + 1.0 / (k + rank)
                rows.setdefault(row_id, row)
        best = sorted(scores, key=lambda r: (-scores[r], r))
        return [(rows[r], scores[r]) for r in best]

    @staticmethod
    def _hit(row: dict[str, Any], score: float) -> SearchHit:
        return SearchHit(
            doc_id=row["doc_id"],
            source=row["source"],
            title=row["title"],
            library=row["library"],
            file_type=row["file_type"],
            last_modified=row["last_modified"],
            page=row["page"],
            content=row["content"],
            chunk_index=row["chunk_index"],
            metadata=_load_metadata(row["metadata"]),
            score=score,
            headings=list(row["headings"] or []),
            token_count=row["token_count"],
        )

    # ------------------------------------------------------------------------ writes

    def upsert(self, request: UpsertRequest) -> UpsertResponse:
        """Replace the document at (library, source) with this version, atomically. The
        request's contract has checked its chunks, identity, model and vectors."""
        document = request.document
        vectors = request.vectors()
        metadata = _dump_metadata(document.metadata)

        with self._write_lock:
            self._check_model(request.model, request.dim)
            documents, chunks = self._ensure_tables(request.model, request.dim)
            self._finish_unpublished(documents, chunks)
            states = self._key_states(documents, document.library, document.source)
            replaced = LIVE in states
            doc_id = str(uuid.uuid4())
            row = self.document_row(request, doc_id, metadata)
            self.stage(row)
            rows = self.chunk_rows(request, doc_id, metadata, vectors)
            try:
                self.swap_chunks(document.library, document.source, rows, replacing=bool(states))
            except Exception as exc:
                self._discard(documents, doc_id)
                raise WriteFailed(
                    f"could not write the chunks of {document.source!r}: {exc}; "
                    "the previous version (if any) is unchanged, try again"
                ) from exc
            self._publish_or_defer(row)
            self._note_write()
        return UpsertResponse(
            status="replaced" if replaced else "indexed",
            doc_id=doc_id,
            chunk_count=len(request.chunks),
        )

    def document_row(self, request: UpsertRequest, doc_id: str, metadata: str) -> pa.Table:
        document = request.document
        return pa.Table.from_pylist(
            [
                {
                    "doc_id": doc_id,
                    "source": document.source,
                    "library": document.library,
                    "title": document.title,
                    "file_type": document.file_type,
                    "content_hash": document.content_hash,
                    "created_at": utc_now(),
                    "last_modified": document.last_modified,
                    "metadata": metadata,
                    "chunk_count": len(request.chunks),
                    "markdown": document.markdown,
                    "state": PENDING,
                }
            ],
            schema=DOCUMENTS_SCHEMA,
        )

    def chunk_rows(
        self, request: UpsertRequest, doc_id: str, metadata: str, vectors: Matrix
    ) -> pa.Table:
        document = request.document
        n = len(request.chunks)
        dim = vectors.shape[1]
        meta_json, meta_list = metadata_columns(document.metadata)
        counts = [c.token_count for c in request.chunks]
        uncounted = [i for i, count in enumerate(counts) if count <= 0]
        for i, count in zip(
            uncounted, self._tokens.count([request.chunks[i].text for i in uncounted]), strict=True
        ):
            counts[i] = count
        columns: dict[str, Any] = {
            # Position, not chunk_index, keys the row: ids stay unique whatever the chunker sent.
            "chunk_id": [f"{doc_id}:{i}" for i in range(n)],
            "doc_id": [doc_id] * n,
            "source": [document.source] * n,
            "library": [document.library] * n,
            "title": [document.title] * n,
            "file_type": [document.file_type] * n,
            "last_modified": [document.last_modified] * n,
            "page": [c.page for c in request.chunks],
            "chunk_index": [c.chunk_index for c in request.chunks],
            "content": [c.text for c in request.chunks],
            "headings": [list(c.headings) for c in request.chunks],
            "metadata": [metadata] * n,
            "vector": pa.FixedSizeListArray.from_arrays(
                pa.array(np.ascontiguousarray(vectors, dtype=np.float32).ravel()), dim
            ),
            "token_count": counts,
            META_JSON: pa.array([meta_json] * n, type=pa.json_(pa.utf8())),
            META_LIST: [meta_list] * n,
        }
        return pa.table(columns, schema=chunks_schema(dim))

    @staticmethod
    def _key_states(documents: Table, library: str, source: str) -> set[str]:
        """The states of every documents row of (library, source): empty for a new one."""
        rows = documents.search().where(key_filter(library, source)).select(["state"])
        return set(rows.limit(None).to_arrow()["state"].to_pylist())

    def stage(self, row: pa.Table) -> None:
        """Step 1: the new version's documents row, invisible while 'pending'."""
        documents, _ = self._require_tables()
        documents.add(row)

    def swap_chunks(
        self, library: str, source: str, rows: pa.Table, *, replacing: bool = True
    ) -> None:
        """Step 2, one commit: the new chunks in, every other chunk of (library, source) out.

        With `replacing` False, (library, source) has no documents row and so no chunks
        (chunks are written after their row and deleted before it): a plain append does,
        instead of a merge whose "not matched by source" clause scans the whole table."""
        _, chunks = self._require_tables()
        if not replacing:
            chunks.add(rows)
            return
        (
            chunks.merge_insert("chunk_id")
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(key_filter(library, source))
            .execute(rows)
        )

    def publish(self, row: pa.Table) -> None:
        """Step 3, one commit: this row 'live', every other row of (library, source) gone.

        Idempotent: inserting when the pending row is missing keeps the chunks reachable.
        """
        documents, _ = self._require_tables()
        live = row.set_column(
            row.schema.get_field_index("state"), "state", pa.array([LIVE] * row.num_rows)
        )
        library, source = live["library"][0].as_py(), live["source"][0].as_py()
        (
            documents.merge_insert("doc_id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(key_filter(library, source))
            .execute(live)
        )

    def _publish_or_defer(self, row: pa.Table) -> None:
        doc_id = row["doc_id"][0].as_py()
        try:
            self.publish(row)
        except Exception as exc:
            # The chunks are already the new version; finish on the next write or restart.
            self._unpublished.add(doc_id)
            log.exception("publishing a document failed", extra={"fields": {"doc_id": doc_id}})
            raise WriteFailed(
                f"the new version of {row['source'][0].as_py()!r} was stored but not yet "
                f"listed ({exc}); it is completed on the next write or restart"
            ) from exc

    def _finish_unpublished(self, documents: Table, chunks: Table) -> None:
        for doc_id in sorted(self._unpublished):
            pending = self._pending_row(documents, doc_id)
            if pending is not None and chunks.count_rows(equals("doc_id", doc_id)):
                self.publish(pending)
            self._unpublished.discard(doc_id)

    @staticmethod
    def _pending_row(documents: Table, doc_id: str) -> pa.Table | None:
        where = f"{equals('doc_id', doc_id)} AND {equals('state', PENDING)}"
        row = documents.search().where(where).limit(None).to_arrow()
        return row.select(DOCUMENTS_SCHEMA.names).cast(DOCUMENTS_SCHEMA) if row.num_rows else None

    @staticmethod
    def _discard(documents: Table, doc_id: str) -> None:
        try:
            documents.delete(f"{equals('doc_id', doc_id)} AND {equals('state', PENDING)}")
        except Exception:
            # Harmless if it stays: pending rows are invisible and reconcile removes them.
            log.exception("could not remove a pending row", extra={"fields": {"doc_id": doc_id}})

    def _require_tables(self) -> tuple[Table, Table]:
        documents, chunks = self._documents, self._chunks
        if documents is None or chunks is None:
            raise MvdbError("the index tables do not exist yet; the first upsert creates them")
        return documents, chunks

    def delete(self, doc_id: str) -> DeleteResult:
        """Chunks first, then the row: a crash in between leaves a document without chunks,
        which is invisible to search and removed by `reconcile`."""
        with self._write_lock:
            documents, chunks = self._tables()
            if documents is None or not documents.count_rows(
                f"{LIVE_ONLY} AND {equals('doc_id', doc_id)}"
            ):
                raise DocumentNotFound(doc_id)
            deleted = 0
            if chunks is not None:
                deleted = chunks.count_rows(equals("doc_id", doc_id))
                chunks.delete(equals("doc_id", doc_id))
            documents.delete(equals("doc_id", doc_id))
            with self._hit_documents_lock:
                self._hit_documents.pop(doc_id, None)
            self._note_write()
        return DeleteResult(doc_id=doc_id, deleted_chunks=deleted)

    # -------------------------------------------------------------------- recovery

    def reconcile(self) -> ReconcileReport:
        """Bring the tables back to a consistent state after a crash (see module doc)."""
        with self._write_lock:
            documents, chunks = self._documents, self._chunks
            if documents is None:
                return ReconcileReport()
            with_chunks = self._chunk_doc_ids(chunks)
            rows = documents.search().select(["doc_id", "state"]).limit(None).to_arrow()
            pending = [r["doc_id"] for r in rows.to_pylist() if r["state"] == PENDING]
            published = 0
            for doc_id in pending:
                if doc_id in with_chunks:
                    row = self._pending_row(documents, doc_id)
                    if row is not None:
                        self.publish(row)
                        published += 1
            discard = [d for d in pending if d not in with_chunks]
            if discard:
                documents.delete(f"{equals('state', PENDING)} AND {in_list('doc_id', discard)}")
            live = documents.search().where(LIVE_ONLY).select(["doc_id"]).limit(None).to_arrow()
            live_ids = set(live["doc_id"].to_pylist())
            empty = sorted(live_ids - with_chunks)
            if empty:
                documents.delete(in_list("doc_id", empty))
            orphans = sorted(with_chunks - live_ids)
            if orphans and chunks is not None:
                chunks.delete(in_list("doc_id", orphans))
            report = ReconcileReport(
                published=published,
                discarded_pending=len(discard),
                dropped_empty_documents=len(empty),
                dropped_orphan_chunks=len(orphans),
            )
        if report.changed:
            fields = dataclasses.asdict(report)
            log.warning("reconciled the index after an interrupted write", extra={"fields": fields})
        return report

    @staticmethod
    def _chunk_doc_ids(chunks: Table | None) -> set[str]:
        if chunks is None:
            return set()
        column = chunks.search().select(["doc_id"]).limit(None).to_arrow()["doc_id"]
        return {str(v) for v in pc.unique(column).to_pylist()}

    # ------------------------------------------------------------------ maintenance

    def _note_write(self) -> None:
        self._writes_since_optimize += 1
        if self._dirty_since is None:
            self._dirty_since = time.monotonic()

    def optimize_due(self) -> bool:
        if self._dirty_since is None:
            return False
        if self._writes_since_optimize >= self.settings.index_optimize_every_writes:
            return True
        return time.monotonic() - self._dirty_since >= self.settings.index_optimize_interval_s

    def optimize(self) -> None:
        """Compact small files and fold new rows into the indexes, incrementally."""
        retention = timedelta(seconds=self.settings.index_version_retention_s)
        with self._write_lock:
            started = time.perf_counter()
            for table in (self._documents, self._chunks):
                if table is not None:
                    table.optimize(cleanup_older_than=retention)
            if self._chunks is not None:
                self._maybe_build_vector_index(self._chunks)
                self._prewarm(self._chunks)
            self._writes_since_optimize = 0
            self._dirty_since = None
        log.info(
            "optimized the index", extra={"fields": {"seconds": time.perf_counter() - started}}
        )
