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
    embed_batch_size: int = Field(
        default=4,
        ge=1,
        le=512,
        description="Texts per ONNX run; memory grows with it (model process peak with "
        "256-token texts: 0.41 GB at 4, 0.56 GB at 8, 0.86 GB at 16) while throughput on CPU "
        "stays within noise (20.7-22 texts/s at 1-16 on 2 cores)",
    )
    embed_coalesce_texts: int = Field(
        default=16,
        ge=1,
        le=4096,
        description="Texts per model call, gathered across concurrent requests; a search "
        "waits for at most one such call of an ongoing ingest",
    )
    embed_coalesce_wait_ms: float = Field(
        default=2.0,
        ge=0,
        le=1000,
        description="How long a lone document request waits for others to share its model "
        "call (queries never wait)",
    )
    embed_threads: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="ONNX threads of the document session in all (default: every core)",
    )
    embed_document_calls: int = Field(
        default=2,
        ge=1,
        le=64,
        description="Document model calls run at once, sharing EMBED_THREADS between them (2 "
        "on two cores: one thread each, the cores kept busier than by one call of two "
        "threads); memory grows by one call's working set for each",
    )
    embed_spin_threads: bool = Field(
        default=False,
        description="Let ONNX Runtime's threads spin-wait between model calls: no faster here, "
        "and the CPU it burns is what the other services need during an ingest",
    )
    embed_query_session: bool = Field(
        default=True,
        description="A second ONNX session for queries, so that a search is embedded beside "
        "a running document batch instead of after it (about 110 MB more memory)",
    )
    embed_query_threads: int | None = Field(
        default=1,
        ge=1,
        le=256,
        description="ONNX threads of the query session (a query is a few dozen tokens)",
    )
    embed_query_int8: bool = Field(
        default=True,
        description="The query session runs the model's matrix products on 8-bit weights with "
        "int8 arithmetic (a graph derived once at start and kept under VAR_DIR/models): about "
        "20 % faster a query, vectors within cosine 0.998 of the model's own; documents always "
        "use the model's own graph",
    )
    embed_max_texts: int = Field(default=4096, ge=1)
    embed_max_body_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=1024,
        description="Largest request body the HTTP API accepts (413 above it)",
    )
