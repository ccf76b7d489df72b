"""Conversion worker processes, and the pool that runs jobs on them under a time limit.

Parsers for untrusted files can loop, crash or eat memory, and Python threads cannot be
stopped, so conversion runs in separate processes (start method "spawn": forking a process
that already holds an event loop, threads and native libraries is unsafe). Each worker
builds its MarkItDown instance and tokenizer once and then serves jobs over a pipe, one at a
time. The pool:

- starts `size` workers up front and hands out only those that reported ready;
- waits for each reply in its own thread, never on the event loop;
- kills a worker that overruns the time limit (`ConversionTimeoutError`), dies
  (`WorkerCrashedError`) or whose caller went away, and starts a replacement in the
  background, so the service stays up;
- retires a worker after `max_jobs` jobs, which bounds slow leaks in native parsers.

A worker hands its allocator's free pages back to the system after each reply: a large
document leaves a few hundred MB of them, which would otherwise stay with the idle worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import signal
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import SpawnContext, SpawnProcess
from typing import Any, Literal, TypeVar

from libs.contracts import ChunkRequest, ConvertResult
from libs.errors import ConversionError, ConversionTimeoutError, MvdbError, NoTextError
from libs.malloc import release_free_memory
from services.converter.archive import ArchiveLimits
from services.converter.errors import WorkerCrashedError, WorkersUnavailableError
from services.converter.metrics import WORKER_RESTARTS

log = logging.getLogger(__name__)

T = TypeVar("T")
Outcome = tuple[Literal["ok", "error", "timeout", "crashed", "cancelled"], Any]


@dataclass(frozen=True)
class WorkerOptions:
    """Everything a worker needs to build its engine; pickled into the child."""

    max_tokens: int
    overlap_tokens: int
    archive: ArchiveLimits
    legacy_encoding: str


@dataclass(frozen=True)
class ConvertJob:
    data: bytes
    filename: str


@dataclass(frozen=True)
class ChunkJob:
    request: ChunkRequest


Job = ConvertJob | ChunkJob


# ------------------------------------------------------------------------- child side


class _Engine:
    """What a worker process holds: the document converter and the chunker, built once."""

    def __init__(self, options: WorkerOptions) -> None:
        # Imported here so the parent process never loads markitdown and its parsers.
        from services.converter.chunk import Chunker
        from services.converter.convert import DocumentConverter

        self._converter = DocumentConverter(options.archive, options.legacy_encoding)
        self._chunker = Chunker.bundled(options.max_tokens, options.overlap_tokens)

    def run(self, job: Job) -> ConvertResult:
        if isinstance(job, ConvertJob):
            return self._convert(job)
        return self._chunk(job.request)

    def _convert(self, job: ConvertJob) -> ConvertResult:
        document = self._converter.convert(job.data, job.filename)
        chunks = self._chunker.chunk(document.markdown, document.pages, code=document.code)
        if not chunks:
            raise NoTextError(
                f"no text could be extracted from '{job.filename}': it converted to "
                "Markdown with no indexable text. If it has text, extract it elsewhere and "
                "index it with ingest_content."
            )
        return ConvertResult(
            markdown=document.markdown,
            title=document.title,
            file_type=document.file_type,
            page_count=document.page_count,
            chunks=chunks,
        )

    def _chunk(self, request: ChunkRequest) -> ConvertResult:
        from services.converter.convert import normalise_text
        from services.converter.headings import first_heading

        markdown = normalise_text(request.markdown)
        chunks = self._chunker.chunk(markdown)
        if not chunks:
            raise NoTextError(
                "the content has no indexable text (only whitespace or markup); pass the "
                "text to index"
            )
        title = (
            " ".join(request.title.split())
            or first_heading(markdown, 1)
            or first_heading(markdown, 6)
        )
        return ConvertResult(
            markdown=markdown,
            title=title,
            file_type=request.file_type,
            page_count=0,
            chunks=chunks,
        )


def worker_main(conn: Connection, options: WorkerOptions) -> None:
    """Entry point of a worker process: build the engine, then serve jobs until EOF."""
    # Ctrl-C reaches the whole process group; the parent decides when workers stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        engine = _Engine(options)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            conn.send(("failed", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        reply: Outcome
        try:
            reply = ("ok", engine.run(job))
        except MvdbError as exc:
            reply = ("error", exc)
        except Exception as exc:
            reply = ("error", ConversionError(f"conversion failed: {type(exc).__name__}: {exc}"))
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return
        # The job's buffers are freed; their pages go back to the system once the caller
        # has its reply (`libs.malloc`).
        del job, reply
        release_free_memory()


# ------------------------------------------------------------------------ parent side


class _Worker:
    """The parent's handle on one worker process. Its blocking methods run in threads."""

    def __init__(self, ctx: SpawnContext, options: WorkerOptions) -> None:
        self.conn, child = ctx.Pipe(duplex=True)
        self.process: SpawnProcess = ctx.Process(
            target=worker_main, args=(child, options), name="mvdb-converter-worker", daemon=True
        )
        self.process.start()
        child.close()
        self.jobs = 0
        self.ready = False

    def wait_ready(self, timeout: float) -> None:
        if not self.conn.poll(timeout):
            raise WorkersUnavailableError(
                f"a converter worker process did not start within {timeout:g} s "
                "(CONVERTER_WORKER_START_TIMEOUT_S); the machine may be overloaded"
            )
        try:
            kind, detail = self.conn.recv()
        except (EOFError, OSError) as exc:
            raise WorkersUnavailableError(
                "a converter worker process exited while starting "
                f"(exit code {self.process.exitcode}); see the converter's log"
            ) from exc
        if kind != "ready":
            raise WorkersUnavailableError(
                f"a converter worker process failed to start: {detail}; reinstall with "
                "`make install`"
            )
        self.ready = True

    def run(self, job: Job, timeout: float, cancelled: threading.Event) -> Outcome:
        try:
            self.conn.send(job)
        except (OSError, ValueError):
            return "crashed", self.process.exitcode
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout", None
            if cancelled.is_set():
                return "cancelled", None
            # Short polls so a cancelled caller frees the worker promptly.
            if self.conn.poll(min(remaining, 0.2)):
                try:
                    outcome: Outcome = self.conn.recv()
                except (EOFError, OSError):
                    self.process.join(1.0)
                    return "crashed", self.process.exitcode
                return outcome

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5.0)
        self.conn.close()

    def stop(self, grace: float) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.conn.send(None)
        self.process.join(grace)
        self.kill()


class WorkerPool:
    """A fixed number of worker processes, replaced as they die or overrun."""

    def __init__(
        self, options: WorkerOptions, size: int, start_timeout_s: float, max_jobs: int
    ) -> None:
        self._options = options
        self._size = size
        self._start_timeout = start_timeout_s
        self._max_jobs = max_jobs
        self._ctx = multiprocessing.get_context("spawn")
        self._executor = ThreadPoolExecutor(
            max_workers=2 * size + 2, thread_name_prefix="converter-pool"
        )
        self._idle: asyncio.Queue[_Worker] | None = None
        self._live: set[_Worker] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._failures = 0
        self._last_error = ""
        self._closed = False

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the workers (idempotent; needs a running event loop)."""
        if self._idle is not None:
            return
        if self._closed:
            raise WorkersUnavailableError("the converter is shut down")
        self._idle = asyncio.Queue()
        for _ in range(self._size):
            self._spawn_task(self._bring_up(0.0))

    def _spawn_task(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def _bring_up(self, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        if self._closed:
            return
        worker: _Worker | None = None
        try:
            worker = await self._blocking(_Worker, self._ctx, self._options)
            if self._closed:
                await self._blocking(worker.kill)
                return
            self._live.add(worker)
            await self._blocking(worker.wait_ready, self._start_timeout)
        except (WorkersUnavailableError, OSError, RuntimeError) as exc:
            why = exc.message if isinstance(exc, WorkersUnavailableError) else repr(exc)
            self._last_error = f"converter workers cannot start: {why}"
            self._failures += 1
            log.error("converter worker failed to start", extra={"fields": {"why": why}})
            if worker is not None:
                await self._retire(worker)
            if not self._closed:
                # Back off so a broken installation does not spin spawning processes.
                self._spawn_task(self._bring_up(min(30.0, 2.0**self._failures)))
            return
        if self._closed or self._idle is None:
            await self._retire(worker)
            return
        self._failures = 0
        self._idle.put_nowait(worker)

    async def _retire(self, worker: _Worker) -> None:
        self._live.discard(worker)
        await self._blocking(worker.kill)

    async def _replace(self, worker: _Worker, reason: str) -> None:
        WORKER_RESTARTS.labels(reason).inc()
        await self._retire(worker)
        if not self._closed:
            await self._bring_up(0.0)

    async def aclose(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        workers = list(self._live)
        self._live.clear()
        loop = asyncio.get_running_loop()
        await asyncio.gather(
            *(loop.run_in_executor(self._executor, w.stop, 2.0) for w in workers),
            return_exceptions=True,
        )
        self._executor.shutdown(wait=False, cancel_futures=True)

    # --------------------------------------------------------------- status

    def status(self) -> tuple[bool, str]:
        ready = sum(1 for w in self._live if w.ready and w.process.is_alive())
        if ready:
            return True, f"{ready} of {self._size} conversion workers ready"
        if self._closed:
            return False, "the converter is shut down"
        return False, self._last_error or "conversion workers are starting"

    # ----------------------------------------------------------------- jobs

    async def _acquire(self) -> _Worker:
        self.start()
        assert self._idle is not None
        while True:
            try:
                # asyncio.timeout cancels the get() itself, and a cancelled Queue.get never
                # loses an item; wait_for on 3.11 can drop a worker that arrives just then.
                async with asyncio.timeout(self._start_timeout):
                    worker = await self._idle.get()
            except TimeoutError as exc:
                detail = f" ({self._last_error})" if self._last_error else ""
                raise WorkersUnavailableError(
                    f"no converter worker became free within {self._start_timeout:g} s"
                    f"{detail}; the service is overloaded or its workers cannot start"
                ) from exc
            if worker.process.is_alive():
                return worker
            self._spawn_task(self._replace(worker, "died_idle"))

    def _settle(self, worker: _Worker, outcome: Outcome | None) -> None:
        """Put a worker back after a job, or replace it when it cannot be trusted."""
        if self._closed:
            return  # aclose() stops every live worker, busy ones included
        kind = outcome[0] if outcome is not None else "crashed"
        worker.jobs += 1
        if kind not in ("ok", "error"):
            self._spawn_task(self._replace(worker, kind))
        elif self._max_jobs and worker.jobs >= self._max_jobs:
            self._spawn_task(self._replace(worker, "recycled"))
        elif self._idle is not None:
            self._idle.put_nowait(worker)

    async def run(self, job: Job, timeout: float, what: str) -> ConvertResult:
        """Run `job` on a free worker; `what` names the input in error messages."""
        worker = await self._acquire()
        cancelled = threading.Event()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, worker.run, job, timeout, cancelled)

        def settle(done: asyncio.Future[Outcome]) -> None:
            failed = done.cancelled() or done.exception() is not None
            self._settle(worker, None if failed else done.result())

        future.add_done_callback(settle)
        try:
            kind, value = await asyncio.shield(future)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        if kind == "ok" and isinstance(value, ConvertResult):
            return value
        if kind == "error" and isinstance(value, MvdbError):
            raise value
        if kind == "timeout":
            raise ConversionTimeoutError(
                f"{what[:1].upper()}{what[1:]} took longer than the limit of {timeout:g} s "
                "(CONVERT_TIMEOUT_S) and was stopped; the file may be very large or "
                "malformed. Split it into smaller files, or raise the limit"
            )
        raise WorkerCrashedError(
            f"the converter worker process died while {what} (exit code {value}); the "
            "file is probably corrupt or triggers a parser bug. Check that it opens in its "
            "usual application, or export it again"
        )
