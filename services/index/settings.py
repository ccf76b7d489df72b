"""Settings of the index service, read from the environment only (built in the factory)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from libs.contracts import IndexRole
from libs.settings import CommonSettings


class IndexSettings(CommonSettings):
    # A bad value is reported by field and problem, never echoed: it may hold credentials.
    model_config = SettingsConfigDict(hide_input_in_errors=True)

    lancedb_uri: str = Field(
        default="./var/lancedb",
        description="Where LanceDB keeps the documents and chunks tables: a path, or an "
        "object-storage URI (s3://bucket/prefix, gs://bucket/prefix, az://container/prefix)",
    )
    lancedb_storage_options: Annotated[dict[str, str], NoDecode] = Field(
        default_factory=dict,
        description="Options of the object store at LANCEDB_URI, a JSON object of names to "
        'strings, e.g. {"endpoint": "http://127.0.0.1:9000", "region": "us-east-1", '
        '"allow_http": "true", "aws_access_key_id": "...", "aws_secret_access_key": "..."}; '
        "the standard AWS_*, GOOGLE_* and AZURE_* variables are read too. Secret values are "
        "never logged or shown",
    )
    index_role: IndexRole = Field(
        default="all",
        description="all: one index process reads and writes (the default); writer: the one "
        "process that writes a store that readers share; reader: a read-only replica of the "
        "store at LANCEDB_URI that serves searches and listings, refuses every write "
        "(read_only_replica, 405) and never runs maintenance or recovery",
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
        "a fold runs beside the writes but costs CPU and more as the table grows (10-20 s "
        "at a million chunks), so a busy ingest should not pay for it every few documents "
        "(unfolded rows are still searched)",
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
        default=120.0,
        ge=0,
        description="Optimize removes table versions older than this; a fold keeps those "
        "written since it began, and 2 minutes more. Every write looks at the versions kept, "
        "so a long ingest slows down as they pile up (a replace is three commits)",
    )
    index_read_consistency_s: float = Field(
        default=5.0,
        ge=0,
        description="How stale a read may be with respect to another process's writes: a "
        "reader checks for the writer's commits once this has passed (0 = on every read); a "
        "writer looks at the latest versions this often (at least every second)",
    )
    index_vector_index_min_rows: int = Field(
        default=10_000,
        ge=256,
        description="Build an approximate (IVF-RQ) vector index once the chunks table has this "
        "many rows; below it vector search is exact, at about 0.8 ms per 1,000 rows on 2 cores",
    )
    index_vector_nprobes: int = Field(
        default=60, ge=1, description="Fewest IVF partitions probed per query (unfiltered)"
    )
    index_vector_probe_share: float = Field(
        default=0.12,
        ge=0,
        le=1,
        description="...or this share of the partitions the index holds now, if more: a fresh "
        "build's fine partitions need the share, the coarser ones Lance's folds leave the "
        "minimum",
    )
    index_vector_refine_factor: int = Field(
        default=1,
        ge=1,
        description="Candidates re-ranked with exact distances, as a multiple of the limit "
        "(1: the limit's own, so every distance returned is exact)",
    )
    index_vector_deltas: int = Field(
        default=8,
        ge=1,
        description="Delta segments the vector index may hold before a fold merges them into "
        "one: each fold adds one, searched apart (about 0.3 ms a search each at a million "
        "chunks), and the fold after a merge compacts their rows",
    )
    index_cpu_threads: int = Field(
        default=0,
        ge=0,
        description="Threads of LanceDB's compute pool (search legs, index builds, compaction); "
        "0: every usable core up to two (a container's CPU limit counts), and every core less "
        "two on machines of more than four "
        "(LanceDB's own default is one thread on two or three cores, which runs a hybrid "
        "search's two legs one after the other). LANCE_CPU_THREADS, if set, wins",
    )
    index_cache_mb: int = Field(
        default=512, ge=8, description="LanceDB index cache (IVF partitions, FTS, B-trees), MiB"
    )
    index_metadata_cache_mb: int = Field(
        default=32, ge=4, description="LanceDB metadata cache (manifests, fragments), MiB"
    )
    index_max_body_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="Largest request body the HTTP API accepts (413 above it)",
    )
    index_staged_max_bytes: int = Field(
        default=128 * 1024 * 1024,
        ge=0,
        description="Most the parts of documents larger than one request may hold in memory "
        "until their writes, all uploads together (chunk text plus float32 vectors); a "
        "larger document is refused before embedding (0: none are taken)",
    )
    index_staged_ttl_s: float = Field(
        default=900.0,
        gt=0,
        description="Parts not followed by another part or their write within this many "
        "seconds are dropped (the gateway sends them again if it still writes)",
    )

    @field_validator("lancedb_storage_options", mode="before")
    @classmethod
    def _options_are_flat_strings(cls, value: Any) -> Any:
        """Accept a JSON object (text, from the environment) of names to strings, numbers or
        booleans; refuse anything else by name, without echoing values (they may be secret)."""
        if isinstance(value, str | bytes):
            try:
                value = json.loads(value) if value.strip() else {}
            except ValueError:
                raise ValueError(
                    "LANCEDB_STORAGE_OPTIONS is not valid JSON; give a JSON object such as "
                    '{"region": "us-east-1", "endpoint": "http://127.0.0.1:9000"}'
                ) from None
        if not isinstance(value, dict):
            raise ValueError(
                f"LANCEDB_STORAGE_OPTIONS must be a JSON object of option names to strings, "
                f"not a {type(value).__name__}"
            )
        options: dict[str, str] = {}
        for name, item in value.items():
            if not isinstance(name, str) or not name.strip():
                raise ValueError("LANCEDB_STORAGE_OPTIONS has an empty option name")
            if isinstance(item, bool):
                options[name] = "true" if item else "false"
            elif isinstance(item, str | int | float):
                options[name] = str(item)
            else:
                raise ValueError(
                    f"LANCEDB_STORAGE_OPTIONS option {name!r} must be a string, number or "
                    f"boolean, not a {type(item).__name__}"
                )
        return options
