"""The rows a search picked, read by row id at the version its legs saw, through Lance's
own dataset API rather than LanceDB's.

A search's legs return row ids and scores; the columns a hit shows are then read for the
ten or so rows picked (`search.materialize`). LanceDB's `take_row_ids` plans each such read
as a query; Lance's `_take_rows` reads the rows straight away. Measured on the million-chunk
table of `bench.scale` (lancedb 0.40 and pylance 13, pinned in pyproject.toml; ten random
rows, the hit's columns and the vector, p50 of 150): 4.36 ms through LanceDB's async API,
1.84 ms through Lance's in a worker thread. `_take_rows` is marked unstable in Lance; if it
is renamed, `PickedRows.read` fails loudly and every search test fails.

A search's legs may see a fold that committed after the version was read; their rows then
lie in fragments that version lacks, which Lance fails on (or panics on, when the ids are not
in order). They are checked first: `RowsNotAtVersion` voids the read, which runs again.

The dataset handle is opened once (with bounded caches of its own: Lance's and LanceDB's
sessions cannot be shared) and moved to each version a search reads (`checkout_version`,
which keeps its caches), so a read costs no manifest load while the table stands still.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from lancedb.table import Table

if TYPE_CHECKING:  # `lance` is imported by `Table.to_lance` when a store first reads rows:
    # importing it registers a warning at every fork of the process, tests' and git's too.
    from lance import LanceDataset

# A read by row id uses no index; the file metadata is what this handle caches.
_INDEX_CACHE_BYTES = 1024 * 1024


class RowsNotAtVersion(Exception):
    """Rows asked for at a version whose fragments do not hold them: the legs that picked
    them saw a later version (a fold committed between the read of the version and the
    legs). `snapshot.in_one_version` then finds the version moved and reads again."""


class PickedRows:
    """Reads rows by row id at one version of a table; see the module docstring. Safe to
    call from several worker threads at once."""

    def __init__(self, metadata_cache_mb: int) -> None:
        self._metadata_cache_bytes = metadata_cache_mb * 1024 * 1024
        self._lock = threading.Lock()
        # The table handle the dataset was opened for, the dataset at the last version read,
        # and the ids of that version's fragments.
        self._opened: tuple[Table, LanceDataset, frozenset[int]] | None = None

    def read(
        self, table: Table, version: int, row_ids: list[int], columns: list[str]
    ) -> list[dict[str, Any]]:
        """The rows `row_ids` of `table` at `version`, each with `columns` and `_rowid`;
        `RowsNotAtVersion` when one of them is in a fragment `version` does not have (Lance
        would fail the read, or panic when the ids are not in order). Blocks: call it in a
        worker thread."""
        dataset, fragments = self._at(table, version)
        # Without stable row ids (the tables have none), a row id is its fragment's id in the
        # high 32 bits and its offset in the low ones.
        strangers = {row_id >> 32 for row_id in row_ids} - fragments
        if strangers:
            raise RowsNotAtVersion(
                f"rows of fragments {sorted(strangers)} asked for at version {version}"
            )
        found = dataset._take_rows(row_ids, columns=[*columns, "_rowid"])
        rows: list[dict[str, Any]] = found.to_pylist()
        return rows

    def _at(self, table: Table, version: int) -> tuple[LanceDataset, frozenset[int]]:
        with self._lock:
            opened = self._opened
        if opened is not None and opened[0] is table and opened[1].version == version:
            return opened[1], opened[2]
        if opened is None or opened[0] is not table:
            dataset = table.to_lance(
                metadata_cache_size_bytes=self._metadata_cache_bytes,
                index_cache_size_bytes=_INDEX_CACHE_BYTES,
            )
        else:
            dataset = opened[1]
        if dataset.version != version:
            dataset = dataset.checkout_version(version)
        fragments = frozenset(fragment.fragment_id for fragment in dataset.get_fragments())
        with self._lock:
            self._opened = (table, dataset, fragments)
        return dataset, fragments
