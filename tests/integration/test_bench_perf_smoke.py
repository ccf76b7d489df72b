"""`make bench-perf` at a toy size, so the benchmark keeps working: a private cluster, a real
ingest and growth run, raw fastembed, a bulk load past a lowered vector-index threshold, MCP
searches and the ANN recall check. Only the report's shape and sanity are checked here: the
timing goals live in the benchmark itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import perf
from bench.mcp_clients import TypeScriptClient
from tests.conftest import SCIFACT

pytestmark = pytest.mark.integration


def test_perf_benchmark_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not (SCIFACT / "corpus.jsonl").is_file():
        pytest.skip(f"SciFact not found at {SCIFACT}")
    out = tmp_path / "perf.json"
    argv = ["--docs", "3", "--growth-docs", "20", "--sizes", "600", "--queries", "5"]
    argv += ["--warmup-queries", "2", "--recall-queries", "10", "--json", str(out)]
    # An approximate vector index from 256 rows, so the 600-row table gets one.
    argv += ["--env", "INDEX_VECTOR_INDEX_MIN_ROWS=256"]
    assert perf.main(argv) == 0
    capsys.readouterr()
    report = json.loads(out.read_text())

    ingest = report["ingest"]
    assert ingest["documents"] == 3 and ingest["chunks"] >= 6
    assert ingest["chunks_per_s"] > 0 and 0 < ingest["ratio_to_raw"] < 5
    assert set(report["raw_fastembed_chunks_per_s"]) == {"4", "8", "32"}
    assert report["growth"]["documents"] == 20
    assert report["growth"]["ratio_last_to_first"] > 0
    assert set(report["memory_peak_mb"]) == {
        "converter",
        "embedder",
        "index",
        "gateway",
        "all_four",
    }
    assert all(mb > 20 for mb in report["memory_peak_mb"].values())

    (search,) = report["search"]
    assert search["chunks"] >= 600 and search["queries"] == 5
    assert 0 < search["search_p50_ms"] <= search["search_p95_ms"]
    assert search["list_documents_p50_ms"] > 0 and search["list_libraries_p50_ms"] > 0
    assert set(search["hops"]) == {
        "embed_query_p50_ms",
        "index_search_after_embed_p50_ms",
        "index_search_back_to_back_p50_ms",
    }
    ann = search["vector_index"]
    assert ann["rows"] >= 600 and ann["queries"] == 10
    assert ann["recall_at_10"] >= 0.9

    # Issue 19, goal 5: the search overhead measured at each size, and the ratios.
    overhead = search["overhead"]
    assert overhead["queries"] == 5
    parts = overhead["embed_query_p50_ms"] + overhead["index_search_p50_ms"]
    assert overhead["ratio_mcp_to_embed_plus_index"] == pytest.approx(
        overhead["mcp_search_p50_ms"] / parts, abs=0.01
    )
    assert overhead["streamable_http_ratio"] > 0
    # The bare client and the TypeScript SDK's (where node and `make ts-client`'s packages
    # are, as in `make test`) searched the same queries.
    clients = ["bare_client", *(["ts_sdk"] if TypeScriptClient.available() else [])]
    for client in clients:
        assert overhead[f"{client}_ratio"] == pytest.approx(
            overhead[f"{client}_search_p50_ms"] / parts, abs=0.01
        )
        name = f"{client}_search_p50_to_embed_plus_index_at_{search['chunks']}"
        assert report["ratios"][name] == overhead[f"{client}_ratio"]
    ratios = report["ratios"]
    assert ratios["ingest_chunks_per_s_to_raw"] == ingest["ratio_to_raw"]
    chunks = search["chunks"]
    assert (
        ratios[f"mcp_search_p50_to_embed_plus_index_at_{chunks}"]
        == (overhead["ratio_mcp_to_embed_plus_index"])
    )
    assert report["command"].startswith("python -m bench.perf --docs 3")
