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
