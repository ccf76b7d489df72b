"""The pieces of `bench.ingest_rate` and `bench.chunking` that decide what is counted: the raw
model's full windows, the Prometheus sample read from the embedder, and the cache that lets
the chunking benchmark embed each distinct text once."""

from __future__ import annotations

import asyncio

import numpy as np

from bench.chunking import CachedEmbedder, parse_setting
from bench.ingest_rate import MODEL_TOKENS, full_windows, metric_sum, text_tokens
from libs.contracts import EmbedKind
from libs.modelfiles import bundled_tokenizer
from libs.vectors import Matrix

PROSE = (
    "The patients were followed for a median of five years. "
    "Incidence of the primary outcome was lower in the treated group, "
    "and the difference held after adjustment for age and sex. "
) * 60


def test_full_windows_fill_the_model_and_cover_the_text() -> None:
    texts = [PROSE, "A short one.", PROSE[:700]]
    windows = full_windows(texts)
    tokenizer = bundled_tokenizer()
    sizes = [len(tokenizer.encode(w).ids) for w in windows]
    # Every window fits the model with [CLS] and [SEP]; all but each text's last are full.
    assert max(sizes) <= MODEL_TOKENS
    long_windows = [s for s in sizes if s == MODEL_TOKENS]
    assert len(long_windows) >= text_tokens([PROSE]) // (MODEL_TOKENS - 2) - 1
    # No text is lost or repeated: the windows hold the text's tokens once each.
    assert abs(text_tokens(windows) - text_tokens(texts)) <= len(windows)
    assert windows[-1].endswith(PROSE[:700].rstrip()[-20:])


def test_metric_sum_reads_one_labelled_sample() -> None:
    text = (
        "# HELP mvdb_embed_seconds Seconds per embed request\n"
        'mvdb_embed_seconds_sum{kind="query"} 1.5\n'
        'mvdb_embed_seconds_sum{kind="document"} 42.25\n'
    )
    assert metric_sum(text, "mvdb_embed_seconds_sum", 'kind="document"') == 42.25
    assert metric_sum(text, "mvdb_embed_seconds_count", 'kind="document"') == 0.0


class _Counting:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed(self, texts: list[str], kind: EmbedKind) -> Matrix:
        self.calls.append(list(texts))
        return np.array([[float(len(t)), 1.0 if kind == "query" else 0.0] for t in texts])


def test_cached_embedder_embeds_each_text_once_per_kind() -> None:
    inner = _Counting()
    cached = CachedEmbedder(inner)

    async def run() -> tuple[Matrix, Matrix, Matrix]:
        first = await cached.embed(["aa", "b"], "document")
        second = await cached.embed(["b", "ccc", "aa"], "document")
        query = await cached.embed(["b"], "query")
        return first, second, query

    first, second, query = asyncio.run(run())
    assert inner.calls == [["aa", "b"], ["ccc"], ["b"]]
    assert cached.embedded_texts == 4
    assert second.tolist() == [[1.0, 0.0], [3.0, 0.0], [2.0, 0.0]]
    assert first.tolist() == [[2.0, 0.0], [1.0, 0.0]]
    assert query.tolist() == [[1.0, 1.0]]


def test_settings_parse() -> None:
    assert parse_setting("256:32") == (256, 32)
    assert parse_setting("192") == (192, 0)
