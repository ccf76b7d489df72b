"""The search-filter compiler: allowed fields, value types, safe quoting, clear errors."""

from __future__ import annotations

from typing import Any

import pytest

from libs.errors import InvalidInputError
from services.index.filters import FILTER_FIELDS, compile_filter, equals, quote


def test_nothing_to_filter_gives_no_clause() -> None:
    assert compile_filter(None) is None
    assert compile_filter({}) is None


@pytest.mark.parametrize(
    ("filters", "library", "expected"),
    [
        ({"file_type": "pdf"}, None, "file_type = 'pdf'"),
        ({"file_type": "pdf", "page": 3}, None, "file_type = 'pdf' AND page = 3"),
        ({"chunk_index": 0}, None, "chunk_index = 0"),
        (
            {"last_modified": "2025-01-01T00:00:00+00:00"},
            None,
            "last_modified = '2025-01-01T00:00:00+00:00'",
        ),
        ({}, "research", "library = 'research'"),
        ({"title": "A"}, "research", "library = 'research' AND title = 'A'"),
        ({"library": "b"}, "a", "library = 'a' AND library = 'b'"),
        ({"doc_id": "abc", "source": "/x.md"}, None, "doc_id = 'abc' AND source = '/x.md'"),
    ],
)
def test_equality_clauses(filters: dict[str, Any], library: str | None, expected: str) -> None:
    assert compile_filter(filters, library=library) == expected


def test_every_documented_field_is_filterable() -> None:
    assert set(FILTER_FIELDS) == {
        "file_type",
        "page",
        "last_modified",
        "source",
        "title",
        "library",
        "doc_id",
        "chunk_index",
    }


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        ("x' OR '1'='1", "'x'' OR ''1''=''1'"),
        ("'; DROP TABLE chunks; --", "'''; DROP TABLE chunks; --'"),
        ("back\\slash'", "'back\\slash'''"),
        ("", "''"),
        ("naïve ☃", "'naïve ☃'"),
    ],
)
def test_quotes_are_doubled_so_values_stay_values(value: str, literal: str) -> None:
    assert quote(value) == literal
    assert compile_filter({"source": value}) == f"source = {literal}"


def test_injection_through_library_scope_is_quoted_too() -> None:
    assert compile_filter(None, library="a' OR 'x'='x") == "library = 'a'' OR ''x''=''x'"


def test_unknown_field_is_refused_with_the_allowed_list() -> None:
    with pytest.raises(InvalidInputError) as caught:
        compile_filter({"author": "Alice"})
    message = caught.value.message
    assert "'author'" in message
    for name in FILTER_FIELDS:
        assert name in message


@pytest.mark.parametrize("key", ["page = 1 OR 1", "content", "vector", "state", "Page", ""])
def test_field_names_never_come_from_the_request(key: str) -> None:
    with pytest.raises(InvalidInputError, match="unknown filter field"):
        compile_filter({key: 1})


@pytest.mark.parametrize("value", [True, False, 3.0, "3", None, [3], {"$gt": 3}])
def test_integer_fields_need_integers(value: Any) -> None:
    with pytest.raises(InvalidInputError, match="'page' needs an integer"):
        compile_filter({"page": value})


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 10**30])
def test_integer_fields_refuse_values_outside_int32(value: int) -> None:
    with pytest.raises(InvalidInputError, match="out of range"):
        compile_filter({"chunk_index": value})


def test_integer_bounds_are_accepted() -> None:
    assert compile_filter({"page": 2**31 - 1}) == f"page = {2**31 - 1}"
    assert compile_filter({"page": -(2**31)}) == f"page = {-(2**31)}"


@pytest.mark.parametrize("value", [1, 1.5, True, None, ["pdf"], {"$eq": "pdf"}])
def test_string_fields_need_strings(value: Any) -> None:
    with pytest.raises(InvalidInputError, match="'file_type' needs a string"):
        compile_filter({"file_type": value})


def test_equals_quotes_internal_values() -> None:
    assert equals("source", "it's") == "source = 'it''s'"
