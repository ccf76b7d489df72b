"""Background jobs: a long folder ingest run by the gateway while the caller goes on, followed
with `get_job` / `list_jobs` and stopped with `cancel_job`. The index keeps each job's record
(the job as callers see it, plus the request that resumes it), so jobs survive restarts.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from libs.contracts.fields import Model, Out, ToolInput
from libs.contracts.tools import FolderError

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
ACTIVE_STATUSES: frozenset[str] = frozenset({"queued", "running"})
MAX_JOB_LIST = 1000

JobId = Annotated[
    str, Field(min_length=1, max_length=64, description="The job's id (UUID), from ingest_folder")
]


class Job(Out):
    """A background job as callers see it. `processed` files out of `total_files` are done;
    `indexed + replaced + skipped + failed == processed`. A job resumed after a restart counts
    again from the start: files finished before it count as `skipped` (same content hash)."""

    job_id: str
    kind: Literal["ingest_folder", "ingest_repo"] = "ingest_folder"
    status: JobStatus
    library: str
    folder: str  # the folder, or for ingest_repo the repository URL
    total_files: int = 0
    processed: int = 0
    indexed: int = 0
    replaced: int = 0
    skipped: int = 0
    failed: int = 0
    deleted: int = 0
    errors: list[FolderError] = Field(default_factory=list)
    deleted_sources: list[str] = Field(default_factory=list)
    created_at: str
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = None  # why the job as a whole failed (e.g. the folder went away)


class JobRecord(Model):
    """What the index stores per job: the job, and the ingest_folder request that (re)runs it."""

    job: Job
    request: dict[str, Any]


class JobAccepted(Out):
    status: Literal["accepted"] = "accepted"
    job_id: str
    existing: bool = False  # the same folder and library already had a queued or running job


class JobIdInput(ToolInput):
    job_id: JobId


class ListJobsInput(ToolInput):
    status: Annotated[
        JobStatus | None, Field(description="Only jobs in this state; null = all")
    ] = None
    limit: Annotated[
        int,
        Field(
            ge=1,
            le=MAX_JOB_LIST,
            description=f"Newest jobs first, at most this many (1-{MAX_JOB_LIST})",
        ),
    ] = 20


class JobList(Out):
    jobs: list[Job]
    count: int


# ------------------------------------------------------------------------ index messages


class JobRecords(Out):
    """`GET /jobs` of the index: records newest first (by `created_at`)."""

    records: list[JobRecord]


class JobsDeleted(Out):
    """`DELETE /jobs?finished_before=...` of the index: finished jobs removed."""

    deleted: int
