"""Documents as MCP resources: the `resources/list`, `resources/templates/list` and
`resources/read` handlers of the MCP server (`services.gateway.tools` wires them in),
answered by the `Library`.

Each document is `mcpvectordb://{library}/{doc_id}` (`text/markdown`), its content the
Markdown exactly as `get_document` returns it; one resource template names that URI. The list
pages through every document with the `Library`'s opaque cursor. Reading is open to read-only
callers. A URI that is not a document URI, or names no document, is a JSON-RPC error
(invalid params, as MCP specifies for an unknown resource) whose message says what to do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    ListResourcesResult,
    ListResourceTemplatesResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextResourceContents,
)

from libs.contracts import (
    MARKDOWN,
    URI_TEMPLATE,
    DocumentUriInput,
    ResourcePageInput,
)
from libs.errors import InvalidInputError, NotFoundError, from_exception
from services.gateway.auth import access_of
from services.gateway.library import Library
from services.gateway.scopes import require_library

log = logging.getLogger(__name__)

Context = ServerRequestContext[Any, Any]

TEMPLATE = ResourceTemplate(
    name="document",
    title="A document of the library",
    uri_template=URI_TEMPLATE,
    description="A document's Markdown, exactly as get_document returns it; library is "
    "percent-encoded, doc_id is the document's id (search hits and list_documents give it)",
    mime_type=MARKDOWN,
)


class DocumentResources:
    """The resource handlers over a `Library` (given as a getter: the app builds it in its
    lifespan)."""

    def __init__(self, library: Callable[[], Library]) -> None:
        self._library = library

    async def list_resources(
        self, ctx: Context, params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        cursor = params.cursor if params is not None else None
        try:
            req = ResourcePageInput(cursor=cursor)
            page = await self._library().list_document_refs(req)
        except Exception as exc:
            raise _protocol_error("resources/list", exc) from exc
        grant = access_of(ctx.request)  # a token confined to some libraries sees only theirs
        resources = [
            Resource(
                uri=ref.uri,
                name=ref.source,
                title=ref.source,
                description=f"{ref.file_type or 'document'} in library {ref.library!r}",
                mime_type=MARKDOWN,
            )
            for ref in page.documents
            if grant.may_use(ref.library)
        ]
        return ListResourcesResult(resources=resources, next_cursor=page.next_cursor)

    async def list_templates(
        self, ctx: Context, params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(resource_templates=[TEMPLATE])

    async def read_resource(
        self, ctx: Context, params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        uri = str(params.uri)
        try:
            document = await self._library().read_document_uri(DocumentUriInput(uri=uri))
            require_library(access_of(ctx.request), document.library, "resources/read")
        except Exception as exc:
            raise _protocol_error("resources/read", exc, uri) from exc
        return ReadResourceResult(
            contents=[TextResourceContents(uri=uri, mime_type=MARKDOWN, text=document.content)]
        )


def _protocol_error(method: str, exc: BaseException, uri: str | None = None) -> MCPError:
    """A failed resource request as the JSON-RPC error MCP specifies: invalid params for a
    bad URI or cursor and an unknown resource; an internal error for the server's faults."""
    error = from_exception(exc, what="params")
    data = {"error_code": error.error_code, **({"uri": uri} if uri else {})}
    if isinstance(error, InvalidInputError | NotFoundError):
        log.info("%s refused: %s", method, error.message)
        return MCPError(code=INVALID_PARAMS, message=error.message, data=data)
    log.warning("%s failed: %s", method, error.message, exc_info=exc)
    return MCPError(code=INTERNAL_ERROR, message=error.message, data=data)
