"""An EPUB's table of contents taken out of its reading order (`services.converter.epubbook`),
through the converter: EPUB 3's navigation document and the page EPUB 2's guide names."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from services.converter.archive import ArchiveLimits
from services.converter.convert import DocumentConverter
from services.converter.epubbook import without_contents

CONTAINER = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
<rootfiles><rootfile full-path="OPS/book.opf" media-type="application/oebps-package+xml"/>
</rootfiles></container>"""


def page(title: str, body: str) -> str:
    return (
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>t</title></head>'
        f"<body><h1>{title}</h1>{body}</body></html>"
    )


CONTENTS = page(
    "Contents",
    '<ol><li><a href="one.xhtml">Herons</a></li><li><a href="two.xhtml">Grebes</a></li></ol>',
)


def epub(spine: list[str], guide: str = "", nav: bool = False) -> bytes:
    properties = ' properties="nav"' if nav else ""
    items = (
        f'<item id="toc" href="toc.xhtml" media-type="application/xhtml+xml"{properties}/>'
        '<item id="one" href="one.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="two" href="two.xhtml" media-type="application/xhtml+xml"/>'
    )
    refs = "".join(f'<itemref idref="{idref}"/>' for idref in spine)
    opf = (
        '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="2.0">'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Birds</dc:title>'
        f"</metadata><manifest>{items}</manifest><spine>{refs}</spine>{guide}</package>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as book:
        book.writestr("mimetype", "application/epub+zip")
        book.writestr("META-INF/container.xml", CONTAINER)
        book.writestr("OPS/book.opf", opf)
        book.writestr("OPS/toc.xhtml", CONTENTS)
        book.writestr("OPS/one.xhtml", page("Herons", "<p>Herons wade.</p>"))
        book.writestr("OPS/two.xhtml", page("Grebes", "<p>Grebes dive.</p>"))
    return out.getvalue()


@pytest.fixture(scope="module")
def converter() -> DocumentConverter:
    return DocumentConverter(ArchiveLimits(100, 50_000_000, 2))


@pytest.mark.parametrize(
    ("guide", "nav"),
    [
        ('<guide><reference type="toc" title="Contents" href="toc.xhtml#top"/></guide>', False),
        ("", True),
    ],
)
def test_the_contents_page_is_not_read(converter: DocumentConverter, guide: str, nav: bool) -> None:
    markdown = converter.convert(epub(["toc", "one", "two"], guide, nav), "birds.epub").markdown
    assert "Contents" not in markdown and "one.xhtml" not in markdown
    assert markdown.endswith("# Herons\n\nHerons wade.\n\n# Grebes\n\nGrebes dive.")


def test_a_book_with_no_contents_page_in_its_spine_is_handed_on_as_it_came() -> None:
    book = epub(["one", "two"], nav=True)
    assert without_contents(book) is book
    only = epub(["toc"], nav=True)  # nothing else to read: left whole
    assert without_contents(only) is only
    assert without_contents(b"not a zip") == b"not a zip"


def test_the_shared_test_book(converter: DocumentConverter, shared_files: Path) -> None:
    data = (shared_files / "markitdown" / "test.epub").read_bytes()
    markdown = converter.convert(data, "test.epub").markdown
    assert "chap_1.xhtml" not in markdown and "# Chapter 1: Test Content" in markdown
