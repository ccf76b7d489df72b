"""What a PDF prints in the margins of every page: running headers and footers and page
numbers, left out but for the first time.

A report repeats its title, series number, a notice ("This publication is available free
of charge from: ...") and the page number at the top or bottom of every page. In the text
layer they open or close every page, so they were part of nearly every chunk: words every
chunk shares (a search for the report's title matched all of them alike) and tokens taken
from the chunk's own text.

A line among the first or last `EDGE` lines with text of a page (a third of its lines, on
a page of few) is *running* when a line of
the same shape stands at an edge of at least half the pages with text (and of three at
least). Shapes compare lines with case and spacing aside and every number as one digit, so
"Page 3 of 12" and "Page 4 of 12" are one line, as are "16" and "vii". A running line is
left out of every page but the first where it stands, so the text keeps it once (a title, a
table's header row repeated on each page); a number alone, a page number, goes everywhere.
Documents of fewer than three pages with text are left as they are.
"""

from __future__ import annotations

import math
import re
from collections import Counter

EDGE = 3  # lines with text looked at at the top and at the bottom of a page
_SHARE = 0.5  # of the pages with text that a running line stands on
_MIN_PAGES = 3
_NUMBER = re.compile(r"\d+")
_ROMAN = re.compile(r"[ivxlcdm]{1,8}")
_PAGE_NUMBER = "0"


def _shape(line: str) -> str:
    text = " ".join(line.split()).casefold()
    if _ROMAN.fullmatch(text):
        return _PAGE_NUMBER
    return _NUMBER.sub("0", text)


def _edges(lines: list[str]) -> list[int]:
    """Indexes of a page's first and last `EDGE` lines with text; on a page of few lines (a
    slide), of a third of them at each end, so that its body is not taken for its margins."""
    filled = [k for k, line in enumerate(lines) if line.strip()]
    size = min(EDGE, (len(filled) - 2) // 3)
    return sorted(set(filled[:size] + filled[len(filled) - size :])) if size else []


def without_running_lines(pages: list[str]) -> list[str]:
    """`pages` without their running headers, footers and page numbers."""
    texts = [page.split("\n") for page in pages]
    edges = [_edges(lines) for lines in texts]
    filled = sum(1 for found in edges if found)
    if filled < _MIN_PAGES:
        return pages
    counts: Counter[str] = Counter()
    for lines, found in zip(texts, edges, strict=True):
        counts.update({_shape(lines[k]) for k in found})
    needed = max(_MIN_PAGES, math.ceil(_SHARE * filled))
    running = {shape for shape, count in counts.items() if count >= needed}
    if not running:
        return pages
    seen: set[str] = set()
    out: list[str] = []
    for page, lines, found in zip(pages, texts, edges, strict=True):
        drop = set()
        for k in found:
            shape = _shape(lines[k])
            if shape not in running:
                continue
            if shape in seen or shape == _PAGE_NUMBER:
                drop.add(k)
            seen.add(shape)
        out.append(
            "\n".join(line for k, line in enumerate(lines) if k not in drop) if drop else page
        )
    return out
