"""`IndexCore`: the index service for asyncio callers, `libs.ports.IndexPort` in-process.

The HTTP app, the stdio server and the CLI all use it. It opens the store on first use (or in
`start`), runs every blocking LanceDB call in a worker thread (searches and document listings
are coroutines awaited on the loop instead, see `services.index.store.snapshot`), and keeps a
background task that folds new rows into the indexes (`optimize`) every N writes or T seconds
after a write, and looks at the tables' latest versions every `INDEX_READ_CONSISTENCY_S` (a
writer's handles move only when it moves them, `services.index.store.location`). On a reader
(`INDEX_ROLE=reader`) that task only follows the writer (tables that appeared, a vector index
built) every `INDEX_READ_CONSISTENCY_S`, and every write is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

import anyio.to_thread

from libs.contracts import (
    MAX_CONTEXT_CHUNKS,
    MAX_LIST_LIMIT,
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
    decode_cursor,
)
from libs.errors import InvalidInputError, MvdbError, StoreError
from libs.lifecycle import AsyncLifecycle
from libs.tasks import to_the_end
from services.index.metrics import OPTIMIZE_SECONDS, SEARCH_SECONDS, STORED
from services.index.settings import IndexSettings
from services.index.store import IndexStore
from services.index.store.location import shown_uri

log = logging.getLogger(__name__)

T = TypeVar("T")

# How long a readiness check waits for the store to open or answer before saying so: less
# than the probes' own timeouts (3 s in deploy/k3s), so that the reason is what they record.
READY_WAIT_S = 2.0
_CLOSED = "the index core was closed; create a new one"


class _Arrival:
    """An awaitable of the query vector that notes when it came (`perf_counter`)."""

    def __init__(self, later: Awaitable[str]) -> None:
        self.later = later
        self.at: float | None = None

    def __await__(self) -> Generator[Any, None, str]:
        data = yield from self.later.__await__()
        self.at = time.perf_counter()
        return data


class IndexCore(AsyncLifecycle):
    """Implements `libs.ports.IndexPort`; see the module docstring."""

    def __init__(self, settings: IndexSettings) -> None:
        self.settings = settings
        self._store: IndexStore | None = None
        self._open_lock: asyncio.Lock | None = None
        self._opening: asyncio.Future[IndexStore] | None = None  # `ready`'s open
        self._open_failure: str | None = None
        self._wake: asyncio.Event | None = None
        self._maintenance: asyncio.Task[None] | None = None
        self._closed = False

    # ---------------------------------------------------------------------- lifecycle

    async def start(self) -> IndexStore:
        """Open LanceDB and reconcile after any crash; idempotent."""
        if self._store is not None:
            return self._store
        if self._closed:
            raise StoreError(_CLOSED)
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._store is None:
                try:
                    store = await anyio.to_thread.run_sync(IndexStore, self.settings)
                except MvdbError:
                    raise
                except Exception as exc:
                    where = shown_uri(self.settings)
                    failure = StoreError(
                        f"could not open the LanceDB store at {where!r}: {exc}; check "
                        "LANCEDB_URI and LANCEDB_STORAGE_OPTIONS (or the AWS_* variables), and "
                        "that the path or bucket exists and is writable"
                    )
                    self._open_failure = failure.message
                    raise failure from exc
                self._open_failure = None
                if self._closed:  # closed while it opened (an open `ready` left running)
                    store.close()
                    raise StoreError(_CLOSED)
                self._wake = asyncio.Event()
                task = self._follow(store) if store.read_only else self._write_side(store)
                self._maintenance = asyncio.create_task(task)
                self._store = store
                STORED.watch(store)
        return self._store

    async def aclose(self) -> None:
        self._closed = True
        task, self._maintenance = self._maintenance, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        store, self._store = self._store, None
        if store is not None:
            store.close()

    async def _maintain(self, store: IndexStore) -> None:
        """Optimize when due, else fold the documents table alone when that is due
        (`maintenance.documents_due`): woken by every write, and sleeping until the next
        optimize would be due if no other write came."""
        assert self._wake is not None
        interval = self.settings.index_optimize_interval_s
        # Not `while True`: on Python 3.11 `wait_for` swallows a cancellation that comes as
        # the event it waits on is set (every write sets it), so `aclose` also says so here.
        while not self._closed:
            wait = store.seconds_until_optimize()
            timeout = interval if wait is None else wait
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            self._wake.clear()
            try:
                if store.optimize_due():
                    with OPTIMIZE_SECONDS.time():
                        await anyio.to_thread.run_sync(store.optimize)
                elif store.documents_due():
                    await anyio.to_thread.run_sync(store.fold_documents)
            except Exception:
                # Search still finds unindexed rows; the next round, an interval later,
                # tries again.
                log.exception("optimizing the index failed")
                await asyncio.sleep(interval)

    async def _write_side(self, store: IndexStore) -> None:
        """A writer's background tasks: maintenance, and the look at the latest versions."""
        await asyncio.gather(self._maintain(store), self._follow(store))

    async def _follow(self, store: IndexStore) -> None:
        """Look at the store every consistency interval (at least every second, at most
        every minute): a reader at what the writer did, a writer at the latest versions
        (`IndexStore.follow`)."""
        interval = min(max(self.settings.index_read_consistency_s, 1.0), 60.0)
        while True:
            await asyncio.sleep(interval)
            try:
                await anyio.to_thread.run_sync(store.follow)
            except Exception:
                log.exception("looking at the store's latest versions failed; trying again")

    async def _run(self, call: Callable[[IndexStore], T]) -> T:
        store = await self.start()
        return await anyio.to_thread.run_sync(call, store)

    def _wrote(self) -> None:
        store = self._store
        if self._wake is not None and store is not None:
            self._wake.set()  # the maintenance task works out when the next optimize is due

    async def optimize(self) -> None:
        """Fold new rows into the indexes now (benchmarks, tests, before a backup)."""
        with OPTIMIZE_SECONDS.time():
            await self._run(lambda store: store.optimize())

    @property
    def store(self) -> IndexStore | None:
        """The open store, for maintenance and tests; None until `start`."""
        return self._store

    # ------------------------------------------------------------------------- port

    async def lookup(self, library: str, source: str) -> LookupResponse:
        return await self._run(lambda store: store.lookup(library, source))

    async def upsert(self, request: UpsertRequest) -> UpsertResponse:
        response = await self._run(lambda store: store.upsert(request))
        self._wrote()
        return response

    async def stage(self, part: UpsertPart) -> PartReceived:
        return await self._run(lambda store: store.stage(part))

    async def search(
        self, request: IndexSearchRequest, later: Awaitable[str] | None = None
    ) -> SearchResult:
        """`later`: the query vector still being computed by the caller (the store starts
        the full-text leg meanwhile). The search's time is counted from when the vector is
        there, so that `mvdb_index_search_seconds` measures the index and not the embedder."""
        store = await self.start()
        started = time.perf_counter()
        vector = _Arrival(later) if later is not None else None
        try:
            # On this loop, not in a worker thread: see services.index.store.snapshot.
            return await store.search(request, vector)
        finally:
            if vector is not None and vector.at is not None:
                started = vector.at
            SEARCH_SECONDS.labels(request.mode).observe(time.perf_counter() - started)

    async def list_documents(
        self, library: str | None, limit: int, offset: int
    ) -> ListDocumentsResult:
        if not 1 <= limit <= MAX_LIST_LIMIT:
            raise InvalidInputError(f"limit must be between 1 and {MAX_LIST_LIMIT}, got {limit}")
        if offset < 0:
            raise InvalidInputError(f"offset must be 0 or more, got {offset}")
        store = await self.start()
        return await store.list_documents(library, limit, offset)

    async def list_sources(
        self, library: str, prefix: str = "", cursor: str | None = None, limit: int = 1000
    ) -> SourceList:
        if not 1 <= limit <= MAX_LIST_LIMIT:
            raise InvalidInputError(f"limit must be between 1 and {MAX_LIST_LIMIT}, got {limit}")
        after = decode_cursor(cursor, 1)[0] if cursor else None
        store = await self.start()
        return await store.list_sources(library, prefix, after, limit)

    async def list_libraries(self) -> ListLibrariesResult:
        return await self._run(lambda store: store.list_libraries())

    async def delete(self, doc_id: str) -> DeleteResult:
        result = await self._run(lambda store: store.delete(doc_id))
        self._wrote()
        return result

    async def get(
        self, doc_id: str, chunk_index: int | None = None, context: int = 0
    ) -> GetDocumentResult:
        if chunk_index is not None and chunk_index < 0:
            raise InvalidInputError(f"chunk_index must be 0 or more, got {chunk_index}")
        if not 0 <= context <= MAX_CONTEXT_CHUNKS:
            raise InvalidInputError(
                f"context must be between 0 and {MAX_CONTEXT_CHUNKS}, got {context}"
            )
        return await self._run(lambda store: store.get(doc_id, chunk_index, context))

    async def stored_vectors(self, doc_id: str) -> StoredVectors:
        return await self._run(lambda store: store.stored_vectors(doc_id))

    async def info(self) -> IndexInfo:
        return await self._run(lambda store: store.info())

    async def save_job(self, record: JobRecord) -> None:
        await self._run(lambda store: store.save_job(record))

    async def get_job(self, job_id: str) -> JobRecord:
        return await self._run(lambda store: store.get_job(job_id))

    async def list_jobs(self, status: str | None, limit: int) -> list[JobRecord]:
        return await self._run(lambda store: store.list_jobs(status, limit))

    async def delete_jobs(self, finished_before: str) -> int:
        return await self._run(lambda store: store.delete_jobs(finished_before))

    async def ready(self) -> tuple[bool, str]:
        """Opens the store if needed (in-process callers may ask before any other call), and
        answers within `READY_WAIT_S` whatever the store does: an object store that does not
        answer (its server down, its name not resolving) has LanceDB retry for minutes. The
        open goes on meanwhile (`to_the_end`), and a later call sees how it ended."""
        where = shown_uri(self.settings)
        try:
            if self._opening is None or (self._opening.done() and self._store is None):
                self._opening = asyncio.ensure_future(self.start())
            try:
                store = await asyncio.wait_for(to_the_end(self._opening), READY_WAIT_S)
            except TimeoutError:
                last = f"; the last try failed: {self._open_failure}" if self._open_failure else ""
                return False, f"the store at {where!r} is still opening{last}"
            ping = to_the_end(anyio.to_thread.run_sync(store.ping))
            try:
                return True, await asyncio.wait_for(ping, READY_WAIT_S)
            except TimeoutError:
                return False, f"the store at {where!r} did not answer within {READY_WAIT_S:g} s"
        except MvdbError as exc:
            return False, exc.message
        except Exception as exc:
            return False, f"LanceDB unavailable: {type(exc).__name__}: {exc}"
