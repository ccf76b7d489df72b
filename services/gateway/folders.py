"""Folder ingest: scan a folder, ingest its files a few at a time, report each file as it
finishes, stop early when asked, and prune what was deleted.

- `FolderHooks.on_scanned` hears how many files the scan found, `on_file_done` each file's
  outcome (progress notifications and background jobs are built on these), and
  `should_stop` is asked before each file starts: a stopped run finishes the files in
  progress and starts no other (a cancelled job keeps what it did).
- Unchanged files are skipped by the library's manifest (`stored_sources`, `GET /sources`
  under the folder's path), read once at the start: a thousand files cost one listing, not
  a look-up each.
- Prune (`prune=true`): after a complete scan and a run that was not stopped, the library's
  documents whose source is a file below the folder that no longer exists are deleted. Never
  after a scan that could not read a subfolder, nor after a stopped run.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from libs.contracts import (
    MAX_LIST_LIMIT,
    FolderError,
    FolderIngestResult,
    IngestFolderInput,
    IngestResult,
    SourceEntry,
)
from libs.errors import MvdbError, NotFoundError
from libs.ports import IndexPort
from libs.telemetry import tell_caller
from services.gateway.consistency import reading_from_writer
from services.gateway.pipeline import Pipeline
from services.gateway.sources import FolderScan, scan_folder

log = logging.getLogger(__name__)

Outcome = IngestResult | MvdbError


@dataclass
class FolderHooks:
    on_scanned: Callable[[int], Awaitable[None]] | None = None
    on_file_done: Callable[[Path, Outcome], Awaitable[None] | None] | None = None
    should_stop: Callable[[], bool] | None = None


Key = TypeVar("Key", Path, str)


def tally(files: Sequence[Key], outcomes: Mapping[Key, Outcome]) -> dict[str, Any]:
    """The fields a folder or repository result shares, from the outcomes of the files that
    ran (in the order of `files`): results, errors and the count of each status."""
    done = [f for f in files if f in outcomes]
    results = [o for f in done if isinstance(o := outcomes[f], IngestResult)]
    errors = [
        FolderError(file=str(f), error=o.message, error_code=o.error_code)
        for f in done
        if isinstance(o := outcomes[f], MvdbError)
    ]
    return {
        "indexed": sum(r.status == "indexed" for r in results),
        "replaced": sum(r.status == "replaced" for r in results),
        "skipped": sum(r.status == "skipped" for r in results),
        "failed": len(errors),
        "results": results,
        "errors": errors,
    }


async def run_bounded(
    work: Mapping[Key, Callable[[], Awaitable[Outcome]]], concurrency: int, hooks: FolderHooks
) -> tuple[dict[Key, Outcome], bool]:
    """Run each item's work, `concurrency` at a time, asking `hooks.should_stop` before each
    starts and telling `hooks.on_file_done` after each ends; the outcomes, and whether the run
    was stopped. Folder and repository ingests share it."""
    gate = asyncio.Semaphore(concurrency)
    outcomes: dict[Key, Outcome] = {}
    stopped = False

    async def one(key: Key, run: Callable[[], Awaitable[Outcome]]) -> None:
        nonlocal stopped
        async with gate:
            if hooks.should_stop is not None and hooks.should_stop():
                stopped = True
                return
            outcome = await run()
        outcomes[key] = outcome
        if hooks.on_file_done is not None:
            maybe = hooks.on_file_done(Path(key), outcome)
            if maybe is not None:
                await maybe

    await asyncio.gather(*(one(key, run) for key, run in work.items()))
    return outcomes, stopped


async def stored_sources(index: IndexPort, library: str, prefix: str) -> dict[str, SourceEntry]:
    """The library's documents whose source starts with `prefix`, by source, from the
    writer's current table (`GET /sources`, a page of a thousand at a time)."""
    found: dict[str, SourceEntry] = {}
    cursor: str | None = None
    while True:
        with reading_from_writer():
            page = await index.list_sources(library, prefix, cursor, MAX_LIST_LIMIT)
        found.update((entry.source, entry) for entry in page.sources)
        cursor = page.next_cursor
        if cursor is None or not page.sources:
            return found


class FolderIngest:
    """`ingest_folder` over a `Pipeline`; see the module docstring."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    def resolve(self, folder: str) -> Path:
        """The folder as the server reads it (refusing paths outside INGEST_ROOTS)."""
        return self.pipeline.paths.resolve(folder)

    async def run(
        self, req: IngestFolderInput, hooks: FolderHooks | None = None
    ) -> FolderIngestResult:
        hooks = hooks or FolderHooks()
        root = self.resolve(req.folder)
        scan = await asyncio.to_thread(scan_folder, root, req.recursive, req.include, req.exclude)
        if hooks.on_scanned is not None:
            await hooks.on_scanned(len(scan.files))
        stored = await stored_sources(self.pipeline.index, req.library, _below(root))
        work = {path: partial(self._file, path, req, stored.get(str(path))) for path in scan.files}
        outcomes, stopped = await run_bounded(work, req.max_concurrency, hooks)
        deleted: list[str] = []
        if req.prune and not stopped:
            deleted = await self._prune(root, req.library, scan)
        return FolderIngestResult(
            folder=str(root),
            library=req.library,
            total_files=len(scan.files),
            **tally(scan.files, outcomes),
            ignored_files=[str(p) for p in scan.ignored],
            deleted=len(deleted),
            deleted_sources=deleted,
        )

    async def _file(
        self, path: Path, req: IngestFolderInput, stored: SourceEntry | None
    ) -> Outcome:
        try:
            return await self.pipeline.ingest_file(
                str(path), req.library, req.metadata, stored=stored
            )
        except MvdbError as exc:
            outcome = exc
        except Exception as exc:
            log.exception("folder ingest failed for one file")
            outcome = MvdbError(f"unexpected error: {type(exc).__name__}: {exc}")
        fields = {"file": str(path), "error_code": outcome.error_code}
        log.warning("a file of the folder failed", extra={"fields": fields})
        await tell_caller("warning", f"{path}: {outcome.message}")
        return outcome

    async def _prune(self, root: Path, library: str, scan: FolderScan) -> list[str]:
        """Delete the library's documents from files below `root` that are gone; the sources
        deleted. Skipped (with a notice) when the scan could not read everything."""
        if not scan.complete:
            note = (
                f"not pruning {root}: {len(scan.unreadable)} subfolder(s) could not be read "
                f"({scan.unreadable[0]}); deleting documents now could delete ones whose files "
                "still exist"
            )
            log.warning(note)
            await tell_caller("warning", note)
            return []
        index = self.pipeline.index
        # What to delete: read again, as the run may have replaced documents.
        stored = await stored_sources(index, library, _below(root))
        candidates = {entry.doc_id: entry.source for entry in stored.values()}
        gone = await asyncio.to_thread(
            lambda: {d: s for d, s in candidates.items() if not os.path.lexists(s)}
        )
        deleted = []
        for doc_id, source in sorted(gone.items(), key=lambda item: item[1]):
            try:
                await index.delete(doc_id)
            except NotFoundError:
                continue  # deleted meanwhile by someone else: gone either way
            deleted.append(source)
        if deleted:
            log.info("pruned documents", extra={"fields": {"deleted": len(deleted)}})
        return deleted


def _below(root: Path) -> str:
    """The prefix of the sources of files below `root`."""
    return str(root).rstrip(os.sep) + os.sep
