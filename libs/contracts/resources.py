"""Documents as MCP resources: `mcpvectordb://{library}/{doc_id}`, the document's Markdown
exactly as `get_document` returns it.

The library is percent-encoded in the URI (a library name may hold `/`, spaces, any text);
the doc_id is the document's UUID. `resources/list` pages through every document of every
library, by library and then by source (keyset pagination, so pages neither repeat nor skip
documents while others are written), with an opaque cursor.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote, unquote

from pydantic import Field

from libs.contracts.fields import MAX_DOC_ID_CHARS, MAX_LIBRARY_CHARS, Out, ToolInput
from libs.contracts.sync import Cursor
from libs.errors import InvalidInputError

SCHEME = "mcpvectordb"
URI_TEMPLATE = f"{SCHEME}://{{library}}/{{doc_id}}"
MARKDOWN = "text/markdown"
MAX_RESOURCE_PAGE = 200


def document_uri(library: str, doc_id: str) -> str:
    return f"{SCHEME}://{quote(library, safe='')}/{quote(doc_id, safe='')}"


def parse_document_uri(uri: str) -> tuple[str, str]:
    """(library, doc_id) of a document URI; InvalidInputError when it is not one."""
    head = f"{SCHEME}://"
    library, _, doc_id = uri.removeprefix(head).partition("/")
    library, doc_id = unquote(library), unquote(doc_id)
    if (
        not uri.startswith(head)
        or not library
        or not doc_id
        or "/" in doc_id
        or len(library) > MAX_LIBRARY_CHARS
        or len(doc_id) > MAX_DOC_ID_CHARS
    ):
        raise InvalidInputError(
            f"{uri!r} is not a document URI; documents are {URI_TEMPLATE} "
            "(resources/list gives each one's URI)"
        )
    return library, doc_id


class ResourcePageInput(ToolInput):
    cursor: Cursor = None
    limit: Annotated[int, Field(ge=1, le=MAX_RESOURCE_PAGE)] = 100


class DocumentRef(Out):
    uri: str
    library: str
    doc_id: str
    source: str
    file_type: str = ""


class DocumentRefPage(Out):
    documents: list[DocumentRef]
    next_cursor: str | None = None


class DocumentUriInput(ToolInput):
    uri: Annotated[str, Field(min_length=1, max_length=4 * (MAX_LIBRARY_CHARS + 64))]
