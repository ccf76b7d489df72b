"""The four services started like `make up`, the index's store on a real S3-compatible server
(ministack on loopback, `LANCEDB_URI=s3://bucket/prefix`): the MCP path end to end through the
gateway with the MCP SDK client, and a SIGKILL of the index in the middle of a folder ingest
(as `test_crash_safety` does on local disk) leaves the store consistent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.entrypoints.cluster import LocalCluster, local_env, running
from tests.e2e.test_crash_safety import (
    BOOK,
    _book_folder,
    answer_through_restarts,
    check_store,
    ingest_through_a_kill,
)
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
    outcome, _, _ = ingest_through_a_kill(s3_cluster, "index", folder, library)
    body = answer_through_restarts(outcome)
    acknowledged = {library: {r["doc_id"] for r in body["results"]}}
    asyncio.run(check_store(s3_cluster, library, sample=4, acknowledged_by_library=acknowledged))
