"""Gateway settings (environment only)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from libs.settings import CommonSettings


def _split(value: object, sep: str = ",") -> list[str]:
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return [str(v).strip() for v in value if str(v).strip()]
    return [part.strip() for part in str(value).split(sep) if part.strip()]


class GatewaySettings(CommonSettings):
    max_upload_bytes: int = Field(default=100 * 1024 * 1024, ge=1)
    max_file_bytes: int = Field(default=200 * 1024 * 1024, ge=1)
    fetch_max_bytes: int = Field(default=50 * 1024 * 1024, ge=1)
    fetch_timeout_s: float = Field(default=30.0, gt=0)
    fetch_max_redirects: int = Field(default=5, ge=0, le=20)
    url_allow_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    ingest_roots: Annotated[list[Path], NoDecode] = Field(default_factory=list)
    auth_token: Annotated[list[str], NoDecode] = Field(default_factory=list)
    read_only_token: Annotated[list[str], NoDecode] = Field(default_factory=list)
    allow_unauthenticated_remote: bool = False
    allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list)
    allowed_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    embed_batch_texts: int = Field(default=64, ge=1, le=4096)
    embed_timeout_per_text_s: float = Field(default=0.5, ge=0)
    embed_cache_texts: int = Field(default=20_000, ge=0)
    job_concurrency: int = Field(default=1, ge=1, le=16)
    job_retention_days: float = Field(default=7.0, gt=0)
    transport: str = "sse"

    @field_validator(
        "url_allow_hosts",
        "auth_token",
        "read_only_token",
        "allowed_hosts",
        "allowed_origins",
        mode="before",
    )
    @classmethod
    def _comma_list(cls, value: object) -> list[str]:
        return _split(value)

    @field_validator("ingest_roots", mode="before")
    @classmethod
    def _roots(cls, value: object) -> list[Path]:
        return [Path(p).expanduser() for p in _split(value, os.pathsep)]
