"""The MCP server: the tools of `libs.contracts.TOOLS`, published under the server name
`mcpvectordb` and answered by the `Library`.

Built on the SDK's low-level `Server`, whose capabilities follow from the handlers given: tools,
logging, and resources (every document, `services.gateway.resources`); no prompts, which would
only ever list empty. Every tool call takes one path. An unknown tool is a JSON-RPC error
(invalid params), as MCP specifies. Otherwise the arguments are validated by the tool's input
model (the model that publishes the input schema, so schema and checks cannot drift: bounds,
unknown arguments refused, no type coercion); the caller's grant must hold the tool's scope
(`write` for the tools that change the library, `read` for the others); the `Library` method of
the same name runs, confined to the caller's libraries (`services.gateway.identity`); any
failure becomes the tool error result, `{"status": "error", "error", "error_code"}` as
structured content with `isError` set, and a success the output model as structured content.
Both come with the same JSON as text for clients that read only text.

While a call runs, what the caller should hear about (a retried service, a file of a folder
that failed) goes to it as `notifications/message` at or above the level it set with
`logging/setLevel` (`warning` until it sets one), and the same lines go to the service log with
the request id.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    EmptyResult,
    ListResourcesResult,
    ListToolsResult,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    SetLevelRequestParams,
    TextContent,
    ToolAnnotations,
)
from mcp.types import Tool as MCPTool
from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema

from libs import SERVER_NAME, SERVER_VERSION
from libs.contracts import TOOLS, TOOLS_BY_NAME, ErrorResult, ToolContract
from libs.errors import MvdbError, from_exception
from libs.telemetry import NoticeLevel, caller_notices, new_request_id, request_id_var
from services.gateway.auth import access_of
from services.gateway.consistency import read_session
from services.gateway.errors import StillStarting
from services.gateway.identity import run_tool
from services.gateway.library import Call, Library, Progress
from services.gateway.metrics import TOOL_CALLS
from services.gateway.progress import ProgressReporter
from services.gateway.resources import DocumentResources
from services.gateway.scopes import FULL, require

log = logging.getLogger(__name__)

Json = dict[str, Any]
Context = ServerRequestContext[Any, Any]

INSTRUCTIONS = (
    "A document library: ingest files, URLs or text, then search it with hybrid BM25 + "
    "vector search. Errors come back as {status: error, error, error_code} with isError set."
)
# RFC 5424 severities, as MCP names them, least severe first.
LEVELS: tuple[LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
DEFAULT_LEVEL: LoggingLevel = "warning"
_MAX_LEVELS = 10_000


def _connection_of(ctx: Context) -> str:
    """The MCP connection a request belongs to: its streamable HTTP session id, its SSE
    session id, or the one stdio connection. (The SDK's session object is per request.)"""
    request = ctx.request
    headers = getattr(request, "headers", None)
    if headers is not None and headers.get("mcp-session-id"):
        return f"mcp:{headers['mcp-session-id']}"
    query = getattr(request, "query_params", None)
    if query is not None and query.get("session_id"):
        return f"sse:{query['session_id']}"
    return "stdio"


def input_schema(tool: ToolContract) -> Json:
    return tool.input.model_json_schema()


def output_schema(tool: ToolContract) -> Json:
    """The tool's result: one of its output models, or the error shape when isError is set."""
    models: list[type[BaseModel]] = [*tool.outputs, ErrorResult]
    refs, definitions = models_json_schema([(model, "serialization") for model in models])
    schema = {
        "type": "object",
        "anyOf": [refs[(model, "serialization")] for model in models],
        **definitions,
    }
    return inline_refs(schema)


def inline_refs(schema: Json) -> Json:
    """The same schema with each `$ref` to its `$defs` replaced by the definition, unless a
    definition refers to itself (then the schema is returned as it is). Clients validate
    every result against the output schema (the Python SDK with jsonschema, on each call):
    resolving a `$ref` for every hit of a search cost about a tenth of that validation."""
    definitions: Json = schema.get("$defs", {})

    def expand(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [expand(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name in seen:
                raise RecursionError(name)
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return {**expand(definitions[name], (*seen, name)), **expand(siblings, seen)}
        return {k: expand(v, seen) for k, v in node.items() if k != "$defs"}

    try:
        inlined: Json = expand(schema, ())
    except RecursionError:
        return schema
    return inlined


def tool_annotations(tool: ToolContract) -> ToolAnnotations:
    return ToolAnnotations(
        title=tool.title,
        read_only_hint=not tool.writes,
        destructive_hint=tool.destructive if tool.writes else None,
        idempotent_hint=tool.idempotent if tool.writes else None,
        open_world_hint=tool.open_world,
    )


def describe(tool: ToolContract) -> MCPTool:
    return MCPTool(
        name=tool.name,
        title=tool.title,
        description=tool.description,
        input_schema=input_schema(tool),
        output_schema=output_schema(tool),
        annotations=tool_annotations(tool),
    )


def tool_result(payload: Json, *, is_error: bool, text: str | None = None) -> CallToolResult:
    """The result: `payload` as structured content and as compact JSON text (`text` when the
    caller has it already serialised), the same for a success and an error."""
    if text is None:
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=payload,
        is_error=is_error,
    )


class LibraryServer:
    """The MCP server over a `Library`; see the module docstring. `server` is the SDK's
    low-level server, which the transports run."""

    def __init__(self, library: Callable[[], Library]) -> None:
        missing = [t.name for t in TOOLS if not callable(getattr(Library, t.name, None))]
        if missing:
            raise TypeError(f"Library has no method for the tools {missing}")
        self._library = library
        self._tools = [describe(tool) for tool in TOOLS]
        self._levels: OrderedDict[str, LoggingLevel] = OrderedDict()
        self.resources = DocumentResources(self._running_library)
        with warnings.catch_warnings():
            # The SDK marks logging deprecated for the 2026-07-28 revision; clients of the
            # revisions before it (every released one at the time of writing) use it.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server: Server[Any] = Server(
                SERVER_NAME,
                version=SERVER_VERSION,
                instructions=INSTRUCTIONS,
                on_list_tools=self._list_tools,
                on_call_tool=self._call_tool,
                on_set_logging_level=self._set_level,
                on_list_resources=self._list_resources,
                on_list_resource_templates=self.resources.list_templates,
                on_read_resource=self._read_resource,
            )

    async def _list_tools(
        self, ctx: Context, params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=list(self._tools))

    # Resources read as their connection, like tool calls: read-your-writes holds for them too.
    async def _list_resources(
        self, ctx: Context, params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        session = read_session.set(_connection_of(ctx))
        try:
            return await self.resources.list_resources(ctx, params)
        finally:
            read_session.reset(session)

    async def _read_resource(
        self, ctx: Context, params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        session = read_session.set(_connection_of(ctx))
        try:
            return await self.resources.read_resource(ctx, params)
        finally:
            read_session.reset(session)

    async def _set_level(self, ctx: Context, params: SetLevelRequestParams) -> EmptyResult:
        key = _connection_of(ctx)
        self._levels[key] = params.level
        self._levels.move_to_end(key)
        while len(self._levels) > _MAX_LEVELS:  # sessions that ended never say so here
            self._levels.popitem(last=False)
        return EmptyResult()

    async def _call_tool(self, ctx: Context, params: CallToolRequestParams) -> CallToolResult:
        name = params.name
        tool = TOOLS_BY_NAME.get(name)
        if tool is None:
            TOOL_CALLS.labels("unknown", "unknown_tool").inc()
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"unknown tool '{name}'; tools/list names the tools this server has",
            )
        # Each call is a request of its own for the logs and the services it calls, whatever
        # connection it came in on.
        request_id = request_id_var.set(new_request_id())
        # Whose writes this call's reads must see (services.gateway.consistency).
        session = read_session.set(_connection_of(ctx))

        async def notice(level: NoticeLevel, text: str) -> None:
            await self._notify(ctx, level, text)

        notices = caller_notices.set(notice)
        token = (ctx.meta or {}).get("progress_token")
        try:
            if token is None or not name.startswith("ingest_"):
                return await self.call(tool, params.arguments or {}, ctx)

            async def send(progress: float, total: float | None, message: str | None) -> None:
                await ctx.session.send_progress_notification(
                    token, progress, total, message, related_request_id=str(ctx.request_id)
                )

            async with ProgressReporter(send) as reporter:
                return await self.call(tool, params.arguments or {}, ctx, reporter.report)
        finally:
            caller_notices.reset(notices)
            read_session.reset(session)
            request_id_var.reset(request_id)

    async def call(
        self,
        tool: ToolContract,
        arguments: Json,
        ctx: Context | None = None,
        progress: Progress | None = None,
    ) -> CallToolResult:
        """Run one tool call: validate, check access, run, shape the result."""
        try:
            grant = access_of(ctx.request) if ctx is not None else FULL
            require(grant, "write" if tool.writes else "read", tool.name)
            request = tool.input.model_validate(arguments)
            library = self._running_library()
            call = replace(self._call_of(ctx), progress=progress)
            result = await run_tool(grant, tool.name, request, library, call)
        except Exception as exc:
            return await self._failed(tool.name, exc, ctx)
        TOOL_CALLS.labels(tool.name, "ok").inc()
        # Both forms serialised by pydantic (in Rust), the text without json.dumps's pass.
        return tool_result(
            result.model_dump(mode="json"), is_error=False, text=result.model_dump_json()
        )

    async def _failed(self, tool: str, exc: BaseException, ctx: Context | None) -> CallToolResult:
        """The one way a failed call is answered, counted, logged and told to the caller."""
        error = from_exception(exc, what="arguments")
        TOOL_CALLS.labels(tool, error.error_code).inc()
        fields = {"tool": tool, "error_code": error.error_code}
        if isinstance(exc, MvdbError | ValidationError):
            log.warning("tool call failed: %s", error.message, extra={"fields": fields})
        else:
            log.exception("tool call failed", extra={"fields": fields})
        if ctx is not None and tool.startswith("ingest_"):
            await self._notify(ctx, "error", f"{tool} failed: {error.message}")
        return tool_result(error.to_payload(), is_error=True)

    async def _notify(self, ctx: Context, level: LoggingLevel, text: str) -> None:
        """A log notification to this call's client, if its level lets it through."""
        wanted = self._levels.get(_connection_of(ctx), DEFAULT_LEVEL)
        if LEVELS.index(level) < LEVELS.index(wanted):
            return
        message = LoggingMessageNotification(
            params=LoggingMessageNotificationParams(level=level, data=text, logger=SERVER_NAME)
        )
        try:
            await ctx.session.send_notification(message, related_request_id=ctx.request_id)
        except Exception:  # a client that went away must not fail the call
            log.debug("could not send a log notification", exc_info=True)

    def _running_library(self) -> Library:
        try:
            return self._library()
        except LookupError as exc:
            raise StillStarting() from exc

    def _call_of(self, ctx: Context | None) -> Call:
        """The transport this call came in on: none for stdio, else the HTTP path."""
        default = self._running_library().call
        request = ctx.request if ctx is not None else None
        path: str = getattr(getattr(request, "url", None), "path", "")
        if not path:
            return default
        return Call("streamable-http" if path.startswith("/mcp") else "sse")
