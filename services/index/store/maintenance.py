"""Maintenance: compacting small files and folding new rows into the text and vector
indexes (`optimize`), due after `INDEX_OPTIMIZE_EVERY_WRITES` writes or
`INDEX_OPTIMIZE_INTERVAL_S` seconds after the first unoptimized write, or as soon as writes
have paused for `INDEX_OPTIMIZE_QUIET_S`. Rows not yet folded are still searched (exactly),
so maintenance only keeps searches fast: until it runs, every write's small fragment is read
on its own and its rows are scanned flat (measured after a 60-document ingest: index search
p50 28.8 ms before an optimize of 0.2 s, 11.3 ms after)."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from services.index.store import ann
from services.index.store.schema import CHUNKS, DOCUMENTS
from services.index.store.state import StoreState

log = logging.getLogger(__name__)


def seconds_until_due(state: StoreState) -> float | None:
    """Seconds until an optimize is due if no other write comes; None while every write is
    folded in, and while writes are refused (`writer_guard`)."""
    if state.dirty_since is None or state.guard.conflict is not None:
        return None
    settings = state.settings
    if state.writes_since_optimize >= settings.index_optimize_every_writes:
        return 0.0
    now = time.monotonic()
    wait = settings.index_optimize_interval_s - (now - state.dirty_since)
    if settings.index_optimize_quiet_s:
        wait = min(wait, settings.index_optimize_quiet_s - (now - state.last_write))
    return max(0.0, wait)


def optimize_due(state: StoreState) -> bool:
    return seconds_until_due(state) == 0.0


def optimize(state: StoreState) -> None:
    """Compact small files and fold new rows into the indexes, incrementally; build the
    vector index when the table has grown enough (`ann.maybe_build`)."""
    retention = timedelta(seconds=state.settings.index_version_retention_s)
    with state.write_lock:
        started = time.perf_counter()
        state.guard.check([(DOCUMENTS, state.documents), (CHUNKS, state.chunks)])
        for name, table in ((DOCUMENTS, state.documents), (CHUNKS, state.chunks)):
            if table is not None:
                table.optimize(cleanup_older_than=retention)
                state.guard.committed(name, table, commits=None)
        if state.chunks is not None:
            ann.maybe_build(state, state.chunks)
            ann.prewarm(state.settings, state.chunks)
        state.writes_since_optimize = 0
        state.dirty_since = None
    log.info("optimized the index", extra={"fields": {"seconds": time.perf_counter() - started}})
