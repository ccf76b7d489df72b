"""The MCP server: the tools of `libs.contracts.TOOLS`, published under the server name
`mcpvectordb` and answered by the `Library`.

Every call takes one path. The arguments are validated by the tool's input model (the same
model that publishes the input schema, so the schema and the checks cannot drift); a write tool
is refused to a read-only caller; the `Library` method of the same name runs; a failure of any
kind becomes the tool error result, `{"status": "error", "error", "error_code"}` as structured
content with `isError` set, and a success the output model as structured content. Both come
with the same JSON as text for clients that read only text.

The server lists and calls tools through the SDK's public `list_tools` / `call_tool` hooks
rather than its decorator: the decorator would derive a second declaration of each tool from a
function signature, validate arguments its own way first, and report some failures as errors
and others as successes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from mcp.types import Tool as MCPTool
from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema

from libs import SERVER_NAME, SERVER_VERSION
from libs.contracts import TOOLS, TOOLS_BY_NAME, ErrorResult, ToolContract
from libs.errors import MvdbError, from_exception
from services.gateway.auth import Access, require_write
from services.gateway.errors import StillStarting
from services.gateway.library import Call, Library
from services.gateway.metrics import TOOL_CALLS

log = logging.getLogger(__name__)

Json = dict[str, Any]
AccessOf = Callable[[Context[Any, Any]], Access]

INSTRUCTIONS = (
    "A document library: ingest files, URLs or text, then search it with hybrid BM25 + "
    "vector search. Errors come back as {status: error, error, error_code} with isError set."
)


def input_schema(tool: ToolContract) -> Json:
    return tool.input.model_json_schema()


def output_schema(tool: ToolContract) -> Json:
    """The tool's result: its output model, or the error shape when isError is set."""
    refs, definitions = models_json_schema(
        [(tool.output, "serialization"), (ErrorResult, "serialization")]
    )
    return {
        "type": "object",
        "anyOf": [refs[(tool.output, "serialization")], refs[(ErrorResult, "serialization")]],
        **definitions,
    }


def tool_annotations(tool: ToolContract) -> ToolAnnotations:
    return ToolAnnotations(
        title=tool.title,
        read_only_hint=not tool.writes,
        destructive_hint=tool.destructive if tool.writes else None,
        idempotent_hint=tool.idempotent if tool.writes else None,
        open_world_hint=tool.open_world,
    )


def tool_result(payload: Json, *, is_error: bool) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
        structured_content=payload,
        is_error=is_error,
    )


def error_result(tool: str, exc: BaseException) -> CallToolResult:
    """The one way a failed call is answered (and counted)."""
    if not isinstance(exc, MvdbError | ValidationError):
        log.exception("tool failed", extra={"fields": {"tool": tool}})
    error = from_exception(exc, what="arguments")
    TOOL_CALLS.labels(tool, error.error_code).inc()
    return tool_result(error.to_payload(), is_error=True)


class LibraryServer(MCPServer[Any]):
    """`MCPServer` whose tools are the contract table; see the module docstring."""

    def __init__(
        self,
        library: Callable[[], Library],
        *,
        access_of: AccessOf | None = None,
    ) -> None:
        super().__init__(SERVER_NAME, version=SERVER_VERSION, instructions=INSTRUCTIONS)
        missing = [t.name for t in TOOLS if not callable(getattr(Library, t.name, None))]
        if missing:
            raise TypeError(f"Library has no method for the tools {missing}")
        self._library = library
        self._access_of = access_of
        self._tools = [
            MCPTool(
                name=tool.name,
                title=tool.title,
                description=tool.description,
                input_schema=input_schema(tool),
                output_schema=output_schema(tool),
                annotations=tool_annotations(tool),
            )
            for tool in TOOLS
        ]

    async def list_tools(self) -> list[MCPTool]:
        return list(self._tools)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult:
        tool = TOOLS_BY_NAME.get(name)
        if tool is None:
            TOOL_CALLS.labels("unknown", "unknown_tool").inc()
            payload = ErrorResult(
                error=f"unknown tool '{name}'; tools/list names the tools this server has",
                error_code="unknown_tool",
            ).model_dump()
            return tool_result(payload, is_error=True)
        try:
            if tool.writes and context is not None and self._access_of is not None:
                require_write(self._access_of(context), name)
            request = tool.input.model_validate(arguments)
            handler = getattr(self._running_library(), name)
            result: BaseModel = await handler(request, self._call(context))
        except Exception as exc:
            return error_result(name, exc)
        TOOL_CALLS.labels(name, "ok").inc()
        return tool_result(result.model_dump(mode="json"), is_error=False)

    def _running_library(self) -> Library:
        try:
            return self._library()
        except LookupError as exc:
            raise StillStarting() from exc

    def _call(self, context: Context[Any, Any] | None) -> Call:
        """The transport this call came in on: none for stdio, else the HTTP path."""
        default = self._running_library().call
        if context is None:
            return default
        request = context.request_context.request
        path: str = getattr(getattr(request, "url", None), "path", "")
        if not path:
            return default
        return Call("streamable-http" if path.startswith("/mcp") else "sse")
