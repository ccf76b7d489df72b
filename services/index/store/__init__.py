"""The LanceDB store of the index service: documents, chunks, hybrid search, crash recovery.

`IndexStore` is the entry point; it holds one `StoreState` (connection, table handles,
locks, model stamp, caches) and hands it to the modules that do the work:

- `schema`: the tables, their Arrow schemas and the columns each read selects;
- `rows`: Arrow rows from an `UpsertRequest`, contract objects from rows;
- `meta`: the model stamp and what the store records about its vector index;
- `state`: `StoreState` and its caches;
- `tables`: opening, creating and upgrading the tables (never on an event loop);
- `ann`: the approximate vector index (build, rebuild, probes) and prewarming;
- `snapshot`: reads that see one table version, through LanceDB's async API;
- `lance`: the one reach into LanceDB internals, and why;
- `ranking`: the search legs, fusion, the cap per document, the token budget;
- `search`: a search from request to result;
- `reads`: lookup, get, listings, counts;
- `writes`: the crash-safe replace protocol and delete;
- `staging`: parts of documents larger than one request, held until their write;
- `recovery`: reconcile after a crash;
- `maintenance`: optimize and when it is due;
- `jobs`: background jobs' records;
- `writer_guard`: a writer that sees another process's commit refuses to write on.

The service is the store's only writer: with `INDEX_ROLE=reader` a store is a read-only
replica of one another process writes (`StoreState.read_only`): every write method raises
`ReadOnlyReplica`, opening it neither creates, upgrades nor reconciles anything, and `follow`
picks up what the writer built. A second writer on one store is a misconfiguration that
`writer_guard` detects: the writer that sees it raises `ConcurrentWriter` on every write
until restarted. Blocking methods run in worker threads
(`services.index.core.IndexCore` does that); `search`, `list_documents` and `list_sources`
are coroutines awaited on the caller's loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

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
from services.index.errors import ReadOnlyReplica
from services.index.settings import IndexSettings
from services.index.store import jobs, maintenance, meta, reads, recovery, search, tables
from services.index.store.meta import ModelStamp
from services.index.store.recovery import ReconcileReport
from services.index.store.schema import DOCUMENTS
from services.index.store.staging import Staging
from services.index.store.state import StoreState
from services.index.store.writes import Writes

__all__ = ["IndexStore", "ModelStamp", "ReconcileReport", "StoreState", "Writes"]


class IndexStore:
    """One LanceDB database. Thread-safe: reads run concurrently, writes take the write lock.

    Building it opens the tables that exist and reconciles after any crash (blocking; a
    reader leaves recovery to the writer). `writes` builds the write collaborator; tests
    pass one whose steps fail.
    """

    def __init__(
        self, settings: IndexSettings, *, writes: Callable[[StoreState], Writes] = Writes
    ) -> None:
        self.state = StoreState(settings)
        self.writes = writes(self.state)
        self.staging = Staging(settings.index_staged_max_bytes, settings.index_staged_ttl_s)
        tables.open_tables(self.state)
        if not self.read_only:
            tables.adopt_versions(self.state)
            self.reconcile()

    @property
    def read_only(self) -> bool:
        return self.state.read_only

    def _writable(self, what: str) -> None:
        if self.state.read_only:
            raise ReadOnlyReplica(what)

    @property
    def settings(self) -> IndexSettings:
        return self.state.settings

    @property
    def uri(self) -> str:
        return self.state.uri

    @property
    def stamp(self) -> ModelStamp | None:
        return self.state.stamp

    # ---------------------------------------------------------------- coroutines

    async def search(
        self, request: IndexSearchRequest, later: Awaitable[str] | None = None
    ) -> SearchResult:
        """Hybrid, vector or BM25 search, awaited on the caller's loop; `later` gives the
        query vector when the request holds none yet (`search.search`)."""
        return await search.search(self.state, request, later)

    async def list_documents(
        self, library: str | None, limit: int, offset: int
    ) -> ListDocumentsResult:
        """A page of live documents, newest first, awaited on the caller's loop."""
        return await reads.list_documents(self.state, library, limit, offset)

    async def list_sources(
        self, library: str, prefix: str, after: str | None, limit: int
    ) -> SourceList:
        """A page of a library's sources by source, awaited on the caller's loop."""
        return await reads.list_sources(self.state, library, prefix, after, limit)

    # ----------------------------------------------------- blocking (worker threads)

    def lookup(self, library: str, source: str) -> LookupResponse:
        return reads.lookup(self.state, library, source)

    def get(
        self, doc_id: str, chunk_index: int | None = None, context: int = 0
    ) -> GetDocumentResult:
        return reads.get(self.state, doc_id, chunk_index, context)

    def stored_vectors(self, doc_id: str) -> StoredVectors:
        return reads.stored_vectors(self.state, doc_id)

    def list_libraries(self) -> ListLibrariesResult:
        return reads.list_libraries(self.state)

    def info(self) -> IndexInfo:
        return reads.info(self.state)

    def upsert(self, request: UpsertRequest) -> UpsertResponse:
        """Replace a document; one sent in parts (`staging`) is put together first, and
        its parts are dropped once it is written."""
        self._writable("store documents")
        response = self.writes.upsert(*self.staging.whole(request))
        if request.staged is not None:
            self.staging.drop(request.staged.upload_id)
        return response

    def stage(self, part: UpsertPart) -> PartReceived:
        """Hold a part of a document larger than one request until its upsert."""
        self._writable("store documents")
        meta.check_model(self.state.stamp, part.model, part.dim)
        return self.staging.add(part)

    def delete(self, doc_id: str) -> DeleteResult:
        self._writable("delete documents")
        return self.writes.delete(doc_id)

    def reconcile(self) -> ReconcileReport:
        self._writable("reconcile the store after a crash")
        return recovery.reconcile(self.writes)

    def optimize_due(self) -> bool:
        return not self.state.read_only and maintenance.optimize_due(self.state)

    def documents_due(self) -> bool:
        """Whether the documents table alone is due a fold (`fold_documents`)."""
        return not self.state.read_only and maintenance.documents_due(self.state)

    def seconds_until_optimize(self) -> float | None:
        return maintenance.seconds_until_due(self.state)

    def optimize(self) -> None:
        self._writable("optimize the indexes")
        maintenance.optimize(self.state)

    def fold_documents(self) -> None:
        self._writable("optimize the indexes")
        maintenance.optimize(self.state, only=(DOCUMENTS,))

    def follow(self) -> None:
        """The periodic look at the store: on a reader, for what the writer created or
        built since; on a writer, for the latest versions (`tables.catch_up`)."""
        if self.read_only:
            tables.follow(self.state)
        else:
            tables.catch_up(self.state)

    def save_job(self, record: JobRecord) -> None:
        self._writable("save job records")
        jobs.save(self.state, record)

    def get_job(self, job_id: str) -> JobRecord:
        return jobs.get(self.state, job_id)

    def list_jobs(self, status: str | None, limit: int) -> list[JobRecord]:
        return jobs.listing(self.state, status, limit)

    def delete_jobs(self, finished_before: str) -> int:
        self._writable("delete job records")
        return jobs.delete_finished_before(self.state, finished_before)

    def ping(self) -> str:
        """The readiness detail. A writer that met another writer stays ready (it serves
        reads) and says that it refuses writes."""
        names = self.state.db.list_tables().tables
        said = f"ok ({len(names)} tables, role {self.settings.index_role})"
        if self.state.guard.conflict is not None:
            said += (
                "; WRITES REFUSED: another process writes this store "
                f"({self.state.guard.conflict}); run one writer per LANCEDB_URI and restart"
            )
        return said

    def close(self) -> None:
        with self.state.handles_lock:
            self.state.documents = None
            self.state.chunks = None
