"""Markdown blocks from a word processor's paragraphs, for the readers that walk a document
paragraph by paragraph (`rtf`, `worddoc`): each reader says what a paragraph is (its text,
heading level, list marker and nesting, whether it sits in a table cell) and this writes it.

- a heading as `#`-`######`; a list item under its marker (`- `, `N. `), nested three spaces
  a level, one list with no blank line between its items;
- table cells and rows as one Markdown table whose first row is the header (a paragraph in a
  cell stays in the cell);
- footnotes as `[^n]` marks with their text at the end;
- blank lines between blocks, runs of blanks one space.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from libs.tables import markdown_table

_HEADING_NAME = re.compile(r"^(?:heading|\u00fcberschrift|titre)\s*(\d)$", re.IGNORECASE)
_NUMBERED = re.compile(r"^\(?[0-9A-Za-z]{1,4}[.)]$")
_BULLETS = frozenset("\u2022\u25cf\u25aa\u25a0\u25e6\u2013\u2014-*\u00b7\uf0b7o\u2023\u2043")


@dataclass
class Blocks:
    blocks: list[str] = field(default_factory=list)
    cell_text: list[str] = field(default_factory=list)  # the cell's paragraphs so far
    cells: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    listing: bool = False  # the last block is a list, which the next item continues
    notes: list[str] = field(default_factory=list)

    def paragraph(
        self,
        text: str,
        *,
        heading: int = 0,
        marker: str = "",
        level: int = 0,
        in_table: bool = False,
    ) -> None:
        """One paragraph: `heading` 1-6 or 0, `marker` as `list_marker` gives it, `level`
        the list nesting (0 the outermost)."""
        if self.cell_text and not in_table:  # a cell's paragraphs that no cell mark closed
            text = "".join(self.cell_text) + text
            self.cell_text.clear()
        text = text.strip()
        if in_table:
            if text:
                self.cell_text.append(text + " ")
            return
        self.end_table()
        if not text:
            return
        if marker and not heading:
            item = f"{'   ' * level}{marker}{text}"
            if self.listing:
                self.blocks[-1] += f"\n{item}"
            else:
                self.blocks.append(item)
        else:
            self.blocks.append(f"{'#' * min(heading, 6)} {text}" if heading else text)
        self.listing = bool(marker) and not heading

    def cell(self, text: str) -> None:
        self.cells.append(("".join(self.cell_text) + text).strip())
        self.cell_text.clear()

    def row(self) -> None:
        if any(self.cells):
            self.rows.append(self.cells)
        self.cells = []

    def block(self, text: str) -> None:
        """A block of its own (a text box's text)."""
        if text.strip():
            self.blocks.append(text.strip())
            self.listing = False

    def end_table(self) -> None:
        if self.rows:
            self.block(markdown_table(self.rows))
            self.rows = []

    def note(self, text: str) -> str:
        """The mark of a footnote whose text is `text` ('' for a note without text)."""
        text = " ".join(text.split())
        if not text:
            return ""
        self.notes.append(text)
        return f"[^{len(self.notes)}]"

    def markdown(self) -> str:
        self.end_table()
        notes = [f"[^{n}]: {text}" for n, text in enumerate(self.notes, start=1)]
        return normalise("\n\n".join([*self.blocks, *(["\n".join(notes)] if notes else [])]))


def style_heading(name: str) -> int:
    """The heading level a paragraph style's name says ("Heading 2", "Title"); 0 for none."""
    name = name.strip()
    if name.lower() == "title":
        return 1
    match = _HEADING_NAME.match(name)
    return (min(int(match.group(1)), 6) or 1) if match else 0


def list_marker(shown: str) -> str:
    """`- ` or `N. ` for a list item's shown marker ("•\\t", "1.\\t", "b)"); '' for none."""
    shown = shown.strip()
    if not shown:
        return ""
    if shown in _BULLETS or (len(shown) == 1 and not shown.isalnum()):
        return "- "
    if _NUMBERED.match(shown):
        digits, letters = re.sub(r"[^0-9]", "", shown), re.sub(r"[^a-z]", "", shown.lower())
        # Markdown numbers with digits: "b)" is the second item.
        number = digits or (str(ord(letters) - 96) if len(letters) == 1 else "1")
        return f"{number}. "
    return ""


def normalise(markdown: str) -> str:
    """Surrogate pairs (RTF's `\\uN` writes a character beyond the BMP as two) joined, runs of
    blanks one space, no blank at line ends, no run of empty lines."""
    markdown = markdown.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    lines = (re.sub(r"(?<=\S)[ \t\u00a0]+", " ", line).rstrip() for line in markdown.split("\n"))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
