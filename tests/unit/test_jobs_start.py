"""A gateway started beside its index (`make up`, compose, k3s) waits quietly for the index
to be ready before it resumes the jobs a restart interrupted (`Jobs._index_ready`)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from libs.contracts import FolderIngestResult, IngestFolderInput, JobRecord
from libs.errors import UpstreamError
from services.gateway.folders import FolderHooks
from services.gateway.jobs import Jobs
from tests.fakes import FakeIndex


class StartingIndex(FakeIndex):
    """Not ready until `ready_at` (the event loop's clock), and failing calls until then, as
    an index process opening its store is."""

    def __init__(self) -> None:
        super().__init__()
        self.ready_at = 0.0
        self.looks = 0

    def _loading(self) -> bool:
        return asyncio.get_running_loop().time() < self.ready_at

    async def ready(self) -> tuple[bool, str]:
        self.looks += 1
        return (False, "HTTP 503") if self._loading() else (True, "fake")

    async def list_jobs(self, status: str | None, limit: int) -> list[JobRecord]:
        if self._loading():
            raise UpstreamError("could not connect to the index service (ConnectError)")
        return await super().list_jobs(status, limit)


def _result(request: IngestFolderInput) -> FolderIngestResult:
    return FolderIngestResult(
        folder=request.folder, library=request.library, total_files=0, indexed=0, replaced=0,
        skipped=0, failed=0, results=[], errors=[],
    )  # fmt: skip


async def test_jobs_resume_once_the_index_is_ready_without_logging_failures(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    index = StartingIndex()
    started = asyncio.Event()

    async def never_ends(request: IngestFolderInput, hooks: FolderHooks) -> FolderIngestResult:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    first = Jobs(index, never_ends, concurrency=1, retention_days=1)
    await first.start()
    accepted = await first.submit(IngestFolderInput(folder=str(tmp_path)), tmp_path)
    await asyncio.wait_for(started.wait(), 5)
    await first.aclose()  # the gateway stops; the job stays running in the index

    async def finishes(request: IngestFolderInput, hooks: FolderHooks) -> FolderIngestResult:
        return _result(request)

    index.ready_at = asyncio.get_running_loop().time() + 0.5
    caplog.set_level(logging.INFO, logger="services.gateway.jobs")
    second = Jobs(index, finishes, concurrency=1, retention_days=1)
    await second.start()
    try:
        for _ in range(500):
            if index.jobs[accepted.job_id].job.status == "succeeded":
                break
            await asyncio.sleep(0.01)
        assert index.jobs[accepted.job_id].job.status == "succeeded"
    finally:
        await second.aclose()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert index.looks >= 2  # it looked, and waited
    assert "resuming a job" in caplog.text
