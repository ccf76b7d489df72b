"""Delimited tables (`.csv`, `.tsv`) read with the separator they were written with.

markitdown reads CSV with commas only. Excel in the many locales whose decimal mark is a
comma (most of continental Europe, Latin America) saves "CSV" with semicolons, and database
and spreadsheet exports are often tab-separated: read with commas, each row of those became
one cell, or was cut at every decimal comma ("4,50 €" → "4" | "50 €"). So the separator is
chosen first: of comma, semicolon, tab and pipe, the one that cuts the most rows of the
file's start into the same number (more than one) of fields; the file type's own separator
(comma for `.csv`, tab for `.tsv`) keeps ties. A table in another separator is rewritten
with commas, quoting where needed, for markitdown's table converter.
"""

from __future__ import annotations

import csv
import io
from collections import Counter

SEPARATORS = (",", ";", "\t", "|")
OWN_SEPARATOR = {".csv": ",", ".tsv": "\t"}
# How much of the file's start is read to choose: a few hundred rows of a typical export.
_SAMPLE_CHARS = 64 * 1024


def separator_of(text: str, own: str = ",") -> str:
    """The separator `text` was written with (see the module docstring)."""
    sample = text[:_SAMPLE_CHARS]
    if len(text) > _SAMPLE_CHARS and "\n" in sample:
        sample = sample[: sample.rindex("\n") + 1]  # whole rows only
    best, best_share = own, _regular_share(sample, own)
    for separator in SEPARATORS:
        share = _regular_share(sample, separator)
        if share > best_share:
            best, best_share = separator, share
    return best


def as_comma_separated(text: str, separator: str) -> str:
    """`text`'s rows, split at `separator`, written back with commas."""
    out = io.StringIO()
    rows = csv.reader(io.StringIO(text, newline=""), delimiter=separator)
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _regular_share(sample: str, separator: str) -> float:
    """The share of non-empty rows with the commonest field count, 0 if that count is 1."""
    try:
        rows = [r for r in csv.reader(io.StringIO(sample, newline=""), delimiter=separator) if r]
    except csv.Error:
        return 0.0
    if not rows:
        return 0.0
    width, count = Counter(len(row) for row in rows).most_common(1)[0]
    return count / len(rows) if width > 1 else 0.0
