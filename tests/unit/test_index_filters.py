"""The search filter: grammar (`libs.filters`) and compiler (`services.index.filters`).

Allowed fields and operators, value types, limits, safe quoting, clear errors, and the
metadata columns the store derives for metadata conditions. What the clauses match in a real
LanceDB is pinned in tests/integration/test_index_search_features.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from libs.contracts import SearchInput
from libs.errors import InvalidInputError
from libs.filters import (
    MAX_CONDITIONS,
    MAX_IN_VALUES,
    OPERATORS,
    Condition,
    FilterError,
    parse_filter,
    scalar_text,
)
from services.index.filters import (
    FILTER_FIELDS,
    compile_filter,
    equals,
    metadata_columns,
    quote,
)

META_TEXT = "json_get_string(meta_json, '{key}')"
META_NUMBER = "TRY_CAST(json_get_string(meta_json, '{key}') AS DOUBLE)"


def test_nothing_to_filter_gives_no_clause() -> None:
    assert compile_filter(None) is None
    assert compile_filter({}) is None


@pytest.mark.parametrize(
    ("filters", "library", "expected"),
    [
        ({"file_type": "pdf"}, None, "file_type = 'pdf'"),
        ({"file_type": "pdf", "page": 3}, None, "file_type = 'pdf' AND COALESCE(page, 0) = 3"),
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


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"page": {"$eq": 2}}, "COALESCE(page, 0) = 2"),
        ({"page": {"$ne": 2}}, "COALESCE(page, 0) <> 2"),
        ({"page": {"$gt": 2}}, "COALESCE(page, 0) > 2"),
        ({"page": {"$gte": 2, "$lte": 7}}, "COALESCE(page, 0) >= 2 AND COALESCE(page, 0) <= 7"),
        ({"chunk_index": {"$lt": 10}}, "chunk_index < 10"),
        ({"page": {"$in": [1, 3, 5]}}, "COALESCE(page, 0) IN (1, 3, 5)"),
        ({"file_type": {"$in": ["pdf", "docx"]}}, "file_type IN ('pdf', 'docx')"),
        ({"file_type": {"$ne": "pdf"}}, "file_type <> 'pdf'"),
        (
            {"last_modified": {"$gte": "2025-01-01", "$lt": "2026-01-01"}},
            "last_modified >= '2025-01-01' AND last_modified < '2026-01-01'",
        ),
        ({"title": {"$contains": "Report"}}, "strpos(title, 'Report') > 0"),
        ({"source": {"$contains": "100%_a\\b"}}, "strpos(source, '100%_a\\b') > 0"),
    ],
)
def test_operators_on_chunk_fields(filters: dict[str, Any], expected: str) -> None:
    assert compile_filter(filters) == expected


def test_metadata_equality_reads_scalars_and_list_elements() -> None:
    text, number = META_TEXT.format(key="author"), META_NUMBER.format(key="year")
    assert compile_filter({"metadata.author": "Alice"}) == (
        f"({text} = 'Alice' OR array_has(meta_list, 'author=Alice'))"
    )
    assert compile_filter({"metadata.year": 2021}) == (
        f"({number} = 2021 OR array_has(meta_list, 'year=2021'))"
    )
    flag = META_TEXT.format(key="draft")
    assert compile_filter({"metadata.draft": True}) == (
        f"({flag} = 'true' OR array_has(meta_list, 'draft=true'))"
    )


def test_metadata_ranges_compare_numbers_as_numbers_and_text_as_text() -> None:
    number, text = META_NUMBER.format(key="year"), META_TEXT.format(key="year")
    assert compile_filter({"metadata.year": {"$gte": 2020, "$lt": 2025.5}}) == (
        f"{number} >= 2020 AND {number} < 2025.5"
    )
    assert compile_filter({"metadata.year": {"$gt": "2020"}}) == f"{text} > '2020'"


def test_metadata_ne_keeps_missing_keys_and_lists_without_the_value() -> None:
    text = META_TEXT.format(key="status")
    assert compile_filter({"metadata.status": {"$ne": "draft"}}) == (
        f"(({text} IS NULL OR NOT {text} = 'draft') AND NOT array_has(meta_list, 'status=draft'))"
    )


def test_metadata_in_and_contains() -> None:
    text, number = META_TEXT.format(key="k"), META_NUMBER.format(key="k")
    assert compile_filter({"metadata.k": {"$in": ["a", 2, False]}}) == (
        f"({text} IN ('a', 'false') OR {number} IN (2) OR "
        "array_has_any(meta_list, make_array('k=a', 'k=2', 'k=false')))"
    )
    assert compile_filter({"metadata.k": {"$contains": "x"}}) == (
        f"(strpos({text}, 'x') > 0 OR array_has(meta_list, 'k=x'))"
    )


def test_metadata_keys_may_hold_dots_and_dashes_as_plain_characters() -> None:
    clause = compile_filter({"metadata.a.b-c_d": "v"})
    assert clause is not None and "json_get_string(meta_json, 'a.b-c_d')" in clause


def test_the_library_scope_comes_first() -> None:
    assert (
        compile_filter({"page": {"$gt": 1}}, library="lib")
        == "library = 'lib' AND COALESCE(page, 0) > 1"
    )


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
    assert OPERATORS == ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$contains")


# ------------------------------------------------------------------------- injection

INJECTIONS = [
    ("x' OR '1'='1", "'x'' OR ''1''=''1'"),
    ("'; DROP TABLE chunks; --", "'''; DROP TABLE chunks; --'"),
    ("') OR 1=1 --", "''') OR 1=1 --'"),
    ("back\\slash'", "'back\\slash'''"),
    ("100% _under_", "'100% _under_'"),
    ("", "''"),
    ("naïve ☃", "'naïve ☃'"),
]


@pytest.mark.parametrize(("value", "literal"), INJECTIONS)
def test_quotes_are_doubled_so_values_stay_values(value: str, literal: str) -> None:
    assert quote(value) == literal
    assert compile_filter({"source": value}) == f"source = {literal}"
    assert compile_filter({"title": {"$in": [value]}}) == f"title IN ({literal})"
    assert compile_filter({"title": {"$gt": value}}) == f"title > {literal}"


@pytest.mark.parametrize(("value", "literal"), [v for v in INJECTIONS if v[0]])
def test_contains_and_metadata_values_are_quoted_too(value: str, literal: str) -> None:
    assert compile_filter({"title": {"$contains": value}}) == f"strpos(title, {literal}) > 0"
    clause = compile_filter({"metadata.note": value})
    assert clause is not None
    assert f"= {literal}" in clause
    assert f"array_has(meta_list, {quote('note=' + value)})" in clause


def test_injection_through_library_scope_is_quoted_too() -> None:
    assert compile_filter(None, library="a' OR 'x'='x") == "library = 'a'' OR ''x''=''x'"


# ------------------------------------------------------------------------ validation


def refused(filters: Any) -> str:
    with pytest.raises(InvalidInputError) as caught:
        compile_filter(filters)
    return caught.value.message


def test_unknown_field_is_refused_with_the_allowed_list() -> None:
    message = refused({"author": "Alice"})
    assert "'author'" in message
    for name in FILTER_FIELDS:
        assert name in message
    assert "metadata.<key>" in message


@pytest.mark.parametrize("key", ["page = 1 OR 1", "content", "vector", "state", "Page", ""])
def test_field_names_never_come_from_the_request(key: str) -> None:
    assert "unknown filter field" in refused({key: 1})


@pytest.mark.parametrize(
    "key",
    [
        "metadata.",
        "metadata.a b",
        "metadata.a'b",
        "metadata.a=b",
        "metadata.x') OR 1=1 --",
        "metadata.ünï",
        "metadata." + "k" * 65,
    ],
)
def test_metadata_keys_are_limited_to_a_safe_charset(key: str) -> None:
    message = refused({key: "v"})
    assert repr(key) in message
    assert "letters, digits, '_', '.' and '-'" in message


def test_a_64_character_metadata_key_is_accepted() -> None:
    assert compile_filter({"metadata." + "k" * 64: "v"}) is not None


@pytest.mark.parametrize("op", ["$regex", "$like", "gt", "$GT", "$exists", "$nin"])
def test_unknown_operators_are_named_with_the_allowed_ones(op: str) -> None:
    message = refused({"title": {op: "x"}})
    assert f"unknown operator {op!r} on filter field 'title'" in message
    assert "$eq, $ne, $gt, $gte, $lt, $lte, $in, $contains" in message


def test_an_empty_operator_object_is_refused() -> None:
    assert "empty operator object" in refused({"page": {}})


@pytest.mark.parametrize("value", [True, False, 3.0, "3", None, [3], {"$gt": "3"}])
def test_integer_fields_need_integers(value: Any) -> None:
    message = refused({"page": value})
    assert "'page'" in message and "needs an integer" in message


@pytest.mark.parametrize("op", ["$gt", "$gte", "$lt", "$lte", "$ne"])
def test_numeric_operators_on_integer_fields_need_integers(op: str) -> None:
    assert f"'chunk_index' {op} needs an integer" in refused({"chunk_index": {op: 1.5}})


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 10**30])
def test_integer_fields_refuse_values_outside_int32(value: int) -> None:
    assert "out of range" in refused({"chunk_index": value})


def test_integer_bounds_are_accepted() -> None:
    assert compile_filter({"page": 2**31 - 1}) == f"COALESCE(page, 0) = {2**31 - 1}"
    assert compile_filter({"page": -(2**31)}) == f"COALESCE(page, 0) = {-(2**31)}"


@pytest.mark.parametrize("value", [1, 1.5, True, None, ["pdf"], {"$eq": 1}])
def test_string_fields_need_strings(value: Any) -> None:
    message = refused({"file_type": value})
    assert "'file_type'" in message and "needs a string" in message


def test_contains_needs_text_on_a_text_field() -> None:
    assert "is an integer field" in refused({"page": {"$contains": "1"}})
    assert "$contains needs a non-empty string" in refused({"title": {"$contains": ""}})
    assert "$contains needs a non-empty string" in refused({"title": {"$contains": 3}})
    assert "$contains needs a non-empty string" in refused({"metadata.k": {"$contains": 3}})


@pytest.mark.parametrize("value", [[], "pdf", None, 3, {"a": 1}])
def test_in_needs_a_non_empty_list(value: Any) -> None:
    assert "$in needs a non-empty list" in refused({"file_type": {"$in": value}})


def test_in_takes_a_bounded_list_of_scalars_of_the_field_type() -> None:
    assert compile_filter({"page": {"$in": list(range(MAX_IN_VALUES))}}) is not None
    assert f"at most {MAX_IN_VALUES} values" in refused(
        {"page": {"$in": list(range(MAX_IN_VALUES + 1))}}
    )
    assert "needs an integer" in refused({"page": {"$in": [1, "2"]}})
    assert "needs a string" in refused({"file_type": {"$in": ["pdf", ["md"]]}})
    assert "needs a string, a number or a boolean" in refused({"metadata.k": {"$in": [None]}})


def test_metadata_values_are_scalars_and_ranges_refuse_booleans() -> None:
    assert "needs a string, a number or a boolean" in refused({"metadata.k": None})
    assert "needs a string, a number or a boolean" in refused({"metadata.k": {"$eq": [1]}})
    assert "not a boolean" in refused({"metadata.k": {"$gt": True}})
    assert "finite number" in refused({"metadata.k": float("nan")})
    assert "finite number" in refused({"metadata.k": {"$lt": float("inf")}})
    assert "±2**53" in refused({"metadata.k": 2**53 + 1})


def test_text_values_and_condition_counts_are_bounded() -> None:
    assert "at most 8192 characters" in refused({"title": "x" * 8193})
    many = {f"metadata.k{i}": "v" for i in range(MAX_CONDITIONS + 1)}
    assert f"at most {MAX_CONDITIONS} conditions" in refused(many)


def test_a_filter_must_be_an_object() -> None:
    with pytest.raises(FilterError, match="must be an object"):
        parse_filter(["file_type", "pdf"])  # type: ignore[arg-type]


def test_the_tool_input_refuses_the_same_filters_before_any_work() -> None:
    with pytest.raises(ValidationError) as caught:
        SearchInput(query="x", filter={"page": {"$between": [1, 2]}})
    assert "unknown operator '$between'" in str(caught.value)
    assert SearchInput(query="x", filter={"metadata.k": {"$in": ["a"]}}).filter is not None


def test_parse_keeps_order_and_kinds() -> None:
    assert parse_filter({"page": {"$gte": 1, "$lte": 2}, "metadata.a": "x"}) == [
        Condition("page", "$gte", 1, "int"),
        Condition("page", "$lte", 2, "int"),
        Condition("metadata.a", "$eq", "x", "metadata"),
    ]


def test_equals_quotes_internal_values() -> None:
    assert equals("source", "it's") == "source = 'it''s'"


# ------------------------------------------------------------ derived metadata columns


def test_metadata_columns_keep_filterable_scalars_and_list_elements() -> None:
    text, entries = metadata_columns(
        {
            "author": "Alice",
            "year": 2021.0,
            "rating": 4.5,
            "draft": False,
            "tags": ["x", "y", "x", 3, True, {"no": 1}, None],
            "nested": {"a": 1},
            "nothing": None,
            "bad key": "v",
            "huge": 2**60,
            "inf": float("inf"),
        }
    )
    assert json.loads(text) == {"author": "Alice", "year": 2021, "rating": 4.5, "draft": False}
    assert entries == ["tags=x", "tags=y", "tags=3", "tags=true"]


def test_list_entries_and_filters_spell_scalars_alike() -> None:
    assert [scalar_text(v) for v in ("a", 3, 3.0, 2.5, True, False)] == [
        "a",
        "3",
        "3",
        "2.5",
        "true",
        "false",
    ]
