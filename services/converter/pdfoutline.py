"""A PDF's bookmarks (its outline) as the Markdown headings of its text.

A PDF's text layer has no headings: every chunk of a 60-page report had an empty heading
path and was cut wherever the token window ended. Most reports, standards and papers carry
an outline, though (Word, LibreOffice and LaTeX's hyperref write one), and each bookmark
names a section and the page it starts on. Where a bookmark's title is a line of its page,
or two or three lines in a row (a long title wrapped), that line becomes a heading: `#` for
a top-level bookmark, `##` below it, down to `######`. Titles are compared with case,
spacing and punctuation left aside (`3.1 Variations` against `3.1  VARIATIONS`). A bookmark
whose title is not on its page (or the next: some point at the end of the page before) is
passed over rather than guessed, so a running header, the table of contents or a slide's
navigation bar never becomes a heading. Bookmarks are read in order, each looked for below
the one before on the same page.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import pypdfium2 as pdfium

MAX_BOOKMARKS = 5000  # an outline is a table of contents, not a second document
_MAX_DEPTH = 6  # Markdown's deepest heading
_MAX_LINES = 3  # lines one title may be wrapped over
_LABEL = re.compile(
    r"(appendix|annex|chapter|part|anhang|annexe|kapitel|teil)\s+[\w.]{1,6}\s*[—–:.-]\s*",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Bookmark:
    level: int  # 0 at the top of the outline
    title: str
    page: int  # 0-based


def outline(document: pdfium.PdfDocument) -> list[Bookmark]:
    """The document's bookmarks that point at one of its pages, in outline order."""
    found: list[Bookmark] = []
    for item in document.get_toc(max_depth=_MAX_DEPTH):
        if len(found) >= MAX_BOOKMARKS:
            break
        destination = item.get_dest()
        page = destination.get_index() if destination is not None else None
        title = " ".join((item.get_title() or "").split())
        if page is not None and 0 <= page < len(document) and title:
            found.append(Bookmark(item.level, title, page))
    return found


def _key(text: str) -> str:
    """`text` as titles are compared: letters and digits only, case folded."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in folded if ch.isalnum())


def _unlabelled(title: str) -> str:
    """The key of `title` without a label the page may draw apart from the text, or not at
    all ("Appendix A— Acronyms" over a page that starts "Acronyms")."""
    match = _LABEL.match(title)
    return _key(title[match.end() :]) if match else ""


def with_headings(pages: list[str], bookmarks: list[Bookmark]) -> list[str]:
    """`pages` with each bookmark's title line(s) written as a Markdown heading."""
    lines = [page.split("\n") for page in pages]
    below = [0] * len(pages)  # per page: where the next bookmark is looked for
    changed: set[int] = set()
    for mark in bookmarks:
        keys = list(dict.fromkeys(k for k in (_key(mark.title), _unlabelled(mark.title)) if k))
        for page in (mark.page, mark.page + 1)[: len(pages) - mark.page] if keys else ():
            found = next((f for f in (_find(lines[page], below[page], k) for k in keys) if f), None)
            if found is None:
                continue
            start, count = found
            heading = " ".join(line.strip() for line in lines[page][start : start + count])
            level = min(mark.level + 1, _MAX_DEPTH)
            lines[page][start : start + count] = ["#" * level + " " + heading]
            below[page] = start + 1
            changed.add(page)
            break
    return ["\n".join(lines[k]) if k in changed else pages[k] for k in range(len(pages))]


def _find(lines: list[str], start: int, key: str) -> tuple[int, int] | None:
    """The first run of one to three lines from `start` whose text is the title `key`."""
    for i in range(start, len(lines)):
        joined = ""
        for count in range(1, _MAX_LINES + 1):
            if i + count > len(lines):
                break
            joined += _key(lines[i + count - 1])
            if joined == key:
                return i, count
            if not key.startswith(joined) or not joined:
                break
    return None
