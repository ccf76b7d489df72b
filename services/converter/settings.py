"""Converter settings, read from the environment only (see the README's table)."""

from __future__ import annotations

from pydantic import Field

from libs.settings import CommonSettings


class ConverterSettings(CommonSettings):
    max_convert_bytes: int = Field(
        default=100 * 1024 * 1024,
        ge=1,
        description="Largest file (or /chunk body) the converter accepts, in bytes; larger is 413",
    )
    converter_workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Conversion worker processes kept running (each holds markitdown and its "
        "parsers, about 0.2 GB); on 2 cores the embedder, not conversion, limits ingestion",
    )
    converter_worker_start_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="How long a request waits for a worker process to be ready before failing",
    )
    converter_max_tasks_per_worker: int = Field(
        default=500,
        ge=0,
        description="Replace a worker process after this many jobs (bounds leaks); 0 = never",
    )
    archive_max_entries: int = Field(
        default=1000, ge=1, description="Most entries a ZIP (or Office/EPUB container) may hold"
    )
    archive_max_uncompressed_bytes: int = Field(
        default=256 * 1024 * 1024,
        ge=1,
        description="Most bytes a ZIP (or Office/EPUB container) may expand to, nested included",
    )
    archive_max_depth: int = Field(
        default=2, ge=1, le=8, description="Deepest nesting of ZIP archives inside ZIP archives"
    )
