"""Configuration shared by every service, read from the environment only (12-factor).

Each service's own `settings.py` extends `CommonSettings` with what only it needs. Settings
objects are built in the app factories, never at import time, so tests can pass their own.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"


class CommonSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", extra="ignore", case_sensitive=False)

    log_level: str = Field(default="INFO", description="Log level of every service")
    var_dir: Path = Field(default=Path("./var"), description="Where logs, pids and data live")

    bind_host: str = Field(default="127.0.0.1", description="Address the services listen on")
    gateway_port: int = 8000
    converter_port: int = 8001
    embedder_port: int = 8002
    index_port: int = 8003

    converter_url: str = "http://127.0.0.1:8001"
    embedder_url: str = "http://127.0.0.1:8002"
    index_url: str = "http://127.0.0.1:8003"

    embedding_model: str = Field(default=DEFAULT_MODEL)
    # 192 and 0 by the numbers (docs/benchmarks.md, "Chunk size and overlap"): on SciFact,
    # 192-token chunks gave hybrid nDCG@10 +0.019 over 256 (95 % interval +0.006..+0.033;
    # the same on long documents) for 0.3 % more tokens embedded, and 32 tokens of overlap
    # no better than none for 8.5 % more. The model itself takes up to 256.
    chunk_max_tokens: int = Field(default=192, ge=32, le=8192)
    chunk_overlap_tokens: int = Field(default=0, ge=0, le=512)

    http_timeout_s: float = Field(default=30.0, gt=0)
    convert_timeout_s: float = Field(default=120.0, gt=0)
    retry_attempts: int = Field(default=4, ge=1, le=20)
    retry_max_s: float = Field(default=30.0, gt=0)
