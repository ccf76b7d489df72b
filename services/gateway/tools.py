"""The MCP tools, exactly as `docs/mcp-tool-spec.md` defines them.

`ToolService` holds the behaviour (validated inputs in, contract models out) and never lets
an exception escape: every failure becomes `{"status": "error", "error", "error_code"}`.
`build_mcp_server` publishes it under the server name `mcpvectordb`; argument type errors
that the SDK catches before our code runs are turned into the same error shape.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import platform
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, ParamSpec

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from libs import SERVER_NAME, SERVER_VERSION
from libs.contracts import (
    MAX_CONTEXT_CHUNKS,
    MAX_TOKENS_LIMIT,
    DocIdInput,
    ErrorResult,
    GetDocumentInput,
    IndexSearchRequest,
    IngestContentInput,
    IngestFileInput,
    IngestFolderInput,
    IngestUrlInput,
    ListDocumentsInput,
    PathCheck,
    SearchInput,
    ServerInfoInput,
    ServerInfoResult,
)
from libs.errors import InvalidInputError, MvdbError, PathNotAllowedError, UpstreamError
from libs.formats import SUPPORTED_EXTENSIONS
from libs.ports import IndexPort
from libs.service_app import describe_validation
from libs.vectors import encode
from services.gateway.metrics import TOOL_CALLS
from services.gateway.pipeline import Pipeline

log = logging.getLogger(__name__)
P = ParamSpec("P")
Json = dict[str, Any]

_STDIO_NOTE = (
    "In stdio mode the server runs on the same machine as the MCP client and reads files "
    "with the client user's permissions."
)
_HTTP_NOTE = (
    "In HTTP mode the server reads files on the server host, not on your machine: use "
    "ingest_content or POST /upload for files that only exist on the client."
)


def _invalid_arguments(exc: ValidationError) -> Json:
    message = f"invalid arguments: {describe_validation(exc)}"
    return ErrorResult(error=message, error_code="invalid_input").model_dump()


def error_payload(exc: BaseException) -> Json:
    if isinstance(exc, MvdbError):
        return exc.to_payload()
    if isinstance(exc, ValidationError):
        return ErrorResult(
            error=f"invalid arguments: {describe_validation(exc)}", error_code="invalid_input"
        ).model_dump()
    return ErrorResult(
        error=f"unexpected error: {type(exc).__name__}: {exc}", error_code="internal_error"
    ).model_dump()


def guarded(
    tool: str,
) -> Callable[[Callable[P, Awaitable[BaseModel]]], Callable[P, Awaitable[Json]]]:
    """Run a tool body; return its model as a dict, or the error shape on any failure."""

    def wrap(fn: Callable[P, Awaitable[BaseModel]]) -> Callable[P, Awaitable[Json]]:
        @functools.wraps(fn)
        async def inner(*args: P.args, **kwargs: P.kwargs) -> Json:
            try:
                result = await fn(*args, **kwargs)
            except Exception as exc:
                if not isinstance(exc, MvdbError | ValidationError):
                    log.exception("tool failed", extra={"fields": {"tool": tool}})
                payload = error_payload(exc)
                TOOL_CALLS.labels(tool, str(payload["error_code"])).inc()
                return payload
            TOOL_CALLS.labels(tool, "ok").inc()
            return result.model_dump()

        return inner

    return wrap


class ToolService:
    """The tools' behaviour. The pipeline is bound when the app's resources exist (lifespan),
    while the MCP server that publishes these methods is built earlier."""

    def __init__(self, *, transport: str, model_cache: str) -> None:
        self.transport = transport
        self.model_cache = model_cache
        self._pipeline: Pipeline | None = None

    def bind(self, pipeline: Pipeline | None) -> None:
        self._pipeline = pipeline

    @property
    def pipeline(self) -> Pipeline:
        if self._pipeline is None:
            raise UpstreamError("the server is still starting; try again in a moment")
        return self._pipeline

    @property
    def index(self) -> IndexPort:
        return self.pipeline.index

    @guarded("ingest_file")
    async def ingest_file(self, **args: Any) -> BaseModel:
        req = IngestFileInput.model_validate(args)
        return await self.pipeline.ingest_file(req.path, req.library, req.metadata)

    @guarded("ingest_content")
    async def ingest_content(self, **args: Any) -> BaseModel:
        req = IngestContentInput.model_validate(args)
        return await self.pipeline.ingest_content(
            req.content, req.source, req.library, req.metadata
        )

    @guarded("ingest_url")
    async def ingest_url(self, **args: Any) -> BaseModel:
        req = IngestUrlInput.model_validate(args)
        return await self.pipeline.ingest_url(req.url, req.library, req.metadata)

    @guarded("ingest_folder")
    async def ingest_folder(self, **args: Any) -> BaseModel:
        req = IngestFolderInput.model_validate(args)
        return await self.pipeline.ingest_folder(
            req.folder,
            req.library,
            req.metadata,
            recursive=req.recursive,
            max_concurrency=req.max_concurrency,
        )

    @guarded("search")
    async def search(self, **args: Any) -> BaseModel:
        req = SearchInput.model_validate(args)
        vector = await self.pipeline.embedder.embed([req.query], "query")
        return await self.index.search(
            IndexSearchRequest(
                query=req.query,
                vector_b64=encode(vector),
                top_k=req.top_k,
                library=req.library,
                filter=req.filter,
                max_tokens=req.max_tokens,
                max_per_document=req.max_per_document,
            )
        )

    @guarded("list_documents")
    async def list_documents(self, **args: Any) -> BaseModel:
        req = ListDocumentsInput.model_validate(args)
        return await self.index.list_documents(req.library, req.limit, req.offset)

    @guarded("list_libraries")
    async def list_libraries(self) -> BaseModel:
        return await self.index.list_libraries()

    @guarded("delete_document")
    async def delete_document(self, **args: Any) -> BaseModel:
        req = DocIdInput.model_validate(args)
        return await self.index.delete(req.doc_id)

    @guarded("get_document")
    async def get_document(self, **args: Any) -> BaseModel:
        req = GetDocumentInput.model_validate(args)
        return await self.index.get(req.doc_id, req.chunk_index, req.context)

    @guarded("server_info")
    async def server_info(self, **args: Any) -> BaseModel:
        req = ServerInfoInput.model_validate(args)
        model = await self.pipeline.model()
        index = await self.index.info()
        result = ServerInfoResult(
            name=SERVER_NAME,
            version=SERVER_VERSION,
            platform=sys.platform,
            python_version=platform.python_version(),
            cwd=os.getcwd(),
            lancedb_uri=index.uri,
            fastembed_cache_path=self.model_cache,
            embedding_model=model.name,
            embedding_dim=model.dim,
            transport=self.transport,
            note=_STDIO_NOTE if self.transport == "stdio" else _HTTP_NOTE,
            supported_extensions=sorted(SUPPORTED_EXTENSIONS),
        )
        if req.check_path is not None:
            result.path_check = self._check_path(req.check_path)
        return result

    def _check_path(self, raw: str) -> PathCheck:
        try:
            path = self.pipeline.paths.resolve(raw)
        except (InvalidInputError, PathNotAllowedError) as exc:
            return PathCheck(path=raw, readable=False, error=exc.message)
        try:
            if not path.exists():
                return PathCheck(path=str(path), readable=False, error="file does not exist")
            if not path.is_file():
                return PathCheck(path=str(path), readable=False, error="not a regular file")
            with path.open("rb") as handle:
                handle.read(1)
            size = path.stat().st_size
        except OSError as exc:
            return PathCheck(path=str(path), readable=False, error=exc.strerror or str(exc))
        return PathCheck(path=str(path), readable=True, size_bytes=size)


# ------------------------------------------------------------------------ MCP server

Library = Annotated[str, Field(description="Library (collection) to index into")]
Metadata = Annotated[
    dict[str, Any] | None, Field(description="Arbitrary key-value metadata to attach")
]
FILTER_HELP = (
    "Conditions, AND-ed. A field is file_type, page, last_modified, source, title, library, "
    "doc_id, chunk_index or metadata.<key>; a plain value means equality, or an object of "
    "operators $eq $ne $gt $gte $lt $lte $in $contains, e.g. "
    '{"file_type": "pdf", "page": {"$gte": 3}, "metadata.author": {"$in": ["Alice", "Bob"]}}'
)
WRITE_TOOLS = frozenset(
    {"ingest_file", "ingest_content", "ingest_url", "ingest_folder", "delete_document"}
)


class _Server(MCPServer[Any]):
    """Turns the SDK's own argument-validation failures into the structured error shape."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                payload = ErrorResult(
                    error=f"invalid arguments: {describe_validation(cause)}",
                    error_code="invalid_input",
                ).model_dump()
            elif self._tool_manager.get_tool(name) is None:
                payload = ErrorResult(
                    error=f"unknown tool '{name}'", error_code="unknown_tool"
                ).model_dump()
            else:
                payload = ErrorResult(error=str(exc), error_code="internal_error").model_dump()
            TOOL_CALLS.labels(
                name if name in _TOOL_NAMES else "unknown", payload["error_code"]
            ).inc()
            return CallToolResult(
                content=[TextContent(type="text", text=json.dumps(payload))],
                structured_content=payload,
                is_error=True,
            )


_TOOL_NAMES = frozenset(
    {
        "ingest_file",
        "ingest_content",
        "ingest_url",
        "ingest_folder",
        "search",
        "list_documents",
        "list_libraries",
        "delete_document",
        "get_document",
        "server_info",
    }
)


def build_mcp_server(
    service: ToolService, access_of: Callable[[Context[Any, Any]], str] | None = None
) -> MCPServer[Any]:
    server = _Server(
        SERVER_NAME,
        version=SERVER_VERSION,
        instructions=(
            "A document library: ingest files, URLs or text, then search it with hybrid "
            "BM25 + vector search. Errors come back as {status: error, error, error_code}."
        ),
    )
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    def refuse_read_only(ctx: Context[Any, Any], tool: str) -> Json | None:
        if access_of is not None and access_of(ctx) != "full":
            TOOL_CALLS.labels(tool, "forbidden").inc()
            return ErrorResult(
                error=f"this token is read-only; '{tool}' needs a full-access token",
                error_code="forbidden",
            ).model_dump()
        return None

    @server.tool(description="Convert a file on the server and index it in the vector store.")
    async def ingest_file(
        path: Annotated[str, Field(description="Absolute or relative path to the file")],
        ctx: Context[Any, Any],
        library: Library = "default",
        metadata: Metadata = None,
    ) -> dict[str, Any]:
        return refuse_read_only(ctx, "ingest_file") or await service.ingest_file(
            path=path, library=library, metadata=metadata
        )

    @server.tool(
        description=(
            "Index pre-extracted text or Markdown directly, without reading the server's "
            "filesystem. Use it when the client has the file and the server cannot see it."
        )
    )
    async def ingest_content(
        content: Annotated[str, Field(description="Full text or Markdown to index")],
        source: Annotated[
            str, Field(description="Label for the origin (filename, URL...), used for dedup")
        ],
        ctx: Context[Any, Any],
        library: Library = "default",
        metadata: Metadata = None,
    ) -> dict[str, Any]:
        return refuse_read_only(ctx, "ingest_content") or await service.ingest_content(
            content=content, source=source, library=library, metadata=metadata
        )

    @server.tool(description="Fetch an HTTP/HTTPS URL, convert its content, and index it.")
    async def ingest_url(
        url: Annotated[str, Field(description="HTTP or HTTPS URL to fetch")],
        ctx: Context[Any, Any],
        library: Library = "default",
        metadata: Metadata = None,
    ) -> dict[str, Any]:
        return refuse_read_only(ctx, "ingest_url") or await service.ingest_url(
            url=url, library=library, metadata=metadata
        )

    @server.tool(
        description="Ingest every supported document in a folder on the server, in parallel."
    )
    async def ingest_folder(
        folder: Annotated[str, Field(description="Path to the folder to ingest")],
        ctx: Context[Any, Any],
        library: Library = "default",
        metadata: Metadata = None,
        recursive: Annotated[bool, Field(description="Scan subdirectories")] = True,
        max_concurrency: Annotated[
            int, Field(description="Max files processed simultaneously (>= 1)")
        ] = 4,
    ) -> dict[str, Any]:
        return refuse_read_only(ctx, "ingest_folder") or await service.ingest_folder(
            folder=folder,
            library=library,
            metadata=metadata,
            recursive=recursive,
            max_concurrency=max_concurrency,
        )

    @server.tool(
        description="Hybrid search (BM25 + vector, reciprocal rank fusion) over indexed chunks.",
        annotations=read_only,
    )
    async def search(
        query: Annotated[str, Field(description="Natural language search query")],
        top_k: Annotated[int, Field(description="Max results to return (1-100)")] = 5,
        library: Annotated[
            str | None, Field(description="Restrict to this library; null = all")
        ] = None,
        filter: Annotated[
            dict[str, Any] | None,
            Field(description=FILTER_HELP),
        ] = None,
        max_tokens: Annotated[
            int | None,
            Field(
                description=(
                    f"Token budget (1-{MAX_TOKENS_LIMIT}): return the best results, in order, "
                    "while their content fits; the result says truncated and total_tokens"
                )
            ),
        ] = None,
        max_per_document: Annotated[
            int | None,
            Field(description="At most this many chunks from any one document (>= 1)"),
        ] = None,
    ) -> dict[str, Any]:
        return await service.search(
            query=query,
            top_k=top_k,
            library=library,
            filter=filter,
            max_tokens=max_tokens,
            max_per_document=max_per_document,
        )

    @server.tool(description="List indexed documents with metadata.", annotations=read_only)
    async def list_documents(
        library: Annotated[str | None, Field(description="Filter by library; null = all")] = None,
        limit: Annotated[int, Field(description="Max documents to return (1-1000)")] = 20,
        offset: Annotated[int, Field(description="Pagination offset")] = 0,
    ) -> dict[str, Any]:
        return await service.list_documents(library=library, limit=limit, offset=offset)

    @server.tool(
        description="List all libraries with document and chunk counts.", annotations=read_only
    )
    async def list_libraries() -> dict[str, Any]:
        return await service.list_libraries()

    @server.tool(description="Remove a document and all its chunks from the index.")
    async def delete_document(
        doc_id: Annotated[str, Field(description="The document UUID to delete")],
        ctx: Context[Any, Any],
    ) -> dict[str, Any]:
        return refuse_read_only(ctx, "delete_document") or await service.delete_document(
            doc_id=doc_id
        )

    @server.tool(
        description=(
            "Return the full Markdown text of an indexed document; with chunk_index, only that "
            "chunk and `context` neighbours on each side (content is then the window's Markdown "
            "and chunks lists them)."
        ),
        annotations=read_only,
    )
    async def get_document(
        doc_id: Annotated[str, Field(description="The document UUID to retrieve")],
        chunk_index: Annotated[
            int | None,
            Field(description="Return only the window around this chunk (a search hit's index)"),
        ] = None,
        context: Annotated[
            int,
            Field(description=f"Chunks on each side of chunk_index (0-{MAX_CONTEXT_CHUNKS})"),
        ] = 0,
    ) -> dict[str, Any]:
        return await service.get_document(doc_id=doc_id, chunk_index=chunk_index, context=context)

    @server.tool(
        description=(
            "Server diagnostics; with check_path, tells whether the server can read that file."
        ),
        annotations=read_only,
    )
    async def server_info(
        check_path: Annotated[
            str | None, Field(description="File path to test for readability")
        ] = None,
    ) -> dict[str, Any]:
        return await service.server_info(check_path=check_path)

    return server


def model_cache_dir(var_dir: Path) -> str:
    return str((var_dir / "models").resolve())
