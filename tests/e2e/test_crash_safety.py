"""Crash safety end to end: the four services started like `make up`, each one in turn killed
with SIGKILL in the middle of a folder ingest and started again with
`services.entrypoints.cluster up`.

After every crash the store must be consistent and must have kept everything it
acknowledged:
- the ingest either finished through the retries or reported the files it could not do (for
  the gateway, whose caller loses the answer, re-running the ingest finishes the rest and
  skips what was already done);
- no document has missing chunks: per library, the sum of `list_documents` chunk counts is
  the `list_libraries` chunk count, the index's raw chunk rows equal the sum over all
  libraries, and for a sample of documents `get_document` works and a search restricted to
  the document finds exactly its chunks;
- every doc_id returned as indexed, in this or an earlier round, is still listed.

Also: concurrent ingests of one source end with one document, and a failed re-ingest leaves
the old version searchable. The retry budget is raised through the cluster's environment
(`RETRY_ATTEMPTS`, `RETRY_MAX_S`) so that retries outlast a restart. The index takes 16 KiB
a request (`INDEX_MAX_BODY_BYTES`), so every file (about 24 KB to write) goes in parts and
then a last request (`services.gateway.parts`): parts a killed index lost are sent again.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.entrypoints.cluster import LocalCluster, local_env, running
from tests.conftest import SHARED_FILES
from tests.crash_checks import IngestInBackground, store_is_consistent
from tests.e2e.conftest import restart
from tests.mcp_client import sse_tools

pytestmark = pytest.mark.e2e

BOOK = SHARED_FILES / "gutenberg" / "1342-0.txt"
FILES_PER_ROUND = 10
SLICE_CHARS = 4000
VICTIMS = ("converter", "embedder", "index", "gateway")

# doc_ids the gateway acknowledged, by library, over the whole module.
ACKNOWLEDGED: dict[str, set[str]] = {}


@pytest.fixture(scope="module")
def crash_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    if not BOOK.is_file():
        pytest.skip(f"shared test files not found at {SHARED_FILES}")
    env = local_env(
        tmp_path_factory.mktemp("crash-var"),
        LOG_LEVEL="INFO",
        RETRY_ATTEMPTS="20",
        RETRY_MAX_S="120",
        INDEX_MAX_BODY_BYTES="16384",
    )
    try:
        with running(env) as cluster:
            yield cluster
    except RuntimeError as exc:
        pytest.fail(str(exc))


def _book_folder(base: Path, name: str, round_no: int) -> Path:
    """FILES_PER_ROUND real-text files, a different stretch of the novel per round."""
    text = BOOK.read_text(encoding="utf-8")
    folder = base / name
    folder.mkdir()
    start = 20_000 + round_no * FILES_PER_ROUND * SLICE_CHARS
    for i in range(FILES_PER_ROUND):
        at = start + i * SLICE_CHARS
        (folder / f"part-{i:02d}.txt").write_text(text[at : at + SLICE_CHARS], encoding="utf-8")
    return folder


def _documents_in(cluster: LocalCluster, library: str) -> int:
    try:
        response = httpx.get(
            cluster.index + "/documents", params={"library": library, "limit": 1}, timeout=5
        )
    except httpx.HTTPError:
        return -1
    return int(response.json()["total"]) if response.status_code == 200 else -1


def _kill(cluster: LocalCluster, service: str) -> None:
    pid = cluster.pid(service)
    assert pid is not None, f"no pid file for {service}"
    os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return  # gone
        if state == "Z":
            return  # dead, waiting to be reaped
        time.sleep(0.05)
    raise AssertionError(f"{service} (pid {pid}) survived SIGKILL")


async def check_store(
    cluster: LocalCluster,
    library: str,
    sample: int,
    acknowledged_by_library: dict[str, set[str]] = ACKNOWLEDGED,
) -> None:
    """Consistency of the whole store, and a close look at `sample` documents of `library`."""

    def index_info() -> dict[str, Any]:
        info: dict[str, Any] = httpx.get(cluster.index + "/info", timeout=10).json()
        return info

    await store_is_consistent(cluster.gateway, index_info, library, sample, acknowledged_by_library)


def ingest_through_a_kill(
    cluster: LocalCluster, victim: str, folder: Path, library: str
) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """Ingest `folder` in the background, SIGKILL `victim` once two documents are stored,
    restart it and wait for the ingest to end: (its outcome, documents stored before the
    kill, the request)."""
    request = {"folder": str(folder), "library": library, "max_concurrency": 2}
    ingest = IngestInBackground(cluster.gateway, request)
    deadline = time.monotonic() + 180
    while (done_before := _documents_in(cluster, library)) < 2:
        assert ingest.running(), f"the ingest ended before the kill: {ingest.outcome}"
        assert time.monotonic() < deadline, "the ingest made no progress"
        time.sleep(0.05)
    assert done_before < FILES_PER_ROUND, "the ingest finished before the kill"

    _kill(cluster, victim)
    assert f"{victim}: started" in restart(cluster)
    ingest.finish()
    return ingest.outcome, done_before, request


def answer_through_restarts(outcome: dict[str, Any]) -> dict[str, Any]:
    """The ingest's answer when its caller's connection survived: every file accounted for,
    and a file the retries could not save reported, not lost."""
    response = outcome["response"]
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["total_files"] == FILES_PER_ROUND
    done = body["indexed"] + body["replaced"] + body["skipped"]
    assert done + body["failed"] == FILES_PER_ROUND
    for error in body["errors"]:
        assert error["error_code"] == "service_unavailable", error
    return body


@pytest.mark.parametrize("victim", VICTIMS)
def test_sigkill_mid_ingest_keeps_the_store_consistent(
    crash_cluster: LocalCluster, victim: str, tmp_path: Path
) -> None:
    round_no = VICTIMS.index(victim)
    library = f"crash-{victim}"
    folder = _book_folder(tmp_path, library, round_no)
    outcome, done_before, request = ingest_through_a_kill(crash_cluster, victim, folder, library)

    if victim == "gateway":
        # The caller's connection died with the gateway; running the ingest again finishes
        # the rest and skips what was already done.
        assert "error" in outcome, outcome
        response = httpx.post(crash_cluster.gateway + "/ingest_folder", json=request, timeout=600)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["failed"] == 0, body["errors"]
        assert body["skipped"] >= done_before
        assert body["skipped"] + body["indexed"] + body["replaced"] == FILES_PER_ROUND
    else:
        body = answer_through_restarts(outcome)
    ACKNOWLEDGED[library] = {r["doc_id"] for r in body["results"]}
    assert len(ACKNOWLEDGED[library]) == len(body["results"])

    asyncio.run(check_store(crash_cluster, library, sample=4))


def test_concurrent_ingests_of_one_source_end_with_one_document(
    crash_cluster: LocalCluster,
) -> None:
    library, source = "concurrent", "notes/shared.md"
    contents = [
        f"# Version {i}\n\nThe lighthouse keeper logged storm number {i}." for i in range(8)
    ]

    async def one(content: str) -> dict[str, Any]:
        async with sse_tools(crash_cluster.gateway + "/sse") as tools:
            return await tools.call(
                "ingest_content", content=content, source=source, library=library
            )

    async def go() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(one(c) for c in contents)))

    results = asyncio.run(go())
    assert all(r.get("status") in ("indexed", "replaced") for r in results), results
    assert sorted(r["status"] for r in results).count("indexed") == 1

    async def check() -> None:
        async with sse_tools(crash_cluster.gateway + "/sse") as tools:
            listed = await tools.call("list_documents", library=library)
            assert listed["count"] == 1
            doc = listed["documents"][0]
            assert doc["doc_id"] in {r["doc_id"] for r in results}
            full = await tools.call("get_document", doc_id=doc["doc_id"])
            assert full["content"] in contents
            hits = await tools.call("search", query="lighthouse keeper storm", library=library)
            assert {h["doc_id"] for h in hits["results"]} == {doc["doc_id"]}
            ACKNOWLEDGED[library] = {doc["doc_id"]}

    asyncio.run(check())


@pytest.mark.parametrize(
    ("bad", "code"),
    [
        ("markitdown/MEDRPT-2024-PAT-3847_medical_report_scan.pdf", "no_text_extracted"),
        ("truncated", "conversion_failed"),
    ],
)
def test_a_failed_re_ingest_leaves_the_old_version_searchable(
    crash_cluster: LocalCluster, tmp_path: Path, bad: str, code: str
) -> None:
    library = f"reingest-{code}"
    path = tmp_path / "report.pdf"
    good = (SHARED_FILES / "markitdown" / "test.pdf").read_bytes()
    path.write_bytes(good)

    async def go() -> None:
        async with sse_tools(crash_cluster.gateway + "/sse") as tools:
            first = await tools.call("ingest_file", path=str(path), library=library)
            assert first["status"] == "indexed", first
            before = await tools.call("search", query="large language models", library=library)
            assert before["results"], before

            replacement = (SHARED_FILES / bad).read_bytes() if bad != "truncated" else b""
            path.write_bytes(replacement or good[: len(good) // 2])
            failed = await tools.call("ingest_file", path=str(path), library=library)
            assert failed["status"] == "error" and failed["error_code"] == code, failed

            listed = await tools.call("list_documents", library=library)
            assert [d["doc_id"] for d in listed["documents"]] == [first["doc_id"]]
            assert listed["documents"][0]["chunk_count"] == first["chunk_count"]
            after = await tools.call("search", query="large language models", library=library)
            assert after["results"] == before["results"]
            full = await tools.call("get_document", doc_id=first["doc_id"])
            assert full["chunk_count"] == first["chunk_count"]
            ACKNOWLEDGED[library] = {first["doc_id"]}

    asyncio.run(go())
    asyncio.run(check_store(crash_cluster, library, sample=1))
