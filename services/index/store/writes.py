"""Writes: the atomic replace of a document and its delete, serialised by one lock.

Atomic replace of the document at (library, source):
1. add the new `documents` row as 'pending' (`stage`);
2. one `chunks` commit that inserts the new chunks and deletes every other chunk of
   (library, source) (`swap_chunks`): this is the moment the new version becomes the
   searchable one;
3. one `documents` commit that makes the new row 'live' and deletes the other rows of
   (library, source) (`publish`).
A crash before 2 leaves an invisible pending row; after 2, a pending row whose chunks exist.
`recovery.reconcile` (run on open) deletes the first kind and finishes step 3 for the second,
and clears what a crash in the middle of a delete leaves (orphan chunks, documents without
chunks). Every read runs against a single table version; a search, which queries the chunks
table several times, checks that the version did not move in between (`snapshot`).

Every commit goes through the writer guard (`writer_guard`): `check` before it, `committed`
after, so a second writer on the store is refused before it can interleave a replace.

`Writes` is a class so that a test can stand in a failing step (a full disk in step 2, a
transient error in step 3) and watch the protocol keep its promises.
"""

from __future__ import annotations

import logging
import uuid

import pyarrow as pa
from lancedb.table import Table

from libs.contracts import DeleteResult, UpsertRequest, UpsertResponse
from libs.vectors import Matrix
from services.index.errors import ConcurrentWriter, DocumentNotFound, WriteFailed
from services.index.filters import equals
from services.index.store import meta
from services.index.store.rows import chunk_rows, document_row, dump_metadata
from services.index.store.schema import (
    CHUNKS,
    DOCUMENTS,
    DOCUMENTS_SCHEMA,
    HIT_DOCUMENT_ENTRY,
    LIVE,
    LIVE_ONLY,
    PENDING,
    key_filter,
)
from services.index.store.state import StoreState
from services.index.store.tables import ensure_tables, require_tables, tables

log = logging.getLogger(__name__)


class Writes:
    """Every write of the store; each public method takes the write lock or is a step of
    one that holds it."""

    def __init__(self, state: StoreState) -> None:
        self.state = state

    def upsert(self, request: UpsertRequest, vectors: Matrix | None = None) -> UpsertResponse:
        """Replace the document at (library, source) with this version, atomically. The
        request's contract has checked its chunks, identity, model and vectors; `vectors`,
        when given, are its vectors decoded (a document put together from parts)."""
        state = self.state
        document = request.document
        vectors = request.vectors() if vectors is None else vectors
        metadata = dump_metadata(document.metadata)
        with state.write_lock:
            state.guard.refuse_if_conflicted()
            meta.check_model(state.stamp, request.model, request.dim)
            documents, chunks = ensure_tables(state, request.model, request.dim)
            self.finish_unpublished(documents, chunks)
            states = _key_states(documents, document.library, document.source)
            doc_id = str(uuid.uuid4())
            row = document_row(request, doc_id, metadata)
            self.stage(row)
            rows = chunk_rows(request, doc_id, metadata, vectors)
            try:
                self.swap_chunks(document.library, document.source, rows, replacing=bool(states))
            except ConcurrentWriter:
                raise  # the pending row stays, invisible; recovery removes it
            except Exception as exc:
                _discard(state, documents, doc_id)
                raise WriteFailed(
                    f"could not write the chunks of {document.source!r}: {exc}; "
                    "the previous version (if any) is unchanged, try again"
                ) from exc
            self._publish_or_defer(row)
            state.note_write()
        state.hit_documents.remember(row.select(HIT_DOCUMENT_ENTRY).to_pylist())
        return UpsertResponse(
            status="replaced" if LIVE in states else "indexed",
            doc_id=doc_id,
            chunk_count=len(request.chunks),
        )

    def stage(self, row: pa.Table) -> None:
        """Step 1: the new version's documents row, invisible while 'pending'."""
        documents, _ = require_tables(self.state)
        self.state.guard.check([(DOCUMENTS, documents)])
        made = documents.add(row).version
        self.state.guard.committed(DOCUMENTS, documents, made)

    def swap_chunks(
        self, library: str, source: str, rows: pa.Table, *, replacing: bool = True
    ) -> None:
        """Step 2, one commit: the new chunks in, every other chunk of (library, source) out.

        With `replacing` False, (library, source) has no documents row and so no chunks
        (chunks are written after their row and deleted before it): a plain append does,
        instead of a merge whose "not matched by source" clause scans the whole table."""
        _, chunks = require_tables(self.state)
        self.state.guard.check([(CHUNKS, chunks)])
        if not replacing:
            made = chunks.add(rows).version
        else:
            made = (
                chunks.merge_insert("chunk_id")
                .when_not_matched_insert_all()
                .when_not_matched_by_source_delete(key_filter(library, source))
                .execute(rows)
                .version
            )
        self.state.guard.committed(CHUNKS, chunks, made)

    def publish(self, row: pa.Table) -> None:
        """Step 3, one commit: this row 'live', every other row of (library, source) gone.

        Idempotent: inserting when the pending row is missing keeps the chunks reachable.
        """
        documents, _ = require_tables(self.state)
        live = row.set_column(
            row.schema.get_field_index("state"), "state", pa.array([LIVE] * row.num_rows)
        )
        library, source = live["library"][0].as_py(), live["source"][0].as_py()
        self.state.guard.check([(DOCUMENTS, documents)])
        made = (
            documents.merge_insert("doc_id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(key_filter(library, source))
            .execute(live)
            .version
        )
        self.state.guard.committed(DOCUMENTS, documents, made)

    def _publish_or_defer(self, row: pa.Table) -> None:
        doc_id = row["doc_id"][0].as_py()
        try:
            self.publish(row)
        except ConcurrentWriter:
            raise  # the pending row has its chunks: recovery publishes it
        except Exception as exc:
            # The chunks are already the new version; finish on the next write or restart.
            self.state.unpublished.add(doc_id)
            log.exception("publishing a document failed", extra={"fields": {"doc_id": doc_id}})
            raise WriteFailed(
                f"the new version of {row['source'][0].as_py()!r} was stored but not yet "
                f"listed ({exc}); it is completed on the next write or restart"
            ) from exc

    def finish_unpublished(self, documents: Table, chunks: Table) -> None:
        """Publish the versions whose step 3 failed earlier in this process."""
        for doc_id in sorted(self.state.unpublished):
            pending = pending_row(documents, doc_id)
            if pending is not None and chunks.count_rows(equals("doc_id", doc_id)):
                self.publish(pending)
            self.state.unpublished.discard(doc_id)

    def delete(self, doc_id: str) -> DeleteResult:
        """Chunks first, then the row: a crash in between leaves a document without chunks,
        which is invisible to search and removed by `reconcile`."""
        state = self.state
        with state.write_lock:
            state.guard.refuse_if_conflicted()
            documents, chunks = tables(state)
            if documents is None or not documents.count_rows(
                f"{LIVE_ONLY} AND {equals('doc_id', doc_id)}"
            ):
                raise DocumentNotFound(doc_id)
            deleted = 0
            if chunks is not None:
                deleted = chunks.count_rows(equals("doc_id", doc_id))
                guarded_delete(state, CHUNKS, chunks, equals("doc_id", doc_id))
            guarded_delete(state, DOCUMENTS, documents, equals("doc_id", doc_id))
            state.hit_documents.forget(doc_id)
            state.note_write()
        return DeleteResult(doc_id=doc_id, deleted_chunks=deleted)


def guarded_delete(state: StoreState, name: str, table: Table, where: str) -> None:
    """One delete commit, through the writer guard."""
    state.guard.check([(name, table)])
    made = table.delete(where).version
    state.guard.committed(name, table, made)


def pending_row(documents: Table, doc_id: str) -> pa.Table | None:
    """The pending documents row of `doc_id`, ready to `publish`; None if there is none."""
    where = f"{equals('doc_id', doc_id)} AND {equals('state', PENDING)}"
    row = documents.search().where(where).limit(None).to_arrow()
    return row.select(DOCUMENTS_SCHEMA.names).cast(DOCUMENTS_SCHEMA) if row.num_rows else None


def _key_states(documents: Table, library: str, source: str) -> set[str]:
    """The states of every documents row of (library, source): empty for a new one."""
    rows = documents.search().where(key_filter(library, source)).select(["state"])
    return set(rows.limit(None).to_arrow()["state"].to_pylist())


def _discard(state: StoreState, documents: Table, doc_id: str) -> None:
    try:
        where = f"{equals('doc_id', doc_id)} AND {equals('state', PENDING)}"
        guarded_delete(state, DOCUMENTS, documents, where)
    except Exception:
        # Harmless if it stays: pending rows are invisible and reconcile removes them.
        log.exception("could not remove a pending row", extra={"fields": {"doc_id": doc_id}})
