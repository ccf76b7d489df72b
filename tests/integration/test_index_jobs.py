"""Background jobs' records in the index (real LanceDB, the index app over HTTP through the
typed client): saved, replaced, read, listed newest first and by status, pruned by age, kept
across a restart of the service, and an unknown id is not_found."""

from __future__ import annotations

from pathlib import Path

import pytest

from libs.clients import IndexClient
from libs.contracts import Job, JobRecord
from libs.errors import NotFoundError
from services.index.settings import IndexSettings
from tests.index_helpers import index_app

pytestmark = pytest.mark.integration


# Job ids are UUIDs (the gateway makes them).
A, B, NOPE = (f"00000000-0000-4000-8000-00000000000{c}" for c in "abc")


def record(
    job_id: str, created: str, status: str = "queued", finished: str | None = None
) -> JobRecord:
    job = Job(
        job_id=job_id,
        status=status,  # type: ignore[arg-type]
        library="lib",
        folder="/srv/ingest/docs",
        created_at=created,
        finished_at=finished,
    )
    return JobRecord(job=job, request={"folder": "/srv/ingest/docs", "library": "lib"})


async def test_job_records_live_with_the_index(tmp_path: Path) -> None:
    settings = IndexSettings(lancedb_uri=str(tmp_path / "lancedb"))

    async def with_client(body):  # type: ignore[no-untyped-def]
        async with index_app(settings) as client:
            return await body(client)

    async def first(client: IndexClient) -> None:
        await client.save_job(record(A, "2026-01-01T00:00:00"))
        await client.save_job(record(B, "2026-01-02T00:00:00"))
        running = record(A, "2026-01-01T00:00:00", "running")
        running.job.processed = 3
        await client.save_job(running)  # replaced whole, not added
        assert (await client.get_job(A)).job.processed == 3
        listed = await client.list_jobs(None, 10)
        assert [r.job.job_id for r in listed] == [B, A]  # newest first
        assert [r.job.job_id for r in await client.list_jobs("running", 10)] == [A]
        with pytest.raises(NotFoundError, match=f"no job with job_id '{NOPE}'"):
            await client.get_job(NOPE)
        with pytest.raises(NotFoundError, match="job_id 'nope' exists: a job_id is a UUID"):
            await client.get_job("nope")

    async def after_restart(client: IndexClient) -> None:
        assert (await client.get_job(A)).job.status == "running"
        done = record(B, "2026-01-02T00:00:00", "succeeded", "2026-01-03T00:00:00")
        await client.save_job(done)
        assert await client.delete_jobs("2026-01-02T12:00:00") == 0  # finished after it
        assert await client.delete_jobs("2026-01-04T00:00:00") == 1  # only the finished one
        assert [r.job.job_id for r in await client.list_jobs(None, 10)] == [A]

    await with_client(first)
    await with_client(after_restart)
