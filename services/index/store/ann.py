"""The approximate vector index over `chunks.vector`: when it is built and built again, how
many partitions a query probes, and loading the search indexes into Lance's cache.

Below `INDEX_VECTOR_INDEX_MIN_ROWS` vector search is exact. Past it an IVF-RQ index
(RaBitQ, 4 bits a dimension; IVF-SQ for vectors whose width is not a multiple of 8: `config`)
with about sqrt(rows) partitions is built; `optimize` folds new rows into it incrementally
(rows not yet folded are searched exactly). Once sqrt(rows) reaches twice the partitions of
the build the index is built again (at 10k rows and then 40k, 160k, 640k...), its partitions
trained on the rows the table holds then. The build's partition count is recorded in `meta`,
since Lance's index statistics tell only what the index holds now.

The index a search reads has fewer, larger partitions than the build made: Lance's fold
(its SPFresh-style maintenance) joins partitions it finds too small, about 2,000 rows or
fewer, into their neighbours, and splits those grown far past its own target. The benchmark's
million-chunk table, built with 567 partitions at 322,000 rows, holds 203 of about 4,900 rows
after its folds, so 40 probes read about a fifth of the rows (docs/benchmarks.md). Searches
probe a share of the partitions the index holds now (`nprobes`), read after each fold.

RaBitQ's codes are half the size of 8-bit scalar quantization's (IVF-SQ, this index's kind
before 0.8.18), and Lance compares them faster. On the million-chunk table with 219
partitions, after ten folds and a merge of their segments, 60 probes of IVF-RQ found 0.983 of
the true ten nearest in 6.3 ms, where IVF-SQ's 40 found 0.975 in 9.6 ms; the index is 218
against 390 MB, and the process held about 200 MB less. IVF-RQ's 40 probes found 0.955-0.979
over three builds, hence a minimum of 60 probes (docs/benchmarks.md). An IVF-SQ index built by
an earlier release is searched as it is, and replaced by the next build as the table grows.

Each fold also leaves the rows it indexed in a delta segment of their own, and lancedb's
optimize never merges them: a search probes every segment apart, and each new fragment,
indexed by its own segment, is never compacted with the others. At a million chunks twenty
folds of 100 rows took the vector leg from 7 to 13-16 ms. So past `INDEX_VECTOR_DELTAS`
segments a fold merges them (`merge_deltas`, Lance's own index optimize: the rows keep their
partitions, nothing is trained, 0.1-0.3 s at a million chunks); the segment of the build
stays as it is, since one covering every fragment would have the next compaction rewrite
the whole table. The fold after a merge compacts the merged segment's fragments into one.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable

from lancedb.index import IndexConfig, IvfRq, IvfSq
from lancedb.table import AsyncTable, Table

from libs.tasks import to_the_end
from services.index.settings import IndexSettings
from services.index.store import meta
from services.index.store.schema import META
from services.index.store.state import StoreState

log = logging.getLogger(__name__)

# Lance's index statistics leave the centroids out (`read_held_partitions` reads only the
# partitions; at a million chunks the centroids are megabytes of JSON, and Lance warns each
# time it includes them by default).
os.environ.setdefault("LANCE_INCLUDE_VECTOR_CENTROIDS", "false")


async def nprobes(state: StoreState, table: AsyncTable, version: int, where: str | None) -> int:
    """IVF partitions to probe, 0 while vector search is exact: `INDEX_VECTOR_PROBE_SHARE` of
    the partitions the index holds now, or `INDEX_VECTOR_NPROBES` when that is more. Lance's
    folds join small partitions and split large ones, so the count a build made says little
    of the index later: a fresh build at 640,000 rows holds 800 partitions of 800 rows, one
    of 1,000 at a million rows held 451 after a few folds (`read_held_partitions`). Fine partitions
    need the share (of a fresh build's 800, 96 found 0.99 of the true ten nearest, 48
    0.92-0.97), coarse ones the minimum (docs/benchmarks.md). More when a filter keeps few
    rows, since the nearest allowed rows may then sit in partitions the default probes miss."""
    if not state.ivf_partitions:
        return 0
    settings = state.settings
    partitions = state.held_partitions or state.ivf_partitions
    probes = max(
        settings.index_vector_nprobes, math.ceil(settings.index_vector_probe_share * partitions)
    )
    if where:
        probes = math.ceil(probes / await _selectivity(state, table, version, where))
    return min(probes, partitions)


async def _selectivity(state: StoreState, table: AsyncTable, version: int, where: str) -> float:
    """Share of rows a filter keeps, counted once per table version and filter."""
    share = state.selectivity.get(version, where)
    if share is None:
        total = max(await to_the_end(table.count_rows()), 1)
        share = max(await to_the_end(table.count_rows(where)), 1) / total
        state.selectivity.put(version, where, share)
    return share


def partitions_for(rows: int) -> int:
    return max(16, int(math.sqrt(rows)))


# Bits a dimension in the index's RaBitQ codes: 4 kept recall per probe where 8-bit scalar
# quantization had it; 2 (a 125 MB index at a million chunks) needed twice the refine for it,
# and 1 (69 MB) five times (docs/benchmarks.md).
RQ_BITS = 4


def config(partitions: int, dim: int) -> IvfRq | IvfSq:
    """What a build of the vector index over vectors of `dim` floats asks of LanceDB: IVF-RQ,
    or IVF-SQ where Lance's RaBitQ cannot pack the codes (a width not a multiple of 8; the
    models the embedder knows give 384 and 768)."""
    if dim % 8:
        return IvfSq(distance_type="cosine", num_partitions=partitions)
    return IvfRq(distance_type="cosine", num_partitions=partitions, num_bits=RQ_BITS)


def vector_width(chunks: Table) -> int:
    """The floats a stored vector holds."""
    width: int = chunks.schema.field("vector").type.list_size
    return width


def maybe_build(state: StoreState, chunks: Table) -> None:
    """Build the index past the threshold, or again once the table has outgrown it (see the
    module docstring). Runs from `optimize`, on its own handle of the chunks table and
    without the write lock (a build at a million rows takes a minute or two, and an index
    commit does not conflict with the appends and deletes landing meanwhile: the rows they
    add are searched exactly until the next fold); the partition count is recorded under
    the lock."""
    rows = chunks.count_rows()
    if rows < state.settings.index_vector_index_min_rows:
        return
    partitions = partitions_for(rows)
    if state.ivf_partitions and partitions < 2 * state.ivf_partitions:
        return
    started = time.perf_counter()
    chunks.create_index("vector", config=config(partitions, vector_width(chunks)))
    with state.write_lock:
        before, state.ivf_partitions = state.ivf_partitions, partitions
        state.guard.refuse_if_conflicted()
        record, made = meta.record(state.db, meta.IVF_PARTITIONS_KEY, str(partitions))
        state.guard.committed(META, record, made)
    log.info(
        "rebuilt the approximate vector index" if before else "built the approximate vector index",
        extra={
            "fields": {
                "rows": rows,
                "partitions": partitions,
                "previous_partitions": before,
                "seconds": round(time.perf_counter() - started, 2),
            }
        },
    )


def merge_deltas(state: StoreState, chunks: Table) -> None:
    """Merge the vector index's delta segments into one once there are more than
    `INDEX_VECTOR_DELTAS` of them (see the module docstring). Runs from `optimize`, after
    the fold, on the fold's handle; an index commit, as the fold's own are. A merge that
    fails (a commit conflict Lance could not rebase, the store unreachable) leaves the
    segments as they were for the next fold, and the fold itself stands."""
    name = vector_index_name(chunks)
    stats = chunks.index_stats(name) if name else None
    deltas = (stats.num_indices or 1) - 1 if stats else 0
    if name is None or deltas <= state.settings.index_vector_deltas:
        return
    started = time.perf_counter()
    try:
        # The segments merged are the latest `deltas`: every one but the build's.
        dataset = chunks.to_lance()
        dataset.optimize.optimize_indices(num_indices_to_merge=deltas, index_names=[name])
    except Exception:
        # Nothing is lost: the segments stay as they were, and the next fold tries again.
        log.warning("could not merge the vector index's delta segments", exc_info=True)
        return
    log.info(
        "merged the vector index's delta segments",
        extra={"fields": {"segments": deltas, "seconds": round(time.perf_counter() - started, 2)}},
    )


def vector_index_name(chunks: Table) -> str | None:
    """The name of the index on `vector`, None while there is none."""
    for index in chunks.list_indices():
        if _on_vector(index):
            return index.name
    return None


def _on_vector(index: IndexConfig) -> bool:
    """Whether `index` is the vector index, whatever its kind (IVF-RQ, or the IVF-SQ of an
    earlier release or of vectors RaBitQ cannot pack)."""
    return tuple(index.columns) == ("vector",)


def read_partitions(state: StoreState, chunks: Table) -> None:
    """The partitions of an existing vector index: those the build made, as recorded in
    `meta` (an index from a release that did not record them is taken to have about
    sqrt(rows)), and those it holds now (`read_held_partitions`)."""
    name = vector_index_name(chunks)
    if name is not None:
        recorded = meta.values(state.db).get(meta.IVF_PARTITIONS_KEY)
        state.ivf_partitions = int(recorded) if recorded else partitions_for(chunks.count_rows())
    state.held_partitions = _held(chunks, name)


def read_held_partitions(state: StoreState, chunks: Table) -> None:
    """The partitions the vector index holds now (after each fold, which joins and splits
    them)."""
    state.held_partitions = _held(chunks, vector_index_name(chunks))


def _held(chunks: Table, name: str | None) -> int:
    """The most partitions a segment of the index `name` holds, from Lance's index
    statistics (a few ms at a million chunks); 0 without an index or when they cannot be
    read, and the recorded count serves."""
    if name is None:
        return 0
    try:
        stats = chunks.to_lance().stats.index_stats(name)
    except Exception:
        log.warning("could not read the vector index's partitions", exc_info=True)
        return 0
    return max((int(s.get("num_partitions") or 0) for s in stats["indices"]), default=0)


# The share of the index cache (INDEX_CACHE_MB) that prewarming may fill; the rest is left
# to what searches read besides (the delta segments of the folds since, the B-trees).
PREWARM_SHARE = 0.75


def prewarm(settings: IndexSettings, chunks: Table) -> None:
    """Load the search indexes into Lance's cache, smallest first, as long as those loaded
    fit in `PREWARM_SHARE` of it, so the first searches after a start or an optimize do not
    read them piece by piece. A million chunks' full-text index (87 MB) and vector index
    (218 MB) both fit the default 512 MiB: a fresh index's first 100 searches took 15.8 ms
    at the median instead of 22.6 (docs/benchmarks.md, 0.8.20)."""
    try:
        indexes = [i for i in chunks.list_indices() if i.index_type == "FTS" or _on_vector(i)]
        load: Callable[[str], None] | None = getattr(chunks, "prewarm_index", None)
        if load is None:  # local tables have it
            return
        room = int(settings.index_cache_mb * 1024 * 1024 * PREWARM_SHARE)
        for index in sorted(indexes, key=_size):
            room -= _size(index)
            if room < 0:
                return
            load(index.name)
    except Exception:
        log.warning("could not prewarm the search indexes", exc_info=True)


def _size(index: IndexConfig) -> int:
    return int(getattr(index, "size_bytes", 0) or 0)
