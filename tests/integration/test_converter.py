"""The converter service end to end through its real FastAPI app and real worker processes,
table-driven over the real-world files in ../shared/data/files (see its README)."""

from __future__ import annotations

import asyncio
import io
import zipfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI

from libs.clients import ConverterClient
from libs.contracts import ChunkRequest
from libs.errors import NoTextError, UnsupportedFormatError
from libs.ports import ConverterPort
from services.converter.app import create_app
from services.converter.core import Converter
from services.converter.settings import ConverterSettings

FILES = Path(__file__).resolve().parents[2].parent / "shared/data/files"
MAX_TOKENS = 256

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

if not FILES.is_dir():
    pytest.skip(
        f"the shared real-world test files are not at {FILES} (expected next to the repo)",
        allow_module_level=True,
    )


@dataclass(frozen=True)
class Case:
    path: str
    title: str
    contains: tuple[str, ...] = ()
    pages: frozenset[int] = field(default_factory=lambda: frozenset({0}))
    page_count: int = 0


CASES = [
    Case(
        "nist/NIST.SP.800-207-ZeroTrustArchitecture.pdf",
        "Zero Trust Architecture",
        ("These tenets are the ideal goal",),
        frozenset(range(1, 60)),
        59,
    ),
    Case(
        "nist/NIST.SP.800-218.pdf",
        "Secure Software Development Framework (SSDF) Version 1.1",
        ("Produce Well-Secured Software",),
        frozenset(range(1, 37)),
        36,
    ),
    Case(
        "yaos-prinzip/Online-Optimierung als Zwei-Personen-Nullsummenspiel und Yaos Prinzip.pdf",
        "Online-Optimierung als Zwei-Personen-Nullsummenspiel und Yaos Prinzip",
        ("Universität Augsburg", "Institut für Mathematik", "Einführung"),
        frozenset(range(1, 24)),
        23,
    ),
    Case("markitdown/test.pdf", "test", ("AutoGen",), frozenset({1}), 1),
    Case(
        "markitdown/REPAIR-2022-INV-001_multipage.pdf",
        "REPAIR-2022-INV-001_multipage",
        (),
        frozenset({1, 2, 3}),
        3,
    ),
    Case(
        "markitdown/test.pptx",
        "AutoGen: Enabling Next-Gen LLM Applications via Multi-Agent Conversation",
        ("AutoGen",),
        frozenset(range(1, 7)),
        6,
    ),
    Case(
        "yaos-prinzip/Präsentation.pptx",
        "Yaos Prinzip",
        ("Nullsummenspiel",),
        frozenset(range(1, 23)),
        22,
    ),
    Case("calamine/pivots.xlsx", "pivots", ("DataSheet",), frozenset(range(1, 7)), 6),
    Case("markitdown/test.xlsx", "test", ("Alpha",), frozenset({1, 2}), 2),
    Case("markitdown/test.xls", "test", ("Alpha",), frozenset({1, 2}), 2),
    Case(
        "markitdown/test.docx",
        "AutoGen: Enabling Next-Gen LLM Applications via Multi-Agent Conversation",
        ("Abstract",),
    ),
    Case(
        "markitdown/test_with_comment.docx",
        "AutoGen: Enabling Next-Gen LLM Applications via Multi-Agent Conversation",
    ),
    Case("docxwriter/元数据.docx", "元数据", ("测试文件",)),
    Case("markitdown/test_wikipedia.html", "Microsoft - Wikipedia", ("Microsoft",)),
    Case(
        "markitdown/test_blog.html",
        "Does Model and Inference Parameter Matter in LLM Applications?",
    ),
    Case("country-codes/country-codes.csv", "country-codes", ("Afghanistan",)),
    Case("markitdown/test_mskanji.csv", "test_mskanji", ("佐藤太郎", "名古屋")),
    Case("markitdown/test.json", "test", ("key1",)),
    Case("markitdown/test_notebook.ipynb", "Test Notebook Title", ("markitdown",)),
    Case("markitdown/test_rss.xml", "The Official Microsoft Blog", ("Copilot",)),
    Case("gutenberg/1342-0.txt", "1342-0", ("It is a truth universally acknowledged",)),
    Case("markitdown/markitdown-project-README.md", "MarkItDown", ("pip install",)),
    Case("markitdown/test.epub", "Test EPUB Document", ("Chapter 1",)),
    Case(
        "markitdown/test_outlook_msg.msg",
        "Test Email Message",
        ("test.sender@example.com", "This is the body of the test email message"),
    ),
    Case("markitdown/test_files.zip", "test_files", ("AutoGen",)),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def app() -> AsyncIterator[FastAPI]:
    settings = ConverterSettings(
        converter_workers=1, max_convert_bytes=4_000_000, archive_max_uncompressed_bytes=50_000_000
    )
    application = create_app(settings)
    async with application.router.lifespan_context(application):
        yield application


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(app) as http:
        yield http


def _client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app), base_url="http://converter", timeout=120
    )


async def _convert(http: httpx.AsyncClient, name: str, data: bytes) -> httpx.Response:
    return await http.post(
        "/convert",
        params={"filename": name},
        content=data,
        headers={"Content-Type": "application/octet-stream"},
    )


_converted: dict[str, httpx.Response] = {}


async def _convert_file(http: httpx.AsyncClient, relative: str) -> httpx.Response:
    """Convert a shared file once per module; later tests look at the same answer."""
    if relative not in _converted:
        path = FILES / relative
        _converted[relative] = await _convert(http, path.name, path.read_bytes())
    return _converted[relative]


async def _wait_ready(http: httpx.AsyncClient, seconds: float = 120) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        response = await http.get("/readyz")
        if response.status_code == 200:
            body: dict[str, Any] = response.json()
            return body
        assert response.status_code == 503
        assert response.json()["status"] == "not_ready"
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"converter not ready after {seconds} s: {response.json()}")
        await asyncio.sleep(0.2)


def _check_chunks(result: dict[str, Any]) -> None:
    chunks = result["chunks"]
    assert chunks, "a successful conversion always has chunks"
    assert [c["chunk_index"] for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk["text"].strip()
        assert 0 < chunk["token_count"] <= MAX_TOKENS


async def test_ready(client: httpx.AsyncClient) -> None:
    body = await _wait_ready(client)
    assert body["status"] == "ready"
    assert "ready" in body["checks"]["workers"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.path.rsplit("/", 1)[-1])
async def test_real_files_convert(client: httpx.AsyncClient, case: Case) -> None:
    path = FILES / case.path
    response = await _convert_file(client, case.path)
    assert response.status_code == 200, response.text[:500]
    result = response.json()
    assert result["markdown"].strip()
    assert result["file_type"] == path.suffix.lstrip(".").lower()
    assert result["title"].startswith(case.title)
    assert result["page_count"] == case.page_count
    _check_chunks(result)
    pages = {c["page"] for c in result["chunks"]}
    assert pages <= case.pages, sorted(pages - case.pages)
    if case.page_count:
        # Every page with text has chunks; the last page is reached.
        assert max(case.pages) in pages
    text = "\n".join(c["text"] for c in result["chunks"])
    for phrase in case.contains:
        assert phrase in text, phrase


async def test_pdf_chunks_carry_their_real_page(client: httpx.AsyncClient) -> None:
    result = (await _convert_file(client, "nist/NIST.SP.800-207-ZeroTrustArchitecture.pdf")).json()
    pages_with = {
        phrase: {c["page"] for c in result["chunks"] if phrase in c["text"]}
        for phrase in (
            "These tenets are the ideal goal",
            "Transition to BYOD Second-Factor Authentication",
            "Zero trust (ZT) is the term for an evolving set",
        )
    }
    assert pages_with == {
        "These tenets are the ideal goal": {15},
        "Transition to BYOD Second-Factor Authentication": {59},
        "Zero trust (ZT) is the term for an evolving set": {4},
    }
    assert len(result["markdown"]) > 100_000


async def test_a_pdfs_bookmarks_are_its_headings(client: httpx.AsyncClient) -> None:
    """The outline's sections become headings where their titles stand on their pages, so
    a chunk's heading path says where in the report it is; the cover and the running header,
    which repeat titles elsewhere, stay text."""
    result = (await _convert_file(client, "nist/NIST.SP.800-207-ZeroTrustArchitecture.pdf")).json()
    markdown = result["markdown"]
    headings = [line for line in markdown.splitlines() if line.startswith("#")]
    assert len(headings) == 68  # of 69 bookmarks: the cover's title is not one line there
    assert headings[:3] == [
        "# 1 Introduction",
        "## 1.1 History of Zero Trust Efforts Related to Federal Agencies",
        "## 1.2 Structure of This Document",
    ]
    assert "### 3.1.1 ZTA Using Enhanced Identity Governance" in headings
    assert "# Appendix A—Acronyms" in headings
    phrase = "the inputs can be broken into categories"
    trust = next(c for c in result["chunks"] if phrase in " ".join(c["text"].split()))
    assert trust["headings"][:2] == [
        "3 Logical Components of Zero Trust Architecture",
        "3.3 Trust Algorithm",
    ]
    # The printed table of contents and lists of figures and tables (pages 7 to 9) are left
    # out: they matched a question about a section as well as the section, and ranked first.
    assert "....." not in markdown
    assert "2.1 Tenets of Zero Trust" not in "".join(c["text"] for c in result["chunks"][:20])
    # A title the page draws apart from its label ("Appendix B— Acronyms" over "Acronyms").
    ssdf = (await _convert_file(client, "nist/NIST.SP.800-218.pdf")).json()["markdown"]
    assert "\n# Acronyms\n" in ssdf and "\n## Protect Software (PS)\n" in ssdf
    # LaTeX's bookmarks leave out the section number the page writes.
    latex = "yaos-prinzip/Online-Optimierung als Zwei-Personen-Nullsummenspiel und Yaos Prinzip.pdf"
    paper = (await _convert_file(client, latex)).json()["markdown"]
    assert [line for line in paper.splitlines() if line.startswith("#")] == [
        "# 1 Zwei-Personen-Nullsummenspiel",
        "# 2 Sattelpunkte und Wert eines Spiels",
        "# 3 Das Minimax-Theorem",
        "# 4 Yaos Prinzip",
        "# 5 Yaos Prinzip für unendliche Spiele",
        "# Literatur",
    ]


async def test_umlauts_from_latex_pdfs_are_folded(client: httpx.AsyncClient) -> None:
    latex = "yaos-prinzip/Online-Optimierung als Zwei-Personen-Nullsummenspiel und Yaos Prinzip.pdf"
    result = (await _convert_file(client, latex)).json()
    assert "\u00a8" not in result["markdown"]
    assert result["markdown"].count("ä") > 100


async def test_slides_and_sheets_are_pages(client: httpx.AsyncClient) -> None:
    deck = (await _convert_file(client, "markitdown/test.pptx")).json()
    first = next(c for c in deck["chunks"] if c["page"] == 1)
    assert first["headings"] == [deck["title"]]
    assert all("Slide number" not in c["text"] for c in deck["chunks"])

    book = (await _convert_file(client, "calamine/pivots.xlsx")).json()
    by_sheet = {c["headings"][0]: c["page"] for c in book["chunks"] if c["headings"]}
    assert by_sheet["PivotSheet1"] == 1
    assert by_sheet["DataSheet"] == 5
    assert by_sheet["DataSheet2"] == 6


async def test_scanned_pdf_is_no_text_with_a_hint(client: httpx.AsyncClient) -> None:
    path = FILES / "markitdown/MEDRPT-2024-PAT-3847_medical_report_scan.pdf"
    response = await _convert(client, path.name, path.read_bytes())
    assert response.status_code == 422
    body = response.json()
    assert body["status"] == "error"
    assert body["error_code"] == "no_text_extracted"
    assert "no text could be extracted" in body["error"]
    assert "scanned" in body["error"] and "OCR" in body["error"]
    assert "ingest_content" in body["error"]


@pytest.mark.parametrize(
    ("name", "data", "status", "code", "words"),
    [
        ("random.bin", None, 422, "unsupported_format", (".pdf", ".docx", ".zip")),
        ("notes.pages", b"PK\x03\x04", 422, "unsupported_format", ("'.pages' files",)),
        (
            "broken.msg",
            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600),
            422,
            "conversion_failed",
            ("corrupt", ".msg"),
        ),
        ("scan.png", b"\x89PNG\r\n\x1a\n" + bytes(64), 422, "unsupported_format", ("OCR",)),
        ("deck.ppt", b"\xd0\xcf\x11\xe0" + bytes(64), 422, "conversion_failed", ("PowerPoint",)),
        ("memo.doc", b"\xd0\xcf\x11\xe0" + bytes(64), 422, "conversion_failed", ("Word",)),
        ("broken.pdf", b"%PDF-1.4\n this is not a PDF", 422, "conversion_failed", ("corrupt",)),
        ("broken.docx", b"PK\x03\x04 not a zip", 422, "conversion_failed", ("corrupt",)),
        ("big.txt", b"a " * 2_000_001, 413, "too_large", ("MAX_CONVERT_BYTES",)),
        ("blank.txt", b" \n\n \t\n", 422, "no_text_extracted", ("ingest_content",)),
    ],
)
async def test_bad_inputs_are_refused_clearly(
    client: httpx.AsyncClient,
    name: str,
    data: bytes | None,
    status: int,
    code: str,
    words: tuple[str, ...],
) -> None:
    payload = data if data is not None else (FILES / "markitdown" / name).read_bytes()
    response = await _convert(client, name, payload)
    assert response.status_code == status, response.text[:300]
    body = response.json()
    assert body["error_code"] == code
    for word in words:
        assert word in body["error"]


async def test_zip_bomb_is_refused(client: httpx.AsyncClient) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for i in range(3):
            archive.writestr(f"zeros{i}.txt", bytes(20_000_000))
    response = await _convert(client, "bomb.zip", buffer.getvalue())
    assert response.status_code == 413
    assert response.json()["error_code"] == "too_large"


async def test_missing_filename_is_invalid_input(client: httpx.AsyncClient) -> None:
    response = await client.post("/convert", content=b"hello")
    assert response.status_code == 400
    assert response.json()["error_code"] == "invalid_input"


async def test_chunk_endpoint(client: httpx.AsyncClient) -> None:
    markdown = "# Notes\r\n\r\nMeeting notes.\n\n## Actions\n\n" + "Do the thing. " * 300
    response = await client.post("/chunk", json={"markdown": markdown, "file_type": "txt"})
    assert response.status_code == 200
    result = response.json()
    assert result["title"] == "Notes"
    assert result["file_type"] == "txt"
    assert "\r" not in result["markdown"]
    _check_chunks(result)
    assert len(result["chunks"]) > 3
    assert result["chunks"][-1]["headings"] == ["Notes", "Actions"]

    titled = await client.post("/chunk", json={"markdown": "plain text", "title": "Mine"})
    assert titled.json()["title"] == "Mine"

    empty = await client.post("/chunk", json={"markdown": "| --- |\n\n<!-- x -->"})
    assert empty.status_code == 422
    assert empty.json()["error_code"] == "no_text_extracted"

    invalid = await client.post("/chunk", json={"text": "wrong field"})
    assert invalid.status_code == 400
    assert invalid.json()["error_code"] == "invalid_input"


async def test_the_typed_client_and_the_in_process_core_agree(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await _wait_ready(client)
    remote = ConverterClient("http://converter", transport=httpx.ASGITransport(app))
    core: Converter = app.state.converter
    local: ConverterPort = core  # the in-process core is a drop-in for the HTTP client
    try:
        for port in (remote, local):
            assert (await port.ready())[0]
        data = (FILES / "markitdown/test.docx").read_bytes()
        over_http = await remote.convert(data, "test.docx")
        in_process = await local.convert(data, "test.docx")
        assert over_http == in_process
        request = ChunkRequest(markdown="# T\n\nSome text to index.", file_type="md")
        assert await remote.chunk(request) == await local.chunk(request)
        # Errors keep their class across the HTTP hop.
        for port in (remote, local):
            with pytest.raises(UnsupportedFormatError):
                await port.convert(b"\x00\x01", "random.bin")
            with pytest.raises(NoTextError):
                await port.chunk(ChunkRequest(markdown="| --- |"))
    finally:
        await remote.aclose()


async def test_a_slow_conversion_is_killed_and_the_service_recovers() -> None:
    settings = ConverterSettings(converter_workers=1, convert_timeout_s=1.0)
    app = create_app(settings)
    cells = "".join(
        f"<table><tr><td>cell {i} <b>bold</b> <a href='#{i}'>link</a></td></tr></table>"
        for i in range(100_000)
    )
    slow = f"<html><body>{cells}</body></html>".encode()
    async with app.router.lifespan_context(app), _client(app) as http:
        await _wait_ready(http)
        response = await _convert(http, "slow.html", slow)
        assert response.status_code == 504
        body = response.json()
        assert body["error_code"] == "conversion_timeout"
        assert "CONVERT_TIMEOUT_S" in body["error"]

        # The killed worker is replaced; the next request waits for it and succeeds.
        after = await _convert(http, "after.md", b"# After\n\nThe service still works.")
        assert after.status_code == 200, after.text
        assert after.json()["title"] == "After"
        assert (await http.get("/readyz")).status_code == 200
