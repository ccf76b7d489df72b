"""Maintenance: compacting small files and folding new rows into the text and vector
indexes (`optimize`), due after `INDEX_OPTIMIZE_EVERY_WRITES` writes or
`INDEX_OPTIMIZE_INTERVAL_S` seconds after the first unoptimized write, or as soon as writes
have paused for `INDEX_OPTIMIZE_QUIET_S`. Rows not yet folded are still searched (exactly),
so maintenance only keeps searches fast: until it runs, every write's small fragment is read
on its own and its rows are scanned flat (measured after a 60-document ingest: index search
p50 28.8 ms before an optimize of 0.2 s, 11.3 ms after).

A fold does not hold writes up. It takes the write lock only to start (the guard's look at
the tables, the write count it folds) and to finish (recording its commits with the writer
guard); Lance's optimize and a vector-index build run in between on table handles of the
fold's own, while writes go on. Lance commits optimistically and rebases: an append, delete
or merge that lands during a compaction or an index commit is kept (and its rows, not yet in
the indexes, are searched exactly until the next fold); a compaction whose rewritten rows a
write deleted meanwhile fails, leaving the table as it was, and is tried again from the
latest version (`_fold_with_retries`), nothing lost. At a million
chunks a fold took 10 s to 2 minutes, every write waiting, while it held the lock
(docs/benchmarks.md). The writer guard takes the fold's commits as this process's
(`writer_guard.folding`), and still catches a foreign writer's.

A fold's cost grows with the table, not with the rows it folds in: merging 500 new rows into
the full-text index of a million chunks took 3 s (the vector index's part and the
compaction, 0.2 s), and in `bench.scale` two such folds ran beside an ingest of 120
documents that took 15-16 s. So after a fold of F seconds the next automatic one waits at
least `FOLD_REST` x F: folds take at most a fifth of the time, while at ten thousand chunks
(folds of 0.1-0.5 s) the quiet rule still decides.

The documents table is folded on its own, and far more often (`documents_due`): a replace
adds two small fragments to it (the pending row, then the live one) and scans it twice (the
source's rows, then `publish`'s merge), so between two folds of the whole store its scans
went over hundreds of fragments (a replace's two scans 23 -> 60 ms over 400 writes, measured
in docs/benchmarks.md). It has no index, but Lance's compaction rewrites every fragment under
a million rows, so each fold rewrites the whole table, Markdown included (26 MB in 0.3 s
here): the same rest applies, after a documents fold of F seconds the next waits FOLD_REST x F.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection
from datetime import timedelta

from lancedb.table import Table

from libs.malloc import release_free_memory
from services.index.store import ann
from services.index.store.schema import CHUNKS
from services.index.store.state import StoreState
from services.index.store.tables import both

log = logging.getLogger(__name__)

# Tries of one table's fold against writes that keep deleting rows it rewrites; after them
# the fold fails and the maintenance task tries again an interval later.
_FOLD_ATTEMPTS = 3
# A fold's cleanup keeps the versions made since it began, and this much more, whatever
# INDEX_VERSION_RETENTION_S says: the writer guard compares the writes' versions with the
# fold's (`writer_guard.folding`), and a reader process may still be reading a version
# from before its last look at the writer's commits (at most a minute ago,
# INDEX_READ_CONSISTENCY_S); the next fold removes them.
_KEEP_S = 120.0
# After a fold of F seconds the next automatic one waits FOLD_REST x F (module docstring).
FOLD_REST = 4.0
# The documents table alone is folded after this many writes (module docstring).
DOCUMENTS_EVERY = 64


def seconds_until_due(state: StoreState) -> float | None:
    """Seconds until an optimize is due if no other write comes, never before the last
    fold's rest is over (`FOLD_REST`); None while every write is folded in, and while
    writes are refused (`writer_guard`)."""
    if state.dirty_since is None or state.guard.conflict is not None:
        return None
    settings = state.settings
    now = time.monotonic()
    if state.writes_since_optimize >= settings.index_optimize_every_writes:
        wait = 0.0
    else:
        wait = settings.index_optimize_interval_s - (now - state.dirty_since)
        if settings.index_optimize_quiet_s:
            wait = min(wait, settings.index_optimize_quiet_s - (now - state.last_write))
    return max(0.0, wait, state.fold_rest_until - now)


def optimize_due(state: StoreState) -> bool:
    return seconds_until_due(state) == 0.0


def documents_due(state: StoreState) -> bool:
    """Whether the documents table alone is due a fold (module docstring)."""
    return (
        state.documents_writes >= DOCUMENTS_EVERY
        and state.guard.conflict is None
        and time.monotonic() >= state.documents_rest_until
    )


def optimize(state: StoreState, only: Collection[str] | None = None) -> None:
    """Compact small files and fold new rows into the indexes, incrementally; build the
    vector index when the table has grown enough (`ann.maybe_build`) and merge its delta
    segments when they are many (`ann.merge_deltas`). Writes go on
    meanwhile (see the module docstring); one fold runs at a time. `only` limits it to
    those tables (the documents table's own fold)."""
    retention = timedelta(seconds=state.settings.index_version_retention_s)
    with state.fold_lock, state.guard.folding():
        with state.write_lock:
            folded = [(n, t) for n, t in both(state) if only is None or n in only]
            state.guard.check(both(state))
            state.guard.remember(folded)
            names = [name for name, table in folded if table is not None]
            # The writes this fold takes in; those landing while it runs wait for the next.
            taken, documents_taken = state.writes_since_optimize, state.documents_writes
        began, started = time.monotonic(), time.perf_counter()
        try:
            for name in names:
                table = state.db.open_table(name)
                # The versions written since the fold began stay for the guard to read.
                keep = max(retention, timedelta(seconds=time.monotonic() - began + _KEEP_S))
                _fold_with_retries(name, table, keep)
                if name == CHUNKS:
                    ann.maybe_build(state, table)
                    ann.merge_deltas(state, table)
                    ann.read_held_partitions(state, table)
        finally:
            with state.write_lock:
                # Brings the write handles to the fold's last commits and records them.
                state.guard.check(both(state))
        with state.write_lock:
            state.documents_writes = max(0, state.documents_writes - documents_taken)
            if only is None:
                _folded(state, taken, began)
    if only is None and state.chunks is not None:
        ann.prewarm(state.settings, state.chunks)
    # The fold's buffers are freed; their pages go back to the system (`libs.malloc`).
    release_free_memory()
    took = time.perf_counter() - started
    rest_until = time.monotonic() + FOLD_REST * took
    if only is None:
        state.fold_rest_until = rest_until
        log.info("optimized the index", extra={"fields": {"seconds": took}})
    else:
        state.documents_rest_until = rest_until
        log.debug("folded the documents table", extra={"fields": {"seconds": took}})


def _folded(state: StoreState, writes: int, began: float) -> None:
    """A fold that began at `began` took in `writes` writes: those that came while it ran
    are still to fold (the first of them no earlier than `began`)."""
    state.writes_since_optimize = max(0, state.writes_since_optimize - writes)
    state.dirty_since = began if state.writes_since_optimize else None


def _fold_with_retries(name: str, table: Table, retention: timedelta) -> None:
    """`fold_table` from the latest version, again when it fails: a compaction loses to a
    write that deleted some of the rows it rewrote meanwhile (Lance: "retryable commit
    conflict"), and the next try plans from that write's version. Lance's optimize is
    incremental, so a retry redoes only what the failed try did not commit."""
    for attempt in range(1, _FOLD_ATTEMPTS + 1):
        table.checkout_latest()  # type: ignore[no-untyped-call]
        try:
            fold_table(table, retention)
            return
        except Exception as exc:
            if attempt == _FOLD_ATTEMPTS:
                raise
            log.warning(
                "a fold lost to a concurrent write; trying again",
                extra={"fields": {"table": name, "attempt": attempt, "error": str(exc)}},
            )


def fold_table(table: Table, retention: timedelta) -> None:
    """Lance's optimize of one table: compaction, the indexes' new rows folded in, versions
    older than `retention` removed; several commits."""
    table.optimize(cleanup_older_than=retention)
