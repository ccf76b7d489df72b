"""A million chunks, measured (`make bench-scale`).

    python -m bench.scale build   [--target 1000000]      # once; kept under var/bench/scale
    python -m bench.scale measure [--json var/bench/scale.json]

`build` tops a table up to `--target` chunks through the index service's own API, as
`bench.perf` does for 100k (real chunk texts, each with its real embedding plus small noise),
and keeps it under `--var` (ignored by git) so that `measure` reuses it. The base material
(the chunk texts of 200 prose documents and their embeddings) is computed once and kept there
too. Run it under `nice`: it is hours of CPU on two cores.

`measure` starts a cluster on that table and one on a 10k table beside it, and reports:
search p50/p95 through MCP, `list_documents` and `list_libraries`, the index's RSS, vector
recall@10 of real queries against exact search (numpy over every stored vector, in blocks),
the time to build and to rebuild the vector index, and the per-document ingest time of real
documents through the gateway into the large table against the 10k one (alternating, same
run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.beir import load
from bench.cli import add_env_option, write_json
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
)
from services.entrypoints.cluster import LocalCluster, local_env, running

DEFAULT_VAR = Path("var/bench/scale")


def base_material(var: Path, docs: int = 200) -> tuple[list[str], np.ndarray, list[int]]:
    """Chunk texts of `docs` prose documents, their embeddings and token counts, computed once
    (a later call reuses them, whatever `docs` it asks)."""
    from libs.modelfiles import count_tokens

    path = var / "base.npz"
    if not path.is_file():
        folder = var / "base-prose"
        write_folder(folder, prose_documents(docs, 1500))
        with running(local_env(var / "base-cluster", LOG_LEVEL="WARNING")) as cluster:
            texts = chunk_texts(cluster, folder)
        _, vectors = raw_fastembed(texts, 32)
        tokens = count_tokens(texts)
        var.mkdir(parents=True, exist_ok=True)
        np.savez(path, texts=np.array(texts), vectors=vectors.astype(np.float32), tokens=tokens)
    saved = np.load(path)
    texts = [str(t) for t in saved["texts"]]
    if "tokens" not in saved:
        np.savez(path, texts=saved["texts"], vectors=saved["vectors"], tokens=count_tokens(texts))
        saved = np.load(path)
    return texts, saved["vectors"].astype(np.float32), [int(n) for n in saved["tokens"]]


def build(
    var: Path, target: int, name: str, env: dict[str, str], base_docs: int = 200
) -> dict[str, Any]:
    """Top the table `var/name` up to `target` chunks, then fold everything into the indexes."""
    texts, vectors, tokens = base_material(var, base_docs)
    rng = np.random.default_rng(int(time.time()))
    cluster_env = local_env(var / name, LOG_LEVEL="INFO")
    cluster_env.update(env)
    with running(cluster_env) as cluster:
        took = bulk_load(cluster, target, texts, vectors, rng, tokens=tokens, progress_every=50_000)
        started = time.perf_counter()
        httpx.post(cluster.index + "/optimize", timeout=None).raise_for_status()
        optimize_s = time.perf_counter() - started
        info = httpx.get(cluster.index + "/info", timeout=60).json()
    return {"chunks": info["chunks"], "bulk_load_s": round(took, 1), "optimize_s": optimize_s}


def vector_index_build(uri: str) -> dict[str, Any]:
    """Time the operation `ann.maybe_build` runs, on the large table with no service open:
    the service's vector index with partitions_for(rows) partitions, trained from scratch (a
    rebuild is the same work: Lance trains anew and replaces the old index)."""
    import lancedb

    from services.index.store.ann import config, partitions_for, vector_width

    table = lancedb.connect(uri).open_table("chunks")
    rows = table.count_rows()
    partitions = partitions_for(rows)
    started = time.perf_counter()
    table.create_index("vector", config=config(partitions, vector_width(table)))
    return {
        "rows": rows,
        "partitions": partitions,
        "seconds": round(time.perf_counter() - started, 1),
    }


def service_index_builds(var: Path) -> list[dict[str, Any]]:
    """The vector-index builds the index service logged while the table was loaded."""
    builds: list[dict[str, Any]] = []
    for line in (var / "log" / "index.log").read_text(errors="replace").splitlines():
        if "approximate vector index" in line:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            keys = ("msg", "rows", "partitions", "previous_partitions", "seconds")
            builds.append({key: record.get(key) for key in keys})
    return builds


def alternate_ingests(
    clusters: dict[str, LocalCluster], work: Path, rounds: int, docs: int
) -> dict[str, Any]:
    """Real documents through the gateway into each table, the same documents, alternating
    which goes first each round; afterwards they are deleted again, so the tables stay the
    size they were built to. Each round's folder goes once both have ingested it."""
    stamp = time.strftime("%Y%m%d%H%M%S")
    per_doc: dict[str, list[float]] = {name: [] for name in clusters}
    ids: dict[str, list[str]] = {name: [] for name in clusters}
    names = list(clusters)
    folds_before = {name: folds(cluster) for name, cluster in clusters.items()}
    for r in range(rounds):
        folder = work / f"ingest-{stamp}-{r}"
        write_folder(folder, prose_documents(docs, 150, offset=5000 + r * docs * 2))
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            took, body = ingest_folder(clusters[name], folder, f"ingest-{stamp}")
            per_doc[name].append(took / docs)
            ids[name].extend(res["doc_id"] for res in body["results"])
            print(f"ingest round {r} {name}: {1000 * took / docs:.0f} ms/doc", file=sys.stderr)
        shutil.rmtree(folder)
    folds_after = {name: folds(cluster) for name, cluster in clusters.items()}
    with httpx.Client(timeout=600) as client:
        for name, doc_ids in ids.items():
            for doc_id in doc_ids:
                client.delete(clusters[name].index + f"/documents/{doc_id}").raise_for_status()
    out: dict[str, Any] = {
        name: {
            "ms_per_doc_rounds": [round(1000 * t, 1) for t in values],
            "ms_per_doc": round(1000 * sum(values) / len(values), 1),
        }
        for name, values in per_doc.items()
    }
    for name in clusters:
        count = folds_after[name][0] - folds_before[name][0]
        seconds = folds_after[name][1] - folds_before[name][1]
        out[name]["folds"] = {"count": round(count), "seconds": round(seconds, 1)}
    out["documents_per_round"] = docs
    out["ratio_large_to_small"] = round(out["large"]["ms_per_doc"] / out["small"]["ms_per_doc"], 3)
    return out


def folds(cluster: LocalCluster) -> tuple[float, float]:
    """The index's folds so far and their seconds in all (`mvdb_index_optimize_seconds`)."""
    text = httpx.get(cluster.index + "/metrics", timeout=30).raise_for_status().text
    values = {"count": 0.0, "sum": 0.0}
    for line in text.splitlines():
        for key in values:
            if line.startswith(f"mvdb_index_optimize_seconds_{key} "):
                values[key] = float(line.split()[1])
    return values["count"], values["sum"]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    var: Path = args.var
    texts, vectors, tokens = base_material(var, args.base_docs)
    report: dict[str, Any] = {"load_avg_before": load_avg(), "env": dict(args.env)}
    small_var = var / "small"
    with running(local_env(small_var, LOG_LEVEL="WARNING")) as small:
        bulk_load(small, args.small, texts, vectors, np.random.default_rng(7), tokens=tokens)
        httpx.post(small.index + "/optimize", timeout=None).raise_for_status()
    large_var = var / args.name
    report["service_vector_index_builds"] = service_index_builds(large_var)
    if args.index_build:
        report["vector_index_build"] = vector_index_build(str(large_var / "lancedb"))
        print(json.dumps(report["vector_index_build"]), file=sys.stderr, flush=True)
    all_queries = list(load(SCIFACT).queries.values())
    queries = all_queries[: args.queries]
    warmup = all_queries[args.queries : args.queries + 50]
    recall_queries = all_queries[-args.recall_queries :]
    # --env applies to both clusters measured (the build above uses the defaults).
    extra = dict(args.env)
    with (
        running({**local_env(small_var, LOG_LEVEL="WARNING"), **extra}) as small,
        running({**local_env(large_var, LOG_LEVEL="WARNING"), **extra}) as large,
    ):
        clusters = {"small": small, "large": large}
        with MemorySampler.of_cluster(large) as serving:
            for name, cluster in clusters.items():
                entry: dict[str, Any] = {"chunks": index_counts(cluster)["chunks"]}
                entry.update(asyncio.run(mcp_latencies(cluster, queries, warmup)))
                entry["load_avg"] = load_avg()
                entry["hops"] = hop_latencies(cluster, queries[:100])
                entry["vector_index"] = ann_recall(cluster, recall_queries)
                report[name] = entry
                print(name, json.dumps(entry), file=sys.stderr, flush=True)
        with MemorySampler.of_cluster(large) as ingesting:
            report["ingest"] = alternate_ingests(clusters, var, args.rounds, args.docs)
            report["ingest"]["load_avg"] = load_avg()
        report["large"]["memory_peak_mb"] = {
            "searching": {k: round(v) for k, v in serving.peaks.items()},
            "ingesting_and_optimizing": {k: round(v) for k, v in ingesting.peaks.items()},
        }
    return report


def load_avg() -> str:
    """The 1, 5 and 15-minute load averages, noted beside the figures."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    parser.add_argument("command", choices=["build", "measure"])
    parser.add_argument("--var", type=Path, default=DEFAULT_VAR)
    parser.add_argument("--target", type=int, default=1_000_000)
    parser.add_argument("--name", default="large")
    parser.add_argument("--base-docs", type=int, default=200, help="prose documents of the base")
    parser.add_argument("--small", type=int, default=10_000, help="chunks of the small table")
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--recall-queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=6, help="ingest rounds per table")
    parser.add_argument("--docs", type=int, default=20, help="documents per ingest round")
    parser.add_argument("--no-index-build", dest="index_build", action="store_false")
    parser.add_argument("--json", type=Path, default=Path("var/bench/scale.json"))
    add_env_option(parser)
    args = parser.parse_args(argv)
    if args.command == "build":
        report = build(args.var, args.target, args.name, dict(args.env), args.base_docs)
    else:
        report = measure(args)
        write_json(args.json, report)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
