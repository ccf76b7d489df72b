"""The product end to end: the four services started like `make up`, every tool driven by
the real MCP SDK client over SSE (and streamable HTTP), real files from shared/data/files,
`POST /upload`, `POST /ingest_folder` and `mcpvectordb-ingest`."""

from __future__ import annotations

import asyncio
import gzip
import http.server
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from libs.contracts import TOOLS
from tests.conftest import REPO, SHARED_FILES
from tests.e2e.conftest import Cluster, ingest_shared
from tests.mcp_client import sse_tools
from tests.uploads import check_windows_upload

pytestmark = pytest.mark.e2e

REAL_FILES = {
    "pdf": "nist/NIST.SP.800-218.pdf",
    "pdf_de": (
        "yaos-prinzip/Online-Optimierung als Zwei-Personen-Nullsummenspiel und Yaos Prinzip.pdf"
    ),
    "docx": "markitdown/test_with_comment.docx",
    "docx_cn": "docxwriter/元数据.docx",
    "pptx": "markitdown/test.pptx",
    "xlsx": "calamine/table-multiple.xlsx",
    "xls": "markitdown/test.xls",
    "html": "markitdown/test_blog.html",
    "csv": "markitdown/test_mskanji.csv",
    "json": "markitdown/test.json",
    "zip": "markitdown/test_files.zip",
    "txt_md": "markitdown/markitdown-project-README.md",
}
SCANNED = "markitdown/MEDRPT-2024-PAT-3847_medical_report_scan.pdf"


@pytest.fixture(scope="module")
def ingested(cluster: Cluster) -> dict[str, dict[str, Any]]:
    files = {key: (rel, {"kind": key}) for key, rel in REAL_FILES.items()}
    return ingest_shared(cluster, files, "e2e")


def test_every_real_file_is_indexed(ingested: dict[str, dict[str, Any]]) -> None:
    for key, result in ingested.items():
        assert result.get("status") == "indexed", (key, result)
        assert result["chunk_count"] > 0, key
        assert result["source"].endswith(Path(REAL_FILES[key]).name)
        assert result["library"] == "e2e"


def test_server_identity_and_tools(cluster: Cluster) -> None:
    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            listed = await tools.session.list_tools()
            assert {t.name for t in listed.tools} == {t.name for t in TOOLS}  # 10 + 3 job tools
            info = await tools.call("server_info", check_path=str(SHARED_FILES / REAL_FILES["csv"]))
            assert info["name"] == "mcpvectordb"
            assert info["embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2"
            assert info["embedding_dim"] == 384
            assert info["path_check"]["readable"] is True
            assert info["path_check"]["size_bytes"] == 70

    asyncio.run(go())


def test_search_finds_pdf_pages_and_filters(
    cluster: Cluster, ingested: dict[str, dict[str, Any]]
) -> None:
    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            found = await tools.call(
                "search", query="secure software development framework practices", top_k=5
            )
            assert found["results"], found
            top = found["results"][0]
            assert top["doc_id"] == ingested["pdf"]["doc_id"]
            assert top["page"] >= 1 and top["file_type"] == "pdf"
            assert top["metadata"] == {"kind": "pdf"}
            assert isinstance(top["score"], float)

            pdf_only = await tools.call(
                "search", query="presentation slides", top_k=10, filter={"file_type": "pdf"}
            )
            assert {r["file_type"] for r in pdf_only["results"]} == {"pdf"}
            pages = await tools.call(
                "search", query="practices", top_k=10, filter={"file_type": "pdf", "page": 3}
            )
            assert pages["results"] and {r["page"] for r in pages["results"]} == {3}

            scoped = await tools.call("search", query="practices", library="nothing-here")
            assert scoped == {"results": [], "truncated": False, "total_tokens": 0}
            inject = await tools.call(
                "search", query="practices", filter={"source": "x' OR '1'='1"}
            )
            assert inject == {"results": [], "truncated": False, "total_tokens": 0}
            unknown = await tools.call("search", query="x", filter={"password": "x"})
            assert unknown["status"] == "error" and unknown["error_code"] == "invalid_input"
            assert "password" in unknown["error"]

            slides = await tools.call(
                "search", query="slide", top_k=20, filter={"file_type": "pptx"}
            )
            assert slides["results"] and all(r["page"] >= 1 for r in slides["results"])
            sheets = await tools.call(
                "search", query="table", top_k=20, filter={"file_type": "xlsx"}
            )
            assert sheets["results"] and all(r["page"] >= 1 for r in sheets["results"])

    asyncio.run(go())


def test_get_document_returns_the_converted_markdown_exactly(
    cluster: Cluster, ingested: dict[str, dict[str, Any]]
) -> None:
    path = SHARED_FILES / REAL_FILES["docx"]
    converted = httpx.post(
        cluster.converter + "/convert",
        params={"filename": path.name},
        content=path.read_bytes(),
        timeout=120,
    ).json()

    async def go() -> dict[str, Any]:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            return await tools.call("get_document", doc_id=ingested["docx"]["doc_id"])

    doc = asyncio.run(go())
    assert doc["content"] == converted["markdown"]
    assert doc["chunk_count"] == ingested["docx"]["chunk_count"]
    assert doc["metadata"] == {"kind": "docx"}


def test_scanned_pdf_says_no_text_and_suggests_ingest_content(cluster: Cluster) -> None:
    async def go() -> dict[str, Any]:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            return await tools.call("ingest_file", path=str(SHARED_FILES / SCANNED), library="e2e")

    result = asyncio.run(go())
    assert result["status"] == "error"
    assert result["error_code"] == "no_text_extracted"
    assert "ingest_content" in result["error"]
    assert "chunking failed" not in result["error"].lower()


def test_dedup_replace_list_libraries_and_delete(
    cluster: Cluster, ingested: dict[str, dict[str, Any]]
) -> None:
    async def go() -> None:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            first = await tools.call(
                "ingest_content",
                content="# Notes\n\nThe quokka is a small marsupial from Rottnest Island.",
                source="notes/quokka.md",
                library="notes",
            )
            assert first["status"] == "indexed"
            again = await tools.call(
                "ingest_content",
                content="# Notes\n\nThe quokka is a small marsupial from Rottnest Island.",
                source="notes/quokka.md",
                library="notes",
            )
            assert again["status"] == "skipped" and again["doc_id"] == first["doc_id"]
            changed = await tools.call(
                "ingest_content",
                content="# Notes\n\nThe numbat eats termites in Western Australia.",
                source="notes/quokka.md",
                library="notes",
            )
            assert changed["status"] == "replaced" and changed["doc_id"] != first["doc_id"]
            hits = await tools.call("search", query="quokka marsupial", library="notes")
            assert {h["doc_id"] for h in hits["results"]} == {changed["doc_id"]}
            listed = await tools.call("list_documents", library="notes")
            assert listed["count"] == 1
            assert listed["documents"][0]["doc_id"] == changed["doc_id"]
            gone = await tools.call("get_document", doc_id=first["doc_id"])
            assert gone["error_code"] == "not_found"

            libraries = await tools.call("list_libraries")
            by_name = {lib["library"]: lib for lib in libraries["libraries"]}
            assert by_name["notes"]["document_count"] == 1
            all_docs = await tools.call("list_documents", library="e2e", limit=1000)
            assert by_name["e2e"]["document_count"] == all_docs["count"]
            assert by_name["e2e"]["chunk_count"] == sum(
                d["chunk_count"] for d in all_docs["documents"]
            )
            page1 = await tools.call("list_documents", library="e2e", limit=2, offset=0)
            page2 = await tools.call("list_documents", library="e2e", limit=2, offset=2)
            assert page1["count"] == 2 and page2["count"] == 2
            assert not {d["doc_id"] for d in page1["documents"]} & {
                d["doc_id"] for d in page2["documents"]
            }

            deleted = await tools.call("delete_document", doc_id=changed["doc_id"])
            assert deleted == {
                "status": "deleted",
                "doc_id": changed["doc_id"],
                "deleted_chunks": changed["chunk_count"],
            }
            assert (await tools.call("delete_document", doc_id=changed["doc_id"]))[
                "error_code"
            ] == "not_found"
            empty = await tools.call("search", query="numbat termites", library="notes")
            assert empty == {"results": [], "truncated": False, "total_tokens": 0}

    asyncio.run(go())


def test_upload_with_a_windows_path(cluster: Cluster) -> None:
    check_windows_upload(cluster.gateway)


def test_ingest_folder_and_url(cluster: Cluster, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(SHARED_FILES / "markitdown/test.json", folder / "a.json")
    shutil.copy(SHARED_FILES / "markitdown/test_rss.xml", folder / "sub" / "feed.xml")
    shutil.copy(SHARED_FILES / SCANNED, folder / "scan.pdf")
    # Unix documentation's compressed text without an extension inside (changelog.gz) is
    # taken; compressed binary data is not.
    readme = (SHARED_FILES / "markitdown/markitdown-project-README.md").read_bytes()
    (folder / "sub" / "changelog.gz").write_bytes(gzip.compress(readme))
    (folder / "data.gz").write_bytes(gzip.compress(bytes(range(256)) * 16))
    response = httpx.post(
        cluster.gateway + "/ingest_folder",
        json={"folder": str(folder), "library": "folder", "max_concurrency": 2},
        timeout=600,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["total_files"], body["indexed"], body["failed"]) == (4, 3, 1)
    assert body["errors"][0]["file"].endswith("scan.pdf")
    assert body["ignored_files"] == [str(folder / "data.gz")]

    async def search() -> dict[str, Any]:
        async with sse_tools(cluster.gateway + "/sse") as tools:
            return await tools.call(
                "search", query="convert files to Markdown", library="folder", top_k=1
            )

    (hit,) = asyncio.run(search())["results"]
    assert (hit["source"], hit["file_type"]) == (str(folder / "sub" / "changelog.gz"), "gz")

    served = tmp_path / "www"
    served.mkdir()
    shutil.copy(SHARED_FILES / "markitdown/test_blog.html", served / "post.html")
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(served))  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/post.html"

        async def go() -> dict[str, Any]:
            async with sse_tools(cluster.gateway + "/sse") as tools:
                return await tools.call("ingest_url", url=url, library="web")

        result = asyncio.run(go())
        assert result["status"] == "indexed" and result["source"] == url
    finally:
        server.shutdown()


def test_streamable_http_transport(cluster: Cluster, ingested: dict[str, dict[str, Any]]) -> None:
    async def go() -> None:
        async with (
            streamable_http_client(cluster.gateway + "/mcp") as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "mcpvectordb"
            result = await session.call_tool("list_documents", {"library": "e2e", "limit": 100})
            docs = result.structured_content
            assert docs is not None
            ids = {d["doc_id"] for d in docs["documents"]}
            assert ingested["pptx"]["doc_id"] in ids

    asyncio.run(go())


def test_cli_against_the_gateway(cluster: Cluster, tmp_path: Path) -> None:
    folder = tmp_path / "cli"
    folder.mkdir()
    shutil.copy(SHARED_FILES / "markitdown/test_notebook.ipynb", folder / "nb.ipynb")
    cli = [sys.executable, "-m", "services.entrypoints.ingest"]
    ok = subprocess.run(
        [*cli, str(folder), "--library", "cli", "--url", cluster.gateway],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert ok.returncode == 0, ok.stderr
    assert "1 indexed" in ok.stdout
    shutil.copy(SHARED_FILES / SCANNED, folder / "scan.pdf")
    failed = subprocess.run(
        [*cli, str(folder), "--library", "cli", "--url", cluster.gateway],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert failed.returncode == 1
    assert "1 skipped" in failed.stdout and "1 failed" in failed.stdout
    assert "scan.pdf" in failed.stderr
    usage = subprocess.run([*cli, "--max-concurrency", "x"], capture_output=True, cwd=REPO)
    assert usage.returncode == 2


@pytest.fixture
def offline_env(tmp_path: Path, cluster: Cluster) -> Iterator[dict[str, str]]:
    env = dict(cluster.env)
    env["LANCEDB_URI"] = str(tmp_path / "standalone-db")
    env["VAR_DIR"] = str(tmp_path / "var")
    yield env


def test_cli_in_process_then_stdio_server(offline_env: dict[str, str], tmp_path: Path) -> None:
    """No services at all: the CLI writes a store, the stdio server reads it."""
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    folder = tmp_path / "local"
    folder.mkdir()
    (folder / "walrus.md").write_text("# Walrus\n\nWalruses use their tusks to haul out onto ice.")
    done = subprocess.run(
        [sys.executable, "-m", "services.entrypoints.ingest", str(folder), "--library", "local"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=offline_env,
    )
    assert done.returncode == 0, done.stderr
    assert "1 indexed" in done.stdout

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "services.entrypoints.mcpvectordb", "--transport", "stdio"],
        env=offline_env,
        cwd=str(REPO),
    )

    async def go() -> None:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool(
                "search", {"query": "tusks on the ice", "library": "local"}
            )
            hits = result.structured_content
            assert hits is not None and hits["results"]
            assert hits["results"][0]["title"] == "Walrus"
            info = await session.call_tool("server_info", {})
            assert info.structured_content is not None
            assert info.structured_content["transport"] == "stdio"

    asyncio.run(go())
