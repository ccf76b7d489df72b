"""The MCP tools' inputs and outputs (the table that publishes them is `catalog.py`). The
HTTP routes and the CLI take the same models, so every path refuses the same bad input with
the same words.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from libs.contracts.fields import (
    DEFAULT_LIBRARY,
    MAX_PATTERNS,
    CheckPath,
    ChunkIndex,
    Content,
    ContextChunks,
    DocId,
    FilePath,
    Filter,
    FolderPath,
    IngestStatus,
    LibraryFilter,
    LibraryName,
    Limit,
    MaxConcurrency,
    MaxPerDocument,
    MaxTokens,
    Metadata,
    MinScore,
    Offset,
    Out,
    Pattern,
    Query,
    Recursive,
    Source,
    Sparse,
    ToolInput,
    TopK,
    Url,
)

# --------------------------------------------------------------------------- tool inputs


class _IngestInput(ToolInput):
    library: LibraryName = DEFAULT_LIBRARY
    metadata: Metadata = None


class IngestFileInput(_IngestInput):
    path: FilePath


class IngestContentInput(_IngestInput):
    content: Content
    source: Source


class IngestUrlInput(_IngestInput):
    url: Url


class IngestFolderInput(_IngestInput):
    folder: FolderPath
    recursive: Recursive = True
    include: Annotated[
        list[Pattern] | None,
        Field(
            max_length=MAX_PATTERNS,
            description="Glob patterns of files to ingest, relative to the folder ('*.pdf', "
            "'reports/**', '*.py': source code only this way); null = every supported format "
            "but source code",
        ),
    ] = None
    exclude: Annotated[
        list[Pattern] | None,
        Field(
            max_length=MAX_PATTERNS,
            description="Glob patterns of files to leave out ('drafts/**'); a pattern ending "
            "in / is a folder at any depth ('node_modules/')",
        ),
    ] = None
    max_concurrency: MaxConcurrency = 4
    background: Annotated[
        bool,
        Field(
            description="Run as a background job: answer at once with its job_id, follow it "
            "with get_job (the same folder and library asked again joins the running job)"
        ),
    ] = False
    prune: Annotated[
        bool,
        Field(
            description="After a complete scan, delete the library's documents whose file "
            "below this folder no longer exists (never after a scan that failed or was cut short)"
        ),
    ] = False


class UploadInput(_IngestInput):
    """`POST /upload`: the multipart form's file with its client-side name and fields."""

    filename: str = Field(description="The file's name as the client sent it")
    data: bytes = Field(description="The file's bytes")
    source: Annotated[
        Source | None,
        Field(
            description="The document's identity in its library, e.g. 'Projects/Q3/report.pdf' "
            "(dedup and replace key on it); default: the file's base name",
        ),
    ] = None


class SearchInput(ToolInput):
    query: Query
    top_k: TopK = 5
    library: LibraryFilter = None
    filter: Filter = None
    max_tokens: MaxTokens = None
    max_per_document: MaxPerDocument = None
    min_score: MinScore = None


class ListDocumentsInput(ToolInput):
    library: LibraryFilter = None
    limit: Limit = 20
    offset: Offset = 0


class NoInput(ToolInput):
    """A tool without arguments (still refuses unknown ones)."""


class DocIdInput(ToolInput):
    doc_id: DocId


class GetDocumentInput(DocIdInput):
    chunk_index: ChunkIndex = None
    context: ContextChunks = 0


class ServerInfoInput(ToolInput):
    check_path: CheckPath = None


# -------------------------------------------------------------------------- tool outputs


class ErrorResult(Out):
    status: Literal["error"] = "error"
    error: str
    error_code: str


class IngestResult(Out):
    status: IngestStatus
    doc_id: str
    source: str
    library: str
    chunk_count: int


class SearchHit(Out):
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
    # Cosine similarity of the chunk to the query (0-1 in practice); null only in a
    # keyword-only search without min_score, where the query is not embedded.
    similarity: float | None = None
    # First and last line of the chunk in the converted Markdown (for text and Markdown
    # files, the file's own lines); 1-based, 0 where unknown (chunks stored before 0.6.0).
    start_line: int = 0
    end_line: int = 0


class SearchResult(Out):
    results: list[SearchHit]
    truncated: bool = False
    total_tokens: int = 0


class DocumentInfo(Out):
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


class ListDocumentsResult(Out):
    documents: list[DocumentInfo]
    count: int
    total: int = 0


class LibraryInfo(Out):
    library: str
    document_count: int
    chunk_count: int


class ListLibrariesResult(Out):
    libraries: list[LibraryInfo]


class DeleteResult(Out):
    status: Literal["deleted"] = "deleted"
    doc_id: str
    deleted_chunks: int


class DocumentChunk(Out):
    chunk_index: int
    content: str
    page: int = 0
    headings: list[str] = Field(default_factory=list)
    start_line: int = 0
    end_line: int = 0


class GetDocumentResult(Out):
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


class PathCheck(Sparse):
    path: str
    readable: bool
    size_bytes: int | None = None
    error: str | None = None


class ServerInfoResult(Sparse):
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


class FolderError(Out):
    file: str
    error: str
    error_code: str = "internal_error"


class FolderIngestResult(Out):
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
    deleted: int = 0
    deleted_sources: list[str] = Field(default_factory=list)
