"""Rows in and out of the tables: the Arrow rows a write adds, built from an `UpsertRequest`,
and the contract objects a read returns, built from the rows it selected."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from libs.contracts import DocumentChunk, DocumentInfo, SearchHit, UpsertRequest
from libs.errors import InvalidInputError
from libs.modelfiles import count_tokens
from libs.vectors import Matrix
from services.index.filters import META_JSON, META_LIST, ZERO_AS_NULL, metadata_columns
from services.index.store import cjk
from services.index.store.schema import CJK_TERMS, DOCUMENTS_SCHEMA, PENDING, chunks_schema


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def dump_metadata(metadata: dict[str, Any]) -> str:
    try:
        return json.dumps(metadata, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f"metadata must be plain JSON (objects, lists, text, numbers): {exc}"
        ) from exc


def load_metadata(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    value = json.loads(text)
    return value if isinstance(value, dict) else {}


def document_row(request: UpsertRequest, doc_id: str, metadata: str) -> pa.Table:
    """The new version's `documents` row, 'pending' until it is published."""
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
                "conversion": document.conversion,
            }
        ],
        schema=DOCUMENTS_SCHEMA,
    )


def chunk_rows(request: UpsertRequest, doc_id: str, metadata: str, vectors: Matrix) -> pa.Table:
    """The new version's `chunks` rows, with the document fields a search shows and filters."""
    document = request.document
    n = len(request.chunks)
    dim = vectors.shape[1]
    meta_json, meta_list = metadata_columns(document.metadata)
    counts = [c.token_count for c in request.chunks]
    # The converter counts every chunk; a caller that sent none gets the same measure here.
    uncounted = [i for i, count in enumerate(counts) if count <= 0]
    for i, count in zip(
        uncounted, count_tokens([request.chunks[i].text for i in uncounted]), strict=True
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
        "start_line": [c.start_line for c in request.chunks],
        "end_line": [c.end_line for c in request.chunks],
        CJK_TERMS: [cjk.index_terms(c.text) for c in request.chunks],
        META_JSON: pa.array([meta_json] * n, type=pa.json_(pa.utf8())),
        META_LIST: [meta_list] * n,
    }
    for column in ZERO_AS_NULL:  # no page, no known line: NULL, not 0
        columns[column] = [value or None for value in columns[column]]
    return pa.table(columns, schema=chunks_schema(dim))


def document_info(row: dict[str, Any]) -> DocumentInfo:
    return DocumentInfo(
        doc_id=row["doc_id"],
        source=row["source"],
        title=row["title"],
        library=row["library"],
        content_hash=row["content_hash"],
        created_at=row["created_at"],
        metadata=load_metadata(row["metadata"]),
        chunk_count=row["chunk_count"],
        file_type=row["file_type"],
        last_modified=row["last_modified"],
    )


def document_chunk(row: dict[str, Any]) -> DocumentChunk:
    return DocumentChunk(
        chunk_index=row["chunk_index"],
        content=row["content"],
        page=row["page"] or 0,
        headings=list(row["headings"] or []),
        start_line=row["start_line"] or 0,
        end_line=row["end_line"] or 0,
    )


def search_hit(row: dict[str, Any], score: float) -> SearchHit:
    return SearchHit(
        doc_id=row["doc_id"],
        source=row["source"],
        title=row["title"],
        library=row["library"],
        file_type=row["file_type"],
        last_modified=row["last_modified"],
        page=row["page"] or 0,
        content=row["content"],
        chunk_index=row["chunk_index"],
        metadata=load_metadata(row["metadata"]),
        score=score,
        headings=list(row["headings"] or []),
        token_count=row["token_count"],
        similarity=row.get("_similarity"),
        start_line=row["start_line"] or 0,
        end_line=row["end_line"] or 0,
    )
