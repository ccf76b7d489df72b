"""One index writer and two index readers, started the way `make up` starts them with
`INDEX_READERS=2`, on one local LanceDB directory and then on a bucket of a real S3-compatible
server on loopback, with the readers' consistency interval set long (30 s) so that a read
served by a reader right after a write would miss it:

- the gateway spreads searches over the readers, and a document written in one MCP session
  shows up in another session's searches (served by the readers) within the interval;
- read-your-writes: a session that ingests finds the document at once (search, get), round
  after round, while another session reading the readers at the same moment does not;
  likewise an HTTP caller's `POST /upload` then `GET /sources`;
- a write sent to a reader directly is refused (405 `read_only_replica`);
- `cluster status` lists the readers;
- a reader killed with SIGKILL in the middle of 20 concurrent MCP searches loses none of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.entrypoints.cluster import LocalCluster, local_env, running
from tests.conftest import REPO
from tests.mcp_client import Tools, sse_tools
from tests.object_store import s3_server

pytestmark = pytest.mark.e2e

CONSISTENCY_S = 30.0
LIBRARY = "replicas"


@pytest.fixture(scope="module", params=["local-disk", "s3"])
def replicas(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalCluster]:
    """The cluster on a local directory (what `INDEX_READERS=2 make up` uses by default), then
    on a bucket of a real S3-compatible server on loopback (tests/object_store.py)."""
    with contextlib.ExitStack() as stack:
        store: dict[str, str] = {}
        if request.param == "s3":
            server = stack.enter_context(s3_server(tmp_path_factory.mktemp("ministack")))
            store = server.bucket("library")
        env = local_env(
            tmp_path_factory.mktemp("replicas-var"),
            readers=2,
            LOG_LEVEL="INFO",
            INDEX_READ_CONSISTENCY_S=str(CONSISTENCY_S),
            **store,
        )
        try:
            cluster = stack.enter_context(running(env))
        except RuntimeError as exc:
            pytest.fail(str(exc))
        yield cluster


def _metrics(cluster: LocalCluster) -> dict[tuple[str, str], float]:
    """The gateway's index routing counters: (sample name, target) -> value."""
    text = httpx.get(cluster.gateway + "/metrics", timeout=10).text
    found: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("mvdb_index_"):
                found[(sample.name, sample.labels.get("target", ""))] = sample.value
    return found


def _delta(after: dict[tuple[str, str], float], before: dict[tuple[str, str], float]) -> Any:
    return {key: value - before.get(key, 0.0) for key, value in after.items()}


def _sources(result: dict[str, Any]) -> set[str]:
    return {hit["source"] for hit in result["results"]}


async def _ingest(tools: Tools, source: str, word: str) -> dict[str, Any]:
    result = await tools.call(
        "ingest_content",
        content=f"The {word} report describes the {word} harvest in detail.",
        source=source,
        library=LIBRARY,
    )
    assert result["status"] == "indexed", result
    return result


def test_the_readers_serve_searches_and_see_new_documents_within_the_interval(
    replicas: LocalCluster,
) -> None:
    word = f"w{uuid.uuid4().hex[:10]}"

    async def go() -> float:
        async with sse_tools(replicas.gateway + "/sse") as writer_session:
            await _ingest(writer_session, f"seen-{word}.md", word)
        written = time.monotonic()
        async with sse_tools(replicas.gateway + "/sse") as other:
            while time.monotonic() - written < CONSISTENCY_S + 15:
                found = await other.call("search", query=word, library=LIBRARY, top_k=5)
                if f"seen-{word}.md" in _sources(found):
                    return time.monotonic() - written
                await asyncio.sleep(1.0)
        raise AssertionError(f"no reader showed the document within {CONSISTENCY_S + 15} s")

    before = _metrics(replicas)
    took = asyncio.run(go())
    moved = _delta(_metrics(replicas), before)
    # The other session's searches were answered by the readers, both of them in turn.
    assert moved[("mvdb_index_reads_total", "reader1")] >= 1
    assert moved[("mvdb_index_reads_total", "reader2")] >= 1
    assert took <= CONSISTENCY_S + 15


def test_a_session_reads_its_own_writes_at_once(replicas: LocalCluster) -> None:
    rounds = 3

    async def go() -> list[bool]:
        other_saw = []
        async with (
            sse_tools(replicas.gateway + "/sse") as mine,
            sse_tools(replicas.gateway + "/sse") as other,
        ):
            for _ in range(rounds):
                word = f"r{uuid.uuid4().hex[:10]}"
                # Both readers answer reads just before the write: one whose interval had
                # passed looks for the latest version now, so it stays behind the write for
                # most of the next interval.
                for _ in range(4):
                    await other.call("search", query="warm up", library=LIBRARY)
                written = await _ingest(mine, f"own-{word}.md", word)
                found = await mine.call("search", query=word, library=LIBRARY, top_k=5)
                assert f"own-{word}.md" in _sources(found), found
                document = await mine.call("get_document", doc_id=written["doc_id"])
                assert document["doc_id"] == written["doc_id"], document
                theirs = await other.call("search", query=word, library=LIBRARY, top_k=5)
                other_saw.append(f"own-{word}.md" in _sources(theirs))
        return other_saw

    before = _metrics(replicas)
    other_saw = asyncio.run(go())
    moved = _delta(_metrics(replicas), before)
    assert moved[("mvdb_index_pinned_reads_total", "")] >= 2 * rounds
    # The readers really were behind: without read-your-writes the session would have missed
    # its own document too (the other session read a reader at the same moment).
    assert not all(other_saw), "the readers were never behind; the test proves nothing"


def test_an_http_caller_reads_its_own_upload_at_once(replicas: LocalCluster) -> None:
    with httpx.Client(base_url=replicas.gateway, timeout=60) as http:
        for _ in range(2):
            name = f"upload-{uuid.uuid4().hex[:10]}.md"
            uploaded = http.post(
                "/upload",
                files={"file": (name, b"# Upload\n\nA fresh upload about apples.", "text/plain")},
                data={"library": LIBRARY},
            )
            assert uploaded.status_code == 200, uploaded.text
            listed = http.get("/sources", params={"library": LIBRARY, "prefix": name})
            assert listed.status_code == 200, listed.text
            assert [entry["source"] for entry in listed.json()["sources"]] == [name]


def test_a_write_sent_to_a_reader_is_refused(replicas: LocalCluster) -> None:
    for reader in replicas.readers:
        refused = httpx.delete(f"{reader}/documents/anything", timeout=10)
        assert refused.status_code == 405, refused.text
        assert refused.json()["error_code"] == "read_only_replica"
        assert httpx.get(f"{reader}/readyz", timeout=10).status_code == 200


def test_cluster_status_lists_the_readers(replicas: LocalCluster) -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "services.entrypoints.cluster", "status"],
        cwd=REPO,
        env=replicas.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stdout + shown.stderr
    lines = {line.split()[0]: line for line in shown.stdout.splitlines() if line.strip()}
    for name, url in zip(("index-reader-1", "index-reader-2"), replicas.readers, strict=True):
        assert "ready" in lines[name] and url in lines[name], shown.stdout


def test_killing_a_reader_mid_searches_loses_none(replicas: LocalCluster) -> None:
    victim = replicas.pid("index-reader-1")
    assert victim is not None

    async def go() -> list[dict[str, Any]]:
        async with (
            sse_tools(replicas.gateway + "/sse") as first,
            sse_tools(replicas.gateway + "/sse") as second,
        ):
            sessions = (first, second)

            async def one(i: int) -> dict[str, Any]:
                query = f"harvest report {i}"
                return await sessions[i % 2].call("search", query=query, library=LIBRARY)

            done = 0
            some_done = asyncio.Event()

            async def counted(i: int) -> dict[str, Any]:
                nonlocal done
                try:
                    return await one(i)
                finally:
                    done += 1
                    if done == 3:
                        some_done.set()

            # Twelve start before the kill and eight right after it, all twenty at once: the
            # index reads of the first ones may all be answered before the kill lands, so the
            # later ones make sure that reads meet the dead reader.
            searches = [asyncio.create_task(counted(i)) for i in range(12)]
            await some_done.wait()
            os.kill(victim, signal.SIGKILL)
            still_running = sum(1 for task in searches if not task.done())
            searches += [asyncio.create_task(counted(i)) for i in range(12, 20)]
            results = list(await asyncio.gather(*searches))
            assert still_running >= 5, f"only {still_running} searches were left at the kill"
            return results

    before = _metrics(replicas)
    results = asyncio.run(go())
    moved = _delta(_metrics(replicas), before)
    failed = [r for r in results if "results" not in r]
    assert failed == [] and len(results) == 20
    assert all(r["results"] for r in results)
    # The kill was felt: reads turned to the dead reader went on to the other one.
    assert moved.get(("mvdb_index_read_failovers_total", "reader1"), 0) >= 1
