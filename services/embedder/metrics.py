"""Embedder metrics: batch sizes and texts embedded, by kind (document or query)."""

from prometheus_client import Counter, Histogram

EMBED_BATCH = Histogram(
    "mvdb_embed_batch_size",
    "Texts per embed request",
    ["kind"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096),
)
EMBED_TEXTS = Counter("mvdb_embed_texts_total", "Texts embedded", ["kind"])
EMBED_SECONDS = Histogram(
    "mvdb_embed_seconds",
    "Seconds per embed request",
    ["kind"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
