"""`mcpvectordb-sync` against the four real services on loopback, with real files from
shared/data/files (non-ASCII names included): the first pass uploads all, the second
nothing; one changed and two deleted files give one upload and two deletions; a sync killed
in the middle resumes and finishes; and the one-file `.pyz`, built by `make sync-client`,
runs in a clean virtual environment that has nothing installed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.entrypoints.cluster import LocalCluster
from tests.conftest import REPO, SHARED_FILES

pytestmark = pytest.mark.e2e

REAL_FILES = [
    "markitdown/test.docx",
    "markitdown/test.pptx",
    "markitdown/test.xlsx",
    "markitdown/test.json",
    "markitdown/test_blog.html",
    "markitdown/test.epub",
    "markitdown/test_notebook.ipynb",
    "markitdown/test.pdf",
    "markitdown/markitdown-project-README.md",
    "calamine/table-multiple.xlsx",
    "docxwriter/元数据.docx",
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not SHARED_FILES.is_dir():
        pytest.skip(f"shared files missing at {SHARED_FILES}")
    root = tmp_path_factory.mktemp("sync-folder") / "Documents"
    for rel in REAL_FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHARED_FILES / rel, root / rel)
    (root / "markitdown" / "random.bin").write_bytes(b"\x00\x01")  # not a document: ignored
    return root


def _run(
    cluster: LocalCluster, folder: Path, *extra: str, python: str = sys.executable
) -> tuple[int, dict[str, Any], str]:
    command = [python, "-m", "mcpvectordb_sync", str(folder), "--url", cluster.gateway]
    done = subprocess.run(
        [*command, "--library", "synced", "--delete", "--json", *extra],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    summary = json.loads(done.stdout) if done.stdout.strip() else {}
    return done.returncode, summary, done.stderr


def _reused_vectors(cluster: LocalCluster) -> float:
    metrics = httpx.get(f"{cluster.gateway}/metrics", timeout=10).text
    for line in metrics.splitlines():
        if line.startswith("mvdb_ingest_reused_vectors_total "):
            return float(line.split()[1])
    raise AssertionError("the gateway exports no mvdb_ingest_reused_vectors_total")


def _manifest(cluster: LocalCluster, library: str = "synced") -> dict[str, dict[str, Any]]:
    entries: dict[str, dict[str, Any]] = {}
    cursor = None
    while True:
        params = {"library": library, "limit": "5", **({"cursor": cursor} if cursor else {})}
        page = httpx.get(f"{cluster.gateway}/sources", params=params, timeout=30).json()
        entries.update({e["source"]: e for e in page["sources"]})
        cursor = page["next_cursor"]
        if cursor is None:
            return entries


def test_sync_uploads_then_skips_then_follows_changes(cluster: LocalCluster, folder: Path) -> None:
    code, first, err = _run(cluster, folder)
    assert code == 0, err
    assert (first["uploaded"], first["unchanged"], first["failed"]) == (len(REAL_FILES), 0, 0)
    assert first["ignored"] == 1
    manifest = _manifest(cluster)
    assert sorted(manifest) == sorted(REAL_FILES)

    code, second, err = _run(cluster, folder)
    assert code == 0, err
    assert (second["uploaded"], second["unchanged"], second["deleted"]) == (0, len(REAL_FILES), 0)

    readme = folder / "markitdown" / "markitdown-project-README.md"
    readme.write_text(readme.read_text(encoding="utf-8") + "\n\nA line added on the client.\n")
    (folder / "markitdown" / "test.json").unlink()
    (folder / "docxwriter" / "元数据.docx").unlink()
    reused = _reused_vectors(cluster)
    code, third, err = _run(cluster, folder)
    assert code == 0, err
    assert (third["uploaded"], third["deleted"], third["failed"]) == (1, 2, 0)
    after = _manifest(cluster)
    assert "markitdown/test.json" not in after and "docxwriter/元数据.docx" not in after
    changed = after["markitdown/markitdown-project-README.md"]
    assert changed["doc_id"] != manifest["markitdown/markitdown-project-README.md"]["doc_id"]
    # The new version embedded only its last chunk: the others' vectors came from the index.
    chunks = httpx.get(f"{cluster.index}/documents/{changed['doc_id']}", timeout=30).json()
    assert _reused_vectors(cluster) - reused >= chunks["chunk_count"] - 1 > 0
    got = httpx.get(f"{cluster.gateway}/jobs", timeout=10)  # the gateway is still healthy
    assert got.status_code == 200


def test_a_killed_sync_resumes_and_finishes(cluster: LocalCluster, tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    for i in range(8):
        body = "\n\n".join(
            f"Log {i}.{p}: the keeper of lighthouse {i} notes wind {p}, swell and visibility."
            for p in range(20)
        )
        (folder / f"log-{i}.md").write_text(f"# Log {i}\n\n{body}\n")
    command = [
        sys.executable, "-m", "mcpvectordb_sync", str(folder), "--url", cluster.gateway,
        "--library", "killed", "--concurrency", "1", "--json",
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not _manifest(cluster, "killed") and time.monotonic() < deadline:
            assert process.poll() is None, "the sync finished before it could be killed"
            time.sleep(0.1)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    before = len(_manifest(cluster, "killed"))
    assert 1 <= before < 8

    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["uploaded"] + summary["unchanged"] == 8
    assert summary["unchanged"] >= before  # what the killed run finished is not sent again
    assert sorted(_manifest(cluster, "killed")) == [f"log-{i}.md" for i in range(8)]


def test_the_pyz_runs_in_a_clean_environment(
    cluster: LocalCluster, folder: Path, tmp_path: Path
) -> None:
    subprocess.run(["make", "sync-client"], cwd=REPO, check=True, capture_output=True)
    archive = REPO / "dist" / "mcpvectordb-sync.pyz"
    venv = tmp_path / "clean"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    bare = subprocess.run([python, "-c", "import httpx"], cwd=tmp_path, capture_output=True)
    assert bare.returncode != 0, "the clean environment is not clean"
    done = subprocess.run(
        [python, str(archive), str(folder), "--url", cluster.gateway, "--library", "pyz",
         "--prefix", "Documents", "--json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["uploaded"] >= 1 and summary["failed"] == 0
    assert all(s.startswith("Documents/") for s in _manifest(cluster, "pyz"))


def test_synced_documents_are_resources(cluster: LocalCluster, folder: Path) -> None:
    import asyncio

    from mcp import ClientSession
    from mcp.client.sse import sse_client
    from mcp.types import PaginatedRequestParams, TextResourceContents

    from libs.contracts import parse_document_uri

    async def go() -> tuple[list[str], str, str]:
        async with (
            sse_client(cluster.gateway + "/sse", timeout=30) as (read, write),
            ClientSession(read, write) as opened,
        ):
            await opened.initialize()
            uris: list[str] = []
            cursor = None
            while True:
                params = PaginatedRequestParams(cursor=cursor)
                page = await opened.list_resources(params=params)
                uris += [r.uri for r in page.resources]
                if (cursor := page.next_cursor) is None:
                    break
            mine = next(u for u in uris if parse_document_uri(u)[0] == "synced")
            [content] = (await opened.read_resource(mine)).contents
            assert isinstance(content, TextResourceContents)
            got = await opened.call_tool("get_document", {"doc_id": parse_document_uri(mine)[1]})
            assert got.structured_content is not None
            return uris, content.text, got.structured_content["content"]

    uris, text, expected = asyncio.run(go())
    synced = {parse_document_uri(u)[1] for u in uris if parse_document_uri(u)[0] == "synced"}
    assert synced == {e["doc_id"] for e in _manifest(cluster).values()}
    assert text == expected and text


def test_a_document_from_an_older_converter_is_converted_again(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """Unchanged bytes made by an older converter: the manifest says `stale`, the next pass
    sends them again and the document is made anew; the pass after that sends nothing."""
    import hashlib

    from libs.contracts import Chunk, NewDocument, UpsertRequest
    from libs.formats import CONVERTER_REVISION

    folder = tmp_path / "notes"
    folder.mkdir()
    data = "Crème brûlée for the niño\n".encode("cp1252")  # Notepad's "ANSI"
    (folder / "recipe.txt").write_bytes(data)
    # What 0.8.3 made of these bytes (read as Windows-1250) and stored, revision unrecorded.
    old_text = "Crčme brűlée for the nińo"
    embedded = httpx.post(f"{cluster.embedder}/embed", json={"texts": [old_text]}, timeout=60)
    old = UpsertRequest(
        document=NewDocument(
            source="recipe.txt",
            library="reconvert",
            title="recipe",
            file_type="txt",
            content_hash=hashlib.sha256(data).hexdigest(),
            last_modified="2026-01-01T00:00:00+00:00",
            markdown=old_text,
        ),
        chunks=[Chunk(chunk_index=0, text=old_text, token_count=12)],
        model=embedded.json()["model"],
        dim=embedded.json()["dim"],
        vectors_b64=embedded.json()["vectors_b64"],
    )
    written = httpx.post(f"{cluster.index}/documents", json=old.model_dump(), timeout=60)
    assert written.status_code == 200, written.text
    [entry] = _manifest(cluster, "reconvert").values()
    assert (entry["conversion"], entry["stale"]) == (0, True)

    def pass_over() -> dict[str, Any]:
        command = [sys.executable, "-m", "mcpvectordb_sync", str(folder)]
        done = subprocess.run(
            [*command, "--url", cluster.gateway, "--library", "reconvert", "--json"],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=REPO,
        )
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    first = pass_over()
    assert (first["uploaded"], first["unchanged"], first["failed"]) == (1, 0, 0)
    assert first["reconverted"] == 1
    [entry] = _manifest(cluster, "reconvert").values()
    assert (entry["conversion"], entry["stale"]) == (CONVERTER_REVISION, False)
    assert entry["doc_id"] != written.json()["doc_id"]
    got = httpx.get(f"{cluster.index}/documents/{entry['doc_id']}", timeout=30).json()
    assert got["content"] == "Crème brûlée for the niño", got
    second = pass_over()
    assert (second["uploaded"], second["unchanged"], second["reconverted"]) == (0, 1, 0)
