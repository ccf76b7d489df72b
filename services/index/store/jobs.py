"""The `jobs` table: background jobs' records, kept with the index so that a job outlives the
gateway that runs it (a restarted gateway resumes what is still queued or running).

One row per job, replaced whole on every update (merge on `job_id`); the record is JSON text,
with the columns a listing filters and sorts on beside it. The table is small (jobs, not
documents) and created on first use; `optimize` compacts it with the others.
"""

from __future__ import annotations

import pyarrow as pa
from lancedb.table import Table

from libs.contracts import JobRecord
from services.index.errors import JobNotFound
from services.index.filters import equals, quote
from services.index.store.schema import JOBS
from services.index.store.state import StoreState

JOBS_SCHEMA = pa.schema(
    [
        ("job_id", pa.string()),
        ("status", pa.string()),
        ("created_at", pa.string()),
        ("finished_at", pa.string()),
        ("record", pa.large_string()),
    ]
)


def _table(state: StoreState) -> Table:
    with state.write_lock:
        return state.db.create_table(JOBS, schema=JOBS_SCHEMA, exist_ok=True)


def _readable(state: StoreState) -> Table | None:
    """The table to read: a reader (which creates nothing) has none until the writer's
    first job."""
    if not state.read_only:
        return _table(state)
    if JOBS not in state.db.list_tables().tables:
        return None
    return state.db.open_table(JOBS)


def _rows(state: StoreState, where: str | None) -> list[JobRecord]:
    table = _readable(state)
    if table is None:
        return []
    query = table.search()
    if where:
        query = query.where(where)
    rows = query.select(["record"]).limit(None).to_arrow()["record"].to_pylist()
    return [JobRecord.model_validate_json(text) for text in rows]


def save(state: StoreState, record: JobRecord) -> None:
    job = record.job
    row = pa.table(
        {
            "job_id": [job.job_id],
            "status": [job.status],
            "created_at": [job.created_at],
            "finished_at": [job.finished_at],
            "record": [record.model_dump_json()],
        },
        schema=JOBS_SCHEMA,
    )
    with state.write_lock:
        state.guard.refuse_if_conflicted()
        table = _table(state)
        state.guard.check([(JOBS, table)])
        merge = table.merge_insert("job_id")
        made = merge.when_matched_update_all().when_not_matched_insert_all().execute(row).version
        state.guard.committed(JOBS, table, made)


def get(state: StoreState, job_id: str) -> JobRecord:
    found = _rows(state, equals("job_id", job_id))
    if not found:
        raise JobNotFound(job_id)
    return found[0]


def listing(state: StoreState, status: str | None, limit: int) -> list[JobRecord]:
    """Newest first (ties by job_id, so the order is stable)."""
    records = _rows(state, equals("status", status) if status else None)
    records.sort(key=lambda r: (r.job.created_at, r.job.job_id), reverse=True)
    return records[:limit]


def delete_finished_before(state: StoreState, cutoff: str) -> int:
    where = f"finished_at IS NOT NULL AND finished_at < {quote(cutoff)}"
    with state.write_lock:
        state.guard.refuse_if_conflicted()
        table = _table(state)
        count = table.count_rows(where)
        if count:
            state.guard.check([(JOBS, table)])
            made = table.delete(where).version
            state.guard.committed(JOBS, table, made)
    return count
