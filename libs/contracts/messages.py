"""The messages between services: converter, embedder and index requests and responses, and
the readiness answer every service gives. Vectors travel as base64 float32 (see
`libs.vectors`), a quarter of the size of JSON numbers.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from libs.contracts.fields import (
    EmbedKind,
    MaxPerDocument,
    MaxTokens,
    Model,
    Out,
    SearchMode,
    TopK,
)
from libs.contracts.tools import DocumentInfo

# ------------------------------------------------------------------- converter messages


class Chunk(Out):
    """One piece of a document, small enough for the embedding model to see whole."""

    chunk_index: int
    text: str
    page: int = 0
    headings: list[str] = Field(default_factory=list)
    token_count: int = 0


class ConvertResult(Out):
    markdown: str
    title: str
    file_type: str
    page_count: int = 0
    chunks: list[Chunk]


class ChunkRequest(Model):
    markdown: str
    title: str = ""
    file_type: str = "md"


# --------------------------------------------------------------------- embedder messages


class ModelInfo(Out):
    name: str
    dim: int
    max_tokens: int


class EmbedRequest(Model):
    texts: list[str] = Field(max_length=4096)
    kind: EmbedKind = "document"


class EmbedResponse(Out):
    model: str
    dim: int
    count: int
    vectors_b64: str


# ------------------------------------------------------------------------ index messages


class NewDocument(Model):
    source: str
    library: str
    title: str
    file_type: str
    content_hash: str
    last_modified: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    markdown: str


class UpsertRequest(Model):
    document: NewDocument
    chunks: list[Chunk]
    model: str
    dim: int
    vectors_b64: str


class UpsertResponse(Out):
    status: Literal["indexed", "replaced"]
    doc_id: str
    chunk_count: int


class LookupResponse(Out):
    document: DocumentInfo | None = None


class IndexSearchRequest(Model):
    query: str
    vector_b64: str | None = None
    top_k: TopK = 5
    library: str | None = None
    filter: dict[str, Any] | None = None
    mode: SearchMode = "hybrid"
    max_tokens: MaxTokens = None
    max_per_document: MaxPerDocument = None


class IndexInfo(Out):
    uri: str
    model: str | None
    dim: int | None
    documents: int
    chunks: int


class ReadyStatus(Out):
    status: Literal["ready", "not_ready"]
    checks: dict[str, str] = Field(default_factory=dict)
