"""Where a document's pages are in its Markdown: a PDF's pages joined, a presentation's
slides after their number markers (`<!-- Slide number: N -->`, markitdown's and the
OpenDocument and PowerPoint readers'), a workbook's sheets under their `## name` headings.
Chunks take their page numbers from these spans (`chunk`)."""

from __future__ import annotations

import re

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
    whole = [PageSpan(0, 0, len(markdown))]
    if route is Route.SLIDES:
        markers = list(_SLIDE_MARKER.finditer(markdown))
        if not markers:
            return whole, 0
        spans = [PageSpan(0, 0, markers[0].start())] if markers[0].start() else []
        for k, marker in enumerate(markers):
            end = markers[k + 1].start() if k + 1 < len(markers) else len(markdown)
            # The marker comment itself is left out of every chunk.
            spans.append(PageSpan(int(marker.group(1)), marker.end(), end))
        return spans, len(markers)
    if route is Route.SHEETS:
        headings = list(_SHEET_HEADING.finditer(markdown))
        if not headings:
            return whole, 0
        spans = [PageSpan(0, 0, headings[0].start())] if headings[0].start() else []
        for k, heading in enumerate(headings):
            end = headings[k + 1].start() if k + 1 < len(headings) else len(markdown)
            spans.append(PageSpan(k + 1, heading.start(), end))
        return spans, len(headings)
    return whole, 0
