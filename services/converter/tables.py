"""Markdown tables in a chunk's text: the header a chunk that starts among a table's rows
repeats, so that every chunk of a long table (a CSV, a sheet) says what its columns are."""

from __future__ import annotations

from dataclasses import dataclass

from libs.tables import ROW, RULE


@dataclass(frozen=True)
class Table:
    """A table in a text: its header (first row and rule line, newline included), and the
    characters `body_start:end` its other rows take."""

    header: str
    body_start: int
    end: int

    def header_for(self, start: int) -> str:
        """The header a chunk starting at `start` repeats: this table's, if `start` is among
        its rows; else ""."""
        return self.header if self.body_start <= start < self.end else ""


def tables_in(text: str) -> list[Table]:
    """Every table of `text`: a row, a rule line under it, then rows."""
    found: list[Table] = []
    lines = text.split("\n")
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line) + 1)
    k = 0
    while k + 1 < len(lines):
        if ROW.match(lines[k]) and RULE.match(lines[k + 1]):
            end = k + 2
            while end < len(lines) and ROW.match(lines[end]):
                end += 1
            header = text[offsets[k] : offsets[k + 2]]
            found.append(Table(header, offsets[k + 2], offsets[end] - 1))
            k = end
        else:
            k += 1
    return found
