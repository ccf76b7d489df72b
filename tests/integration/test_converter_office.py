"""OpenDocument (`.odt`, `.ods`, `.odp`), RTF and Word 97-2003 (`.doc`) files as LibreOffice
and Word write them (tests/data/office, see its README), through the converter: the Markdown
of each, titles from the document's metadata, sheets and slides as pages; and files that are
not what their name says, read as what they are or refused with what to do."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from libs.errors import ConversionError, NoTextError
from services.converter.archive import ArchiveLimits
from services.converter.convert import DocumentConverter

OFFICE = Path(__file__).resolve().parents[1] / "data" / "office"

NOTES = """# Carnet de recettes

Une crème brûlée pour le niño, façon « grand-mère » — avec des œufs frais.

## Ingrédients

- 500 ml de crème entière
- 6 jaunes d’œufs
- 100 g de sucre

## Étapes

1. Préchauffer le four à 150 °C.
2. Fouetter les jaunes avec le sucre.

Voir [l’article](https://fr.wikipedia.org/wiki/Crème_brûlée) pour l’histoire.

## Tableau des temps

| Étape | Durée | Température |
| --- | --- | --- |
| Cuisson | 45 min | 150 °C |
| Repos | 4 h | 4 °C |

### Notes en d’autres langues

Русский: крем-брюле. 日本語: クレームブリュレ. Ελληνικά: κρεμ μπρουλέ."""

FINDINGS = """# Findings

1. Nesting sites moved east
   1. mostly near Hagnau
   2. a few near Immenstaad
2. Reed beds recovered after the 2024 flood

## Counts by site
"""


@pytest.fixture(scope="module")
def converter() -> DocumentConverter:
    return DocumentConverter(ArchiveLimits(100, 50_000_000, 2))


def convert(converter: DocumentConverter, name: str):  # type: ignore[no-untyped-def]
    return converter.convert((OFFICE / name).read_bytes(), name)


@pytest.mark.parametrize("name", ["notes.odt", "notes.rtf", "notes.doc"])
def test_a_text_document_in_either_format(converter: DocumentConverter, name: str) -> None:
    """Headings (the title paragraph too), lists, a link, a table, accents and three scripts:
    the same Markdown from the OpenDocument file and from the RTF and Word 97 files that
    LibreOffice wrote from it."""
    document = convert(converter, name)
    assert document.markdown == NOTES
    assert document.title == "Carnet de recettes"
    assert document.file_type == name.rsplit(".", 1)[1]
    assert document.page_count == 0


@pytest.mark.parametrize(
    "name", ["report.odt", "report.fodt", "report.rtf", "report.doc", "report.docx"]
)
def test_footnotes_text_boxes_and_what_is_left_out(converter: DocumentConverter, name: str) -> None:
    document = convert(converter, name)
    markdown = document.markdown
    assert document.title == "Field report: Lake Constance survey"  # meta.xml / \info\title
    assert markdown.startswith("# Summary\n\nThe survey counted 412 great crested grebes[^1]")
    assert markdown.endswith("[^1]: Counted from the Meersburg ferry on 3 May.")
    assert "Sidebar: water temperature was 14 °C at 2 m depth." in markdown
    assert FINDINGS in markdown
    assert "Hagnau" in markdown and "Immenstaad 97" in markdown.replace("\t", " ")
    # The table of contents repeats the headings, a comment is not the text.
    assert "Contents" not in markdown and "Summary 1" not in markdown
    assert "Check this number" not in markdown


@pytest.mark.parametrize(
    "name", ["revisions.odt", "revisions.rtf", "revisions.doc", "revisions.docx"]
)
def test_tracked_deletions_and_hidden_text_are_not_the_text(
    converter: DocumentConverter, name: str
) -> None:
    """What a reader sees: an old price deleted with tracked changes (in a paragraph and as a
    whole paragraph) and a hidden internal note are left out, the inserted price kept."""
    document = convert(converter, name)
    assert document.title == "Rate card"
    assert document.markdown == (
        "# Rates\n\nThe room costs 450 euros a night.\n\nCheckout is at noon.\n\n"
        "Ask at the desk for late checkout."
    )


@pytest.mark.parametrize("name", ["sheets.ods", "sheets.fods", "sheets.xlsx", "sheets.xls"])
def test_sheets_are_pages(converter: DocumentConverter, name: str) -> None:
    """Each sheet under its name, one table, as markitdown gives .xlsx; the 16,384 repeated
    empty columns and million empty rows a sheet ends with are not written out."""
    document = convert(converter, name)
    markdown = document.markdown
    assert document.page_count == 2 and [p.page for p in document.pages] == [1, 2]
    assert markdown.startswith(
        "## Sheet1\n| Alpha | Beta | Gamma | Delta |\n| --- | --- | --- | --- |\n"
        "| 89 | 82 | 100 | 12 |"
    )
    assert "## 09060124-b5e7-4717-9d07-3c046eb\n| ColA | ColB | ColC | ColD |" in markdown
    assert "| 13 | 14 | 15 | affc7dad-52dc-4b98-9b5d-51e65d8a8ad0 |" in markdown
    assert max(len(line) for line in markdown.splitlines()) < 80
    assert document.title == "sheets"  # a sheet's heading is not the document's title
    first = document.pages[0]
    assert markdown[first.start : first.end].startswith("## Sheet1")


def test_excel_workbooks_read_as_excel_shows_them(converter: DocumentConverter) -> None:
    """The same workbook saved as .xlsx and .xls gives the same Markdown, and the same as the
    OpenDocument reader gives its .ods: no `NaN` for an empty cell, no `Unnamed: 0` over the
    empty column before the table, no `4.0` for a whole number, no empty sheet; a formula's
    value as the file stored it, dates in ISO 8601, TRUE and FALSE."""
    assert convert(converter, "sheets.xlsx").markdown == convert(converter, "sheets.ods").markdown
    assert convert(converter, "sheets.xls").markdown == convert(converter, "sheets.ods").markdown
    budget = convert(converter, "budget.xlsx")
    assert budget.markdown == convert(converter, "budget.xls").markdown
    assert budget.markdown == (
        "## Budget\n| Item | Cost | Paid | Due |\n| --- | --- | --- | --- |\n"
        "| Dam repair | 1200.5 | TRUE | 2027-03-01 |\n| Otter food | 80 | FALSE |  |\n"
        "| Total | 1280.5 |  |  |\n| Share | 0.0624755954705193 |  |  |\n\n"
        "## Notes\n| Checked by | Jörg Müller |\n| --- | --- |"
    )
    assert budget.page_count == 2 and [p.page for p in budget.pages] == [1, 2]
    # An Excel 97-2003 workbook renamed .xlsx is read; another Office file is refused.
    renamed = converter.convert((OFFICE / "budget.xls").read_bytes(), "renamed.xlsx")
    assert renamed.markdown == budget.markdown
    with pytest.raises(ConversionError, match="not a workbook"):
        converter.convert((OFFICE / "word2016.doc").read_bytes(), "memo.xlsx")
    with pytest.raises(ConversionError, match="does not read as an Excel workbook"):
        converter.convert(_zip({"a.txt": b"x"}), "broken.xlsx")


@pytest.mark.parametrize("name", ["formats.xlsx", "formats.xls"])
def test_numbers_read_in_their_cells_formats(converter: DocumentConverter, name: str) -> None:
    """A percentage, decimals, a currency, a negative in parentheses, an accounting zero,
    millions and scientific notation as the workbook shows them (what LibreOffice's own
    .ods of it prints, but for digit grouping); a date stays ISO 8601."""
    assert convert(converter, name).markdown == (
        "## Results\n| Measure | Value |\n| --- | --- |\n| Growth | 6.3% |\n| Share | 6.25% |\n"
        "| Weight | 4.00 |\n| Price | 1200.50 € |\n| Refund | (1200.50) |\n| Fee | $- |\n"
        "| Revenue | 1.2 M |\n| Avogadro | 6.02E+23 |\n| Count | 1235 |\n"
        "| Opened | 2027-03-01 |"
    )


@pytest.mark.parametrize("name", ["hidden.xlsx", "hidden.xls", "hidden.ods"])
def test_hidden_sheets_are_left_out(converter: DocumentConverter, name: str) -> None:
    """A hidden sheet's tab is not shown (a lookup table, settings): like Word's hidden text,
    it is not indexed. The visible sheets keep their order and become pages 1 and 2."""
    document = convert(converter, name)
    assert document.markdown == (
        "## Rates\n| Route | Fare |\n| --- | --- |\n| Meersburg–Konstanz | 4.1 |\n"
        "| Friedrichshafen–Romanshorn | 11.5 |\n\n"
        "## Timetable\n| Ferry | Departs |\n| --- | --- |\n| Meersburg | 06:35 |"
    )
    assert [p.page for p in document.pages] == [1, 2]


def test_very_hidden_sheets_are_left_out(converter: DocumentConverter) -> None:
    """Excel's "very hidden" state (set by a macro or an add-in; LibreOffice writes it as
    hidden), as openpyxl writes it."""
    import openpyxl

    book = openpyxl.Workbook()
    book.active.append(["Shown", "yes"])
    book.create_sheet("Secret").append(["Key", "kestrel-0.37"])
    book["Secret"].sheet_state = "veryHidden"
    buffer = io.BytesIO()
    book.save(buffer)
    markdown = converter.convert(buffer.getvalue(), "very.xlsx").markdown
    assert markdown == "## Sheet\n| Shown | yes |\n| --- | --- |"


@pytest.mark.parametrize(
    ("variant", "base"),
    [("notes.docm", "notes.docx"), ("sheets.xlsm", "sheets.xlsx"), ("slides.ppsx", "slides.odp")],
)
def test_macro_enabled_template_and_show_files_read_as_their_formats(
    converter: DocumentConverter, variant: str, base: str
) -> None:
    """A .docm, .xlsm or .ppsx is the container of a .docx, .xlsx or .pptx: the same text
    and pages, its own file type."""
    document = convert(converter, variant)
    assert document.file_type == variant.rsplit(".", 1)[1]
    same = convert(converter, base)
    assert document.page_count == same.page_count and document.title == same.title
    if base != "slides.odp":  # the .odp reader's shape is markitdown's, not byte for byte
        assert document.markdown == same.markdown
    else:
        assert "Quarterly review" in document.markdown and "### Notes:" in document.markdown


@pytest.mark.parametrize("name", ["slides.odp", "slides.fodp", "slides.ppt"])
def test_slides_are_pages_with_their_notes(converter: DocumentConverter, name: str) -> None:
    """The same three slides from LibreOffice's OpenDocument and PowerPoint 97 files: a
    title slide, nested bullets with speaker notes, a table."""
    document = convert(converter, name)
    markdown = document.markdown
    assert document.page_count == 3 and [p.page for p in document.pages] == [1, 2, 3]
    assert document.title == "Quarterly review"
    second = markdown[document.pages[1].start : document.pages[1].end].strip()
    assert second == (
        "# Highlights\n\n- Revenue up 12 %\n- Churn down to 3 %\n  - Enterprise renewals\n"
        "- New office in Lyon\n\n### Notes:\n\nMention the Lyon lease signing date."
    )
    third = markdown[document.pages[2].start :]
    assert "| Region | Revenue | Growth |\n| --- | --- | --- |\n| EMEA | 4.2 M€ | +9 % |" in third


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def test_files_that_are_not_what_their_name_says(converter: DocumentConverter) -> None:
    with pytest.raises(ConversionError, match="not a readable ZIP container"):
        converter.convert(b"plain text, not a zip", "fake.odt")
    with pytest.raises(ConversionError, match=r"no content\.xml \(or flat XML document\) with"):
        converter.convert(_zip({"mimetype": b"application/zip"}), "other.ods")
    with pytest.raises(ConversionError, match=r"not an OpenDocument file"):
        converter.convert(b"<html><body>a web page</body></html>", "page.fodt")
    with pytest.raises(ConversionError, match=r"content\.xml is not well-formed XML"):
        converter.convert(_zip({"content.xml": b"<office:document-content"}), "broken.odp")
    with pytest.raises(ConversionError, match="not an RTF document; check that it opens"):
        converter.convert((OFFICE / "notes.odt").read_bytes(), "renamed.rtf")


def test_nesting_made_to_break_readers_is_refused(converter: DocumentConverter) -> None:
    deep = "<text:section>" * 5000 + "<text:p>deep</text:p>" + "</text:section>" * 5000
    content = (
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
        ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text>'
        f"{deep}</office:text></office:body></office:document-content>"
    )
    with pytest.raises(ConversionError, match="nested hundreds deep"):
        converter.convert(_zip({"content.xml": content.encode()}), "deep.odt")


def test_entities_and_passwords_are_refused(converter: DocumentConverter) -> None:
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa">'
        b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><d>&b;</d>'
    )
    with pytest.raises(ConversionError, match="not well-formed XML"):
        converter.convert(_zip({"content.xml": bomb}), "entities.odt")
    with pytest.raises(ConversionError, match="its XML is not well-formed XML"):
        converter.convert(bomb, "entities.fodt")  # flat OpenDocument: the same parser
    manifest = (
        b'<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
        b'<manifest:file-entry manifest:full-path="content.xml"><manifest:encryption-data/>'
        b"</manifest:file-entry></manifest:manifest>"
    )
    encrypted = _zip({"META-INF/manifest.xml": manifest, "content.xml": b"\x8f\x02\xee"})
    with pytest.raises(ConversionError, match="password-protected; open it, save a copy"):
        converter.convert(encrypted, "secret.odt")


def test_a_document_without_text(converter: DocumentConverter) -> None:
    empty = (
        b'<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0">'
        b"<office:body><office:text/></office:body></office:document-content>"
    )
    with pytest.raises(NoTextError):
        converter.convert(_zip({"content.xml": empty}), "blank.odt")
    with pytest.raises(NoTextError):
        converter.convert(b"{\\rtf1\\ansi{\\fonttbl{\\f0 Arial;}}\\par}", "blank.rtf")
