"""The `search` filter grammar, defined once: what callers may write and what it means.

A filter is a JSON object; every entry is one condition and all of them are AND-ed:

    {"file_type": "pdf"}                             equality (a plain value)
    {"page": {"$gte": 3, "$lte": 7}}                 several operators on one field, AND-ed
    {"metadata.author": {"$in": ["Alice", "Bob"]}}   a key of the user metadata

Fields are the chunk fields in `FIELDS` and `metadata.<key>`, where the key is a top-level
metadata key written with letters, digits, `_`, `.` and `-` (a dot is part of the key, not a
path). Operators are `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`, `$in` and `$contains`.

`parse_filter` turns a filter into `Condition`s or raises `FilterError` (a `ValueError`, so a
pydantic validator can use it) with a message naming the field, the operator and what is
allowed. It checks shapes and types only; turning conditions into a query is the index's job.
The gateway parses a filter before it embeds the query, the index parses it again before it
compiles it, so both refuse the same filters with the same words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

FieldKind = Literal["string", "int"]
Operator = Literal["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$contains"]
Scalar = str | int | float | bool

FIELDS: dict[str, FieldKind] = {
    "file_type": "string",
    "page": "int",
    "last_modified": "string",
    "source": "string",
    "title": "string",
    "library": "string",
    "doc_id": "string",
    "chunk_index": "int",
}

OPERATORS: tuple[Operator, ...] = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$contains")
RANGE_OPERATORS: frozenset[Operator] = frozenset({"$gt", "$gte", "$lt", "$lte"})

METADATA_PREFIX = "metadata."
METADATA_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_CONDITIONS = 32
MAX_IN_VALUES = 100
MAX_TEXT_CHARS = 8192

# page and chunk_index are int32 columns; a wider literal is a query error in Lance.
INT_MIN = -(2**31)
INT_MAX = 2**31 - 1
# Metadata numbers are compared as doubles, which hold integers exactly up to 2**53.
METADATA_NUMBER_LIMIT = 2**53


class FilterError(ValueError):
    """A filter that does not follow the grammar; the message says what to change."""


@dataclass(frozen=True)
class Condition:
    """One `field op value`. `metadata_key` is set for `metadata.<key>` fields; for `$in`,
    `value` is a tuple of scalars."""

    field: str
    op: Operator
    value: Scalar | tuple[Scalar, ...]
    kind: FieldKind | Literal["metadata"]

    @property
    def metadata_key(self) -> str | None:
        return self.field.removeprefix(METADATA_PREFIX) if self.kind == "metadata" else None


def allowed_fields() -> str:
    return (
        ", ".join(sorted(FIELDS)) + ", and metadata.<key> (key: letters, digits, '_', '.', '-', "
        "at most 64 characters)"
    )


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _check_text(field: str, op: str, value: str) -> str:
    if len(value) > MAX_TEXT_CHARS:
        raise FilterError(
            f"filter {field!r} {op}: text values are at most {MAX_TEXT_CHARS} characters"
        )
    return value


def _int_value(field: str, op: str, value: Any) -> int:
    # bool is an int subclass in Python, but `{"page": true}` is a caller mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        raise FilterError(f"filter {field!r} {op} needs an integer, got {_describe(value)}")
    if not INT_MIN <= value <= INT_MAX:
        raise FilterError(
            f"filter {field!r} {op} is out of range: {value} (allowed {INT_MIN}..{INT_MAX})"
        )
    return value


def _string_value(field: str, op: str, value: Any) -> str:
    if not isinstance(value, str):
        raise FilterError(f"filter {field!r} {op} needs a string, got {_describe(value)}")
    return _check_text(field, op, value)


def _metadata_value(field: str, op: str, value: Any, *, allow_bool: bool) -> Scalar:
    if isinstance(value, bool):
        if not allow_bool:
            raise FilterError(
                f"filter {field!r} {op} compares order; it needs a string or a number, "
                f"not a boolean"
            )
        return value
    if isinstance(value, str):
        return _check_text(field, op, value)
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise FilterError(f"filter {field!r} {op} needs a finite number, got {value!r}")
        if abs(value) > METADATA_NUMBER_LIMIT:
            raise FilterError(
                f"filter {field!r} {op}: metadata numbers are compared as doubles, so they "
                f"must lie within ±2**53; got {value!r}"
            )
        return value
    kinds = "a string, a number or a boolean" if allow_bool else "a string or a number"
    raise FilterError(f"filter {field!r} {op} needs {kinds}, got {_describe(value)}")


def _scalar(field: str, kind: FieldKind | Literal["metadata"], op: str, value: Any) -> Scalar:
    if kind == "int":
        return _int_value(field, op, value)
    if kind == "string":
        return _string_value(field, op, value)
    return _metadata_value(field, op, value, allow_bool=op not in RANGE_OPERATORS)


def _condition(
    field: str, kind: FieldKind | Literal["metadata"], op: Operator, value: Any
) -> Condition:
    if op == "$in":
        if not isinstance(value, list | tuple) or not value:
            raise FilterError(
                f"filter {field!r} $in needs a non-empty list of values, got {_describe(value)}"
            )
        if len(value) > MAX_IN_VALUES:
            raise FilterError(
                f"filter {field!r} $in takes at most {MAX_IN_VALUES} values, got {len(value)}"
            )
        return Condition(field, op, tuple(_scalar(field, kind, op, v) for v in value), kind)
    if op == "$contains":
        if kind == "int":
            raise FilterError(
                f"filter {field!r} $contains matches text, and {field!r} is an integer field; "
                "use $eq, $in or a range ($gt, $gte, $lt, $lte)"
            )
        if not isinstance(value, str) or not value:
            raise FilterError(
                f"filter {field!r} $contains needs a non-empty string, got {_describe(value)}"
            )
        return Condition(field, op, _check_text(field, op, value), kind)
    return Condition(field, op, _scalar(field, kind, op, value), kind)


def _field_kind(field: Any) -> FieldKind | Literal["metadata"]:
    if isinstance(field, str):
        kind = FIELDS.get(field)
        if kind is not None:
            return kind
        if field.startswith(METADATA_PREFIX):
            key = field.removeprefix(METADATA_PREFIX)
            if METADATA_KEY.fullmatch(key):
                return "metadata"
            raise FilterError(
                f"filter field {field!r}: metadata keys are 1 to 64 characters of letters, "
                "digits, '_', '.' and '-'"
            )
    raise FilterError(f"unknown filter field {field!r}; filterable fields are: {allowed_fields()}")


def parse_filter(raw: Mapping[str, Any] | None) -> list[Condition]:
    """The conditions of a filter, in the order written; [] for None or {}."""
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        raise FilterError(f"filter must be an object of field: condition, got {_describe(raw)}")
    conditions: list[Condition] = []
    for field, spec in raw.items():
        kind = _field_kind(field)
        if isinstance(spec, Mapping):
            if not spec:
                raise FilterError(
                    f"filter {field!r} has an empty operator object; "
                    f"use one or more of {', '.join(OPERATORS)}"
                )
            for op, value in spec.items():
                if op not in OPERATORS:
                    raise FilterError(
                        f"unknown operator {op!r} on filter field {field!r}; "
                        f"allowed operators: {', '.join(OPERATORS)}"
                    )
                conditions.append(_condition(field, kind, op, value))
        else:
            conditions.append(_condition(field, kind, "$eq", spec))
        if len(conditions) > MAX_CONDITIONS:
            raise FilterError(f"a filter holds at most {MAX_CONDITIONS} conditions")
    return conditions


def scalar_text(value: Scalar) -> str:
    """How a metadata scalar reads as text: the same at write time (list elements) and in
    filters, so `{"metadata.year": 2021}` finds `{"year": [2021]}`. Integral floats read as
    integers (2021.0 -> "2021"), booleans as `true` / `false`, as in JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) <= METADATA_NUMBER_LIMIT:
        return str(int(value))
    return str(value) if isinstance(value, str | int) else repr(value)
