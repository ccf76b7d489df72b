"""Converter settings, read from the environment only (see the README's table)."""

from __future__ import annotations

from pydantic import Field, field_validator

from libs.encodings import canonical
from libs.settings import CommonSettings
from services.converter.charset import DEFAULT_LEGACY


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
    text_legacy_encoding: str = Field(
        default=DEFAULT_LEGACY,
        description="Encoding a text file that is not UTF-8 is read with when the detector "
        "finds it as likely as its own pick (the hosts' ANSI code page: cp1252 Western, "
        "cp1250 Central European, cp1257 Baltic, ...)",
    )

    @field_validator("text_legacy_encoding")
    @classmethod
    def _known_encoding(cls, value: str) -> str:
        try:
            return canonical(value)
        except LookupError:
            raise ValueError(
                f"TEXT_LEGACY_ENCODING={value!r} is not an encoding Python knows; give a code "
                "page such as cp1252, cp1250 or iso8859-15"
            ) from None
