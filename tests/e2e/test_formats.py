"""More formats through the product (the four services started like `make up`, the real MCP
SDK client): OpenDocument, RTF and Word uploads found on their pages, a source file found in
its function, and a transcript, a paper and a saved web page found by what they say."""

from __future__ import annotations

import asyncio
import http.server
import threading
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO, SHARED_FILES
from tests.e2e.conftest import Cluster
from tests.mcp_client import sse_tools

pytestmark = pytest.mark.e2e


def test_opendocument_rtf_and_word_uploads_are_found_on_their_pages(cluster: Cluster) -> None:
    """LibreOffice and Word files through `/upload`, found by an MCP client: a slide's speaker
    notes on that slide's page, an RTF footnote, an OpenDocument sheet on its sheet's page, a
    Word 97 document's table row under its heading."""
    office = REPO / "tests" / "data" / "office"
    for name in ("slides.odp", "report.rtf", "sheets.ods", "notes.doc"):
        response = httpx.post(
            cluster.gateway + "/upload",
            files={"file": (f"C:\\Users\\alex\\Documents\\{name}", (office / name).read_bytes())},
            data={"library": "office"},
            timeout=120,
        )
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "indexed", response.text

    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            notes = await tools.call("search", query="Lyon lease signing", library="office")
            top = notes["results"][0]
            assert (top["source"], top["page"], top["file_type"]) == ("slides.odp", 2, "odp")
            assert "Mention the Lyon lease signing date." in top["content"]
            ferry = await tools.call("search", query="Meersburg ferry count", library="office")
            top = ferry["results"][0]
            assert (top["source"], top["title"]) == (
                "report.rtf",
                "Field report: Lake Constance survey",
            )
            sheet = await tools.call("search", query="ColA ColB affc7dad", library="office")
            top = sheet["results"][0]
            assert (top["source"], top["page"]) == ("sheets.ods", 2)
            word = await tools.call("search", query="Cuisson 45 min", library="office")
            top = word["results"][0]
            assert (top["source"], top["file_type"]) == ("notes.doc", "doc")
            assert top["title"] == "Carnet de recettes"
            assert "| Cuisson | 45 min | 150 °C |" in top["content"]

    asyncio.run(go())


def test_a_source_file_upload_is_found_in_its_function(cluster: Cluster) -> None:
    """A Python file through `/upload`: the hit is the function, its heading path the class
    and the method, its lines the file's own. The file is this project's own module, which
    changes: the function's hit is looked for among ten, not at the top."""
    path = REPO / "services" / "converter" / "code.py"
    response = httpx.post(
        cluster.gateway + "/upload",
        files={"file": ("code.py", path.read_bytes())},
        data={"library": "code"},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    lines = path.read_text(encoding="utf-8").split("\n")
    heading = next(k for k, line in enumerate(lines, start=1) if "def heading(self" in line)

    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            found = await tools.call(
                "search", query="heading: match a definition line, pop the open indents as "
                "deep, return the level", library="code", top_k=10,
            )  # fmt: skip
            top = next(r for r in found["results"] if "def heading(self" in r["content"])
            assert (top["source"], top["file_type"], top["title"]) == ("code.py", "py", "code.py")
            assert top["headings"][0] == "class DefinitionScanner"
            assert top["start_line"] <= heading <= top["end_line"]

    asyncio.run(go())


def test_a_transcript_a_paper_and_a_saved_page_are_found_by_what_they_say(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A meeting transcript, a LaTeX paper and Org notes through `/upload`, and a web page saved
    as one file through `ingest_url` (served by a local server as `message/rfc822`), found
    by an MCP client: the speaker and the time in the transcript's hit, the paper's section
    as the hit's heading path, the saved page by its article's words and title."""
    text = REPO / "tests" / "data" / "text"
    for name in ("standup.vtt", "paper.tex", "notes.org"):
        response = httpx.post(
            cluster.gateway + "/upload",
            files={"file": (name, (text / name).read_bytes())},
            data={"library": "markup"},
            timeout=120,
        )
        assert response.status_code == 200, response.text
        assert response.json()["status"] == "indexed", response.text
    blog = (SHARED_FILES / "markitdown/test_blog.html").read_text("utf-8")
    page = MIMEMultipart("related", type="text/html")
    page.attach(MIMEText(blog, "html", "utf-8"))
    served = tmp_path / "www"
    served.mkdir()
    (served / "post.mhtml").write_bytes(page.as_bytes())  # served as message/rfc822
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(served))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/post.mhtml"

    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            saved = await tools.call("ingest_url", url=url, library="markup")
            assert saved["status"] == "indexed", saved
            said = await tools.call(
                "search", query="who raised the ledger timeout", library="markup"
            )
            top = said["results"][0]
            assert (top["source"], top["file_type"]) == ("standup.vtt", "vtt")
            assert "[00:00:11] **Tomás Ortega:** The retry storm" in top["content"]
            prior = await tools.call(
                "search", query="terms weighted by document frequency", library="markup"
            )
            top = prior["results"][0]
            assert (top["source"], top["title"]) == (
                "paper.tex",
                "Cold-Start Retrieval with Sparse Priors",
            )
            assert "Sparse prior" in top["content"]
            post = await tools.call(
                "search", query="tuning inference parameters for MATH problems", library="markup"
            )
            top = post["results"][0]
            assert top["file_type"] == "mhtml" and top["title"].startswith("Does Model and")

    try:
        asyncio.run(go())
    finally:
        server.shutdown()
