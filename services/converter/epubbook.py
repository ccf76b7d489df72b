"""EPUB books: the table of contents taken out of the reading order before markitdown reads
the book.

markitdown converts an EPUB's documents in the order of its spine, and many books put their
table of contents there: EPUB 3's navigation document (`properties="nav"`), or the page
EPUB 2's guide names as the `toc`. Its list of chapter titles then sat at the head of the
book's Markdown, and a question about a chapter found the list first, as a PDF's printed
contents did (`pdfoutline`). Those spine entries are removed from the package document
(the OPF) here; the rest of the file is as it came. A book whose spine holds nothing else
is left whole, and so is one whose package cannot be read, for markitdown to refuse with
its own message (`packages`).
"""

from __future__ import annotations

import re
from xml.etree.ElementTree import Element

from services.converter.packages import READ_ERRORS, opened, parsed, with_members

_CONTAINER = "META-INF/container.xml"


def _local(element: Element) -> str:
    return element.tag.rsplit("}", 1)[-1]


def _path(href: str) -> str:
    return href.split("#", 1)[0]


def without_contents(data: bytes) -> bytes:
    """`data` (an .epub, already bounded by `check_archive`) whose spine no longer lists its
    table of contents; the same bytes when it has none there."""
    try:
        with opened(data) as book:
            container = parsed(book.read(_CONTAINER))
            if container is None:
                return data
            rootfile = next((e for e in container.iter() if _local(e) == "rootfile"), None)
            package = rootfile.get("full-path") if rootfile is not None else None
            if not package:
                return data
            raw = book.read(package)
            opf = parsed(raw)
            if opf is None:
                return data
            contents = {
                _path(e.get("href") or "")
                for e in opf.iter()
                if _local(e) == "reference" and (e.get("type") or "").lower() == "toc"
            }
            drop = {
                e.get("id")
                for e in opf.iter()
                if _local(e) == "item"
                and (
                    "nav" in (e.get("properties") or "").split()
                    or _path(e.get("href") or "") in contents
                )
            }
            spine = [e.get("idref") for e in opf.iter() if _local(e) == "itemref"]
            removed = [idref for idref in spine if idref in drop]
            if not removed or len(removed) == len(spine):
                return data
            for idref in removed:  # the element itself, so the OPF stays as markitdown reads it
                raw = re.sub(
                    rb"<(?:[\w.-]+:)?itemref\b[^>]*\bidref\s*=\s*([\"'])"
                    + re.escape(str(idref).encode())
                    + rb"\1[^>]*>",
                    b"",
                    raw,
                )
            return with_members(book, {package: raw})
    except READ_ERRORS:
        return data
