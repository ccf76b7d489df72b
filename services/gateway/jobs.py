"""Background jobs: folder and repository ingests that outlive the call that started them.

`Jobs` queues them and runs `JOB_CONCURRENCY` at a time; each job's record (the job callers see
and the request that runs it) is saved in the index when the job is accepted, when it starts,
after every file and when it ends, so its state survives any restart. On start, the gateway
resumes the jobs that were queued or running: the folder is scanned again and the files already
ingested are skipped by their content hash (a resumed job counts from the start: those files
count as `skipped`).

A cancel stops a job after the files in progress: what finished stays indexed and the job ends
`cancelled` (a queued job is cancelled at once). The same folder and library asked again while
its job is queued or running joins that job. Finished jobs are deleted after
`JOB_RETENTION_DAYS`.

A repository job (`kind` 'ingest_repo') stores its `ingest_repo` request and runs it the same
way: `folder` is the repository URL, and a resumed job clones again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from libs.contracts import (
    ACTIVE_STATUSES,
    FolderError,
    FolderIngestResult,
    IngestFolderInput,
    IngestRepoInput,
    IngestResult,
    Job,
    JobAccepted,
    JobRecord,
)
from libs.errors import MvdbError, from_exception
from libs.ports import IndexPort
from services.gateway.consistency import read_session, reading_as
from services.gateway.folders import FolderHooks

log = logging.getLogger(__name__)

# How long a starting gateway waits for the index before resuming jobs (`_index_ready`).
INDEX_START_GRACE_S = 60.0

RunFolder = Callable[[IngestFolderInput, FolderHooks], Awaitable[FolderIngestResult]]
RunRepo = Callable[[IngestRepoInput, FolderHooks], Awaitable[FolderIngestResult]]


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@dataclass
class _Running:
    record: JobRecord
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    # The caller that submitted the job: its writes pin that caller's reads to the index
    # writer (services.gateway.consistency); "" for a job resumed after a restart.
    caller: str = field(default_factory=read_session.get)


class Jobs:
    """The job queue of one gateway; see the module docstring."""

    def __init__(
        self,
        index: IndexPort,
        run_folder: RunFolder,
        *,
        concurrency: int,
        retention_days: float,
        run_repo: RunRepo | None = None,
    ) -> None:
        self.index = index
        self.run_folder = run_folder
        self.run_repo = run_repo
        self.concurrency = concurrency
        self.retention = timedelta(days=retention_days)
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._active: dict[str, _Running] = {}
        self._workers: list[asyncio.Task[None]] = []

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the workers; they first resume what was queued or running and forget what is
        past retention, as soon as the index answers (the gateway may start before it)."""
        self._workers = [asyncio.create_task(self._resume_then_work())]
        self._workers += [asyncio.create_task(self._work()) for _ in range(self.concurrency - 1)]

    async def _resume_then_work(self) -> None:
        await self._index_ready()
        wait = 0.5
        while True:
            try:
                await self._resume()
                break
            except MvdbError as exc:
                log.warning("cannot resume jobs yet: %s", exc.message)
                await asyncio.sleep(wait)
                wait = min(wait * 2, 10.0)
        await self._work()

    async def _index_ready(self) -> None:
        """Wait, quietly, up to a minute (`INDEX_START_GRACE_S`) for the index to be ready:
        started beside the gateway (`make up`, compose, k3s) it opens its store for a few
        seconds, and resuming at once logged each failed call as an error. Past the grace,
        resuming tries anyway and says why it cannot."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + INDEX_START_GRACE_S
        wait = 0.1
        while loop.time() < deadline:
            ok, _ = await self.index.ready()
            if ok:
                return
            await asyncio.sleep(wait)
            wait = min(wait * 2, 2.0)

    async def _resume(self) -> None:
        for status in ("running", "queued"):
            for record in reversed(await self.index.list_jobs(status, 1000)):
                job_id = record.job.job_id
                if job_id in self._active:
                    continue
                record.job.status = "queued"
                self._active[job_id] = _Running(record)
                await self._queue.put(job_id)
                log.info("resuming a job", extra={"fields": {"job_id": job_id}})
        await self._forget_old()

    async def aclose(self) -> None:
        """Stop the workers; jobs in progress stay 'running' in the index and resume later."""
        for task in self._workers:
            task.cancel()
        for task in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._workers = []

    # --------------------------------------------------------------------- the API

    async def submit(self, request: IngestFolderInput, folder: Path) -> JobAccepted:
        """Queue a folder ingest (`folder` resolved), or join the one already queued or running
        for the same folder and library."""
        stored = request.model_copy(update={"folder": str(folder), "background": False})
        return await self._enqueue("ingest_folder", str(folder), request.library, stored)

    async def submit_repo(self, request: IngestRepoInput, url: str) -> JobAccepted:
        """Queue a repository ingest (`url` normalised), or join the one already queued or
        running for the same repository and library."""
        stored = request.model_copy(update={"url": url, "background": False})
        return await self._enqueue("ingest_repo", url, request.library, stored)

    async def _enqueue(
        self,
        kind: Literal["ingest_folder", "ingest_repo"],
        folder: str,
        library: str,
        stored: IngestFolderInput | IngestRepoInput,
    ) -> JobAccepted:
        for running in self._active.values():
            job = running.record.job
            if job.kind == kind and job.folder == folder and job.library == library:
                return JobAccepted(job_id=job.job_id, existing=True)
        job = Job(
            job_id=str(uuid.uuid4()),
            kind=kind,
            status="queued",
            library=library,
            folder=folder,
            created_at=now(),
        )
        record = JobRecord(job=job, request=stored.model_dump(mode="json"))
        await self.index.save_job(record)
        self._active[job.job_id] = _Running(record)
        await self._queue.put(job.job_id)
        return JobAccepted(job_id=job.job_id, existing=False)

    async def get(self, job_id: str) -> Job:
        running = self._active.get(job_id)
        if running is not None:
            return running.record.job.model_copy(deep=True)
        return (await self.index.get_job(job_id)).job

    async def listing(self, status: str | None, limit: int) -> list[Job]:
        stored = {r.job.job_id: r.job for r in await self.index.list_jobs(status, limit)}
        for job_id, running in self._active.items():  # fresher than the last save
            if job_id in stored or status in (None, running.record.job.status):
                stored[job_id] = running.record.job.model_copy(deep=True)
        jobs = sorted(stored.values(), key=lambda j: (j.created_at, j.job_id), reverse=True)
        return jobs[:limit]

    async def cancel(self, job_id: str) -> Job:
        running = self._active.get(job_id)
        if running is None:
            return (await self.index.get_job(job_id)).job  # finished: nothing to stop
        running.stop.set()
        async with running.lock:
            job = running.record.job
            if job.status == "queued":  # never started: done now
                job.status, job.finished_at = "cancelled", now()
                await self.index.save_job(running.record)
                self._active.pop(job_id, None)
            return job.model_copy(deep=True)

    # ------------------------------------------------------------------ the work

    async def _work(self) -> None:
        while True:
            job_id = await self._queue.get()
            running = self._active.get(job_id)
            if running is None:  # cancelled while queued
                continue
            try:
                with reading_as(running.caller):
                    await self._run(running)
            finally:
                if running.record.job.status not in ACTIVE_STATUSES:
                    self._active.pop(job_id, None)

    async def _run(self, running: _Running) -> None:
        job = running.record.job
        async with running.lock:
            for counter in ("processed", "indexed", "replaced", "skipped", "failed", "deleted"):
                setattr(job, counter, 0)
            job.errors, job.deleted_sources = [], []
            job.status, job.started_at, job.finished_at, job.error = "running", now(), None, None
            await self.index.save_job(running.record)

        async def scanned(total: int) -> None:
            async with running.lock:
                job.total_files = total
                await self.index.save_job(running.record)

        async def file_done(path: Path, outcome: IngestResult | MvdbError) -> None:
            async with running.lock:
                job.processed += 1
                if isinstance(outcome, MvdbError):
                    job.failed += 1
                    error = FolderError(
                        file=str(path), error=outcome.message, error_code=outcome.error_code
                    )
                    job.errors.append(error)
                else:
                    setattr(job, outcome.status, getattr(job, outcome.status) + 1)
                await self.index.save_job(running.record)

        hooks = FolderHooks(scanned, file_done, running.stop.is_set)
        try:
            result = await self._dispatch(running.record, hooks)
        except asyncio.CancelledError:
            raise  # the gateway is stopping: the job stays 'running' and resumes on start
        except Exception as exc:
            if not isinstance(exc, MvdbError):
                log.exception("a job failed", extra={"fields": {"job_id": job.job_id}})
            job.status, job.error = "failed", from_exception(exc).message
        else:
            job.deleted, job.deleted_sources = result.deleted, result.deleted_sources
            job.status = "cancelled" if running.stop.is_set() else "succeeded"
        async with running.lock:
            job.finished_at = now()
            await self.index.save_job(running.record)
        log.info(
            "a job ended",
            extra={"fields": {"job_id": job.job_id, "status": job.status, "files": job.processed}},
        )
        await self._forget_old()

    async def _dispatch(self, record: JobRecord, hooks: FolderHooks) -> FolderIngestResult:
        if record.job.kind == "ingest_repo":
            if self.run_repo is None:
                raise MvdbError("this gateway cannot run repository jobs")
            return await self.run_repo(IngestRepoInput.model_validate(record.request), hooks)
        return await self.run_folder(IngestFolderInput.model_validate(record.request), hooks)

    async def _forget_old(self) -> None:
        cutoff = (datetime.now(UTC) - self.retention).isoformat(timespec="milliseconds")
        try:
            forgotten = await self.index.delete_jobs(cutoff)
        except MvdbError:
            log.warning("could not delete old jobs", exc_info=True)
            return
        if forgotten:
            log.info("deleted finished jobs", extra={"fields": {"jobs": forgotten}})
