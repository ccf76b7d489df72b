"""The messages between services: converter, embedder and index requests and responses, and
the readiness answer every service gives. Vectors travel as base64 float32 (see
`libs.vectors`), a quarter of the size of JSON numbers.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from libs.contracts.fields import (
    EmbedKind,
    MaxPerDocument,
    MaxTokens,
    MinScore,
    Model,
    Out,
    SearchMode,
    TopK,
)
from libs.contracts.tools import DocumentInfo
from libs.errors import InvalidInputError
from libs.formats import is_current
from libs.vectors import Matrix, decode, encode, text_digest

# ------------------------------------------------------------------- converter messages


class Chunk(Out):
    """One piece of a document, small enough for the embedding model to see whole."""

    chunk_index: int
    text: str
    page: int = 0
    headings: list[str] = Field(default_factory=list)
    token_count: int = 0
    # The chunk's first and last line in the converted Markdown (1-based; 0 = unknown).
    start_line: int = 0
    end_line: int = 0


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
    # The converter revision that made `markdown` and the chunks (`libs.formats`); 0 unknown.
    conversion: int = Field(default=0, ge=0)

    @field_validator("source", "library")
    @classmethod
    def _identity(cls, value: str) -> str:
        # (library, source) is the document's identity: dedup and replace key on it.
        if not value:
            raise ValueError("a document needs a non-empty source and library")
        return value


class ChunkVectors(Model):
    """Chunks and their vectors, checked here so that every caller (HTTP or in-process) is
    refused before anything is written: a document's write, or a part of it.

    `chunks` are as the converter made them: each carries its `token_count`, the chunk's
    length in the embedding model's tokens with special tokens. A chunk sent with 0 is
    counted by the index with the same tokenizer (`libs.modelfiles.count_tokens`).
    `vectors_b64` holds one `dim`-wide float32 vector per chunk, in chunk order.
    """

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
    def _chunks_and_vectors(self) -> ChunkVectors:
        if not self.chunks:
            raise ValueError(self._no_chunks())
        self.vectors()
        return self

    def _no_chunks(self) -> str:
        return "a write needs at least one chunk"

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


UploadId = Annotated[str, Field(min_length=8, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]


class StagedChunks(Model):
    """The chunks an upsert's own come after: `chunk_count` of them, sent before in parts
    under `upload_id` (`UpsertPart`)."""

    upload_id: UploadId
    chunk_count: int = Field(ge=1)


class UpsertRequest(ChunkVectors):
    """One version of a document for the index. A document larger than one request
    (`IndexInfo.max_body_bytes`) sends its first chunks in parts (`UpsertPart`), and this
    request, with the document and the last chunks, names them (`staged`): the index writes
    them all in the one replace, so the parts are never searchable on their own."""

    document: NewDocument
    staged: StagedChunks | None = None

    def _no_chunks(self) -> str:
        return (
            "a document needs at least one chunk; nothing was indexed for "
            f"{self.document.source!r} (was the text empty?)"
        )


class UpsertPart(ChunkVectors):
    """Chunks `start` .. `start + len(chunks) - 1` of a document written in parts, held by the
    index under `upload_id` until the upsert that names them (`StagedChunks`). Sending a part
    again replaces the one sent with the same `start`."""

    upload_id: UploadId
    start: int = Field(ge=0)

    def _no_chunks(self) -> str:
        return "a part of a document needs at least one chunk"


class PartReceived(Out):
    upload_id: str
    # The chunks held under upload_id, and the bytes every upload's parts hold in the index.
    chunks: int
    held_bytes: int


def held_bytes(chunks: list[Chunk], dim: int) -> int:
    """What `chunks` and their `dim`-wide vectors cost the index to hold until their write:
    the one measure of `IndexInfo.max_staged_bytes`, for the index and its callers."""
    return sum(len(c.text) + sum(map(len, c.headings)) + 64 for c in chunks) + 4 * dim * len(chunks)


class UpsertResponse(Out):
    status: Literal["indexed", "replaced"]
    doc_id: str
    chunk_count: int


class StoredVectors(Out):
    """The vectors a document's chunks are stored with, one per distinct chunk text, keyed by
    the SHA-256 (hex) of the text: what an ingest of a new version of that document, or of
    the same bytes converted again, takes instead of embedding those texts again
    (`services.gateway.embedding`). Empty when the document has no chunks stored."""

    model: str = ""
    dim: int = 0
    hashes: list[str] = Field(default_factory=list)
    vectors_b64: str = ""

    @classmethod
    def of(cls, model: str, dim: int, texts: list[str], vectors: Matrix) -> StoredVectors:
        """The chunks' `vectors` (one row per text, in order), the first of each text kept."""
        first: dict[str, int] = {}
        for i, text in enumerate(texts):
            first.setdefault(text_digest(text).hex(), i)
        rows = vectors[np.fromiter(first.values(), dtype=np.int64, count=len(first))]
        return cls(model=model, dim=dim, hashes=list(first), vectors_b64=encode(rows))

    def by_digest(self) -> dict[bytes, np.ndarray[Any, np.dtype[np.float32]]]:
        """The vectors by the SHA-256 digest (bytes) of their text."""
        if not self.hashes:
            return {}
        vectors = decode(self.vectors_b64, self.dim, len(self.hashes))
        return {bytes.fromhex(h): row for h, row in zip(self.hashes, vectors, strict=True)}


class LookupResponse(Out):
    document: DocumentInfo | None = None
    # The converter revision the document was made with (0: before 0.8.5, unknown).
    conversion: int = 0

    @property
    def current(self) -> bool:
        """Whether the document converts as this release would convert it (made by this
        release's converter, a newer one, or an older one its file type has not changed in)."""
        return self.document is not None and is_current(self.conversion, self.document.file_type)


class IndexSearchRequest(Model):
    query: str
    vector_b64: str | None = None
    top_k: TopK = 5
    library: str | None = None
    filter: dict[str, Any] | None = None
    mode: SearchMode = "hybrid"
    max_tokens: MaxTokens = None
    max_per_document: MaxPerDocument = None
    min_score: MinScore = None


# `POST /search/stream`: a search whose query vector follows its parameters, as the two
# lines of one NDJSON body: an IndexSearchRequest without `vector_b64`, then a QueryVector
# once the caller has embedded the query (`services.index.search_stream`).
SEARCH_STREAM_TYPE = "application/x-ndjson"


class QueryVector(Model):
    vector_b64: str


# What an index process does with its store (INDEX_ROLE): `all` reads and writes alone,
# `writer` is the one writer of a store that `reader` replicas share read-only.
IndexRole = Literal["all", "writer", "reader"]


class IndexInfo(Out):
    uri: str  # credentials redacted
    model: str | None
    dim: int | None
    documents: int
    chunks: int
    role: IndexRole = "all"
    # The largest write the index takes in one request (INDEX_MAX_BODY_BYTES); 0: unknown.
    max_body_bytes: int = 0
    # The most the parts of larger documents may hold in the index until their writes
    # (INDEX_STAGED_MAX_BYTES, measured by `held_bytes`); 0: unknown.
    max_staged_bytes: int = 0


class ReadyStatus(Out):
    status: Literal["ready", "not_ready"]
    checks: dict[str, str] = Field(default_factory=dict)
