"""Where a document's pages are in its Markdown: a PDF's pages joined, a presentation's
slides after their number markers (`<!-- Slide number: N -->`, markitdown's and the
OpenDocument and PowerPoint readers'), a workbook's sheets under their `## name` headings.
Chunks take their page numbers from these spans (`chunk`)."""

from __future__ import annotations

import re
from collections.abc import Callable

from services.converter.chunk import PageSpan
from services.converter.formats import Route

_SLIDE_MARKER = re.compile(r"^<!-- Slide number: (\d+) -->[ \t]*$", re.MULTILINE)
_SHEET_HEADING = re.compile(r"^## .*$", re.MULTILINE)
_PAGE_SEPARATOR = "\n\n"


def joined_pages(pages: list[str]) -> tuple[str, list[PageSpan]]:
    """The pages' texts as one Markdown text, a blank line apart, and each page's span
    (numbered from 1)."""
    parts: list[str] = []
    spans: list[PageSpan] = []
    position = 0
    for number, text in enumerate(pages, start=1):
        if parts:
            parts.append(_PAGE_SEPARATOR)
            position += len(_PAGE_SEPARATOR)
        parts.append(text)
        spans.append(PageSpan(number, position, position + len(text)))
        position += len(text)
    return "".join(parts), spans


def page_spans(markdown: str, route: Route) -> tuple[list[PageSpan], int]:
    """Page spans for slides and sheets; one page-0 span for everything else."""
    if route is Route.SLIDES:
        # A slide is numbered by its marker; the marker comment is left out of every chunk.
        marks = list(_SLIDE_MARKER.finditer(markdown))
        return _spans(markdown, marks, lambda k, mark: (int(mark.group(1)), mark.end()))
    if route is Route.SHEETS:
        marks = list(_SHEET_HEADING.finditer(markdown))
        return _spans(markdown, marks, lambda k, mark: (k + 1, mark.start()))
    return [PageSpan(0, 0, len(markdown))], 0


def _spans(
    markdown: str,
    marks: list[re.Match[str]],
    page: Callable[[int, re.Match[str]], tuple[int, int]],
) -> tuple[list[PageSpan], int]:
    """A span from each mark to the next, numbered and started by `page` (the k-th mark's
    number and where its text starts); text before the first mark is page 0."""
    if not marks:
        return [PageSpan(0, 0, len(markdown))], 0
    spans = [PageSpan(0, 0, marks[0].start())] if marks[0].start() else []
    for k, mark in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(markdown)
        number, start = page(k, mark)
        spans.append(PageSpan(number, start, end))
    return spans, len(marks)
