"""`ingest_repo`: sync a git repository's files into a library.

A run clones the ref (`repos.checkout`), walks the files, and ingests each as
`<url>#<path>` with `repo`, `ref`, `commit` and `path` in its metadata, a few at a time,
through the same pipeline as every ingest: an unchanged file is skipped by its content hash
(its metadata keeps the commit it was last indexed at), a changed one replaced. With
`prune`, after a run that was not stopped, the library's documents of this repository whose
path is gone are deleted. The result is a folder result plus `commit` (now) and
`commit_before`: the commit of the repository's most recently written document before the
run (the last sync that changed something), null on the first ingest.

Refusals come before anything is written: a URL the policy refuses, a ref that does not
exist, a clone over the size or time limit, more matching files than `max_files`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from libs.contracts import (
    MAX_LIST_LIMIT,
    IngestRepoInput,
    RepoIngestResult,
    SourceEntry,
)
from libs.errors import MvdbError, NotFoundError, TooLargeError
from libs.telemetry import tell_caller
from services.gateway.consistency import reading_from_writer
from services.gateway.folders import FolderHooks, Outcome, run_bounded, stored_sources, tally
from services.gateway.pipeline import Pipeline
from services.gateway.repos import CloneLimits, checkout, repo_url, walk

log = logging.getLogger(__name__)


class RepoIngest:
    """`ingest_repo` over a `Pipeline`; see the module docstring."""

    def __init__(self, pipeline: Pipeline, limits: CloneLimits, concurrency: int = 4) -> None:
        self.pipeline = pipeline
        self.limits = limits
        self.concurrency = concurrency

    async def run(self, req: IngestRepoInput, hooks: FolderHooks | None = None) -> RepoIngestResult:
        hooks = hooks or FolderHooks()
        url = repo_url(req.url)
        await self.pipeline.urls.check(url)  # refuse early, before listing anything
        indexed, before = await self._indexed(url, req.library)
        stored = await stored_sources(self.pipeline.index, req.library, f"{url}#")
        max_file_bytes = self.pipeline.settings.max_file_bytes
        async with checkout(url, req.ref, self.pipeline.urls, self.limits) as tree:
            found = await asyncio.to_thread(
                walk, tree.root, req.include, req.exclude, max_file_bytes
            )
            if len(found.files) > req.max_files:
                raise TooLargeError(
                    f"{url} has {len(found.files)} matching files, more than max_files="
                    f"{req.max_files}; raise max_files or narrow include/exclude"
                )
            if hooks.on_scanned is not None:
                await hooks.on_scanned(len(found.files))

            def work(path: str) -> Callable[[], Awaitable[Outcome]]:
                metadata = {
                    **(req.metadata or {}),
                    "repo": url,
                    "ref": tree.ref,
                    "commit": tree.commit,
                    "path": path,
                }
                known = stored.get(f"{url}#{path}")
                return lambda: self._file(tree.root / path, path, url, req.library, metadata, known)

            items = {path: work(path) for path in found.files}
            outcomes, stopped = await run_bounded(items, self.concurrency, hooks)
        deleted: list[str] = []
        if req.prune and not stopped:
            present = {f"{url}#{path}" for path in found.files}
            deleted = await self._prune({d: s for d, s in indexed.items() if s not in present})
        return RepoIngestResult(
            folder=url,
            library=req.library,
            total_files=len(found.files),
            **tally(found.files, outcomes),
            ignored_files=found.ignored,
            deleted=len(deleted),
            deleted_sources=deleted,
            repo=url,
            ref=tree.ref,
            commit=tree.commit,
            commit_before=before,
        )

    async def _file(
        self,
        path: Path,
        relative: str,
        url: str,
        library: str,
        metadata: dict[str, object],
        stored: SourceEntry | None,
    ) -> Outcome:
        try:
            data = await asyncio.to_thread(path.read_bytes)
            return await self.pipeline.ingest_bytes(
                data, relative, f"{url}#{relative}", library, metadata, stored=stored
            )
        except MvdbError as exc:
            outcome = exc
        except Exception as exc:
            log.exception("repository ingest failed for one file")
            outcome = MvdbError(f"unexpected error: {type(exc).__name__}: {exc}")
        await tell_caller("warning", f"{relative}: {outcome.message}")
        return outcome

    async def _indexed(self, url: str, library: str) -> tuple[dict[str, str], str | None]:
        """The library's documents of this repository (doc_id -> source) and the commit of
        the newest of them (documents are listed newest first)."""
        prefix = url + "#"
        found: dict[str, str] = {}
        newest: str | None = None
        offset = 0
        while True:
            with reading_from_writer():  # what to delete: from the current table only
                page = await self.pipeline.index.list_documents(library, MAX_LIST_LIMIT, offset)
            for document in page.documents:
                if document.source.startswith(prefix):
                    found[document.doc_id] = document.source
                    commit = document.metadata.get("commit")
                    if newest is None and isinstance(commit, str):
                        newest = commit
            offset += page.count
            if not page.documents or offset >= page.total:
                return found, newest

    async def _prune(self, gone: dict[str, str]) -> list[str]:
        deleted = []
        for doc_id, source in sorted(gone.items(), key=lambda item: item[1]):
            try:
                await self.pipeline.index.delete(doc_id)
            except NotFoundError:
                continue  # deleted meanwhile by someone else: gone either way
            deleted.append(source)
        return deleted
