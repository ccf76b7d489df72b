"""Markdown and plain text are decoded, not converted: the Markdown, title and pages are what
markitdown itself gives for the same bytes (real files from shared/data and awkward ones),
without its file-type model; anything else named .md or .txt still goes through markitdown.
Text a Windows host saved in its ANSI code page reads right through the converter service,
which takes that code page from TEXT_LEGACY_ENCODING, and so do Excel's semicolon-separated
tables and tab-separated ones."""

from __future__ import annotations

import base64
import codecs
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from libs.errors import ConversionError, UnsupportedFormatError
from libs.formats import TEXT_EXTENSIONS, is_convertible
from services.converter.app import create_app
from services.converter.archive import ArchiveLimits
from services.converter.chunk import Chunker
from services.converter.convert import DocumentConverter
from services.converter.formats import Route
from services.converter.settings import ConverterSettings
from tests.conftest import REPO, zip_bytes

FILES = REPO.parent / "shared" / "data" / "files"
LIMITS = ArchiveLimits(max_entries=20, max_uncompressed_bytes=10_000_000, max_depth=2)

AWKWARD = {
    "page.txt": b"<html><head><title>T</title></head><body><h1>Hi</h1><p>x</p></body></html>",
    "table.txt": b"a,b,c\n1,2,3\n4,5,6\n",
    "data.md": b'{"a": [1, 2, 3], "b": "x"}',
    "feed.txt": b'<?xml version="1.0"?><rss><channel><title>x</title></channel></rss>',
    "sjis.txt": "日本語のテキストです。これはテストです。".encode("shift_jis") * 20,
    "bom16.md": codecs.BOM_UTF16_LE + "# Titel\n\nÄpfel und Birnen".encode("utf-16-le"),
    "latin.txt": "Ça va très bien, merci. Déjà vu.".encode("latin-1") * 10,
    "crlf.md": b"# Head\r\n\r\nline one  \r\nline two\r\n",
    "blanks.md": "# T\u3000\n\na\xa0 \n\n\n\nb \r c\t\r\n\x85d\n\n\n".encode(),
}


SHARED = [(p.name, p.read_bytes()) for p in sorted(FILES.rglob("*")) if p.suffix in (".md", ".txt")]
CASES = SHARED + list(AWKWARD.items())


@pytest.fixture(scope="module")
def converter() -> DocumentConverter:
    return DocumentConverter(LIMITS)


@pytest.mark.parametrize(("name", "data"), CASES, ids=[name for name, _ in CASES])
def test_text_decoded_here_is_what_markitdown_gives(
    converter: DocumentConverter, name: str, data: bytes
) -> None:
    ext = Path(name).suffix
    if not data.strip():
        pytest.skip("an empty file is refused before either path")
    assert converter.convert(data, name) == converter._markitdown_document(
        data, name, ext, Route.TEXT
    )


def test_the_shared_files_include_markdown_and_plain_text() -> None:
    if not FILES.is_dir():
        pytest.skip(f"{FILES} not found")
    suffixes = {Path(name).suffix for name, _ in SHARED}
    assert {".md", ".txt"} <= suffixes


def test_an_archive_named_markdown_is_still_checked_and_converted_by_markitdown(
    converter: DocumentConverter,
) -> None:
    data = zip_bytes({"inner.txt": b"hello from inside"})
    assert converter.convert(data, "notes.md") == converter._markitdown_document(
        data, "notes.md", ".md", Route.TEXT
    )


WINDOWS_1252 = {
    "notes.txt": "Recette : crème brûlée, à servir très froide. El niño pidió más jamón.\n",
    "prices.csv": "article;prix\ncrème brûlée;4,50 €\nmadeleine;1,20 €\n",  # Excel, in French
    "stock.tsv": "article\tstock\ncrème brûlée\t12\n",
}
LITHUANIAN = "Ąžuolas, ėglė ir šermukšnis auga Lietuvoje.\n"


async def _converted_text(settings: ConverterSettings, files: dict[str, bytes]) -> list[str]:
    application = create_app(settings)
    transport = httpx.ASGITransport(application)
    texts = []
    async with (
        application.router.lifespan_context(application),
        httpx.AsyncClient(transport=transport, base_url="http://converter", timeout=120) as http,
    ):
        for name, data in files.items():
            answer = await http.post("/convert", params={"filename": name}, content=data)
            assert answer.status_code == 200, answer.text
            texts.append(answer.json()["markdown"])
    return texts


async def test_text_from_a_windows_host_reads_right_through_the_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = {name: text.encode("cp1252") for name, text in WINDOWS_1252.items()}
    notes, prices, stock = await _converted_text(ConverterSettings(_env_file=None), files)  # type: ignore[call-arg]
    assert "crème brûlée, à servir très froide" in notes and "niño pidió más" in notes
    assert "| crème brûlée | 4,50 € |" in prices and "| crème brûlée | 12 |" in stock

    # A Baltic deployment names its code page; the worker processes read it.
    lithuanian = {"pastabos.txt": LITHUANIAN.encode("cp1257")}
    (western,) = await _converted_text(ConverterSettings(_env_file=None), lithuanian)  # type: ignore[call-arg]
    assert western != LITHUANIAN.strip()
    monkeypatch.setenv("TEXT_LEGACY_ENCODING", "windows-1257")
    settings = ConverterSettings(_env_file=None)  # type: ignore[call-arg]
    assert settings.text_legacy_encoding == "cp1257"
    (baltic,) = await _converted_text(settings, lithuanian)
    assert baltic == LITHUANIAN.strip()


def test_an_unknown_legacy_encoding_is_refused_by_name() -> None:
    with pytest.raises(ValidationError, match="TEXT_LEGACY_ENCODING='klingon' is not an encoding"):
        ConverterSettings(_env_file=None, text_legacy_encoding="klingon")  # type: ignore[call-arg]


def test_a_page_is_read_in_the_encoding_it_declares(converter: DocumentConverter) -> None:
    turkish = "Türkçe metin: ğüşıöç ĞÜŞİÖÇ, İstanbul güzel bir şehir."
    head = '<meta http-equiv="Content-Type" content="text/html; charset=windows-1254">'
    page = f"<html><head>{head}</head><body><p>{turkish}</p></body></html>"
    assert converter.convert(page.encode("cp1254"), "sayfa.html").markdown == turkish


@pytest.mark.parametrize("ext", TEXT_EXTENSIONS)
def test_documentation_and_configuration_formats_are_read_as_they_are(
    converter: DocumentConverter, ext: str
) -> None:
    text = "Deploying\n=========\n\nreplicas: 3  # raise for more readers\n"
    document = converter.convert(text.encode(), f"guide{ext}")
    assert document.markdown == text.strip()
    assert (document.file_type, document.title) == (ext.lstrip("."), "Deploying")
    assert is_convertible(f"docs/guide{ext.upper()}")  # ingest_file, folders, /upload, sync


def test_a_pasted_image_is_not_indexed_as_base64(converter: DocumentConverter) -> None:
    payload = base64.b64encode(bytes(range(256)) * 200).decode()
    note = (
        "# Meeting\n\nThe budget was approved.\n\n"
        f"![whiteboard](data:image/png;base64,{payload})\n\n"
        "Next steps: hire two people.\n\n"
        '<img src="data:image/svg+xml;charset=utf-8;base64,' + payload + '">\n\n'
        "A short one stays: [x](data:text/plain;base64,SGVsbG8=)\n"
    )
    document = converter.convert(note.encode(), "meeting.md")
    assert payload[:200] not in document.markdown
    assert "![whiteboard](data:image/png;base64...)" in document.markdown
    assert '<img src="data:image/svg+xml;charset=utf-8;base64...">' in document.markdown
    assert "data:text/plain;base64,SGVsbG8=" in document.markdown
    assert document.markdown.count("\n") == note.rstrip().count("\n")  # line numbers hold
    chunks = Chunker.bundled(192, 0).chunk(document.markdown, document.pages)
    assert len(chunks) == 1


def test_a_file_named_without_an_extension_is_read_as_plain_text(
    converter: DocumentConverter,
) -> None:
    """README, LICENSE, Makefile: the bytes decide. Text is a `txt` document titled by its
    name; binary data (a program, an unnamed ZIP or Office file) is refused, saying so."""
    licence = b"MIT License\n\nPermission is hereby granted, free of charge, to any person\n"
    document = converter.convert(licence, "C:\\src\\LICENSE")
    assert (document.file_type, document.title) == ("txt", "LICENSE")
    assert document.markdown == licence.decode().strip()
    assert converter.convert("Grüße\n".encode("cp1252") * 3, "NOTES").markdown.startswith("Grüße")
    refused = r"binary data .*\(no extension\).*its type's extension"
    for data in (b"\x7fELF\x02\x01\x01\x00" + bytes(64), zip_bytes({"a.txt": b"hello"})):
        with pytest.raises(ConversionError, match=refused):
            converter.convert(data, "program")
    with pytest.raises(UnsupportedFormatError, match=r"'\.bin' files are not supported"):
        converter.convert(licence, "licence.bin")  # an extension this build cannot read
