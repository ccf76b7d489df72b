"""Word and PowerPoint 97-2003 files (`.doc`, `.ppt`) as Word, PowerPoint and LibreOffice
save them (tests/data/office, see its README), and legacy Office names over other contents
(RTF, Office Open XML, web pages), through the converter. The same documents in OpenDocument
and RTF are in test_converter_office.py."""

from __future__ import annotations

import io
import struct
import zipfile

import openpyxl
import pptx
import pytest

from libs.errors import ConversionError
from services.converter.archive import ArchiveLimits
from services.converter.convert import DocumentConverter
from services.converter.powerpoint import _markdown, _Stream
from tests.integration.test_converter_office import NOTES, OFFICE, convert


@pytest.fixture(scope="module")
def converter() -> DocumentConverter:
    return DocumentConverter(ArchiveLimits(100, 50_000_000, 2))


def test_word_97_tables_lists_and_characters_beyond_the_bmp(converter: DocumentConverter) -> None:
    """Empty cells keep their place (a row ends at its own mark, not at two marks in a row),
    nested bullets, a line break, and UTF-16 surrogate pairs read as one character each."""
    document = convert(converter, "cells.doc")
    assert document.title == "Inventory \U0001f600"  # the summary information's title
    assert document.markdown == (
        "# Inventory\n\nStock counted on \U0001d7da March, with a smile \U0001f600.\n\n"
        "| Item | Shelf | Count |\n| --- | --- | --- |\n| Bolts | | 40 |\n| | B2 | |\n"
        "| Nuts | C3 | 12 |\n\n- checked by Ana\n   - second pass by Li\n- signed off\n\n"
        "Line one\nline two"
    )


def test_a_document_saved_by_word(converter: DocumentConverter) -> None:
    """A file Microsoft Word saved (oletools' test file): its Heading 1, umlauts and sharp s
    in 8-bit pieces."""
    markdown = convert(converter, "word2016.doc").markdown
    assert markdown.startswith("# Test\n\nThis is a harmless test document.\n\n")
    assert "some \u00fcnic\u00f6de-\u00dftring\u00df and different text sizes" in markdown


@pytest.mark.parametrize("source", ["notes.rtf", "notes.html", "notes.docx"])
def test_a_doc_that_is_really_rtf_a_web_page_or_a_docx(
    converter: DocumentConverter, source: str
) -> None:
    """WordPad saves RTF, many web applications HTML, under a .doc name, and people rename
    .docx files: each is read as what it is, under the name's file type."""
    document = converter.convert((OFFICE / source).read_bytes(), "exported.doc")
    assert document.file_type == "doc"
    if source == "notes.rtf":
        assert document.markdown == NOTES
    assert document.markdown.startswith("# Carnet de recettes\n\nUne crème brûlée")
    assert "| Cuisson | 45 min | 150 °C |" in document.markdown


# Confluence's "Export to Word" (and Word's "Single File Web Page" under a .doc name): a web
# page saved as one MIME file, its HTML quoted-printable.
CONFLUENCE_EXPORT = b"""Date: Sat, 28 Nov 2026 10:00:00 +0000 (UTC)\r
Message-ID: <1795.1764324000000@wiki.example.org>\r
Subject: Exported From Confluence\r
MIME-Version: 1.0\r
Content-Type: multipart/related; \r
\tboundary="----=_Part_1795_1"\r
\r
------=_Part_1795_1\r
Content-Type: text/html; charset=UTF-8\r
Content-Transfer-Encoding: quoted-printable\r
Content-Location: file:///C:/exported.html\r
\r
<html xmlns:o=3D"urn:schemas-microsoft-com:office:office" xmlns:w=3D"urn:schemas-micr=\r
osoft-com:office:word"><head><title>Ferry runbook</title></head><body>\r
<h1>Ferry runbook</h1><p>Restart the ticket machine before the first crossing=\r
 at 06:40.</p><table><tr><th>Boat</th><th>Crew</th></tr><tr><td>Sk=C3=A1lholt</td>=\r
<td>4</td></tr></table></body></html>\r
------=_Part_1795_1--\r
"""


def test_a_doc_that_is_a_saved_web_page_or_plain_text(converter: DocumentConverter) -> None:
    """Confluence's export to Word is a web page saved as one MIME file, read as an .mhtml
    is (so is one under an .xls name); a .doc of plain text (old documentation's README.doc,
    which Word opens as text) is read as a .txt, in the legacy encoding when not UTF-8."""
    page = converter.convert(CONFLUENCE_EXPORT, "Ferry runbook.doc")
    assert page.markdown.startswith("# Ferry runbook\n\nRestart the ticket machine")
    assert "| Skálholt | 4 |" in page.markdown
    assert (page.title, page.file_type) == ("Ferry runbook", "doc")
    sheet = converter.convert(CONFLUENCE_EXPORT, "crews.xls")  # Excel's single-file page
    assert "| Skálholt | 4 |" in sheet.markdown and sheet.file_type == "xls"
    words = "Fahrplan der Fähre\r\n\r\nDie Fähre fährt täglich über den Fluß, um neun Uhr.\r\n"
    plain = converter.convert(words.encode("cp1252"), "README.doc")
    assert (
        plain.markdown
        == "Fahrplan der Fähre\n\nDie Fähre fährt täglich über den Fluß, um neun Uhr."
    )
    assert plain.file_type == "doc"


def test_word_files_that_cannot_be_read_say_why(converter: DocumentConverter) -> None:
    with pytest.raises(ConversionError, match="password-protected; remove the password"):
        convert(converter, "encrypted.doc")
    word95 = bytearray((OFFICE / "notes.doc").read_bytes())
    # The WordDocument stream starts a sector with its FIB: wIdent 0xA5EC, then nFib.
    start = next(at for at in range(512, len(word95), 512) if word95[at : at + 2] == b"\xec\xa5")
    word95[start + 2 : start + 4] = (104).to_bytes(2, "little")  # nFib 104: Word 95
    with pytest.raises(ConversionError, match=r"Word 6\.0/95 format.*save it as \.docx"):
        converter.convert(bytes(word95), "old.doc")
    with pytest.raises(ConversionError, match=r"the Word file is damaged \(.+\); open it in Word"):
        converter.convert((OFFICE / "notes.doc").read_bytes()[:6000], "cut.doc")
    with pytest.raises(ConversionError, match="no WordDocument stream"):
        converter.convert(
            (OFFICE / "encrypted.doc")
            .read_bytes()
            .replace("WordDocument".encode("utf-16-le"), "WordDokument".encode("utf-16-le")),
            "x.doc",
        )
    with pytest.raises(ConversionError, match="not a Word 97-2003 document"):
        converter.convert(b"\x89PNG\r\n\x1a\n" + bytes(range(256)), "memo.doc")


def test_a_presentation_saved_by_powerpoint(converter: DocumentConverter) -> None:
    """A file PowerPoint saved (oletools' test file): title placeholder, body placeholder
    paragraphs as bullets, 8-bit text, the title from the summary information."""
    document = convert(converter, "powerpoint2007.ppt")
    assert document.title == "Embedded Objects"
    assert document.page_count == 1
    assert document.markdown == (
        "<!-- Slide number: 1 -->\n\n# Embedded Objects\n\n"
        "- This slide contains an embedded object\n- It is a simple harmless ASCII text file"
    )


def _record(kind: int, body: bytes, instance: int = 0, container: bool = False) -> bytes:
    head = (instance << 4) | (0xF if container else 0)
    return struct.pack("<HHI", head, kind, len(body)) + body


def test_text_kept_in_the_slide_list_is_found_through_outline_references() -> None:
    """PowerPoint 97-2003 kept placeholder text in the document's slide list and put only a
    reference to it in the shape: a stream built record by record as [MS-PPT] lays it out."""
    title = _record(0x0F9F, struct.pack("<I", 0)) + _record(
        0x0FA0, "Ancien titre".encode("utf-16-le")
    )
    body = _record(0x0F9F, struct.pack("<I", 1)) + _record(
        0x0FA8, "premier\rsecond".encode("latin-1")
    )
    persist = _record(0x03F3, struct.pack("<IIiII", 2, 0, 2, 256, 0))
    slide_list = _record(0x0FF0, persist + title + body, instance=0, container=True)
    document = _record(0x03E8, slide_list, container=True)

    def shape(index: int) -> bytes:
        reference = _record(0x0F9E, struct.pack("<I", index))
        return _record(0xF004, _record(0xF00D, reference, container=True), container=True)

    drawing = _record(0x040C, _record(0xF002, shape(0) + shape(1), container=True), container=True)
    slide = _record(0x03EE, _record(0x03EF, bytes(24)) + drawing, container=True)
    directory_at = len(document) + len(slide)
    directory = _record(0x1772, struct.pack("<III", 1 | (2 << 20), 0, len(document)))
    edit_at = directory_at + len(directory)
    edit = _record(0x0FF5, struct.pack("<IHBBIII", 0, 0, 0, 3, 0, directory_at, 1))
    stream = _Stream(document + slide + directory + edit)
    assert _markdown(stream, edit_at) == (
        "<!-- Slide number: 1 -->\n\n# Ancien titre\n\n- premier\n- second"
    )


def _pptx() -> bytes:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Renamed deck"
    slide.placeholders[1].text = "Saved as .pptx, named .ppt"
    buffer = io.BytesIO()
    deck.save(buffer)
    return buffer.getvalue()


def _xlsx() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Stock"
    sheet.append(["Item", "Count"])
    sheet.append(["Bolts", 40])
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("deck.ppt", _pptx(), "# Renamed deck"),
        ("book.xls", _xlsx(), "## Stock\n| Item | Count |\n| --- | --- |\n| Bolts | 40 |"),
        (
            "export.xls",
            b"<table><tr><th>Item</th><th>Count</th></tr><tr><td>Bolts</td><td>40</td></tr></table>",
            "| Item | Count |\n| --- | --- |\n| Bolts | 40 |",
        ),
        (
            "report.xls",
            b"Item\tCount\nBolts\t40\n",
            "| Item | Count |\n| --- | --- |\n| Bolts | 40 |",
        ),
        (
            "semi.xls",
            "Item;Count\nBolts;40\n".encode("cp1252"),
            "| Item | Count |\n| --- | --- |\n| Bolts | 40 |",
        ),
    ],
)
def test_legacy_office_names_over_other_contents(
    converter: DocumentConverter, name: str, data: bytes, expected: str
) -> None:
    """A renamed .pptx or .xlsx, and the HTML table and delimited text web applications export
    as "Excel"."""
    document = converter.convert(data, name)
    assert expected in document.markdown
    assert document.file_type == name.rsplit(".", 1)[1]


def test_powerpoint_files_that_cannot_be_read_say_why(converter: DocumentConverter) -> None:
    with pytest.raises(ConversionError, match="password-protected; remove the password"):
        convert(converter, "encrypted.ppt")
    with pytest.raises(ConversionError, match="no PowerPoint Document stream"):
        converter.convert((OFFICE / "notes.doc").read_bytes(), "notes.ppt")
    with pytest.raises(ConversionError, match="not a PowerPoint 97-2003 presentation"):
        converter.convert(b"plain words", "deck.ppt")
    cut = (OFFICE / "slides.ppt").read_bytes()
    with pytest.raises(ConversionError, match=r"damaged|not a PowerPoint"):
        converter.convert(cut[: len(cut) // 2], "cut.ppt")


def test_word_and_powerpoint_members_of_a_zip_are_read(converter: DocumentConverter) -> None:
    """Until 0.8.6 a ZIP's .doc and .ppt members were left out (so ZIP documents are stale
    from revision 2 on, `libs.formats.CHANGED_AT`)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("memo/notes.doc", (OFFICE / "notes.doc").read_bytes())
        archive.writestr("deck/slides.ppt", (OFFICE / "slides.ppt").read_bytes())
    markdown = converter.convert(buffer.getvalue(), "bundle.zip").markdown
    assert "| Cuisson | 45 min | 150 °C |" in markdown
    assert "Mention the Lyon lease signing date." in markdown


def excel_web_page(sheets: list[tuple[str, str]], *, listed: bool = True) -> bytes:
    """A workbook as Excel's "Single File Web Page" writes it: a frameset page that links
    each sheet (`shLink`) and names it (`c_rgszSh`), a part per sheet and a tab strip, under
    `file:///C:/Reports/` locations."""
    boundary = "----=_NextPart_01DA0000.12345678"
    links = "".join(
        f'<link id="shLink" href="Book1_files/sheet{n:03d}.htm">\n'
        for n in range(1, len(sheets) + 1)
        if listed
    )
    names = "".join(f' c_rgszSh[{n}] = "{name}";\n' for n, (name, _) in enumerate(sheets))
    frameset = (
        '<html xmlns:x="urn:schemas-microsoft-com:office:excel">\n<head>\n'
        '<meta name="Excel Workbook Frameset">\n<title>Crew rota</title>\n'
        f'{links}<script language="JavaScript">\n var c_rgszSh=new Array({len(sheets)});\n'
        f"{names}</script>\n</head>\n"
        '<frameset rows="*,39" border=0 width=0 frameborder=no framespacing=0>\n'
        ' <frame src="Book1_files/sheet001.htm" name="frSheet">\n'
        ' <frame src="Book1_files/tabstrip.htm" name="frTabs">\n</frameset>\n</html>\n'
    )
    parts = [
        ("Book1.htm", frameset),
        ("Book1_files/tabstrip.htm", "<html><body>tabs</body></html>"),
    ]
    parts += [
        (f"Book1_files/sheet{n:03d}.htm", f"<html><body><table>{rows}</table></body></html>")
        for n, (_, rows) in enumerate(sheets, start=1)
    ]
    text = (
        "MIME-Version: 1.0\r\nX-Document-Type: Workbook\r\n"
        f'Content-Type: multipart/related; boundary="{boundary}"\r\n\r\n'
        "This document is a Single File Web Page, also known as a Web Archive file.\r\n"
    )
    for location, body in parts:
        text += (
            f"\r\n--{boundary}\r\nContent-Location: file:///C:/Reports/{location}\r\n"
            'Content-Transfer-Encoding: 8bit\r\nContent-Type: text/html; charset="utf-8"\r\n'
            f"\r\n{body}\r\n"
        )
    return (text + f"\r\n--{boundary}--\r\n").encode()


SHEETS = [
    ("Monday", "<tr><td>Boat</td><td>Crew</td></tr><tr><td>Skálholt</td><td>4</td></tr>"),
    ("Tuesday", "<tr><td>Boat</td><td>Crew</td></tr><tr><td>Herjólfur</td><td>6</td></tr>"),
]


@pytest.mark.parametrize("listed", [True, False])
def test_a_workbook_saved_as_a_web_page_keeps_every_sheet(
    converter: DocumentConverter, listed: bool
) -> None:
    """Every sheet under its name, in order, whether the frameset lists its sheets or the
    file's parts are all there is to go by (then the tab strip is left out)."""
    document = converter.convert(excel_web_page(SHEETS, listed=listed), "rota.xls")
    markdown = document.markdown
    assert "| Skálholt | 4 |" in markdown and "| Herjólfur | 6 |" in markdown
    monday, tuesday = markdown.index("## Monday"), markdown.index("## Tuesday")
    assert monday < markdown.index("Skálholt") < tuesday < markdown.index("Herjólfur")
    assert "tabs" not in markdown
    assert (document.title, document.file_type) == ("Crew rota", "xls")
    alone = converter.convert(excel_web_page(SHEETS[:1]), "monday.mht")
    assert "| Skálholt | 4 |" in alone.markdown and "Herjólfur" not in alone.markdown
