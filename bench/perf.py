"""Throughput and latency at scale, measured on a running local cluster in one run.

    python -m bench.perf [--docs 200] [--growth-docs 2000] [--sizes 10000,100000]

1. Ingestion: a folder of real-prose documents (about 1,500 words each, built from SciFact
   abstracts) through `POST /ingest_folder`; documents/s, chunks/s, and the ratio of chunks/s
   to fastembed's raw throughput on the same chunk texts, measured in the same run.
2. Growth: a 2,000-document ingest in ten equal batches; time per document of the last batch
   against the first.
3. Search latency through MCP (SSE client, query embedding included) at about 10k and 100k
   chunks, p50/p95 over real queries; `list_documents` (limit 20) and `list_libraries` p50;
   then MCP search p50 against query embedding p50 + index search p50, interleaved query by
   query (`bench.perf_measure.search_overhead`).
   The large table is bulk-loaded through the index service's own API with vectors derived
   from the real chunk embeddings (each a real vector plus small noise, normalised), so the
   vector space keeps a realistic shape.
4. Memory: peak RSS per service (process tree) sampled during the ingests.
5. The approximate vector index: recall@10 of vector search for real SciFact queries against
   exact search computed here with numpy over every stored vector (in blocks).

The report ends with `ratios`: every figure above that issue 19 sets a goal for, as a ratio
within the run, and `command`, the command line that produced it.

The corpora and the bulk load are in `bench.perf_corpus`, the measures in
`bench.perf_measure`; a million chunks is `bench.scale`, object storage `bench.scale_s3`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.beir import load
from bench.cli import add_env_option, command_line, write_json
from bench.perf_corpus import (
    SCIFACT,
    bulk_load,
    chunk_texts,
    prose_documents,
    raw_fastembed,
    write_folder,
)
from bench.perf_measure import (
    MemorySampler,
    ann_recall,
    hop_latencies,
    index_counts,
    ingest_folder,
    mcp_latencies,
    search_overhead,
)
from services.entrypoints.cluster import local_env, running


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="mvdb-perf-"))
    env = local_env(workdir / "var", LOG_LEVEL="WARNING", **dict(args.env))
    report: dict[str, Any] = {
        "cores": os.cpu_count(),
        "command": args.command,
    }
    rng = np.random.default_rng(7)
    all_queries = list(load(SCIFACT).queries.values())
    queries = all_queries[: args.queries]
    warmup = all_queries[args.queries : args.queries + args.warmup_queries]
    with running(env) as cluster:
        folder = workdir / "prose"
        write_folder(folder, prose_documents(args.docs, 1500))
        with MemorySampler.of_cluster(cluster) as memory:
            seconds, body = ingest_folder(cluster, folder, "prose")
            chunks = sum(r["chunk_count"] for r in body["results"])
            report["ingest"] = {
                "documents": body["total_files"],
                "chunks": chunks,
                "seconds": round(seconds, 1),
                "documents_per_s": round(body["total_files"] / seconds, 2),
                "chunks_per_s": round(chunks / seconds, 2),
            }
            print(json.dumps(report["ingest"]), file=sys.stderr, flush=True)

            growth_root = workdir / "growth"
            docs = prose_documents(args.growth_docs, 150, offset=args.docs * 10)
            batch = max(1, len(docs) // 10)
            per_doc: list[float] = []
            for b in range(10):
                sub = growth_root / f"batch-{b}"
                write_folder(sub, docs[b * batch : (b + 1) * batch])
                took, _ = ingest_folder(cluster, sub, "growth")
                per_doc.append(took / batch)
                print(f"growth batch {b}: {1000 * took / batch:.1f} ms/doc", file=sys.stderr)
            report["growth"] = {
                "documents": batch * 10,
                "first_10pct_ms_per_doc": round(1000 * per_doc[0], 1),
                "last_10pct_ms_per_doc": round(1000 * per_doc[-1], 1),
                "ratio_last_to_first": round(per_doc[-1] / per_doc[0], 3),
            }
        report["memory_peak_mb"] = {k: round(v) for k, v in memory.peaks.items()}
        report["memory_peak_mb"]["all_four"] = round(memory.peak_total)

        texts = chunk_texts(cluster, folder)
        best = 0.0
        vectors = np.zeros((0, 384), np.float32)
        for batch_size in (4, 8, 32):
            rate, vectors = raw_fastembed(texts, batch_size)
            best = max(best, rate)
            report.setdefault("raw_fastembed_chunks_per_s", {})[str(batch_size)] = round(rate, 2)
        report["ingest"]["ratio_to_raw"] = round(report["ingest"]["chunks_per_s"] / best, 3)

        recall_queries = all_queries[-args.recall_queries :]
        for size in args.sizes:
            took = bulk_load(cluster, size, texts, vectors, rng)
            httpx.post(cluster.index + "/optimize", timeout=600)
            counts = index_counts(cluster)
            latencies = asyncio.run(mcp_latencies(cluster, queries, warmup))
            entry = {"chunks": counts["chunks"], "bulk_load_s": round(took, 1), **latencies}
            entry["hops"] = hop_latencies(cluster, queries[:100])
            entry["overhead"] = asyncio.run(search_overhead(cluster, queries, warmup))
            entry["vector_index"] = ann_recall(cluster, recall_queries)
            report.setdefault("search", []).append(entry)
            print(json.dumps(entry), file=sys.stderr, flush=True)
    report["ratios"] = ratios(report)
    return report


def ratios(report: dict[str, Any]) -> dict[str, Any]:
    """Every figure of issue 19 this run measures, as a ratio within the run (goal 5), so a
    run on another machine compares. The ingest's tokens/s against the raw model's (goal 4) is
    `bench.ingest_rate`'s own report (rounds between raw passes on a cluster of its own), which
    `make bench-perf` runs after this module."""
    out: dict[str, Any] = {
        "ingest_chunks_per_s_to_raw": report["ingest"]["ratio_to_raw"],
        "growth_last_to_first_ms_per_doc": report["growth"]["ratio_last_to_first"],
    }
    for entry in report.get("search", []):
        overhead = entry["overhead"]
        chunks = entry["chunks"]
        out[f"mcp_search_p50_to_embed_plus_index_at_{chunks}"] = overhead[
            "ratio_mcp_to_embed_plus_index"
        ]
        out[f"streamable_http_search_p50_to_embed_plus_index_at_{chunks}"] = overhead[
            "streamable_http_ratio"
        ]
        # The same over SSE with the TypeScript SDK's client (where node runs) and a bare one.
        for client in ("ts_sdk", "bare_client"):
            if f"{client}_ratio" in overhead:
                out[f"{client}_search_p50_to_embed_plus_index_at_{chunks}"] = overhead[
                    f"{client}_ratio"
                ]
        out[f"vector_recall_at_10_at_{chunks}"] = entry["vector_index"]["recall_at_10"]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.perf", description=__doc__)
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--growth-docs", type=int, default=2000)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--warmup-queries", type=int, default=50)
    parser.add_argument("--recall-queries", type=int, default=100)
    parser.add_argument("--json", type=Path, default=Path("var/bench/perf.json"))
    add_env_option(parser)
    args = parser.parse_args(argv)
    args.command = command_line("bench.perf", argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    report = run(args)
    print(write_json(args.json, report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
