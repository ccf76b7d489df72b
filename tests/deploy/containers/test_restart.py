"""Crash and restart in the containers: `docker kill` of the index in the middle of a folder
ingest leaves no partial document and the counts right, and the data is kept across `down` /
`up`. RETRY_ATTEMPTS / RETRY_MAX_S are raised in the project (as in
tests/e2e/test_crash_safety.py) so that the gateway's retries outlast the index's restart."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.crash_checks import IngestInBackground, store_is_consistent
from tests.deploy.containers.stack import BOOK, Stack, call, readable, wait
from tests.mcp_client import sse_tools

# The first test to run builds the base and service images (minutes on a machine without them).
pytestmark = pytest.mark.timeout(2400)


def _book_folder(folder: Path, files: int) -> Path:
    """`files` stretches of real text (a novel), 4000 characters each."""
    text = BOOK.read_text(encoding="utf-8")
    folder.mkdir(parents=True)
    for i in range(files):
        at = 20_000 + i * 4000
        (folder / f"part-{i:02d}.txt").write_text(text[at : at + 4000], encoding="utf-8")
    return readable(folder)


def test_killing_the_index_mid_ingest_leaves_the_store_consistent(stack: Stack) -> None:
    files, library = 10, "crash"
    _book_folder(stack.ingest / library, files)
    request = {"folder": f"/srv/ingest/{library}", "library": library, "max_concurrency": 2}
    ingest = IngestInBackground(stack.gateway, request)

    async def documents() -> int:
        async with sse_tools(stack.gateway + "/sse") as tools:
            deadline = time.monotonic() + 180
            while True:
                listed = await tools.call("list_documents", library=library, limit=1)
                if listed.get("total", 0) >= 2:
                    return int(listed["total"])
                assert ingest.running(), f"the ingest ended before the kill: {ingest.outcome}"
                assert time.monotonic() < deadline, "the ingest made no progress"
                await asyncio.sleep(0.05)

    done_before = asyncio.run(documents())
    assert done_before < files, "the ingest finished before the kill"

    index = stack.compose.container("index")
    stack.docker("kill", index)  # SIGKILL
    wait(
        lambda: (
            not stack.docker.inspect(index)["State"]["Running"]
            or stack.docker.inspect(index)["RestartCount"] > 0
        ),
        30,
        lambda: "the index survived docker kill",
    )
    stack.docker("start", index)
    ready = stack.compose.wait_ready(300)
    assert ready.returncode == 0, f"{ready.stdout}\n{ready.stderr}\n{stack.compose.logs()}"

    ingest.finish()
    response = ingest.outcome["response"]
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["total_files"] == files
    assert body["indexed"] + body["replaced"] + body["skipped"] + body["failed"] == files
    for error in body["errors"]:  # the retries outlast a restart; what they did not is said
        assert error["error_code"] == "service_unavailable", error
    acknowledged = {r["doc_id"] for r in body["results"]}

    # Running it again does what is left and skips what was done (at least what was
    # acknowledged: a write the index committed just before the kill is there too).
    again = httpx.post(stack.gateway + "/ingest_folder", json=request, timeout=600).json()
    assert again["failed"] == 0, again["errors"]
    assert again["skipped"] >= len(acknowledged)
    assert again["skipped"] + again["indexed"] == files
    acknowledged |= {r["doc_id"] for r in again["results"]}
    asyncio.run(
        store_is_consistent(stack.gateway, stack.index_info, library, 4, {library: acknowledged})
    )


def test_the_data_survives_down_and_up(stack: Stack) -> None:
    note = call(
        stack,
        "ingest_content",
        content="# Log\n\nThe lighthouse keeper logged the storm before the relief boat came.",
        source="notes/lighthouse.md",
        library="persist",
    )
    assert note["status"] in ("indexed", "skipped"), note

    async def snapshot() -> dict[str, Any]:
        async with sse_tools(stack.gateway + "/sse") as tools:
            libraries = (await tools.call("list_libraries"))["libraries"]
            documents = {
                lib["library"]: sorted(
                    (d["doc_id"], d["chunk_count"])
                    for d in (
                        await tools.call("list_documents", library=lib["library"], limit=1000)
                    )["documents"]
                )
                for lib in libraries
            }
            hit = await tools.call("search", query="lighthouse keeper storm", top_k=1)
            return {"libraries": libraries, "documents": documents, "hit": hit["results"]}

    before = asyncio.run(snapshot())
    assert before["hit"][0]["doc_id"] == note["doc_id"]
    stack.compose("down")  # the containers and networks go; the named volume stays
    assert stack.docker("ps", "-aq", "--filter", f"name={stack.compose.name}_").stdout == ""
    stack.compose("up", "-d", "--no-build")
    ready = stack.compose.wait_ready(300)
    assert ready.returncode == 0, f"{ready.stdout}\n{ready.stderr}\n{stack.compose.logs()}"
    after = asyncio.run(snapshot())
    assert after == before
    persist = {"persist": {note["doc_id"]}}
    asyncio.run(store_is_consistent(stack.gateway, stack.index_info, "persist", 4, persist))
