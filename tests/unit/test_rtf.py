"""The RTF reader (`services.converter.rtf`) on documents as WordPad and Word write them: code
pages (Windows-1251, Shift-JIS), Unicode escapes with their fallbacks, characters beyond the
BMP, binary data, skipped destinations, headings, lists, tables, links, and input that is not
RTF. (LibreOffice's RTF files: tests/integration/test_converter_office.py.)"""

from __future__ import annotations

import pytest

from libs.errors import ConversionError
from services.converter.rtf import rtf_markdown

WORDPAD = (
    rb"{\rtf1\ansi\ansicpg1251\deff0\nouicompat\deflang1049{\fonttbl{\f0\fnil\fcharset204 "
    rb"Calibri;}}{\*\generator Riched20 10.0.19041}\viewkind4\uc1 \pard\sa200\sl276\slmult1"
    rb"\f0\fs22\lang1049\'cf\'f0\'e8\'e2\'e5\'f2, \'ec\'e8\'f0!\par}"
)


def markdown(rtf: bytes) -> str:
    return rtf_markdown(rtf, "doc.rtf")[0]


def test_a_wordpad_document_in_windows_1251() -> None:
    assert markdown(WORDPAD) == "Привет, мир!"


def test_a_font_character_set_names_the_code_page() -> None:
    """Older writers say Cyrillic only by the font's character set, not the document's."""
    rtf = (
        rb"{\rtf1\ansi\deff0{\fonttbl{\f0\fnil\fcharset204 Arial;}{\f1\fswiss\fcharset0 Arial;}"
        rb"{\f2\fnil\fcharset238 Arial;}}\pard\'cf\'f0\'e8\'e2\'e5\'f2 {\f1 caf\'e9} "
        rb"\f2 \'9ale\'9f\par\plain \'e4\'e0\par}"
    )
    assert markdown(rtf) == "Привет café šleź\n\nда"


def test_double_byte_code_page() -> None:
    # Shift-JIS: each character is two \'hh bytes, decoded together.
    rtf = rb"{\rtf1\ansi\ansicpg932 \'82\'b1\'82\'f1\'82\'c9\'82\'bf\'82\'cd\par}"
    assert markdown(rtf) == "こんにちは"


def test_unicode_escapes_skip_their_fallbacks() -> None:
    assert markdown(rb"{\rtf1\ansi\uc1 caf\u233\'e9 ok\par}") == "café ok"
    assert markdown(rb"{\rtf1\ansi\uc2 \u8364\'80\'80 euro\par}") == "€ euro"
    assert markdown(rb"{\rtf1\ansi\uc0 \u8364 x\par}") == "€x"
    # Word writes a character beyond the BMP as a surrogate pair, each with its fallback.
    assert markdown(rb"{\rtf1\ansi\uc1 ok \u-10179?\u-8704? done\par}") == "ok 😀 done"


def test_binary_data_and_skipped_destinations() -> None:
    rtf = (
        rb"{\rtf1\ansi{\fonttbl{\f0 Arial;}}{\colortbl;\red0\green0\blue0;}"
        rb"{\info{\title Minutes}{\author Ann}{\company Acme}}"
        rb"{\header {\pard Page header\par}}{\footer Page 1}"
        rb"Before{\*\objdata\bin4 }}{{}After{\*\unknowndestination hidden}"
        rb"{\pict\pngblip 89504e47}\par}"
    )
    text, title = rtf_markdown(rtf, "minutes.rtf")
    assert text == "BeforeAfter"
    assert title == "Minutes"


def test_headings_lists_tables_and_links() -> None:
    rtf = (
        rb"{\rtf1\ansi\ansicpg1252{\stylesheet{\s0 Normal;}{\s1\sbasedon0 heading 1;}"
        rb"{\s15 Title;}}"
        rb"\pard\s15 Annual report\par"
        rb"\pard\s1 Overview\par"
        rb"\pard\outlinelevel1 Details\par"
        rb"\pard{\pntext\f1\'b7\tab}{\*\pn\pnlvlblt{\pntxtb\'b7}}Item one\par"
        rb"{\pntext\f1\'b7\tab}Item two\par"
        rb"\pard\trowd\cellx1000\cellx2000\intbl Name\cell Score\cell\row"
        rb"\trowd\cellx1000\cellx2000\intbl Ada\cell 9\cell\row"
        rb'\pard See {\field{\*\fldinst{HYPERLINK "https://example.org/"}}'
        rb"{\fldrslt{\ul example}}} now\emdash done\par}"
    )
    assert markdown(rtf) == (
        "# Annual report\n\n# Overview\n\n## Details\n\n- Item one\n- Item two\n\n"
        "| Name | Score |\n| --- | --- |\n| Ada | 9 |\n\n"
        "See [example](https://example.org/) now\u2014done"
    )


def test_a_backslash_at_a_line_end_is_a_paragraph() -> None:
    assert markdown(b"{\\rtf1\\ansi first\\\nsecond\\\r\nthird}") == "first\n\nsecond\n\nthird"


def test_an_unknown_code_page_keeps_the_default() -> None:
    assert markdown(rb"{\rtf1\ansi\ansicpg99999 caf\'e9\par}") == "café"


def test_what_is_not_rtf_is_refused() -> None:
    with pytest.raises(ConversionError, match="not an RTF document"):
        rtf_markdown(b"PK\x03\x04 a zip", "renamed.rtf")
