"""Delimited tables keep their columns whatever separator wrote them
(`services.converter.delimited`): Excel's semicolons where the decimal mark is a comma, tabs,
pipes; commas inside quoted text do not fool it, and a one-column file stays one column."""

from __future__ import annotations

import csv
import io

import pytest

from services.converter.delimited import as_comma_separated, separator_of

EUROPEAN_EXCEL = "article;prix;stock\ncrème brûlée;4,50;12\nmadeleine;1,20;40\nfar breton;3,10;7\n"


@pytest.mark.parametrize(
    ("text", "own", "expected"),
    [
        (EUROPEAN_EXCEL, ",", ";"),
        ("name\tlanguage\nlancedb\trust\nmarkitdown\tpython\n", ",", "\t"),
        ("a|b|c\n1|2|3\n4|5|6\n", ",", "|"),
        ('name,comment\nx,"semi; colon; here"\ny,"and; more; of; them"\n', ",", ","),
        ("just one column\nvalue\nother value\n", ",", ","),
        ("just one column\nvalue\n", "\t", "\t"),
        # A tie keeps the file type's own separator: one row cut alike by both.
        ("a,b;c\n", ",", ","),
        ("a\tb,c\n", "\t", "\t"),
        ("", ",", ","),
    ],
)
def test_the_separator_is_the_one_that_cuts_rows_alike(text: str, own: str, expected: str) -> None:
    assert separator_of(text, own) == expected


def test_a_long_file_is_judged_by_its_whole_first_rows() -> None:
    text = "k;v\n" + "".join(f"row {i};{i},5\n" for i in range(20_000))
    assert len(text) > 64 * 1024
    assert separator_of(text) == ";"


def test_rewritten_with_commas_the_cells_are_the_same() -> None:
    rewritten = as_comma_separated(EUROPEAN_EXCEL, ";")
    assert list(csv.reader(io.StringIO(rewritten))) == [
        line.split(";") for line in EUROPEAN_EXCEL.splitlines()
    ]
    assert '"4,50"' in rewritten  # quoted, so the decimal comma stays in its cell
