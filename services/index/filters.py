"""Search filters (grammar: `libs.filters`) to LanceDB SQL `where` clauses, safely.

Column names come from the allow-list or are fixed here, never from the request; string
values are quoted with single quotes doubled (Lance SQL has no backslash escapes), numbers
pass through `int()` / `float()`. So `x' OR '1'='1` is just a string that matches nothing.
Substrings are matched with `strpos`, not `LIKE`, so `%`, `_` and `\\` in a value are plain
characters, and `$contains` is case-sensitive.

Metadata conditions read two columns the store derives from the document metadata at write
time (see `metadata_columns`), so every condition stays a LanceDB prefilter and `top_k` is
exact:
- `meta_json`, a Lance JSON column holding the top-level keys whose values are text, numbers
  or booleans. `json_get_string` reads a value as text (numbers and booleans in their JSON
  spelling); a number in a filter compares with `TRY_CAST(... AS DOUBLE)`, which is NULL for
  values that do not read as numbers, so they never match and never make the query fail.
- `meta_list`, a `list<string>` of `key=value` entries, one per element of top-level lists of
  scalars: a list matches `$eq` / `$in` / `$contains` when one element equals the value, and
  `$ne` when none does. Lists and nested objects are kept out of `meta_json` because
  `json_get_string` fails the whole query on them.
A missing key is NULL: it matches `$ne` and nothing else.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from libs.errors import InvalidInputError
from libs.filters import (
    FIELDS,
    METADATA_KEY,
    METADATA_NUMBER_LIMIT,
    Condition,
    FilterError,
    Scalar,
    parse_filter,
    scalar_text,
)

FILTER_FIELDS = FIELDS
META_JSON = "meta_json"
META_LIST = "meta_list"
# Chunk columns stored as NULL where the contract says 0 (no page, no known line), and read
# back as 0. Lance takes a few rows of a column whose values are all equal in a data file by
# decoding that file's whole column (about 3 ms a column at a million rows, on every
# search's read of its hits), and a column of NULLs does not pay that (docs/benchmarks.md,
# 0.8.13). A filter compares them as 0, as the contract has it.
ZERO_AS_NULL = frozenset({"page", "start_line", "end_line"})

_SQL_OPS = {"$eq": "=", "$ne": "<>", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def quote(value: str) -> str:
    """A Lance SQL string literal for any text."""
    return "'" + value.replace("'", "''") + "'"


def equals(column: str, value: str) -> str:
    """`column = 'value'` for a trusted column name (internal use and the allow-list)."""
    return f"{column} = {quote(value)}"


def _number(value: int | float) -> str:
    # repr keeps every digit a double has; ints within ±2**53 print exactly.
    return str(int(value)) if isinstance(value, int) else repr(float(value))


def _column_literal(condition: Condition, value: Scalar) -> str:
    if condition.kind == "int":
        return str(int(value))
    return quote(str(value))


def _column_clause(condition: Condition) -> str:
    column = condition.field
    if column in ZERO_AS_NULL:
        column = f"COALESCE({column}, 0)"
    if condition.op == "$in":
        assert isinstance(condition.value, tuple)
        values = ", ".join(_column_literal(condition, v) for v in condition.value)
        return f"{column} IN ({values})"
    assert not isinstance(condition.value, tuple)
    if condition.op == "$contains":
        return f"strpos({column}, {quote(str(condition.value))}) > 0"
    return f"{column} {_SQL_OPS[condition.op]} {_column_literal(condition, condition.value)}"


def _is_number(value: Scalar) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _entry(key: str, value: Scalar) -> str:
    return quote(f"{key}={scalar_text(value)}")


def _scalar_equals(text: str, number: str, value: Scalar) -> str:
    if _is_number(value):
        assert isinstance(value, int | float)
        return f"{number} = {_number(value)}"
    return f"{text} = {quote(scalar_text(value))}"


def _metadata_clause(condition: Condition) -> str:
    key = condition.metadata_key
    assert key is not None
    text = f"json_get_string({META_JSON}, {quote(key)})"
    number = f"TRY_CAST({text} AS DOUBLE)"
    op, value = condition.op, condition.value
    if op == "$in":
        assert isinstance(value, tuple)
        texts = [quote(scalar_text(v)) for v in value if not _is_number(v)]
        numbers = [_number(v) for v in value if isinstance(v, int | float) and _is_number(v)]
        parts = []
        if texts:
            parts.append(f"{text} IN ({', '.join(texts)})")
        if numbers:
            parts.append(f"{number} IN ({', '.join(numbers)})")
        entries = ", ".join(_entry(key, v) for v in value)
        parts.append(f"array_has_any({META_LIST}, make_array({entries}))")
        return "(" + " OR ".join(parts) + ")"
    assert not isinstance(value, tuple)
    in_list = f"array_has({META_LIST}, {_entry(key, value)})"
    if op == "$eq":
        return f"({_scalar_equals(text, number, value)} OR {in_list})"
    if op == "$ne":
        target = number if _is_number(value) else text
        return (
            f"(({target} IS NULL OR NOT {_scalar_equals(text, number, value)}) AND NOT {in_list})"
        )
    if op == "$contains":
        return f"(strpos({text}, {quote(str(value))}) > 0 OR {in_list})"
    if _is_number(value):
        assert isinstance(value, int | float)
        return f"{number} {_SQL_OPS[op]} {_number(value)}"
    return f"{text} {_SQL_OPS[op]} {quote(str(value))}"


def compile_filter(filters: Mapping[str, Any] | None, *, library: str | None = None) -> str | None:
    """The `where` clause for a search, or None when nothing restricts it.

    `library` is the request's own library scope; it behaves like `{"library": ...}`.
    """
    try:
        conditions = parse_filter(filters)
    except FilterError as exc:
        raise InvalidInputError(str(exc)) from exc
    clauses: list[str] = []
    if library is not None:
        clauses.append(equals("library", library))
    for condition in conditions:
        if condition.kind == "metadata":
            clauses.append(_metadata_clause(condition))
        else:
            clauses.append(_column_clause(condition))
    return " AND ".join(clauses) or None


def metadata_columns(metadata: Mapping[str, Any]) -> tuple[str, list[str]]:
    """`meta_json` text and `meta_list` entries for one document's metadata.

    Only keys that a filter can name are kept. Integral floats become integers so that text
    comparisons read them the way `scalar_text` writes them; numbers a double cannot hold
    exactly are left out (a filter could not name them exactly either).
    """
    scalars: dict[str, Scalar] = {}
    entries: list[str] = []
    for key, value in metadata.items():
        if not METADATA_KEY.fullmatch(key):
            continue
        if isinstance(value, list):
            for element in value:
                scalar = _filterable(element)
                if scalar is not None:
                    entry = f"{key}={scalar_text(scalar)}"
                    if entry not in entries:
                        entries.append(entry)
            continue
        scalar = _filterable(value)
        if scalar is not None:
            scalars[key] = scalar
    text = json.dumps(scalars, ensure_ascii=False, separators=(",", ":"))
    return text, entries


def _filterable(value: Any) -> Scalar | None:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if abs(value) > METADATA_NUMBER_LIMIT:
            return None
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value
    return None
