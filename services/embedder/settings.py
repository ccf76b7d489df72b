"""Embedder settings (environment only)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from libs.settings import CommonSettings


class EmbedderSettings(CommonSettings):
    embedding_model_path: Path | None = Field(
        default=None,
        description="Directory holding model.onnx and tokenizer files; empty = bundled model",
    )
    embed_batch_size: int = Field(default=32, ge=1, le=512)
    embed_threads: int | None = Field(default=None, ge=1, le=256)
    embed_max_texts: int = Field(default=4096, ge=1)
