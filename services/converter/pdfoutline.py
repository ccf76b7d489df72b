"""A PDF's outline: its bookmarks as the Markdown headings of its text, and its printed table
of contents left out.

A PDF's text layer has no headings: every chunk of a 60-page report had an empty heading
path and was cut wherever the token window ended. Most reports, standards and papers carry
an outline, though (Word, LibreOffice and LaTeX's hyperref write one), and each bookmark
names a section and the page it starts on. Where a bookmark's title is a line of its page,
or two or three lines in a row (a long title wrapped), that line becomes a heading: `#` for
a top-level bookmark, `##` below it, down to `######`. Titles are compared with case,
spacing and punctuation left aside (`3.1 Variations` against `3.1  VARIATIONS`), and a
section number the page writes before the title and the bookmark leaves out. A bookmark
whose title is not on its page (or the next: some point at the end of the page before) is
passed over rather than guessed, so a running header, the table of contents or a slide's
navigation bar never becomes a heading. Bookmarks are read in order, each looked for below
the one before on the same page.

The printed table of contents (and list of figures or tables) repeats the section titles
with dot leaders and page numbers ("3.3 Trust Algorithm ........ 17"); its chunks matched
every query about a section as well as the section did, and ranked above it. A run of at
least three such lines, a line or two of a wrapped entry between them, is left out, with
or without bookmarks (the other readers leave a document's table of contents out too).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from itertools import pairwise

import pypdfium2 as pdfium

MAX_BOOKMARKS = 5000  # an outline is a table of contents, not a second document
_MAX_DEPTH = 6  # Markdown's deepest heading
_MAX_LINES = 3  # lines one title may be wrapped over
_LABEL = re.compile(
    r"(appendix|annex|chapter|part|anhang|annexe|kapitel|teil)\s+[\w.]{1,6}\s*[—–:.-]\s*",
    re.IGNORECASE,
)


# A contents entry: its title, dot leaders (". . ." too), its page number (roman in front matter).
_ENTRY = re.compile(r"(?:\.\s?){4,}\s*(\d{1,4}|[ivxlcdm]{1,7})\s*$", re.IGNORECASE)
_MIN_ENTRIES = 3  # lines of dot leaders that make a table of contents
# The title over a table of contents or a list of figures or tables, in a few languages.
_CONTENTS_TITLE = re.compile(
    r"(table of )?contents|list of (figures|tables|illustrations)|inhalt(sverzeichnis)?"
    r"|(abbildungs|tabellen)verzeichnis|table des matières|sommaire|índice|indice|contenido",
    re.IGNORECASE,
)
_WRAPPED = 2  # lines of one entry before its dot leaders


@dataclass(frozen=True)
class Bookmark:
    level: int  # 0 at the top of the outline
    title: str
    page: int  # 0-based


def outline(document: pdfium.PdfDocument) -> list[Bookmark]:
    """The document's bookmarks that point at one of its pages, in outline order; those
    read before a damaged entry, which does not stop its text from being read."""
    found: list[Bookmark] = []
    try:
        for item in document.get_toc(max_depth=_MAX_DEPTH):
            if len(found) >= MAX_BOOKMARKS:
                break
            destination = item.get_dest()
            page = destination.get_index() if destination is not None else None
            title = " ".join((item.get_title() or "").split())
            if page is not None and 0 <= page < len(document) and title:
                found.append(Bookmark(item.level, title, page))
    except (pdfium.PdfiumError, ValueError, RuntimeError, UnicodeDecodeError):
        pass  # the outline is a help for headings; the text is what is asked for
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
    """The first run of one to three lines from `start` whose text is the title `key`, with
    or without a section number before it (LaTeX's bookmarks leave the number out)."""
    for i in range(start, len(lines)):
        joined = ""
        for count in range(1, _MAX_LINES + 1):
            if i + count > len(lines):
                break
            joined += _key(lines[i + count - 1])
            texts = (joined, joined.lstrip("0123456789"))
            if key in texts:
                return i, count
            if not joined or not any(t and key.startswith(t) for t in texts):
                break
    return None


def without_contents(pages: list[str]) -> list[str]:
    """`pages` without the runs of table-of-contents entries they print."""
    return [_without_contents(page, len(pages)) if "...." in page else page for page in pages]


def _without_contents(page: str, page_count: int) -> str:
    lines = page.split("\n")
    numbers = {k: _page_number(line) for k, line in enumerate(lines)}
    entries = [k for k, number in numbers.items() if number is not None]
    drop: set[int] = set()
    run: list[int] = []
    for k in [*entries, None]:
        if k is not None and run and k - run[-1] <= _WRAPPED + 1:
            run.append(k)
            continue
        if len(run) >= _MIN_ENTRIES and _counts_pages([numbers[i] or 0 for i in run], page_count):
            # Numbered lines just before and after go too (an entry wrapped above its leaders,
            # one continued on the next page, one without leaders), as those between.
            first, last = run[0], run[-1]
            while first > 0 and run[0] - first < _WRAPPED and _numbered(lines[first - 1]):
                first -= 1
            while (
                last + 1 < len(lines) and last - run[-1] < _WRAPPED and _numbered(lines[last + 1])
            ):
                last += 1
            if first > 0 and _CONTENTS_TITLE.fullmatch(lines[first - 1].strip()):
                first -= 1  # "Table of Contents", "List of Figures" over the entries
            drop.update(range(first, last + 1))
        run = [k] if k is not None else []
    return "\n".join(line for k, line in enumerate(lines) if k not in drop) if drop else page


def _counts_pages(numbers: list[int], page_count: int) -> bool:
    """Whether entries' numbers are page numbers: within the document, counting up (a list
    of figures or tables after the sections starts again, once or twice), where a price
    list or a form with dot leaders goes up and down, or past the last page."""
    descents = sum(1 for a, b in pairwise(numbers) if b < a)
    return max(numbers) <= page_count and descents * 4 <= len(numbers)


def _page_number(line: str) -> int | None:
    """The page number a contents entry ends with (0 for a roman one), or None."""
    match = _ENTRY.search(line)
    if match is None:
        return None
    number = match.group(1)
    return int(number) if number.isdigit() else 0


def _numbered(line: str) -> bool:
    """A line that starts with a section number (`3.1 `, `B.2.1 `), as contents entries do."""
    return bool(re.match(r"\s*(?:[A-Z]\.)?\d+(?:\.\d+)*\s+\S", line))
