"""The one place the store reaches inside LanceDB: the async handle of a sync table.

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
"""

from __future__ import annotations

from lancedb.table import AsyncTable, Table


def async_handle(table: Table) -> AsyncTable:
    """The `AsyncTable` inside `table`: the same handle, not a second one opened beside it."""
    handle = table._table  # type: ignore[attr-defined]
    if not isinstance(handle, AsyncTable):
        raise TypeError(f"LanceDB's Table._table is a {type(handle).__name__}, not an AsyncTable")
    return handle
