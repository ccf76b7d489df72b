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
