"""`make bench-scale` at a toy size, so the benchmark keeps working: the base material from
three prose documents, a 400-chunk "large" table built through the index service's API (with
an approximate vector index from 256 rows), then `measure` beside a 300-chunk table: MCP
searches, listings, recall against exact search read in blocks, the in-process index build,
and real documents ingested into both and deleted again; then `bench.folds` on copies of the
toy table, one merging the vector index's delta segments after every second, one never.
Only the report's shape and sanity are checked here: the goals live in the benchmarks."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import httpx
import pytest

from bench import folds, scale
from services.entrypoints.cluster import local_env, running
from tests.conftest import SCIFACT

pytestmark = pytest.mark.integration


def test_scale_benchmark_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not (SCIFACT / "corpus.jsonl").is_file():
        pytest.skip(f"SciFact not found at {SCIFACT}")
    var = tmp_path / "scale"
    build = ["build", "--var", str(var), "--target", "400", "--base-docs", "3"]
    assert scale.main([*build, "--env", "INDEX_VECTOR_INDEX_MIN_ROWS=256"]) == 0
    out = tmp_path / "scale.json"
    measure = ["measure", "--var", str(var), "--small", "300", "--queries", "5"]
    measure += ["--recall-queries", "5", "--rounds", "2", "--docs", "2", "--json", str(out)]
    assert scale.main(measure) == 0
    capsys.readouterr()
    report = json.loads(out.read_text())

    (built,) = [b for b in report["service_vector_index_builds"] if b["rows"]]
    assert built["rows"] >= 256 and built["partitions"] >= 16
    assert report["vector_index_build"]["rows"] == 400
    assert report["vector_index_build"]["seconds"] >= 0
    for name, rows in (("small", 300), ("large", 400)):
        entry = report[name]
        assert entry["chunks"] == rows and entry["queries"] == 5
        assert 0 < entry["search_p50_ms"] <= entry["search_p95_ms"]
        assert entry["list_documents_p50_ms"] > 0 and entry["list_libraries_p50_ms"] > 0
        assert entry["vector_index"]["rows"] == rows
        assert entry["vector_index"]["recall_at_10"] >= 0.9
    ingest = report["ingest"]
    assert len(ingest["small"]["ms_per_doc_rounds"]) == len(ingest["large"]["ms_per_doc_rounds"])
    assert ingest["ratio_large_to_small"] > 0
    memory = report["large"]["memory_peak_mb"]
    assert set(memory) == {"searching", "ingesting_and_optimizing"}
    assert memory["searching"]["index"] > 20

    # The ingested documents were deleted again: the tables keep the size they were built to.
    with running(local_env(var / "large", LOG_LEVEL="WARNING")) as cluster:
        info = httpx.get(cluster.index + "/info", timeout=30).json()
    assert info["chunks"] == 400

    # bench.folds on copies of it: the table given is left as it was.
    out = tmp_path / "folds.json"
    run = ["--table", str(var / "large"), "--folds", "3", "--every", "2", "--chunks", "20"]
    assert folds.main([*run, "--queries", "4", "--deltas", "1", "--json", str(out)]) == 0
    capsys.readouterr()
    report = json.loads(out.read_text())
    assert [point["folds"] for point in report["checkpoints"]] == [0, 2, 3]
    for point in report["checkpoints"]:
        assert set(point["p50_ms"]) == {"merging", "not_merging"}
        assert all(v > 0 for v in point["p50_ms"].values())
    assert all(len(f["each"]) == 3 for f in report["fold_seconds"].values())
    layout = report["layout_after"]
    assert layout["merging"]["vector_segments"] < layout["not_merging"]["vector_segments"]
    peaks = report["index_rss_peak_mb_while_folding"]
    assert all(mb > 20 for mb in peaks.values())
    # The peak so far at each checkpoint after folds: growing to the overall peak.
    so_far = [point["rss_peak_mb"] for point in report["checkpoints"][1:]]
    assert all(a[n] <= b[n] for a, b in itertools.pairwise([*so_far, peaks]) for n in peaks)
    with running(local_env(var / "large", LOG_LEVEL="WARNING")) as cluster:
        info = httpx.get(cluster.index + "/info", timeout=30).json()
    assert info["chunks"] == 400
