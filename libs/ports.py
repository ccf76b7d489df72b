"""The ports the ingest pipeline and the MCP tools talk to.

Each has two implementations: the typed HTTP client in `libs.clients` (cluster mode) and the
service core wrapped in-process (stdio transport, CLI without a cluster URL). Callers cannot
tell them apart; tests use both.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Protocol

from libs.contracts import (
    ChunkRequest,
    ConvertResult,
    DeleteResult,
    EmbedKind,
    GetDocumentResult,
    IndexInfo,
    IndexSearchRequest,
    JobRecord,
    ListDocumentsResult,
    ListLibrariesResult,
    LookupResponse,
    ModelInfo,
    PartReceived,
    SearchResult,
    SourceList,
    StoredVectors,
    UpsertPart,
    UpsertRequest,
    UpsertResponse,
)
from libs.vectors import Matrix


class ConverterPort(Protocol):
    """`convert` and `chunk` return at least one chunk, each with its token count; a document
    without indexable text is `NoTextError` (no_text_extracted), never an empty result."""

    async def convert(self, data: bytes, filename: str) -> ConvertResult: ...
    async def chunk(self, request: ChunkRequest) -> ConvertResult: ...
    async def ready(self) -> tuple[bool, str]: ...


class EmbedderPort(Protocol):
    async def info(self) -> ModelInfo: ...
    async def embed(self, texts: list[str], kind: EmbedKind) -> Matrix: ...
    async def ready(self) -> tuple[bool, str]: ...


class IndexPort(Protocol):
    async def lookup(self, library: str, source: str) -> LookupResponse: ...
    async def upsert(self, request: UpsertRequest) -> UpsertResponse: ...
    # A part of a document larger than one write (`IndexInfo.max_body_bytes`), held by the
    # index until the upsert that names it (`UpsertRequest.staged`).
    async def stage(self, part: UpsertPart) -> PartReceived: ...
    # `later`: the query vector (base64, as `vector_b64`) still being computed, for a request
    # without one; the index starts on the words meanwhile. It only ever gives a vector: a
    # caller whose embedding fails cancels the search instead.
    async def search(
        self, request: IndexSearchRequest, later: Awaitable[str] | None = None
    ) -> SearchResult: ...
    async def list_documents(
        self, library: str | None, limit: int, offset: int
    ) -> ListDocumentsResult: ...
    async def list_libraries(self) -> ListLibrariesResult: ...
    # A library's live sources by source, from `cursor` (a previous page's next_cursor).
    async def list_sources(
        self, library: str, prefix: str = "", cursor: str | None = None, limit: int = 1000
    ) -> SourceList: ...
    async def delete(self, doc_id: str) -> DeleteResult: ...
    async def get(
        self, doc_id: str, chunk_index: int | None = None, context: int = 0
    ) -> GetDocumentResult: ...
    async def stored_vectors(self, doc_id: str) -> StoredVectors: ...
    async def info(self) -> IndexInfo: ...
    async def ready(self) -> tuple[bool, str]: ...
    # Background jobs' records (see libs.contracts.jobs): kept with the index so they survive
    # restarts of the gateway. An unknown job_id is NotFoundError.
    async def save_job(self, record: JobRecord) -> None: ...
    async def get_job(self, job_id: str) -> JobRecord: ...
    async def list_jobs(self, status: str | None, limit: int) -> list[JobRecord]: ...
    async def delete_jobs(self, finished_before: str) -> int: ...
