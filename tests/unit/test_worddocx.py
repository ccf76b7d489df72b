"""Word (.docx) files as a reader sees them: hidden text left out, however it is hidden, and
the title they were saved with (`services.converter.worddocx`, `ooxml`), through the
converter. The packages are written here, part by part, as Word lays them out; a file as
LibreOffice writes it is in tests/integration/test_converter_office.py."""

from __future__ import annotations

import io
import zipfile

import pytest

from services.converter.archive import ArchiveLimits
from services.converter.convert import DocumentConverter
from services.converter.ooxml import core_title
from services.converter.worddocx import hidden_styles, visible_docx

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
TYPES = """<?xml version="1.0" encoding="UTF-8"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml"
 ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
</Types>"""
PACKAGE_RELS = f"""<?xml version="1.0" encoding="UTF-8"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Target="word/document.xml" Type="{RELS}/officeDocument"/>
</Relationships>"""
DOCUMENT_RELS = f"""<?xml version="1.0" encoding="UTF-8"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Target="styles.xml" Type="{RELS}/styles"/>
<Relationship Id="rId2" Target="footnotes.xml" Type="{RELS}/footnotes"/>
<Relationship Id="rId3" Target="endnotes.xml" Type="{RELS}/endnotes"/>
</Relationships>"""
STYLES = f"""<?xml version="1.0" encoding="UTF-8"?>
<w:styles xmlns:w="{W}">
<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="heading 1"/></w:style>
<w:style w:type="character" w:styleId="Secret"><w:rPr><w:vanish/></w:rPr></w:style>
<w:style w:type="character" w:styleId="TopSecret"><w:basedOn w:val="Secret"/></w:style>
<w:style w:type="character" w:styleId="Shown"><w:basedOn w:val="Secret"/>
 <w:rPr><w:vanish w:val="0"/></w:rPr></w:style>
<w:style w:type="paragraph" w:styleId="AuthorNote"><w:rPr><w:vanish/></w:rPr></w:style>
</w:styles>"""


def run(text: str, properties: str = "") -> str:
    return f'<w:r><w:rPr>{properties}</w:rPr><w:t xml:space="preserve">{text}</w:t></w:r>'


def paragraph(*runs: str, style: str = "") -> str:
    pstyle = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
    return f"<w:p>{pstyle}{''.join(runs)}</w:p>"


def docx(
    *paragraphs: str, footnote: str = "", endnote: str = "", title: str | None = None
) -> bytes:
    body = f'<w:document xmlns:w="{W}"><w:body>{"".join(paragraphs)}</w:body></w:document>'
    notes = f'<w:footnotes xmlns:w="{W}"><w:footnote w:id="1">{footnote}</w:footnote></w:footnotes>'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr("[Content_Types].xml", TYPES)
        package.writestr("_rels/.rels", PACKAGE_RELS)
        package.writestr("word/_rels/document.xml.rels", DOCUMENT_RELS)
        package.writestr("word/document.xml", body)
        package.writestr("word/styles.xml", STYLES)
        package.writestr("word/footnotes.xml", notes)
        package.writestr(
            "word/endnotes.xml",
            f'<w:endnotes xmlns:w="{W}"><w:endnote w:id="1">{endnote}</w:endnote></w:endnotes>',
        )
        if title is not None:
            package.writestr(
                "docProps/core.xml",
                '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/'
                'metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/">'
                f"<dc:title>{title}</dc:title></cp:coreProperties>",
            )
    return out.getvalue()


@pytest.fixture(scope="module")
def converter() -> DocumentConverter:
    return DocumentConverter(ArchiveLimits(100, 50_000_000, 2))


def test_text_hidden_by_its_formatting_or_its_style_is_left_out(
    converter: DocumentConverter,
) -> None:
    """Hidden by the run's own formatting, by a character style and one based on it, by the
    paragraph's style; shown where the run or its style says `w:val="0"`."""
    data = docx(
        paragraph(run("Price list"), style="Heading1"),
        paragraph(run("The price is "), run("(cost 40) ", "<w:vanish/>"), run("75 euros.")),
        paragraph(run("Keep "), run("this", '<w:vanish w:val="false"/>'), run(" visible.")),
        paragraph(run("Call "), run("ext. 99 ", '<w:rStyle w:val="Secret"/>'), run("the desk.")),
        paragraph(run("Ask "), run("for Bo ", '<w:rStyle w:val="TopSecret"/>'), run("politely.")),
        paragraph(run("Styled "), run("and shown", '<w:rStyle w:val="Shown"/>'), run(".")),
        paragraph(run("Remember to update the figures."), style="AuthorNote"),
        paragraph(run("Note "), run("shown anyway", '<w:vanish w:val="0"/>'), style="AuthorNote"),
    )
    markdown = converter.convert(data, "prices.docx").markdown
    assert markdown == (
        "# Price list\n\nThe price is 75 euros.\n\nKeep this visible.\n\nCall the desk.\n\n"
        "Ask politely.\n\nStyled and shown.\n\nshown anyway"
    )


def test_hidden_text_in_a_footnote_is_left_out(converter: DocumentConverter) -> None:
    note = paragraph(run("Source: survey"), run(" (raw data on drive X)", "<w:vanish/>"))
    data = docx(
        paragraph(
            run("Most agree."),
            '<w:r><w:rPr><w:vertAlign w:val="superscript"/></w:rPr>'
            '<w:footnoteReference w:id="1"/></w:r>',
        ),
        footnote=note,
    )
    markdown = converter.convert(data, "survey.docx").markdown
    assert "Source: survey" in markdown and "drive X" not in markdown


def test_a_file_with_nothing_hidden_is_handed_on_as_it_came() -> None:
    plain = docx(paragraph(run("Nothing to hide.")))
    assert visible_docx(plain) is plain
    broken = plain.replace(b"Nothing to hide.", b"<w:vanish/>")  # not well-formed now
    assert visible_docx(broken) is broken
    assert visible_docx(b"not a zip") == b"not a zip"


def test_style_inheritance_is_followed_and_cycles_end() -> None:
    from defusedxml.ElementTree import fromstring

    styles = fromstring(
        f'<w:styles xmlns:w="{W}">'
        '<w:style w:styleId="A"><w:basedOn w:val="B"/></w:style>'
        '<w:style w:styleId="B"><w:basedOn w:val="A"/></w:style>'
        '<w:style w:styleId="C"><w:basedOn w:val="D"/></w:style>'
        '<w:style w:styleId="D"><w:rPr><w:vanish/></w:rPr></w:style>'
        '<w:style w:styleId="E"><w:rPr><w:vanish w:val="off"/></w:rPr></w:style>'
        "</w:styles>"
    )
    assert hidden_styles(styles) == {"C": True, "D": True, "E": False}


@pytest.mark.parametrize(
    ("saved", "title"),
    [
        ("Quarterly plan 2027", "Quarterly plan 2027"),
        ("Microsoft Word - draft.docx", "Price list"),  # a stand-in: the first heading
        ("", "Price list"),
        (None, "Price list"),
    ],
)
def test_the_title_a_file_was_saved_with_is_its_title(
    converter: DocumentConverter, saved: str | None, title: str
) -> None:
    data = docx(paragraph(run("Price list"), style="Heading1"), title=saved)
    assert core_title(data) == (saved or "")
    assert converter.convert(data, "plan.docx").title == title


def field(instruction: str, *result: str) -> tuple[str, str, str]:
    """A field's begin (with its instruction), separator, and end, to put around runs."""
    begin = (
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        f'<w:r><w:instrText xml:space="preserve"> {instruction} </w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
    )
    return begin, "".join(result), '<w:r><w:fldChar w:fldCharType="end"/></w:r>'


def test_a_table_of_contents_is_left_out(converter: DocumentConverter) -> None:
    """As Word writes one (a content control holding a heading and a TOC field whose entries
    are hyperlinks with page-number fields inside), and as older files do (the field alone,
    across paragraphs); other fields keep the text they show."""
    begin, _, end = field('TOC \\o "1-3" \\h \\z \\u')
    page = "".join(field("PAGEREF _Toc1 \\h", run("2")))
    tab = "<w:r><w:tab/></w:r>"
    entry = f'<w:hyperlink w:anchor="_Toc1">{run("Findings")}{tab}{page}</w:hyperlink>'
    control = (
        '<w:sdt><w:sdtPr><w:docPartObj><w:docPartGallery w:val="Table of Contents"/>'
        "</w:docPartObj></w:sdtPr><w:sdtContent>"
        f"{paragraph(run('Contents'), style='TOCHeading')}"
        f"<w:p>{begin}{entry}</w:p><w:p>{entry}{end}</w:p></w:sdtContent></w:sdt>"
    )
    link = "".join(field('HYPERLINK "https://example.org/grebes"', run("the grebe census")))
    body = (
        paragraph(run("Findings"), style="Heading1"),
        paragraph(run("See "), link, run(".")),
    )
    for contents in (control, f"<w:p>{begin}{entry}</w:p><w:p>{entry}{end}</w:p>"):
        markdown = converter.convert(docx(contents, *body), "report.docx").markdown
        assert markdown == "# Findings\n\nSee [the grebe census](https://example.org/grebes)."


def test_notes_are_markdown_footnotes(converter: DocumentConverter) -> None:
    """Footnotes and endnotes, numbered in the order the text refers to them, a note of two
    paragraphs, and a body list that is not a note."""
    data = docx(
        paragraph(run("Grebes counted"), '<w:r><w:footnoteReference w:id="1"/></w:r>'),
        paragraph(run("Nesting sites moved east"), '<w:r><w:endnoteReference w:id="1"/></w:r>'),
        footnote=paragraph(run("From the ferry.")) + paragraph(run("On 3 May.")),
        endnote=paragraph(run("By boat.")),
    )
    markdown = converter.convert(data, "notes.docx").markdown
    assert markdown == (
        "Grebes counted[^1]\n\nNesting sites moved east[^2]\n\n"
        "[^1]: From the ferry.\n\n    On 3 May.\n[^2]: By boat."
    )
