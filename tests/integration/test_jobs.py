"""Large libraries over MCP, through the real Python SDK client over SSE and streamable HTTP
against a gateway on the hand-written fakes: progress notifications (per file, and a heartbeat
while one long ingest runs), background jobs (accepted at once, joined when asked again,
followed to the end, cancelled in the middle), their HTTP routes, and prune.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.types import CallToolResult

from services.gateway.folders import FolderIngest
from services.gateway.pipeline import Pipeline
from services.gateway.settings import GatewaySettings
from services.gateway.sources import FolderScan
from tests.fakes import FakeConverter, FakeEmbedder, FakeIndex, fake_gateway
from tests.mcp_client import streamable_session

pytestmark = pytest.mark.integration

EMBEDDER = FakeEmbedder()
TOKENS = {"full": "full-secret", "read": "read-secret"}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ingest-root")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, root: Path) -> Iterator[str]:
    with fake_gateway(
        tmp_path_factory,
        EMBEDDER,
        ingest_roots=[root],
        auth_token=[TOKENS["full"]],
        read_only_token=[TOKENS["read"]],
    ) as url:
        yield url


def folder_of(root: Path, name: str, files: int) -> Path:
    folder = root / name
    folder.mkdir()
    for i in range(files):
        (folder / f"note-{i:02d}.txt").write_text(f"{name}: note {i}\n\nabout {name} topic {i}")
    return folder


@asynccontextmanager
async def session(url: str, transport: str, token: str = TOKENS["full"]) -> AsyncIterator[Any]:
    headers = {"Authorization": f"Bearer {token}"}
    if transport == "sse":
        async with (
            sse_client(url + "/sse", headers=headers, timeout=30, sse_read_timeout=120) as (r, w),
            ClientSession(r, w) as opened,
        ):
            await opened.initialize()
            yield opened
    else:
        async with streamable_session(url, headers) as opened:
            yield opened


def payload(result: CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result
    return result.structured_content


TRANSPORTS = ["sse", "streamable-http"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_folder_reports_progress_per_file(gateway: str, root: Path, transport: str) -> None:
    folder = folder_of(root, f"progress-{transport}", 5)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with session(gateway, transport) as opened:
        result = await opened.call_tool(
            "ingest_folder",
            {"folder": folder.name, "library": f"progress-{transport}"},
            progress_callback=on_progress,
        )
    assert payload(result)["indexed"] == 5
    values = [p for p, _, _ in seen]
    assert values == sorted(values) and len(set(values)) == len(values), seen  # increasing
    per_file = [(p, t, m) for p, t, m in seen if p == int(p) and p > 0]
    assert [p for p, _, _ in per_file] == [1, 2, 3, 4, 5], seen
    assert all(t == 5 for _, t, _ in per_file)
    assert {m.split(":")[0] for _, _, m in per_file if m} == {f"note-{i:02d}.txt" for i in range(5)}


async def test_a_long_ingest_sends_a_heartbeat(gateway: str) -> None:
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    EMBEDDER.delay_s = 5.0
    try:
        async with session(gateway, "sse") as opened:
            result = await opened.call_tool(
                "ingest_content",
                {"content": "a long one", "source": "heartbeat-note"},
                progress_callback=on_progress,
            )
    finally:
        EMBEDDER.delay_s = 0.0
    assert not result.is_error, payload(result)
    assert len(seen) >= 2, seen  # at least every 5 s: every 2 s here
    assert seen == sorted(seen) and len(set(seen)) == len(seen)


async def _follow(opened: Any, job_id: str, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        job = payload(await opened.call_tool("get_job", {"job_id": job_id}))
        if job["status"] not in ("queued", "running"):
            return job
        assert time.monotonic() < deadline, job
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_background_job_is_accepted_joined_and_followed(
    gateway: str, root: Path, transport: str
) -> None:
    folder = folder_of(root, f"job-{transport}", 6)
    arguments = {
        "folder": folder.name,
        "library": f"job-{transport}",
        "background": True,
        "max_concurrency": 1,
    }
    EMBEDDER.delay_s = 0.4
    try:
        async with session(gateway, transport) as opened:
            started = time.monotonic()
            accepted = payload(await opened.call_tool("ingest_folder", arguments))
            assert time.monotonic() - started < 1.0  # at once, not after the work
            assert accepted["status"] == "accepted" and accepted["existing"] is False
            again = payload(await opened.call_tool("ingest_folder", arguments))
            assert again == {"status": "accepted", "job_id": accepted["job_id"], "existing": True}
            job = await _follow(opened, accepted["job_id"])
            listed = payload(await opened.call_tool("list_jobs", {"status": "succeeded"}))
    finally:
        EMBEDDER.delay_s = 0.0
    assert job["status"] == "succeeded", job
    assert job["total_files"] == job["processed"] == 6
    assert job["indexed"] + job["replaced"] + job["skipped"] + job["failed"] == 6
    assert job["folder"] == str(folder) and job["started_at"] and job["finished_at"]
    assert accepted["job_id"] in {j["job_id"] for j in listed["jobs"]}
    over_http = httpx.get(
        f"{gateway}/jobs/{accepted['job_id']}",
        headers={"Authorization": f"Bearer {TOKENS['read']}"},  # reading jobs is a read
    )
    assert over_http.status_code == 200 and over_http.json()["status"] == "succeeded"


async def test_a_job_cancelled_in_the_middle_keeps_what_it_did(gateway: str, root: Path) -> None:
    folder = folder_of(root, "cancelled", 8)
    EMBEDDER.delay_s = 0.5
    try:
        async with session(gateway, "sse") as opened:
            accepted = payload(
                await opened.call_tool(
                    "ingest_folder",
                    {
                        "folder": folder.name,
                        "library": "cancelled",
                        "background": True,
                        "max_concurrency": 1,
                        "prune": True,
                    },
                )
            )
            await asyncio.sleep(1.3)
            refused = await opened_read_only_cancel(gateway, accepted["job_id"])
            assert refused.status_code == 403 and refused.json()["error_code"] == "forbidden"
            cancelled = payload(
                await opened.call_tool("cancel_job", {"job_id": accepted["job_id"]})
            )
            assert cancelled["job_id"] == accepted["job_id"]
            job = await _follow(opened, accepted["job_id"])
            documents = payload(await opened.call_tool("list_documents", {"library": "cancelled"}))
    finally:
        EMBEDDER.delay_s = 0.0
    assert job["status"] == "cancelled", job
    assert 1 <= job["processed"] < 8 and job["deleted"] == 0
    assert documents["total"] == job["indexed"] == job["processed"]


async def opened_read_only_cancel(gateway: str, job_id: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(
            f"{gateway}/jobs/{job_id}/cancel",
            headers={"Authorization": f"Bearer {TOKENS['read']}"},
        )


async def test_unknown_jobs_are_not_found(gateway: str) -> None:
    async with session(gateway, "sse") as opened:
        for tool in ("get_job", "cancel_job"):
            result = await opened.call_tool(tool, {"job_id": "no-such-job"})
            assert result.is_error and payload(result)["error_code"] == "not_found"
    response = httpx.get(
        f"{gateway}/jobs/no-such-job", headers={"Authorization": f"Bearer {TOKENS['full']}"}
    )
    assert response.status_code == 404


async def test_prune_forgets_deleted_files_and_only_those(gateway: str, root: Path) -> None:
    folder = folder_of(root, "pruned", 3)
    (folder / "sub").mkdir()
    (folder / "sub" / "deep.txt").write_text("deep note\n\nbelow")
    arguments = {"folder": folder.name, "library": "pruned"}
    async with session(gateway, "sse") as opened:
        first = payload(await opened.call_tool("ingest_folder", arguments))
        assert first["indexed"] == 4
        (folder / "note-01.txt").unlink()
        (folder / "sub" / "deep.txt").unlink()
        kept = payload(await opened.call_tool("ingest_folder", arguments))  # no prune asked
        assert kept["deleted"] == 0
        pruned = payload(await opened.call_tool("ingest_folder", {**arguments, "prune": True}))
        listed = payload(await opened.call_tool("list_documents", {"library": "pruned"}))
    assert pruned["deleted"] == 2
    assert sorted(pruned["deleted_sources"]) == sorted(
        [str(folder / "note-01.txt"), str(folder / "sub" / "deep.txt")]
    )
    assert sorted(d["source"] for d in listed["documents"]) == [
        str(folder / "note-00.txt"),
        str(folder / "note-02.txt"),
    ]


async def test_no_prune_after_an_incomplete_scan(tmp_path: Path) -> None:
    """A scan that could not read a subfolder deletes nothing (the files may still exist)."""
    index = FakeIndex()
    pipeline = Pipeline(
        GatewaySettings(_env_file=None),  # type: ignore[call-arg]
        FakeConverter(),
        FakeEmbedder(),
        index,
    )
    (tmp_path / "gone.txt").write_text("soon gone")
    await pipeline.ingest_file(str(tmp_path / "gone.txt"), "lib", None)
    (tmp_path / "gone.txt").unlink()
    folders = FolderIngest(pipeline)
    incomplete = FolderScan([], [], unreadable=[f"{tmp_path}/locked: Permission denied"])
    assert await folders._prune(tmp_path, "lib", incomplete) == []
    assert len(index.docs) == 1
    complete = FolderScan([], [])
    assert await folders._prune(tmp_path, "lib", complete) == [str(tmp_path / "gone.txt")]
    assert index.docs == {}
