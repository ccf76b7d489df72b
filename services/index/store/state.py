"""`StoreState`: the one object every part of the store shares. It holds the LanceDB
connection, the table handles (None until the tables exist), the locks, the model stamp,
the write bookkeeping maintenance reads, and the caches searches keep. The other modules
are functions over it; none of them keeps state of its own.

Locks: `write_lock` serialises writes (and the rare read that must wait for them, see
`snapshot`); `handles_lock` guards opening the tables, which readers may also trigger;
`fold_lock` lets one fold (`maintenance.optimize`) run at a time, beside the writes.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import lancedb
from lancedb.table import Table

from libs.malloc import limit_arenas
from services.index.settings import IndexSettings
from services.index.store import lance, location
from services.index.store.meta import ModelStamp
from services.index.store.picks import PickedRows
from services.index.store.schema import HIT_DOCUMENT_COLUMNS
from services.index.store.writer_guard import WriterGuard

# Enough for every document of a large library; an entry is a few hundred bytes.
_DOCUMENT_CACHE_SIZE = 20_000
# Filters are few per deployment; the cache is emptied when it grows past this anyway.
_SELECTIVITY_CACHE_SIZE = 256


class DocumentColumns:
    """The document-level columns of hits (`HIT_DOCUMENT_COLUMNS`) by doc_id, least recently
    used first out. A doc_id's row never changes (a replace writes a new doc_id), so an entry
    never goes stale; a deleted document's entry is dropped only to free the memory."""

    def __init__(self, size: int = _DOCUMENT_CACHE_SIZE) -> None:
        self._size = size
        self._entries: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, doc_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The cached entries of those of `doc_ids` that are cached."""
        found: dict[str, dict[str, Any]] = {}
        with self._lock:
            for doc_id in doc_ids:
                entry = self._entries.get(doc_id)
                if entry is not None:
                    self._entries.move_to_end(doc_id)
                    found[doc_id] = entry
        return found

    def remember(self, rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Keep the document columns of `rows` (each with a doc_id); the entries kept."""
        entries = {row["doc_id"]: {c: row[c] for c in HIT_DOCUMENT_COLUMNS} for row in rows}
        with self._lock:
            for doc_id, entry in entries.items():
                self._entries[doc_id] = entry
                self._entries.move_to_end(doc_id)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return entries

    @property
    def size(self) -> int:
        return self._size

    def forget(self, doc_id: str) -> None:
        with self._lock:
            self._entries.pop(doc_id, None)


class SelectivityCache:
    """The share of rows a filter keeps, per (table version, filter)."""

    def __init__(self, size: int = _SELECTIVITY_CACHE_SIZE) -> None:
        self._size = size
        self._shares: dict[tuple[int, str], float] = {}

    def get(self, version: int, where: str) -> float | None:
        return self._shares.get((version, where))

    def put(self, version: int, where: str, share: float) -> None:
        # Entries of older versions are never asked for again: dropping all is enough.
        if len(self._shares) >= self._size:
            self._shares.clear()
        self._shares[(version, where)] = share


class StoreState:
    """See the module docstring. Building it connects to LanceDB and opens nothing."""

    def __init__(self, settings: IndexSettings) -> None:
        self.settings = settings
        # For showing (`/info`, `server_info`, messages): without credentials.
        self.uri = location.shown_uri(settings)
        # A reader (INDEX_ROLE=reader) never writes: no table creation, upgrade, index
        # build, recovery or maintenance; it follows the writer's commits.
        self.read_only = settings.index_role == "reader"
        # A writer refuses to write once it sees a commit it did not make (`writer_guard`).
        self.guard = WriterGuard(self.uri, enabled=not self.read_only)
        lance.size_compute_pool(settings.index_cpu_threads)
        # One heap per usable core (`libs.malloc`); the service sets it before importing
        # LanceDB already, this is for the in-process store (stdio, the CLI).
        limit_arenas()
        # Bounded caches: Lance's defaults let index and manifest caches grow with every
        # table version a busy ingest writes.
        session = lancedb.Session(
            index_cache_size_bytes=settings.index_cache_mb * 1024 * 1024,
            metadata_cache_size_bytes=settings.index_metadata_cache_mb * 1024 * 1024,
        )
        self.db = location.connect(settings, session)
        self.write_lock = threading.RLock()
        self.handles_lock = threading.Lock()
        self.fold_lock = threading.Lock()
        self.documents: Table | None = None
        self.chunks: Table | None = None
        self.stamp: ModelStamp | None = None
        # When the tables were last looked for (monotonic), for the retry while none exist.
        self.last_open_attempt = 0.0
        # Documents whose chunks were committed but whose publish failed: finished first
        # thing on the next write, so a transient error does not wait for a restart.
        self.unpublished: set[str] = set()
        self.writes_since_optimize = 0
        # Writes since the documents table was last compacted (`maintenance.documents_due`).
        self.documents_writes = 0
        self.dirty_since: float | None = None
        self.last_write = 0.0
        # No automatic fold before this (monotonic): `maintenance.FOLD_REST`; the second for
        # the documents table's own.
        self.fold_rest_until = 0.0
        self.documents_rest_until = 0.0
        # IVF partitions of the vector index as built, 0 while vector search is exact; and
        # those it holds now, after Lance's folds joined and split them (`ann.nprobes`).
        self.ivf_partitions = 0
        self.held_partitions = 0
        # The chunks table's version a reader last followed (`tables.follow`).
        self.followed_version: int | None = None
        self.selectivity = SelectivityCache()
        self.hit_documents = DocumentColumns()
        self.picked_rows = PickedRows(settings.index_metadata_cache_mb)

    def note_write(self) -> None:
        """Count a committed write, for `maintenance.optimize_due`."""
        self.writes_since_optimize += 1
        self.documents_writes += 1
        self.last_write = time.monotonic()
        if self.dirty_since is None:
            self.dirty_since = time.monotonic()
