"""Keeping a library in step with a folder (`mcpvectordb-sync`): the manifest of a library's
sources (`GET /sources`), delete by source, and the cursor that pages through the manifest.

The manifest lists each live document's source with the SHA-256 of the bytes it was made
from (`content_sha256`), which a client computes from its file without converting anything:
equal digests mean the upload would be `skipped`, unless the entry is `stale` (made before
its file type's conversion last changed, `libs.formats.CONVERTER_REVISION`), when the same
bytes are converted anew.
Pages are ordered by source and keyed on it (keyset pagination), so a page never repeats or
skips a source when others are added or deleted between pages; the cursor is opaque to
callers.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated

from pydantic import Field, computed_field

from libs.contracts.fields import (
    DEFAULT_LIBRARY,
    MAX_LIST_LIMIT,
    MAX_SOURCE_CHARS,
    LibraryName,
    Out,
    Source,
    ToolInput,
)
from libs.errors import InvalidInputError
from libs.formats import is_current

MAX_CURSOR_CHARS = 4 * MAX_SOURCE_CHARS

Prefix = Annotated[
    str,
    Field(
        max_length=MAX_SOURCE_CHARS,
        description="Only sources that start with this text (e.g. 'Projects/Q3/'); '' = all",
    ),
]
Cursor = Annotated[
    str | None,
    Field(
        max_length=MAX_CURSOR_CHARS,
        description="next_cursor of the previous page; omit for the first page",
    ),
]
SourcesLimit = Annotated[
    int,
    Field(ge=1, le=MAX_LIST_LIMIT, description=f"Sources per page (1-{MAX_LIST_LIMIT})"),
]


class ListSourcesInput(ToolInput):
    """`GET /sources`: one page of a library's manifest."""

    library: LibraryName = DEFAULT_LIBRARY
    prefix: Prefix = ""
    cursor: Cursor = None
    limit: SourcesLimit = MAX_LIST_LIMIT


class DeleteSourceInput(ToolInput):
    """`DELETE /documents?library=L&source=S`: the document at that identity."""

    library: LibraryName = DEFAULT_LIBRARY
    source: Source


class SourceEntry(Out):
    source: str
    doc_id: str
    content_sha256: str
    chunk_count: int
    file_type: str = ""
    last_modified: str = ""
    # The converter revision the document was made with (0: before 0.8.5, unknown).
    conversion: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def stale(self) -> bool:
        """Made by an older converter: sending the same bytes again converts them anew."""
        return not is_current(self.conversion, self.file_type)


class SourceList(Out):
    """A page of the manifest, by source; `next_cursor` is null on the last page."""

    sources: list[SourceEntry]
    next_cursor: str | None = None


def encode_cursor(*keys: str) -> str:
    """An opaque cursor holding the keys the next page starts after."""
    raw = json.dumps(list(keys), ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, size: int) -> list[str]:
    """The keys of a cursor made by `encode_cursor` with `size` keys; InvalidInputError if
    it is not one (a cursor from another listing, or edited)."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        keys = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise InvalidInputError(
            "the cursor is not one this listing gave out; pass next_cursor exactly as "
            "returned, or omit it to start from the first page"
        ) from exc
    if not isinstance(keys, list) or len(keys) != size or not all(isinstance(k, str) for k in keys):
        raise InvalidInputError(
            "the cursor is not one this listing gave out; pass next_cursor exactly as "
            "returned, or omit it to start from the first page"
        )
    return keys
