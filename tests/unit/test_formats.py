"""The gateway's view of file formats (libs.formats) matches what the converter routes."""

from __future__ import annotations

from libs import formats
from services.converter.formats import ROUTES


def test_convertible_extensions_are_exactly_the_converter_routes() -> None:
    assert set(ROUTES) == formats.CONVERTIBLE_EXTENSIONS


def test_known_but_unavailable_formats_match() -> None:
    assert set(formats.UNAVAILABLE) == formats.KNOWN_EXTENSIONS - formats.CONVERTIBLE_EXTENSIONS


def test_every_spec_extension_is_known() -> None:
    assert set(formats.SPEC_EXTENSIONS) <= formats.KNOWN_EXTENSIONS


def test_a_document_is_stale_only_if_its_file_type_changed_since_it_was_made() -> None:
    """Revision 1 (0.8.5) changed every type; revision 2 (0.8.6) RTF, OpenDocument and ZIP;
    revision 3 (0.8.7) text read as it is, delimited tables, source code and ZIP; revision 4
    (0.8.8) source code, Excel workbooks, web pages, e-mail and ZIP; revision 5 (0.8.9) web
    pages, e-mail and ZIP; revision 6 (0.8.10) LaTeX and ZIP; revision 7 (0.8.11) PDF, Word
    and PowerPoint (Office Open XML, and legacy names that can hold it), EPUB, web pages,
    e-mail and ZIP; revision 8 (0.8.12) workbooks (Excel and OpenDocument), ZIP and tar;
    revision 9 (0.8.23) text read through the encoding detector, legacy Office names and
    archives."""
    newest = formats.CONVERTER_REVISION
    assert formats.is_current(9, "json") and formats.is_current(9, ".ipynb")
    assert not formats.is_current(1, "rtf") and not formats.is_current(1, "ODT")
    assert formats.is_current(2, "rtf") and formats.is_current(2, "odt")
    assert not formats.is_current(2, "zip") and not formats.is_current(4, "zip")
    assert not formats.is_current(5, "zip") and not formats.is_current(4, "HTML")
    assert formats.is_current(9, "zip") and not formats.is_current(7, "zip")
    assert not formats.is_current(7, "xlsx") and not formats.is_current(7, "XLTX")
    assert not formats.is_current(7, "ods") and not formats.is_current(7, "fods")
    assert not formats.is_current(7, "xls") and not formats.is_current(7, "tgz")
    assert not formats.is_current(7, "gz") and formats.is_current(7, "odt")
    assert formats.is_current(7, "pdf") and formats.is_current(7, "docx")
    assert formats.is_current(8, "xlsx") and formats.is_current(9, "tar")
    assert not formats.is_current(6, "html") and formats.is_current(6, "odt")
    assert not formats.is_current(6, "docx") and not formats.is_current(6, "DOCM")
    assert not formats.is_current(6, "ppsx") and not formats.is_current(6, "doc")
    assert not formats.is_current(6, "epub") and not formats.is_current(6, "MHT")
    assert not formats.is_current(7, "xlsm") and not formats.is_current(6, "pdf")
    assert not formats.is_current(7, "html") and not formats.is_current(8, "org")
    assert not formats.is_current(5, "tex") and not formats.is_current(5, "LTX")
    assert formats.is_current(9, "org") and formats.is_current(9, "vtt")
    assert formats.is_current(8, "xlsm") and not formats.is_current(4, "eml")
    assert not formats.is_current(3, "xlsx") and not formats.is_current(3, "XLS")
    assert not formats.is_current(3, "html") and not formats.is_current(3, "eml")
    assert not formats.is_current(2, "md") and not formats.is_current(2, "CSV")
    assert not formats.is_current(2, "yaml") and not formats.is_current(8, "txt")
    assert not formats.is_current(2, "py") and not formats.is_current(2, "c")
    assert not formats.is_current(3, "py") and formats.is_current(9, "ts")
    assert formats.is_current(9, "md") and formats.is_current(9, "csv")
    # Revision 9 (0.8.23): every type read through the text encoding detector, the legacy
    # Office names that can hold text, and archives; the others stay current.
    for text in ("md", "txt", "csv", "json", "html", "py", "tex", "srt", "zip", "gz", "doc"):
        assert not formats.is_current(8, text) and formats.is_current(9, text), text
    for other in ("pdf", "docx", "pptx", "xlsx", "odt", "rtf", "epub", "eml", "mhtml", "ppt"):
        assert formats.is_current(8, other), other
    assert not formats.is_current(0, "pdf")  # made before 0.8.5: unknown, so stale
    assert all(formats.is_current(newest, t) for t in ("pdf", "rtf", "ods", "md", "doc", ""))
    assert set(formats.CHANGED_AT.values()) <= set(range(1, newest + 1))


def test_the_manifest_and_the_lookup_say_stale_by_file_type() -> None:
    from libs.contracts.messages import DocumentInfo, LookupResponse
    from libs.contracts.sync import SourceEntry

    def entry(file_type: str) -> SourceEntry:
        return SourceEntry(
            source=f"a.{file_type}", doc_id="d", content_sha256="0" * 64, chunk_count=1,
            file_type=file_type, conversion=1,
        )  # fmt: skip

    assert entry("json").stale and entry("rtf").stale  # revisions 9 and 2
    assert not entry("msg").stale  # Outlook messages: unchanged since revision 1
    assert LookupResponse(document=None, conversion=formats.CONVERTER_REVISION).current is False
    fields = DocumentInfo.model_fields
    assert "file_type" in fields  # what `current` reads
