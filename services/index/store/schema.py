"""The index's LanceDB tables: their names and Arrow schemas, the columns each read selects,
and the SQL that picks out a document's rows.

- `documents`: one row per document version, `state` 'pending' (being written, invisible to
  list/get/lookup) or 'live'. Holds the Markdown exactly as converted, and the converter
  revision that made it (`conversion`; a table from before it gets the column on open,
  `tables.upgrade_documents`).
- `chunks`: the searchable pieces with their vectors, full-text indexed on `content`; each row
  repeats the document fields that search results and filters need, so a search never joins:
  besides the metadata as JSON text, `meta_json` and `meta_list` hold it in the shapes that
  metadata filters read (see `services.index.filters`), and `token_count` the chunk's length
  in model tokens. A chunks table from before those columns gets them on open
  (`tables.upgrade_chunks`).
- `meta`: the embedding model and dimension the store was built with, and what the store
  records about its vector index (see `meta`).
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
from lancedb.index import FTS
from lancedb.query import ColumnOrdering

from services.index.filters import META_JSON, META_LIST, equals, quote

DOCUMENTS = "documents"
CHUNKS = "chunks"
META = "meta"
JOBS = "jobs"
PENDING = "pending"
LIVE = "live"
LIVE_ONLY = equals("state", LIVE)

# Columns added after the first release, last in the schema: `add_columns` appends, so new
# and upgraded tables keep one column order; NULL in the rows of an older table.
ADDED_DOCUMENT_FIELDS = [
    # The converter revision that made the row's Markdown (`libs.formats`); NULL: unknown.
    pa.field("conversion", pa.int32()),
]

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
        *ADDED_DOCUMENT_FIELDS,
    ]
)

META_SCHEMA = pa.schema([("key", pa.string()), ("value", pa.string())])

CJK_TERMS = "cjk_terms"
# The same for chunks, NULL in the rows of an older table until `tables.upgrade_chunks`
# fills them.
ADDED_CHUNK_FIELDS = [
    pa.field("token_count", pa.int32()),
    pa.field(META_JSON, pa.json_(pa.utf8())),
    pa.field(META_LIST, pa.list_(pa.string())),
    # The chunk's first and last line in the Markdown; NULL where unknown (rows from before
    # 0.6.0), stored as 0 until 0.8.13 (`filters.ZERO_AS_NULL`).
    pa.field("start_line", pa.int32()),
    pa.field("end_line", pa.int32()),
    # The chunk's Chinese, Japanese and Korean text as the terms of its own full-text index
    # (`cjk`); "" without any. Added to an older table by an expression, not as NULL.
    pa.field(CJK_TERMS, pa.string()),
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

# list_sources: a library's manifest, by source (its keyset).
SOURCE_COLUMNS = [
    "source",
    "doc_id",
    "content_hash",
    "chunk_count",
    "file_type",
    "last_modified",
    "conversion",
]
BY_SOURCE = [ColumnOrdering(column_name="source", ascending=True)]

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
    "start_line",
    "end_line",
]

# The document-level columns of a hit. A doc_id names one version of one document and its
# row never changes (a replace writes a new doc_id), so they are kept per doc_id in memory
# and a search reads only the chunk's own columns for documents it has seen before.
HIT_DOCUMENT_COLUMNS = ["source", "title", "library", "file_type", "last_modified", "metadata"]
# What an entry of that memory is read with, wherever it comes from (the documents table, a
# chunk row, a write).
HIT_DOCUMENT_ENTRY = ["doc_id", *HIT_DOCUMENT_COLUMNS]
HIT_CHUNK_COLUMNS = [c for c in HIT_COLUMNS if c not in HIT_DOCUMENT_COLUMNS]

WINDOW_COLUMNS = ["chunk_index", "content", "page", "headings", "start_line", "end_line"]

FTS_CONFIG = FTS(
    with_position=False,
    base_tokenizer="simple",
    language="English",
    stem=True,
    remove_stop_words=True,
    lower_case=True,
    ascii_folding=True,
)
# `cjk_terms` is already cut into terms, separated by spaces.
CJK_FTS_CONFIG = FTS(
    with_position=False,
    base_tokenizer="whitespace",
    stem=False,
    remove_stop_words=False,
    lower_case=False,
    ascii_folding=False,
)
# The columns with a full-text index.
FTS_COLUMNS = ("content", CJK_TERMS)


def key_filter(library: str, source: str) -> str:
    """The rows of one document identity, every version of it."""
    return f"{equals('library', library)} AND {equals('source', source)}"


def in_list(column: str, values: Iterable[str]) -> str:
    return f"{column} IN ({', '.join(quote(v) for v in values)})"
