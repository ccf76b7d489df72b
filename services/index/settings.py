"""Settings of the index service, read from the environment only (built in the factory)."""

from __future__ import annotations

from pydantic import Field

from libs.settings import CommonSettings


class IndexSettings(CommonSettings):
    lancedb_uri: str = Field(
        default="./var/lancedb",
        description="Where LanceDB keeps the documents and chunks tables (a path or URI)",
    )
    index_rrf_k: int = Field(
        default=60,
        ge=1,
        le=10_000,
        description="Reciprocal rank fusion constant k: score = sum of 1 / (k + rank)",
    )
    index_candidates_min: int = Field(
        default=50,
        ge=1,
        le=10_000,
        description="Fewest candidates each search leg (full-text, vector) fetches",
    )
    index_candidates_per_result: int = Field(
        default=4,
        ge=1,
        le=100,
        description="Each leg fetches max(INDEX_CANDIDATES_MIN, this x top_k) candidates",
    )
    index_optimize_every_writes: int = Field(
        default=500,
        ge=1,
        description="Fold new rows into the indexes (optimize) after this many writes; "
        "optimize holds the write lock and costs more as the table grows, so a busy ingest "
        "should not pay for it every few documents (unfolded rows are still searched)",
    )
    index_optimize_interval_s: float = Field(
        default=60.0,
        gt=0,
        description="...or this many seconds after the first unoptimized write",
    )
    index_optimize_quiet_s: float = Field(
        default=2.0,
        ge=0,
        description="...or as soon as no write has come for this many seconds (0 = never): "
        "the searches after an ingest then read compacted, indexed rows instead of every "
        "small write's fragment",
    )
    index_version_retention_s: float = Field(
        default=3600.0,
        ge=0,
        description="Optimize removes table versions older than this (time travel window)",
    )
    index_read_consistency_s: float = Field(
        default=5.0,
        ge=0,
        description="How stale a read may be with respect to another process's writes "
        "(0 = check on every read)",
    )
    index_vector_index_min_rows: int = Field(
        default=10_000,
        ge=256,
        description="Build an approximate (IVF-SQ) vector index once the chunks table has this "
        "many rows; below it vector search is exact, at about 0.8 ms per 1,000 rows on 2 cores",
    )
    index_vector_nprobes: int = Field(
        default=20, ge=1, description="IVF partitions probed per query (unfiltered)"
    )
    index_vector_refine_factor: int = Field(
        default=2,
        ge=1,
        description="Candidates re-ranked with exact distances, as a multiple of the limit",
    )
    index_cache_mb: int = Field(
        default=256, ge=8, description="LanceDB index cache (IVF partitions, FTS, B-trees), MiB"
    )
    index_metadata_cache_mb: int = Field(
        default=32, ge=4, description="LanceDB metadata cache (manifests, fragments), MiB"
    )
    index_max_body_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="Largest request body the HTTP API accepts (413 above it)",
    )
