"""Recovery: bring the tables back to a consistent state after a crash, on every open.

What an interrupted write can leave, and what becomes of it (the write protocol is in
`writes`): a pending row without chunks (a crash before step 2) is deleted; a pending row
whose chunks exist (a crash before step 3) is published; a live row without chunks (a crash
in a delete) is deleted; chunks without a row (orphans) are deleted.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

import pyarrow.compute as pc
from lancedb.table import Table

from services.index.filters import equals
from services.index.store.schema import CHUNKS, DOCUMENTS, LIVE_ONLY, PENDING, in_list
from services.index.store.writes import Writes, guarded_delete, pending_row

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReconcileReport:
    published: int = 0
    discarded_pending: int = 0
    dropped_empty_documents: int = 0
    dropped_orphan_chunks: int = 0

    @property
    def changed(self) -> bool:
        return self != ReconcileReport()


def reconcile(writes: Writes) -> ReconcileReport:
    """See the module docstring. Publishes through `writes`, under the write lock."""
    state = writes.state
    with state.write_lock:
        state.guard.refuse_if_conflicted()
        documents, chunks = state.documents, state.chunks
        if documents is None:
            return ReconcileReport()
        with_chunks = _chunk_doc_ids(chunks)
        rows = documents.search().select(["doc_id", "state"]).limit(None).to_arrow()
        pending = [r["doc_id"] for r in rows.to_pylist() if r["state"] == PENDING]
        published = 0
        for doc_id in pending:
            if doc_id in with_chunks:
                row = pending_row(documents, doc_id)
                if row is not None:
                    writes.publish(row)
                    published += 1
        discard = [d for d in pending if d not in with_chunks]
        if discard:
            where = f"{equals('state', PENDING)} AND {in_list('doc_id', discard)}"
            guarded_delete(state, DOCUMENTS, documents, where)
        live = documents.search().where(LIVE_ONLY).select(["doc_id"]).limit(None).to_arrow()
        live_ids = set(live["doc_id"].to_pylist())
        empty = sorted(live_ids - with_chunks)
        if empty:
            guarded_delete(state, DOCUMENTS, documents, in_list("doc_id", empty))
        orphans = sorted(with_chunks - live_ids)
        if orphans and chunks is not None:
            guarded_delete(state, CHUNKS, chunks, in_list("doc_id", orphans))
        report = ReconcileReport(
            published=published,
            discarded_pending=len(discard),
            dropped_empty_documents=len(empty),
            dropped_orphan_chunks=len(orphans),
        )
    if report.changed:
        fields = dataclasses.asdict(report)
        log.warning("reconciled the index after an interrupted write", extra={"fields": fields})
    return report


def _chunk_doc_ids(chunks: Table | None) -> set[str]:
    if chunks is None:
        return set()
    column = chunks.search().select(["doc_id"]).limit(None).to_arrow()["doc_id"]
    return {str(v) for v in pc.unique(column).to_pylist()}
