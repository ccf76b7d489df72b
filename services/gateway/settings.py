"""Gateway settings (environment only)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode

from libs.errors import InvalidInputError
from libs.settings import CommonSettings
from services.gateway.urls import check_url


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
    repo_max_bytes: int = Field(default=500 * 1024 * 1024, ge=1)
    repo_clone_timeout_s: float = Field(default=300.0, gt=0)
    job_concurrency: int = Field(default=1, ge=1, le=16)
    job_retention_days: float = Field(default=7.0, gt=0)
    transport: str = "sse"
    # Resumable streams on /mcp (services.gateway.resumption): the recent events kept; 0 = off.
    mcp_resume_buffer_bytes: int = Field(default=32 * 1024 * 1024, ge=0)
    # OAuth 2.1 (services.gateway.oauth): off unless OAUTH_ISSUER is set.
    public_url: str | None = None
    oauth_issuer: str | None = None
    oauth_audience: Annotated[list[str], NoDecode] = Field(default_factory=list)
    oauth_jwks_url: str | None = None
    oauth_read_scope: str = Field(default="mcpvectordb:read", min_length=1)
    oauth_write_scope: str = Field(default="mcpvectordb:write", min_length=1)
    oauth_libraries_claim: str | None = None
    # Index read replicas (services.gateway.replicas): off unless INDEX_READ_URLS is set.
    index_read_urls: Annotated[list[str], NoDecode] = Field(default_factory=list)
    index_read_consistency_s: float = Field(default=5.0, ge=0)
    index_read_margin_s: float = Field(default=1.0, ge=0)
    index_read_cooldown_s: float = Field(default=10.0, gt=0)
    index_read_timeout_s: float = Field(default=10.0, gt=0)

    @field_validator(
        "url_allow_hosts",
        "auth_token",
        "read_only_token",
        "allowed_hosts",
        "allowed_origins",
        "oauth_audience",
        mode="before",
    )
    @classmethod
    def _comma_list(cls, value: object) -> list[str]:
        return _split(value)

    @field_validator("index_read_urls", mode="before")
    @classmethod
    def _read_urls(cls, value: object) -> list[str]:
        """Each reader once, as an http(s) base URL with a host and nothing after the port."""
        urls = [url.rstrip("/") for url in _split(value)]
        for url in urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname or parts.query:
                raise ValueError(
                    f"INDEX_READ_URLS must be comma-separated base URLs of index readers such "
                    f"as http://127.0.0.1:8004,http://127.0.0.1:8005; {url!r} is not one"
                )
        repeated = sorted({url for url in urls if urls.count(url) > 1})
        if repeated:
            raise ValueError(
                f"INDEX_READ_URLS names {', '.join(repeated)} more than once; list each reader "
                "once (a Service in front of several pods is one URL)"
            )
        return urls

    @field_validator("ingest_roots", mode="before")
    @classmethod
    def _roots(cls, value: object) -> list[Path]:
        return [Path(p).expanduser() for p in _split(value, os.pathsep)]

    @field_validator("public_url", "oauth_issuer", "oauth_jwks_url", "oauth_libraries_claim")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @model_validator(mode="after")
    def _oauth(self) -> GatewaySettings:
        """OAuth's settings hang together: an audience with the issuer, https URLs (plain
        http only on loopback), a public URL with a scheme and host."""
        if self.public_url is not None:
            parts = urlsplit(self.public_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(
                    f"PUBLIC_URL must be the gateway's public base URL such as "
                    f"https://mcp.example.org, not {self.public_url!r}"
                )
        if self.oauth_issuer is None:
            return self
        if not self.oauth_audience:
            raise ValueError(
                "OAUTH_AUDIENCE is required with OAUTH_ISSUER: set it to the audience (aud) "
                "the authorization server puts in access tokens for this gateway, e.g. "
                "https://mcp.example.org/mcp (comma-separated for several)"
            )
        for setting, url in (
            ("OAUTH_ISSUER", self.oauth_issuer),
            ("OAUTH_JWKS_URL", self.oauth_jwks_url),
        ):
            if url is not None:
                try:
                    check_url(url, setting)
                except InvalidInputError as exc:
                    raise ValueError(exc.message) from exc
        if self.oauth_read_scope == self.oauth_write_scope:
            raise ValueError(
                "OAUTH_READ_SCOPE and OAUTH_WRITE_SCOPE must differ, or every reader could write"
            )
        return self
