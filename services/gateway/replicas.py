"""`ReplicaRouter`: the index port over one writer and any number of read replicas.

With `INDEX_READ_URLS` set, the gateway's index port is this router (`services.gateway.ports`):

- writes (upsert, delete) and everything the write path reads (the dedup `lookup`, the
  stored vectors an ingest reuses), plus the background jobs' records, always go to the
  writer (`INDEX_URL`);
- reads (search, list_documents, list_sources, list_libraries, get, info) go to the readers
  in turn (round robin). A reader that fails (cannot be reached, times out, answers 5xx or
  something that is not the contract) is skipped for `INDEX_READ_COOLDOWN_S` and the read
  goes to the next one; the writer answers when no reader can, so a read fails only when the
  writer fails too. An answer that is the caller's mistake (4xx: a bad filter, an unknown
  document) is the answer, except that `get` of an unknown document asks the writer before
  saying so (an id handed over by another caller may be newer than the reader);
- read-your-writes: a caller that wrote within the readers' consistency window reads from the
  writer, and so do the listings a sync prunes from (`services.gateway.consistency`).

Reader clients try once (no retries: the next replica is the retry) with their own timeout,
`INDEX_READ_TIMEOUT_S`. Reads are counted per target in `mvdb_index_reads_total{target}`
(`reader1`...`readerN` in the order of INDEX_READ_URLS, `writer`), reads the writer took for
read-your-writes in `mvdb_index_pinned_reads_total`, and readers skipped after a failure in
`mvdb_index_read_failovers_total{target}`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from libs.contracts import (
    DeleteResult,
    GetDocumentResult,
    IndexInfo,
    IndexSearchRequest,
    JobRecord,
    ListDocumentsResult,
    ListLibrariesResult,
    LookupResponse,
    PartReceived,
    SearchResult,
    SourceList,
    StoredVectors,
    UpsertPart,
    UpsertRequest,
    UpsertResponse,
)
from libs.errors import MvdbError, NotFoundError
from libs.ports import IndexPort
from services.gateway.consistency import RecentWrites, read_session, writer_reads
from services.gateway.metrics import INDEX_FAILOVERS, INDEX_PINNED_READS, INDEX_READS

log = logging.getLogger(__name__)

T = TypeVar("T")
Read = Callable[[IndexPort], Awaitable[T]]


@dataclass
class Replica:
    """One reader: its metric name (`reader1`...), its port, and until when it is skipped."""

    name: str
    port: IndexPort
    skipped_until: float = 0.0


class ReplicaRouter:
    """An `IndexPort` over a writer and its readers; see the module docstring."""

    def __init__(
        self,
        writer: IndexPort,
        readers: Sequence[IndexPort],
        *,
        window_s: float,
        cooldown_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.writer = writer
        self.replicas = [Replica(f"reader{i}", port) for i, port in enumerate(readers, start=1)]
        self.cooldown_s = cooldown_s
        self.clock = clock
        self.recent = RecentWrites(window_s, clock)
        self._turn = 0

    # ------------------------------------------------------------------ routing

    def order(self) -> list[Replica]:
        """The readers to try for the next read: those not put aside after a failure, from
        the one whose turn it is (turns go round the readers available, so the others share
        a skipped reader's load evenly)."""
        now = self.clock()
        available = [replica for replica in self.replicas if replica.skipped_until <= now]
        if not available:
            return []
        start = self._turn % len(available)
        self._turn += 1
        return available[start:] + available[:start]

    async def _read(self, what: str, read: Read[T], *, writer_if_missing: bool = False) -> T:
        if writer_reads.get():
            return await self._from_writer(read)
        if self.recent.pinned(read_session.get()):
            INDEX_PINNED_READS.inc()
            return await self._from_writer(read)
        for replica in self.order():
            try:
                result = await read(replica.port)
            except MvdbError as exc:
                if exc.http_status < 500:
                    INDEX_READS.labels(replica.name).inc()
                    if writer_if_missing and isinstance(exc, NotFoundError):
                        return await self._from_writer(read)
                    raise
                self._failed(replica, what, exc)
            except Exception as exc:  # an answer outside the contract: a broken reader
                self._failed(replica, what, exc)
            else:
                INDEX_READS.labels(replica.name).inc()
                return result
        return await self._from_writer(read)

    async def _from_writer(self, read: Read[T]) -> T:
        INDEX_READS.labels("writer").inc()
        return await read(self.writer)

    def _failed(self, replica: Replica, what: str, exc: Exception) -> None:
        replica.skipped_until = self.clock() + self.cooldown_s
        INDEX_FAILOVERS.labels(replica.name).inc()
        why = exc.message if isinstance(exc, MvdbError) else f"{type(exc).__name__}: {exc}"
        log.warning(
            "index reader failed; skipping it for %.0f s",
            self.cooldown_s,
            extra={"fields": {"target": replica.name, "read": what, "why": why}},
        )

    async def _write(self, write: Callable[[], Awaitable[T]]) -> T:
        key = read_session.get()
        try:
            return await write()
        finally:
            # Also after a failure: a write whose answer was lost may still have committed.
            self.recent.wrote(key)

    # ------------------------------------------------------------------- writes

    async def upsert(self, request: UpsertRequest) -> UpsertResponse:
        return await self._write(lambda: self.writer.upsert(request))

    async def stage(self, part: UpsertPart) -> PartReceived:
        return await self.writer.stage(part)  # invisible until the upsert naming it

    async def delete(self, doc_id: str) -> DeleteResult:
        return await self._write(lambda: self.writer.delete(doc_id))

    async def lookup(self, library: str, source: str) -> LookupResponse:
        # The dedup decision before a write: a stale answer would skip a changed document.
        return await self.writer.lookup(library, source)

    async def stored_vectors(self, doc_id: str) -> StoredVectors:
        # Part of the write path, like `lookup`: the writer just named this document live.
        return await self.writer.stored_vectors(doc_id)

    async def save_job(self, record: JobRecord) -> None:
        await self.writer.save_job(record)

    async def get_job(self, job_id: str) -> JobRecord:
        return await self.writer.get_job(job_id)

    async def list_jobs(self, status: str | None, limit: int) -> list[JobRecord]:
        return await self.writer.list_jobs(status, limit)

    async def delete_jobs(self, finished_before: str) -> int:
        return await self.writer.delete_jobs(finished_before)

    # -------------------------------------------------------------------- reads

    async def search(
        self, request: IndexSearchRequest, later: Awaitable[str] | None = None
    ) -> SearchResult:
        return await self._read("search", lambda port: port.search(request, later))

    async def list_documents(
        self, library: str | None, limit: int, offset: int
    ) -> ListDocumentsResult:
        return await self._read(
            "list_documents", lambda port: port.list_documents(library, limit, offset)
        )

    async def list_sources(
        self, library: str, prefix: str = "", cursor: str | None = None, limit: int = 1000
    ) -> SourceList:
        return await self._read(
            "list_sources", lambda port: port.list_sources(library, prefix, cursor, limit)
        )

    async def list_libraries(self) -> ListLibrariesResult:
        return await self._read("list_libraries", lambda port: port.list_libraries())

    async def get(
        self, doc_id: str, chunk_index: int | None = None, context: int = 0
    ) -> GetDocumentResult:
        return await self._read(
            "get", lambda port: port.get(doc_id, chunk_index, context), writer_if_missing=True
        )

    async def info(self) -> IndexInfo:
        return await self._read("info", lambda port: port.info())

    async def ready(self) -> tuple[bool, str]:
        """Ready when the writer is; the detail says how many readers answer. With the writer
        down but a reader up, reads still work: ready, and the detail says writes fail."""
        checks = await asyncio.gather(
            self.writer.ready(), *(replica.port.ready() for replica in self.replicas)
        )
        (writer_ok, writer_detail), readers = checks[0], checks[1:]
        up = sum(1 for ok, _ in readers if ok)
        detail = f"writer {writer_detail}; readers {up}/{len(readers)} ready"
        if writer_ok:
            return True, detail
        if up:
            return True, f"{detail}: reads only, writes fail until the writer is back"
        return False, detail
