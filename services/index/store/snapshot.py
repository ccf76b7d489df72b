"""Reads that see one version of a table, through LanceDB's async API on the caller's loop.

A search queries the chunks table several times (two legs, then the picked rows by row id,
and row ids mean something only within one version); a document listing counts and then
reads a page. `in_one_version` runs such a read and checks that the table's version did not
move while it ran. Awaited on the caller's loop, each query costs no hand-over to a worker
thread and back (on 2 cores each is a wake-up that costs more than planning the query it
carries). A write landing in the middle voids the read, which runs again; after
`READ_ATTEMPTS` such writes the read waits for the write lock in a worker thread, which holds
it while the read runs on the loop (writes take tens of milliseconds, so this is rare and
short).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio.from_thread
import anyio.to_thread
from lancedb.table import AsyncTable, Table

from libs.tasks import to_the_end
from services.index.store import lance
from services.index.store.state import StoreState

T = TypeVar("T")

READ_ATTEMPTS = 3


async def in_one_version(
    state: StoreState, table: Table, read: Callable[[AsyncTable, int], Awaitable[T]]
) -> T:
    """Run `read` (given the async handle of `table` and the version it runs against) so
    that every query in it sees one version of `table`. Must be awaited in an anyio-managed
    event loop (the service's, or a test's)."""
    handle = lance.async_handle(table)
    for _ in range(READ_ATTEMPTS):
        before = await to_the_end(handle.version())
        try:
            result = await read(handle, before)
        except Exception:
            if await to_the_end(handle.version()) == before:
                raise
            continue  # a write landed in the middle: the row ids read are void
        if await to_the_end(handle.version()) == before:
            return result

    async def current() -> T:
        return await read(handle, await to_the_end(handle.version()))

    def locked() -> T:
        with state.write_lock:
            return anyio.from_thread.run(current)

    return await anyio.to_thread.run_sync(locked)
