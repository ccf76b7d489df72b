"""Markdown tables as the converter writes them (markitdown's pipe tables): a header row, a
rule line under it, then rows. The converter repeats a long table's header at the top of each
of its chunks (`services.converter.tables`); whoever finds a chunk in its document's Markdown
(`services.index.store.reads.window_markdown`) looks for the text after such a header."""

from __future__ import annotations

import re

ROW = re.compile(r"^[ \t]*\|.*\|[ \t]*$")
RULE = re.compile(r"^[ \t]*\|(?:[ \t]*:?-{3,}:?[ \t]*\|)+[ \t]*$")


def header_length(text: str) -> int:
    """How many characters of `text` a table header takes at its start (its row, its rule
    line and their newlines); 0 if `text` does not open with one followed by more."""
    lines = text.split("\n", 2)
    if len(lines) == 3 and ROW.match(lines[0]) and RULE.match(lines[1]):
        return len(lines[0]) + len(lines[1]) + 2
    return 0
