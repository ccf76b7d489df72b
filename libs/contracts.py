"""Every message mcpvectordb exchanges, defined once: MCP tool inputs and outputs, the HTTP
endpoints' bodies, and each inter-service request and response.

Tool inputs are validated here (ranges, required fields), so the MCP server, the HTTP routes
and the CLI all refuse the same bad input with the same words. Vectors travel between
services as base64 float32 (see `libs.vectors`), a quarter of the size of JSON numbers.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from libs.errors import InvalidInputError
from libs.filters import parse_filter
from libs.vectors import Matrix, decode

DEFAULT_LIBRARY = "default"

IngestStatus = Literal["indexed", "replaced", "skipped"]
EmbedKind = Literal["document", "query"]
SearchMode = Literal["hybrid", "bm25", "vector"]


def _check_library(value: str) -> str:
    value = value.strip()
    if not value:
        raise ValueError("library must not be empty; omit it to use 'default'")
    if len(value) > 128:
        raise ValueError("library names are at most 128 characters")
    if any(ord(ch) < 32 for ch in value):
        raise ValueError("library names may not contain control characters")
    return value


LibraryName = Annotated[str, Field(min_length=1, max_length=128)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Out(BaseModel):
    """Outputs tolerate extra fields so a newer service can talk to an older caller."""

    model_config = ConfigDict(extra="ignore")


# --------------------------------------------------------------------------- tool inputs


class _LibraryInput(_Model):
    library: str = DEFAULT_LIBRARY
    metadata: dict[str, Any] | None = None

    @field_validator("library")
    @classmethod
    def _library(cls, value: str) -> str:
        return _check_library(value)


class IngestFileInput(_LibraryInput):
    path: str = Field(min_length=1, description="Absolute or relative path to the file")


class IngestContentInput(_LibraryInput):
    content: str = Field(min_length=1, description="Full text or Markdown to index")
    source: str = Field(min_length=1, max_length=2048, description="Label used for dedup")

    @field_validator("content")
    @classmethod
    def _content(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content is only whitespace; pass the text to index")
        return value


class IngestUrlInput(_LibraryInput):
    url: str = Field(min_length=1, max_length=8192, description="HTTP or HTTPS URL")


class IngestFolderInput(_LibraryInput):
    folder: str = Field(min_length=1, description="Path to the folder to ingest")
    recursive: bool = True
    max_concurrency: int = Field(default=4, ge=1, le=64)


MAX_TOKENS_LIMIT = 100_000
MAX_CONTEXT_CHUNKS = 20

# Search options shared by the tool input and the index request, so both accept the same.
MaxTokens = Annotated[
    int | None,
    Field(
        ge=1,
        le=MAX_TOKENS_LIMIT,
        description="Token budget for the results' content; the best results that fit, in order",
    ),
]
MaxPerDocument = Annotated[
    int | None,
    Field(ge=1, le=100, description="At most this many chunks per document"),
]


class SearchInput(_Model):
    query: str = Field(min_length=1, max_length=10_000)
    top_k: int = Field(default=5, ge=1, le=100)
    library: str | None = None
    filter: dict[str, Any] | None = None
    max_tokens: MaxTokens = None
    max_per_document: MaxPerDocument = None

    @field_validator("filter")
    @classmethod
    def _filter(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        # Refused here, before the query is embedded; the index checks again (same rules).
        parse_filter(value)
        return value

    @field_validator("query")
    @classmethod
    def _query(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query is only whitespace; pass the words to search for")
        return value

    @field_validator("library")
    @classmethod
    def _library(cls, value: str | None) -> str | None:
        return None if value is None else _check_library(value)


class ListDocumentsInput(_Model):
    library: str | None = None
    limit: int = Field(default=20, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)

    @field_validator("library")
    @classmethod
    def _library(cls, value: str | None) -> str | None:
        return None if value is None else _check_library(value)


class DocIdInput(_Model):
    doc_id: str = Field(min_length=1, max_length=64)


class GetDocumentInput(DocIdInput):
    chunk_index: int | None = Field(
        default=None, ge=0, description="Return this chunk and its neighbours (a window)"
    )
    context: int = Field(
        default=0,
        ge=0,
        le=MAX_CONTEXT_CHUNKS,
        description="Neighbouring chunks on each side of chunk_index",
    )


class ServerInfoInput(_Model):
    check_path: str | None = None


# -------------------------------------------------------------------------- tool outputs


class ErrorResult(_Out):
    status: Literal["error"] = "error"
    error: str
    error_code: str


class IngestResult(_Out):
    status: IngestStatus
    doc_id: str
    source: str
    library: str
    chunk_count: int


class SearchHit(_Out):
    doc_id: str
    source: str
    title: str
    library: str
    file_type: str
    last_modified: str
    page: int
    content: str
    chunk_index: int
    metadata: dict[str, Any] = Field(default_factory=dict)
    score: float = 0.0
    headings: list[str] = Field(default_factory=list)
    token_count: int = 0


class SearchResult(_Out):
    results: list[SearchHit]
    truncated: bool = False
    total_tokens: int = 0


class DocumentInfo(_Out):
    doc_id: str
    source: str
    title: str
    library: str
    content_hash: str
    created_at: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    chunk_count: int
    file_type: str = ""
    last_modified: str = ""


class ListDocumentsResult(_Out):
    documents: list[DocumentInfo]
    count: int
    total: int = 0


class LibraryInfo(_Out):
    library: str
    document_count: int
    chunk_count: int


class ListLibrariesResult(_Out):
    libraries: list[LibraryInfo]


class DeleteResult(_Out):
    status: Literal["deleted"] = "deleted"
    doc_id: str
    deleted_chunks: int


class DocumentChunk(_Out):
    chunk_index: int
    content: str
    page: int = 0
    headings: list[str] = Field(default_factory=list)


class GetDocumentResult(_Out):
    """`content` is the whole Markdown, or with `chunk_index` only the window's Markdown;
    `chunks` is the window (null without `chunk_index`)."""

    doc_id: str
    source: str
    title: str
    library: str
    content: str
    chunk_count: int
    metadata: dict[str, Any] = Field(default_factory=dict)
    file_type: str = ""
    created_at: str = ""
    chunks: list[DocumentChunk] | None = None


class PathCheck(_Out):
    path: str
    readable: bool
    size_bytes: int | None = None
    error: str | None = None


class ServerInfoResult(_Out):
    name: str
    version: str
    platform: str
    python_version: str
    cwd: str
    lancedb_uri: str
    fastembed_cache_path: str
    embedding_model: str
    embedding_dim: int
    transport: str
    note: str
    supported_extensions: list[str]
    path_check: PathCheck | None = None


class FolderError(_Out):
    file: str
    error: str
    error_code: str = "internal_error"


class FolderIngestResult(_Out):
    folder: str
    library: str
    total_files: int
    indexed: int
    replaced: int
    skipped: int
    failed: int
    results: list[IngestResult]
    errors: list[FolderError]
    ignored_files: list[str] = Field(default_factory=list)


# ------------------------------------------------------------------- converter messages


class Chunk(_Out):
    """One piece of a document, small enough for the embedding model to see whole."""

    chunk_index: int
    text: str
    page: int = 0
    headings: list[str] = Field(default_factory=list)
    token_count: int = 0


class ConvertResult(_Out):
    markdown: str
    title: str
    file_type: str
    page_count: int = 0
    chunks: list[Chunk]


class ChunkRequest(_Model):
    markdown: str
    title: str = ""
    file_type: str = "md"


# --------------------------------------------------------------------- embedder messages


class ModelInfo(_Out):
    name: str
    dim: int
    max_tokens: int


class EmbedRequest(_Model):
    texts: list[str] = Field(max_length=4096)
    kind: EmbedKind = "document"


class EmbedResponse(_Out):
    model: str
    dim: int
    count: int
    vectors_b64: str


# ------------------------------------------------------------------------ index messages


class NewDocument(_Model):
    source: str
    library: str
    title: str
    file_type: str
    content_hash: str
    last_modified: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    markdown: str

    @field_validator("source", "library")
    @classmethod
    def _identity(cls, value: str) -> str:
        # (library, source) is the document's identity: dedup and replace key on it.
        if not value:
            raise ValueError("a document needs a non-empty source and library")
        return value


class UpsertRequest(_Model):
    """One version of a document for the index, checked here so that every caller (HTTP or
    in-process) is refused before anything is written.

    `chunks` are as the converter made them: each carries its `token_count`, the chunk's
    length in the embedding model's tokens with special tokens. A chunk sent with 0 is
    counted by the index with the same tokenizer (`libs.modelfiles.count_tokens`).
    `vectors_b64` holds one `dim`-wide float32 vector per chunk, in chunk order.
    """

    document: NewDocument
    chunks: list[Chunk]
    model: str
    dim: int
    vectors_b64: str

    @field_validator("model")
    @classmethod
    def _model(cls, value: str) -> str:
        if not value:
            raise ValueError("upsert needs the embedding model name (EmbedResponse.model)")
        return value

    @field_validator("dim")
    @classmethod
    def _dim(cls, value: int) -> int:
        if value <= 0:
            raise ValueError(f"dim must be the model's positive vector width, got {value}")
        return value

    @model_validator(mode="after")
    def _chunks_and_vectors(self) -> UpsertRequest:
        if not self.chunks:
            raise ValueError(
                "a document needs at least one chunk; nothing was indexed for "
                f"{self.document.source!r} (was the text empty?)"
            )
        self.vectors()
        return self

    def vectors(self) -> Matrix:
        """The decoded vectors, one row per chunk; ValueError says what is wrong with them."""
        try:
            vectors = decode(self.vectors_b64, self.dim, len(self.chunks))
        except InvalidInputError as exc:  # a payload of the wrong size
            raise ValueError(f"vectors_b64 does not match the chunks: {exc.message}") from exc
        except ValueError as exc:
            raise ValueError(f"vectors_b64 is not base64 float32 data: {exc}") from exc
        if not np.isfinite(vectors).all():
            raise ValueError("the chunk vectors contain NaN or infinite values")
        return vectors


class UpsertResponse(_Out):
    status: Literal["indexed", "replaced"]
    doc_id: str
    chunk_count: int


class LookupResponse(_Out):
    document: DocumentInfo | None = None


class IndexSearchRequest(_Model):
    query: str
    vector_b64: str | None = None
    top_k: int = Field(default=5, ge=1, le=100)
    library: str | None = None
    filter: dict[str, Any] | None = None
    mode: SearchMode = "hybrid"
    max_tokens: MaxTokens = None
    max_per_document: MaxPerDocument = None


class IndexInfo(_Out):
    uri: str
    model: str | None
    dim: int | None
    documents: int
    chunks: int


class ReadyStatus(_Out):
    status: Literal["ready", "not_ready"]
    checks: dict[str, str] = Field(default_factory=dict)
