"""Shared pieces of the index tests: the stand-in model, deterministic unit vectors, the
one builder of `UpsertRequest`s every index test module uses, the settings of a store in a
test's folder (`settings_for`), a keyword search (`bm25`), the real index app driven by its
typed client (`index_app`), a store as an older release wrote it (`write_old_store`), and the
wait for a reader (or a writer's look) to catch up (`until`)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import BTree

from libs.clients import IndexClient
from libs.contracts import Chunk, IndexSearchRequest, NewDocument, UpsertRequest
from libs.formats import CONVERTER_REVISION
from libs.http import RetryPolicy
from libs.vectors import Matrix, encode
from services.index.app import create_app
from services.index.core import IndexCore
from services.index.settings import IndexSettings
from services.index.store import IndexStore
from services.index.store.schema import (
    ADDED_CHUNK_FIELDS,
    ADDED_DOCUMENT_FIELDS,
    DOCUMENTS_SCHEMA,
    FTS_CONFIG,
    chunks_schema,
)

DIM = 384
MODEL = "test/minilm"


def unit_vectors(n: int, seed: int) -> Matrix:
    vectors = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    normalised: Matrix = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return normalised


def upsert_request(
    source: str,
    texts: list[str],
    *,
    library: str = "default",
    seed: int = 0,
    vectors: Matrix | None = None,
    title: str | None = None,
    file_type: str = "md",
    last_modified: str = "2025-06-01T09:00:00+00:00",
    metadata: dict[str, Any] | None = None,
    markdown: str | None = None,
    pages: list[int] | None = None,
    headings: list[str] | None = None,
    token_counts: list[int] | None = None,
    model: str = MODEL,
    dim: int | None = None,
    conversion: int = CONVERTER_REVISION,
) -> UpsertRequest:
    """A document of one chunk per text, as the gateway would send it.

    Vectors are `unit_vectors(len(texts), seed)` unless given; the title is "Title of
    <source>", the Markdown the texts joined by blank lines, and each chunk's heading path
    ["Top", "Part <i>"] unless given. Token counts default to 0, which the index counts itself.
    """
    if vectors is None:
        vectors = unit_vectors(len(texts), seed)
    return UpsertRequest(
        document=NewDocument(
            source=source,
            library=library,
            title=title if title is not None else f"Title of {source}",
            file_type=file_type,
            content_hash=f"hash-{seed}",
            last_modified=last_modified,
            metadata=metadata or {},
            markdown=markdown if markdown is not None else "\n\n".join(texts),
            conversion=conversion,
        ),
        chunks=[
            Chunk(
                chunk_index=i,
                text=text,
                page=pages[i] if pages else 0,
                headings=list(headings) if headings is not None else ["Top", f"Part {i}"],
                token_count=token_counts[i] if token_counts else 0,
            )
            for i, text in enumerate(texts)
        ],
        model=model,
        dim=dim if dim is not None else int(vectors.shape[1]),
        vectors_b64=encode(vectors),
    )


def settings_for(path: Path, **overrides: Any) -> IndexSettings:
    """An index on a store in the folder `path` (a test's tmp_path)."""
    return IndexSettings(lancedb_uri=str(path / "lancedb"), **overrides)


def opened_store(core: IndexCore) -> IndexStore:
    store = core.store
    assert store is not None
    return store


def bm25(query: str, **kwargs: Any) -> IndexSearchRequest:
    return IndexSearchRequest(query=query, mode="bm25", **kwargs)


@asynccontextmanager
async def index_app(settings: IndexSettings) -> AsyncIterator[IndexClient]:
    """The real index app with its lifespan (its own state, on `settings`' store), and the
    typed client to it in-process, with no retries: what a test sees is the first answer."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        index = IndexClient(
            "http://index", transport=httpx.ASGITransport(app=app), policy=RetryPolicy(attempts=1)
        )
        try:
            yield index
        finally:
            await index.aclose()


# ------------------------------------------------------------- stores from before 0.5.0

# The chunks columns of 0.4.0: this release's, less those added since.
OLD_CHUNK_FIELDS = [f for f in chunks_schema(DIM) if f not in ADDED_CHUNK_FIELDS]


def write_old_store(uri: str) -> None:
    """A store as 0.4.0 wrote it: no token_count, meta_json or meta_list columns in chunks,
    no conversion column in documents."""
    db = lancedb.connect(uri)
    db.create_table(
        "meta",
        data=pa.table({"key": ["model", "dim", "schema"], "value": [MODEL, str(DIM), "1"]}),
    )
    metadata = json.dumps({"author": "Alice", "tags": ["old"]})
    document = {
        "doc_id": "old-doc",
        "source": "old.md",
        "library": "default",
        "title": "Old",
        "file_type": "md",
        "content_hash": "h",
        "created_at": "2025-01-01T00:00:00+00:00",
        "last_modified": "",
        "metadata": metadata,
        "chunk_count": 2,
        "markdown": "walrus from before\n\nsecond walrus",
        "state": "live",
    }
    old_documents = pa.schema([f for f in DOCUMENTS_SCHEMA if f not in ADDED_DOCUMENT_FIELDS])
    db.create_table("documents", data=pa.Table.from_pylist([document], schema=old_documents))
    vectors = unit_vectors(2, 3)
    chunks = {
        "chunk_id": ["old-doc:0", "old-doc:1"],
        "doc_id": ["old-doc"] * 2,
        "source": ["old.md"] * 2,
        "library": ["default"] * 2,
        "title": ["Old"] * 2,
        "file_type": ["md"] * 2,
        "last_modified": [""] * 2,
        "page": [0, 0],
        "chunk_index": [0, 1],
        "content": ["walrus from before", "second walrus"],
        "headings": [[], []],
        "metadata": [metadata] * 2,
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM),
    }
    table = db.create_table("chunks", data=pa.table(chunks, schema=pa.schema(OLD_CHUNK_FIELDS)))
    table.create_index("content", config=FTS_CONFIG)
    table.create_index("doc_id", config=BTree())


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> float:
    """Seconds until `await check()` is true; fails past `timeout`."""
    started = time.monotonic()
    while not await check():
        assert time.monotonic() - started < timeout, "the reader did not catch up"
        await asyncio.sleep(0.05)
    return time.monotonic() - started
