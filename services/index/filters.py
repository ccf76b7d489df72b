"""Search filters to LanceDB SQL `where` clauses, safely.

A filter is `{field: value}`, conditions AND-ed, equality only. Column names come from an
allow-list, never from the request; string values are quoted with single quotes doubled
(Lance SQL has no backslash escapes), integers pass through `int()`. So `x' OR '1'='1` is just
a string that matches nothing. Each field has a kind that decides which values it accepts,
which is where comparison operators and `metadata.<key>` will slot in later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from libs.errors import InvalidInputError

FieldKind = Literal["string", "int"]

FILTER_FIELDS: dict[str, FieldKind] = {
    "file_type": "string",
    "page": "int",
    "last_modified": "string",
    "source": "string",
    "title": "string",
    "library": "string",
    "doc_id": "string",
    "chunk_index": "int",
}

# page and chunk_index are int32 columns; a wider literal is a query error in Lance.
INT_MIN = -(2**31)
INT_MAX = 2**31 - 1


def quote(value: str) -> str:
    """A Lance SQL string literal for any text."""
    return "'" + value.replace("'", "''") + "'"


def equals(column: str, value: str) -> str:
    """`column = 'value'` for a trusted column name (internal use and the allow-list)."""
    return f"{column} = {quote(value)}"


def _allowed() -> str:
    return ", ".join(sorted(FILTER_FIELDS))


def _literal(key: str, kind: FieldKind, value: Any) -> str:
    if kind == "int":
        # bool is an int subclass in Python, but `{"page": true}` is a caller mistake.
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInputError(
                f"filter {key!r} needs an integer, got {type(value).__name__} {value!r}"
            )
        if not INT_MIN <= value <= INT_MAX:
            raise InvalidInputError(
                f"filter {key!r} is out of range: {value} (allowed {INT_MIN}..{INT_MAX})"
            )
        return str(int(value))
    if not isinstance(value, str):
        raise InvalidInputError(
            f"filter {key!r} needs a string, got {type(value).__name__} {value!r}"
        )
    return quote(value)


def compile_filter(filters: Mapping[str, Any] | None, *, library: str | None = None) -> str | None:
    """The `where` clause for a search, or None when nothing restricts it.

    `library` is the request's own library scope; it behaves like `{"library": ...}`.
    """
    clauses: list[str] = []
    if library is not None:
        clauses.append(equals("library", library))
    for key, value in (filters or {}).items():
        kind = FILTER_FIELDS.get(key)
        if kind is None:
            raise InvalidInputError(
                f"unknown filter field {key!r}; filterable fields are: {_allowed()}"
            )
        clauses.append(f"{key} = {_literal(key, kind, value)}")
    return " AND ".join(clauses) or None
