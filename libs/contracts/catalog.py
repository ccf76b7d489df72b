"""The tool table, declared once: each MCP tool's name, title, description, input model,
output models (a tool's result is one of them, or the error shape) and behaviour hints. The MCP
server publishes exactly this table (input schemas with every bound, output schemas,
annotations) and validates arguments against these models.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from libs.contracts.jobs import Job, JobAccepted, JobIdInput, JobList, ListJobsInput
from libs.contracts.repos import IngestRepoInput, RepoIngestResult
from libs.contracts.tools import (
    DeleteResult,
    DocIdInput,
    FolderIngestResult,
    GetDocumentInput,
    GetDocumentResult,
    IngestContentInput,
    IngestFileInput,
    IngestFolderInput,
    IngestResult,
    IngestUrlInput,
    ListDocumentsInput,
    ListDocumentsResult,
    ListLibrariesResult,
    NoInput,
    SearchInput,
    SearchResult,
    ServerInfoInput,
    ServerInfoResult,
)


@dataclass(frozen=True)
class ToolContract:
    """One MCP tool. `writes`: it changes the library, so it needs a token with write
    access; the hints tell clients how careful to be (MCP tool annotations)."""

    name: str
    title: str
    description: str
    input: type[BaseModel]
    outputs: tuple[type[BaseModel], ...]
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
        (IngestResult,),
        writes=True,
        idempotent=True,
    ),
    ToolContract(
        "ingest_content",
        "Ingest text",
        "Index pre-extracted text or Markdown directly, without reading the server's "
        "filesystem. Use it when the client has the file and the server cannot see it.",
        IngestContentInput,
        (IngestResult,),
        writes=True,
        idempotent=True,
    ),
    ToolContract(
        "ingest_url",
        "Ingest a web page",
        "Fetch an HTTP/HTTPS URL, convert its content, and index it.",
        IngestUrlInput,
        (IngestResult,),
        writes=True,
        idempotent=True,
        open_world=True,
    ),
    ToolContract(
        "ingest_folder",
        "Ingest a folder",
        "Ingest every supported document in a folder on the server, in parallel.",
        IngestFolderInput,
        (FolderIngestResult, JobAccepted),
        writes=True,
        idempotent=True,
    ),
    ToolContract(
        "ingest_repo",
        "Ingest a git repository",
        "Clone a git repository (http/https URL, or owner/repo for GitHub; one ref, shallow) "
        "and index its documentation and text files as <url>#<path>. Ingesting it again syncs: "
        "unchanged files are skipped, changed ones replaced, deleted ones removed (prune). "
        "Large repositories: background=true and the job tools.",
        IngestRepoInput,
        (RepoIngestResult, JobAccepted),
        writes=True,
        idempotent=True,
        open_world=True,
    ),
    ToolContract(
        "search",
        "Search the library",
        "Hybrid search (BM25 + vector, reciprocal rank fusion) over indexed chunks.",
        SearchInput,
        (SearchResult,),
    ),
    ToolContract(
        "list_documents",
        "List documents",
        "List indexed documents with metadata.",
        ListDocumentsInput,
        (ListDocumentsResult,),
    ),
    ToolContract(
        "list_libraries",
        "List libraries",
        "List all libraries with document and chunk counts.",
        NoInput,
        (ListLibrariesResult,),
    ),
    ToolContract(
        "delete_document",
        "Delete a document",
        "Remove a document and all its chunks from the index.",
        DocIdInput,
        (DeleteResult,),
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
        (GetDocumentResult,),
    ),
    ToolContract(
        "server_info",
        "Server diagnostics",
        "Server diagnostics; with check_path, tells whether the server can read that file.",
        ServerInfoInput,
        (ServerInfoResult,),
    ),
    ToolContract(
        "get_job",
        "Follow a background job",
        "The state and counts of a background job (ingest_folder with background=true).",
        JobIdInput,
        (Job,),
    ),
    ToolContract(
        "list_jobs",
        "List background jobs",
        "Background jobs, newest first; with status, only those in that state.",
        ListJobsInput,
        (JobList,),
    ),
    ToolContract(
        "cancel_job",
        "Cancel a background job",
        "Stop a background job after the files in progress; what finished stays indexed.",
        JobIdInput,
        (Job,),
        writes=True,
        idempotent=True,
    ),
)
TOOLS_BY_NAME: dict[str, ToolContract] = {tool.name: tool for tool in TOOLS}
WRITE_TOOLS = frozenset(tool.name for tool in TOOLS if tool.writes)
