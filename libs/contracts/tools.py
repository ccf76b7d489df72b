"""The MCP tools' contract, declared once: each tool's input and output models, its name,
title, description and behaviour hints in `TOOLS`. The MCP server publishes exactly this table
(input schemas with every bound, output schemas, annotations), validates arguments against
these models, and the HTTP routes and the CLI take the same models, so every path refuses the
same bad input with the same words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field

from libs.contracts.fields import (
    DEFAULT_LIBRARY,
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
    Offset,
    Out,
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
    max_concurrency: MaxConcurrency = 4


class UploadInput(_IngestInput):
    """`POST /upload`: the multipart form's file with its client-side name and fields."""

    filename: str = Field(description="The file's name as the client sent it")
    data: bytes = Field(description="The file's bytes")


class SearchInput(ToolInput):
    query: Query
    top_k: TopK = 5
    library: LibraryFilter = None
    filter: Filter = None
    max_tokens: MaxTokens = None
    max_per_document: MaxPerDocument = None


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


# ------------------------------------------------------------------------- the tool table


@dataclass(frozen=True)
class ToolContract:
    """One MCP tool. `writes`: it changes the library, so it needs a token with write
    access; the hints tell clients how careful to be (MCP tool annotations)."""

    name: str
    title: str
    description: str
    input: type[BaseModel]
    output: type[BaseModel]
    writes: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False


TOOLS: tuple[ToolContract, ...] = (
    ToolContract(
        "ingest_file",
        "Ingest a file",
        "Convert a file on the server and index it in the vector store.",
        IngestFileInput,
        IngestResult,
        writes=True,
        idempotent=True,
    ),
    ToolContract(
        "ingest_content",
        "Ingest text",
        "Index pre-extracted text or Markdown directly, without reading the server's "
        "filesystem. Use it when the client has the file and the server cannot see it.",
        IngestContentInput,
        IngestResult,
        writes=True,
        idempotent=True,
    ),
    ToolContract(
        "ingest_url",
        "Ingest a web page",
        "Fetch an HTTP/HTTPS URL, convert its content, and index it.",
        IngestUrlInput,
        IngestResult,
        writes=True,
        idempotent=True,
        open_world=True,
    ),
    ToolContract(
        "ingest_folder",
        "Ingest a folder",
        "Ingest every supported document in a folder on the server, in parallel.",
        IngestFolderInput,
        FolderIngestResult,
        writes=True,
        idempotent=True,
    ),
    ToolContract(
        "search",
        "Search the library",
        "Hybrid search (BM25 + vector, reciprocal rank fusion) over indexed chunks.",
        SearchInput,
        SearchResult,
    ),
    ToolContract(
        "list_documents",
        "List documents",
        "List indexed documents with metadata.",
        ListDocumentsInput,
        ListDocumentsResult,
    ),
    ToolContract(
        "list_libraries",
        "List libraries",
        "List all libraries with document and chunk counts.",
        NoInput,
        ListLibrariesResult,
    ),
    ToolContract(
        "delete_document",
        "Delete a document",
        "Remove a document and all its chunks from the index.",
        DocIdInput,
        DeleteResult,
        writes=True,
        destructive=True,
    ),
    ToolContract(
        "get_document",
        "Read a document",
        "Return the full Markdown text of an indexed document; with chunk_index, only that "
        "chunk and `context` neighbours on each side (content is then the window's Markdown "
        "and chunks lists them).",
        GetDocumentInput,
        GetDocumentResult,
    ),
    ToolContract(
        "server_info",
        "Server diagnostics",
        "Server diagnostics; with check_path, tells whether the server can read that file.",
        ServerInfoInput,
        ServerInfoResult,
    ),
)
TOOLS_BY_NAME: dict[str, ToolContract] = {tool.name: tool for tool in TOOLS}
WRITE_TOOLS = frozenset(tool.name for tool in TOOLS if tool.writes)
