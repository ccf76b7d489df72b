"""The four services started like `make up`, the index's store on a real S3-compatible server
(ministack on loopback, `LANCEDB_URI=s3://bucket/prefix`): the MCP path end to end through the
gateway with the MCP SDK client, and a SIGKILL of the index in the middle of a folder ingest
(as `test_crash_safety` does on local disk) leaves the store consistent."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.entrypoints.cluster import LocalCluster, local_env, running
from tests.e2e.conftest import restart
from tests.e2e.test_crash_safety import BOOK, FILES_PER_ROUND, _book_folder, _documents_in, _kill
from tests.mcp_client import sse_tools
from tests.object_store import ACCESS_KEY_ID, SECRET_ACCESS_KEY, S3Server, s3_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("ministack")) as server:
        yield server


@pytest.fixture(scope="module")
def s3_cluster(s3: S3Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    if not BOOK.is_file():
        pytest.skip(f"shared test files not found at {BOOK}")
    env = local_env(
        tmp_path_factory.mktemp("s3-var"),
        LOG_LEVEL="INFO",
        RETRY_ATTEMPTS="20",
        RETRY_MAX_S="120",
        **s3.bucket("library"),
    )
    try:
        with running(env) as cluster:
            yield cluster
    except RuntimeError as exc:
        pytest.fail(str(exc))


def test_the_mcp_path_on_s3(s3_cluster: LocalCluster) -> None:
    async def go() -> None:
        async with sse_tools(s3_cluster.gateway + "/sse") as tools:
            info = await tools.call("server_info")
            assert info["lancedb_uri"] == s3_cluster.env["LANCEDB_URI"]
            stored = await tools.call(
                "ingest_content",
                content="# Tides\n\nThe harbour master records the spring tides at dawn.",
                source="notes/tides.md",
                library="s3lib",
            )
            assert stored["status"] == "indexed", stored
            found = await tools.call("search", query="spring tides harbour", library="s3lib")
            assert [h["doc_id"] for h in found["results"]][:1] == [stored["doc_id"]]
            full = await tools.call("get_document", doc_id=stored["doc_id"])
            assert "harbour master" in full["content"]
            listed = await tools.call("list_documents", library="s3lib")
            assert [d["doc_id"] for d in listed["documents"]] == [stored["doc_id"]]
            gone = await tools.call("delete_document", doc_id=stored["doc_id"])
            assert gone["status"] == "deleted", gone
            after = await tools.call("search", query="spring tides harbour", library="s3lib")
            assert after["results"] == []

    asyncio.run(go())
    logs = "".join(p.read_text(errors="replace") for p in (s3_cluster.var_dir / "log").glob("*"))
    assert SECRET_ACCESS_KEY not in logs and ACCESS_KEY_ID not in logs


def test_sigkill_of_the_index_mid_ingest_keeps_the_s3_store_consistent(
    s3_cluster: LocalCluster, tmp_path: Path
) -> None:
    library = "crash-s3"
    folder = _book_folder(tmp_path, library, 0)
    request = {"folder": str(folder), "library": library, "max_concurrency": 2}
    outcome: dict[str, Any] = {}

    def ingest() -> None:
        try:
            outcome["response"] = httpx.post(
                s3_cluster.gateway + "/ingest_folder", json=request, timeout=600
            )
        except httpx.HTTPError as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=ingest, daemon=True)
    worker.start()
    deadline = time.monotonic() + 180
    while (done_before := _documents_in(s3_cluster, library)) < 2:
        assert worker.is_alive(), f"the ingest ended before the kill: {outcome}"
        assert time.monotonic() < deadline, "the ingest made no progress"
        time.sleep(0.05)
    assert done_before < FILES_PER_ROUND, "the ingest finished before the kill"

    _kill(s3_cluster, "index")
    assert "index: started" in restart(s3_cluster)
    worker.join(timeout=600)
    assert not worker.is_alive(), "the ingest did not finish after the restart"
    response = outcome["response"]
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["total_files"] == FILES_PER_ROUND
    assert body["indexed"] + body["replaced"] + body["skipped"] + body["failed"] == FILES_PER_ROUND
    for error in body["errors"]:  # retries outlast a restart; what they could not do is said
        assert error["error_code"] == "service_unavailable", error
    acknowledged = {r["doc_id"] for r in body["results"]}

    async def check() -> None:
        async with sse_tools(s3_cluster.gateway + "/sse") as tools:
            libraries = {
                lib["library"]: lib for lib in (await tools.call("list_libraries"))["libraries"]
            }
            docs = (await tools.call("list_documents", library=library, limit=1000))["documents"]
            assert libraries[library]["document_count"] == len(docs)
            assert libraries[library]["chunk_count"] == sum(d["chunk_count"] for d in docs)
            assert len({d["source"] for d in docs}) == len(docs), "two versions live"
            assert acknowledged <= {d["doc_id"] for d in docs}, "acknowledged documents lost"
            info = httpx.get(s3_cluster.index + "/info", timeout=30).json()
            assert info["chunks"] == sum(lib["chunk_count"] for lib in libraries.values())
            assert info["documents"] == sum(lib["document_count"] for lib in libraries.values())
            for doc in random.Random(7).sample(docs, min(4, len(docs))):
                full = await tools.call("get_document", doc_id=doc["doc_id"])
                assert full["chunk_count"] == doc["chunk_count"] and full["content"].strip()
                found = await tools.call(
                    "search",
                    query=full["content"][:300],
                    top_k=100,
                    filter={"doc_id": doc["doc_id"]},
                )
                hits = found["results"]
                assert len({h["chunk_index"] for h in hits}) == doc["chunk_count"] == len(hits)

    asyncio.run(check())
