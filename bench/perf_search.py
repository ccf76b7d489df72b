"""The search path alone (issue 19, goal 3): MCP `search` p50 against query embedding p50 +
index search p50, measured in one run, on a private local cluster.

    python -m bench.perf_search [--docs 20] [--sizes 10000,100000] [--rounds 3]

A small real-prose folder goes through `POST /ingest_folder` (for real chunk texts and their
embeddings), the table is topped up to each size with `bench.perf_corpus.bulk_load`, then
optimized; each round runs `bench.perf_measure.search_overhead`: per query the MCP search and
the same query's two hops straight to the embedder and the index, interleaved. `bench.perf`
reports the same ratio inside its longer run; this one takes minutes, not twenty.
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
from bench.perf_measure import cpu_per_search, index_counts, ingest_folder, search_overhead
from services.entrypoints.cluster import local_env, running


def _load_average() -> float:
    return round(os.getloadavg()[0], 2)


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="mvdb-perf-search-"))
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
        print(f"gateway pid {cluster.pid('gateway')}", file=sys.stderr, flush=True)
        folder = workdir / "prose"
        write_folder(folder, prose_documents(args.docs, 1500))
        ingest_folder(cluster, folder, "prose")
        texts = chunk_texts(cluster, folder)
        _, vectors = raw_fastembed(texts, 32)
        for size in args.sizes:
            took = bulk_load(cluster, size, texts, vectors, rng)
            httpx.post(cluster.index + "/optimize", timeout=600)
            entry: dict[str, Any] = {
                "chunks": index_counts(cluster)["chunks"],
                "bulk_load_s": round(took, 1),
                "rounds": [],
            }
            for _ in range(args.rounds):
                measured = asyncio.run(search_overhead(cluster, queries, warmup))
                measured["load_average_1m"] = _load_average()
                entry["rounds"].append(measured)
                print(json.dumps({"chunks": entry["chunks"], **measured}), file=sys.stderr)
            if args.cpu:
                entry["cpu_per_search"] = asyncio.run(cpu_per_search(cluster, queries))
                print(json.dumps(entry["cpu_per_search"]), file=sys.stderr)
            ratios = sorted(r["ratio_mcp_to_embed_plus_index"] for r in entry["rounds"])
            entry["ratio_median"] = ratios[len(ratios) // 2]
            report.setdefault("search", []).append(entry)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.perf_search", description=__doc__)
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--warmup-queries", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu", action="store_true", help="also CPU ms per search of each process")
    parser.add_argument("--json", type=Path, default=Path("var/bench/perf_search.json"))
    add_env_option(parser)
    args = parser.parse_args(argv)
    args.command = command_line("bench.perf_search", argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    report = run(args)
    print(write_json(args.json, report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
