"""Markdown tables as the converter writes them (markitdown's pipe tables): a header row, a
rule line under it, then rows. The converter's chunker repeats a long table's header at the top
of each of its chunks (`tables_in`, `Table.header_for`), so that every chunk of a long table
(a CSV, a sheet) says what its columns are; whoever finds a chunk in its document's Markdown
(`services.index.store.reads.window_markdown`) looks for the text after such a header
(`header_length`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$")
RULE = re.compile(r"^[ \t]*\|(?:[ \t]*:?-{3,}:?[ \t]*\|)+[ \t]*$")


def header_length(text: str) -> int:
    """How many characters of `text` a table header takes at its start (its row, its rule
    line and their newlines); 0 if `text` does not open with one followed by more."""
    lines = text.split("\n", 2)
    if len(lines) == 3 and ROW.match(lines[0]) and RULE.match(lines[1]):
        return len(lines[0]) + len(lines[1]) + 2
    return 0


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


def markdown_table(rows: list[list[str]]) -> str:
    """`rows` (the first is the header) as a pipe table in that shape, for the converters
    that read tables themselves (OpenDocument, RTF). Rows are padded to the widest; a `|` in
    a cell is escaped and a line break becomes a space, so each row stays one line."""
    width = max((len(row) for row in rows), default=0)
    if not width:
        return ""

    def line(cells: list[str]) -> str:
        padded = [*cells, *[""] * (width - len(cells))]
        return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in padded) + " |"

    return "\n".join(
        [line(rows[0]), "| " + " | ".join(["---"] * width) + " |", *map(line, rows[1:])]
    )


def markdown_sheet(name: str, rows: list[list[str]]) -> str:
    """A spreadsheet's sheet as markitdown writes one of an .xlsx: `## name`, then its table
    (the converter's own readers of .ods and Excel files write sheets the same way, so that
    sheets become pages alike)."""
    return f"## {name}\n{markdown_table(rows)}"
