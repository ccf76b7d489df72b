"""Index metrics: what is stored per library (read from the documents table at scrape time,
never from chunks), search time by mode, and index maintenance time."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from services.index.store import IndexStore

log = logging.getLogger(__name__)

SEARCH_SECONDS = Histogram(
    "mvdb_index_search_seconds",
    "Index search time by mode (both legs and fusion for hybrid)",
    ["mode"],
    buckets=(0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
)
OPTIMIZE_SECONDS = Histogram(
    "mvdb_index_optimize_seconds",
    "Time to fold new rows into the full-text and vector indexes",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)


class StoredCollector(Collector):
    """`mvdb_index_documents{library}` and `mvdb_index_chunks{library}` from the open store."""

    def __init__(self) -> None:
        self._store: weakref.ref[IndexStore] | None = None

    def watch(self, store: IndexStore | None) -> None:
        self._store = weakref.ref(store) if store is not None else None

    def collect(self) -> Iterator[Metric]:
        documents = GaugeMetricFamily(
            "mvdb_index_documents", "Documents stored", labels=["library"]
        )
        chunks = GaugeMetricFamily("mvdb_index_chunks", "Chunks stored", labels=["library"])
        store = self._store() if self._store is not None else None
        if store is not None:
            try:
                for lib in store.list_libraries().libraries:
                    documents.add_metric([lib.library], lib.document_count)
                    chunks.add_metric([lib.library], lib.chunk_count)
            except Exception:
                log.exception("could not read library counts for /metrics")
        yield documents
        yield chunks


STORED = StoredCollector()
REGISTRY.register(STORED)
