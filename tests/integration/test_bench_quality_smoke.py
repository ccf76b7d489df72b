"""A few dozen SciFact documents through the quality benchmark's real path (ingest_content
pipeline, real model, real LanceDB), so `make bench-quality` keeps working."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.beir import load
from bench.quality import MODES, evaluate, render, subset
from tests.conftest import SCIFACT


@pytest.fixture
def isolated_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANCEDB_URI", str(tmp_path / "lancedb"))
    monkeypatch.setenv("VAR_DIR", str(tmp_path / "var"))
    assert os.environ["LANCEDB_URI"].startswith(str(tmp_path))


@pytest.mark.usefixtures("isolated_store")
async def test_quality_benchmark_smoke() -> None:
    if not (SCIFACT / "corpus.jsonl").is_file():
        pytest.skip(f"SciFact not found at {SCIFACT}")
    ds = subset(load(SCIFACT), max_docs=40, max_queries=12)
    assert 12 >= len(ds.queries) > 0 and len(ds.corpus) == 40
    report = await evaluate(ds, concurrency=4)
    assert report["documents"] == 40 and report["chunks"] >= 40
    for mode in MODES:
        metrics = report["modes"][mode]
        assert 0.0 <= metrics["ndcg@10"] <= 1.0
        # 40 documents hold every relevant one: each mode must find most of them.
        assert metrics["recall@100"] >= 0.8, (mode, metrics)
    assert report["modes"]["hybrid"]["ndcg@10"] >= 0.5
    assert "| hybrid |" in render("scifact-smoke", report)


@pytest.mark.usefixtures("isolated_store")
async def test_chunking_benchmark_smoke(tmp_path: Path) -> None:
    """Two chunk sizes on a few abstracts: both measured, the second compared with the first
    query by query (`make bench-chunking`)."""
    from bench.chunking import evaluate as evaluate_settings
    from bench.chunking import paired
    from bench.chunking import render as render_settings

    if not (SCIFACT / "corpus.jsonl").is_file():
        pytest.skip(f"SciFact not found at {SCIFACT}")
    ds = subset(load(SCIFACT), max_docs=30, max_queries=10)
    first, second = await evaluate_settings(ds, [(256, 0), (128, 0)], tmp_path, concurrency=4)
    assert second["chunks"] > first["chunks"] >= 30
    assert len(first["per_query"]["hybrid"]["ndcg@10"]) == len(ds.queries)
    same = paired(first, first)["hybrid ndcg@10"]
    assert same == {
        "mean_difference": 0.0,
        "interval_95": [0.0, 0.0],
        "queries_up": 0,
        "queries_down": 0,
    }
    compared = second["paired_with_first"]["vector recall@100"]
    low, high = compared["interval_95"]
    assert low <= compared["mean_difference"] <= high
    assert compared["queries_up"] + compared["queries_down"] <= len(ds.queries)
    assert "| 128 | 0 | " in render_settings([first, second]).split("query by query")[1]


def test_long_documents_rank_the_entries_a_chunk_overlaps() -> None:
    """`--long-docs`: entries become `##` sections of one document, and a chunk's lines name
    the entries it holds, in line order, each once."""
    from types import SimpleNamespace

    from bench.beir import Dataset
    from bench.chunking import Corpus

    ds = Dataset(
        corpus={"a": ("Alpha", "one\ntwo"), "b": ("Beta", "three"), "c": ("", "four")},
        queries={},
        qrels={},
    )
    corpus = Corpus.of(ds, long_docs=2)
    assert list(corpus.documents) == ["collection-00000", "collection-00001"]
    lines = corpus.documents["collection-00000"].splitlines()
    assert lines[:7] == ["# Collection 0", "", "## Alpha", "", "one", "two", ""]
    assert corpus.spans["collection-00000"] == [(3, 7, "a"), (8, 11, "b")]
    assert corpus.documents["collection-00001"].splitlines()[2] == "## c"

    def hit(source: str, start: int, end: int) -> SimpleNamespace:
        return SimpleNamespace(source=source, start_line=start, end_line=end)

    ranked = corpus.ranked(
        [
            hit("collection-00000", 8, 9),
            hit("collection-00000", 5, 8),
            hit("collection-00001", 1, 4),
        ]
    )
    assert ranked == ["b", "a", "c"]
    assert Corpus.of(ds, long_docs=0).ranked([hit("b", 1, 1), hit("a", 1, 2), hit("b", 2, 3)]) == [
        "b",
        "a",
    ]


@pytest.mark.usefixtures("isolated_store")
async def test_chunking_benchmark_on_long_documents_finds_the_sections(tmp_path: Path) -> None:
    """Five abstracts to a document: the chunks' line numbers lead back to the abstracts, so
    the abstracts relevant to a query are found as they are one to a document."""
    from bench.chunking import evaluate as evaluate_settings

    if not (SCIFACT / "corpus.jsonl").is_file():
        pytest.skip(f"SciFact not found at {SCIFACT}")
    ds = subset(load(SCIFACT), max_docs=30, max_queries=10)
    (result,) = await evaluate_settings(ds, [(256, 0)], tmp_path, concurrency=4, long_docs=5)
    assert result["documents"] == 6 and result["chunks"] >= 6
    for mode in ("hybrid", "vector"):
        assert result["modes"][mode]["recall@100"] >= 0.8, result["modes"]
