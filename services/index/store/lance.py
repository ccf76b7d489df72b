"""The one place the store reaches inside LanceDB: the async handle of a sync table, the
size of Lance's compute pool (`size_compute_pool`), and why a LanceDB call once started runs
to its end.

The store writes through LanceDB's synchronous API (in worker threads, under its write lock)
and reads through the asynchronous one (awaited on the service's loop, see `snapshot`). A
search must see this process's own writes the moment they are acknowledged, without paying
for a freshness check on every query. A sync `Table` wraps an `AsyncTable`, and a write
through the one moves the other at once because they are the same object; LanceDB does not
expose it, so it is read from `Table._table` here.

The public alternatives fall short (measured with lancedb 0.40, pinned in pyproject.toml):
- a second handle from `lancedb.connect_async` with the same session and
  `read_consistency_interval` sees the sync handle's writes only once that interval passed;
- with an interval of 0 it sees them at once, but checks for a newer version on every call:
  about 0.1 ms more per call on a local disk, a request per call on object storage, and a
  search makes five calls or more (version checks, two legs, the read of the picks);
- moving every write to the async API would put the writer on the service's loop.
If LanceDB renames the attribute, `async_handle` fails loudly and every search test fails.

Every LanceDB call the store awaits goes through `libs.tasks.to_the_end`: a caller cancelled
meanwhile (a search whose query vector failed, an MCP request cancelled in the stdio server)
stops waiting, and the call finishes. Cancelling the Python side of a LanceDB call drops its
Rust future wherever it is, and a full-text query dropped while Lance loads the table's
full-text index (the first one of a store in a process) left every later query of the table,
and the next fold, waiting forever: 6 in 10 cancelled 0.6 to 1.5 ms in (lancedb 0.40,
pylance 13; `tests/integration/test_index_cancelled_reads.py`). A test reads the store's
source for a bare await (`tests/unit/test_lance_calls.py`).
"""

from __future__ import annotations

import os

from lancedb.table import AsyncTable, Table

from libs.cpus import usable_cores


def async_handle(table: Table) -> AsyncTable:
    """The `AsyncTable` inside `table`: the same handle, not a second one opened beside it."""
    handle = table._table  # type: ignore[attr-defined]
    if not isinstance(handle, AsyncTable):
        raise TypeError(f"LanceDB's Table._table is a {type(handle).__name__}, not an AsyncTable")
    return handle


# Lance's own default for its compute pool reserves two cores for I/O and keeps at least one.
_IO_CORES = 2


def compute_threads(setting: int, cores: int) -> int:
    """The compute pool's size for `INDEX_CPU_THREADS` = `setting` on `cores` usable cores
    (`libs.cpus`, a container's CPU limit included): the setting, or for 0 every core up to
    two and every core less two beyond four."""
    if setting:
        return setting
    return max(min(cores, _IO_CORES), cores - _IO_CORES)


def size_compute_pool(setting: int) -> str:
    """Size Lance's compute pool, which runs the CPU work of searches (each leg of a hybrid
    search), index builds and compaction; the size in effect (LANCE_CPU_THREADS).

    Lance reads LANCE_CPU_THREADS once per process, when its first compute task starts, and
    without it takes every core less two and at least one: one thread on two or three cores,
    so a hybrid search's full-text and vector legs run one after the other even when the
    other core is idle (at a million chunks on two cores, 19.5 ms for the two legs side by
    side with one thread, 16.9 ms with two; docs/benchmarks.md). A LANCE_CPU_THREADS already
    in the environment is kept, and a pool already running keeps its size. The variable is
    set in this process's environment, the only place Lance reads it, so processes started
    from this one inherit it (an index process starts none)."""
    threads = compute_threads(setting, usable_cores())
    return os.environ.setdefault("LANCE_CPU_THREADS", str(threads))
