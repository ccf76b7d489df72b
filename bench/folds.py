"""Search as a library keeps changing, fold after fold (issues 17 and 19), as ratios in one run.

    python -m bench.folds [--table var/bench/scale/large] [--folds 24] [--every 8]
                          [--chunks 100] [--queries 60] [--deltas N] [--json PATH]

Each fold of the index's maintenance leaves the rows it indexed in a vector index delta
segment of their own, which LanceDB's optimize never merges; since 0.8.15 a fold merges them
past `INDEX_VECTOR_DELTAS` (`services/index/store/ann.py`). This benchmark copies a built table
(`bench.scale build`, default the million-chunk one) twice and starts a private cluster on
each copy, side by side: **merging** with the default setting (or `--deltas`), and **not
merging** (`INDEX_VECTOR_DELTAS` past any count). Then `--folds` times, on each cluster in turn: one
document of `--chunks` chunks through the index's `POST /documents` (real chunk texts and
their embeddings plus small noise, as the table was built), then `POST /optimize`, timed.
Before the first fold and after every `--every` folds, `--queries` SciFact queries go to
each index's `POST /search` (hybrid, top_k 10, the query embedded once by the embedder
beforehand), the two clusters alternating query by query.

Reported: per checkpoint each cluster's index search p50 and its ratio to its own p50
before the first fold, the vector index's segments and the chunks table's fragments; each
cluster's fold seconds; the peak RSS of each index process while folding, overall and as it
stood at each checkpoint. The copies are deleted afterwards; the table given is not touched.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.beir import load
from bench.cli import command_line, write_json
from bench.perf_corpus import SCIFACT, bulk_body
from bench.perf_measure import MemorySampler, index_search, percentile
from bench.scale import base_material, load_avg
from services.entrypoints.cluster import LocalCluster, local_env, running

VARIANTS = ("merging", "not_merging")
NEVER = "1000000000"


def layout(table: Path) -> dict[str, int]:
    """The vector index's segments and the chunks table's fragments, read from the files."""
    import lance

    dataset = lance.dataset(str(table / "chunks.lance"))
    segments = sum(1 for i in dataset.list_indices() if i["fields"] == ["vector"])
    return {"vector_segments": segments, "fragments": len(dataset.get_fragments())}


def searches(
    clusters: dict[str, LocalCluster], queries: list[str], vectors: list[str]
) -> dict[str, float]:
    """Index search p50 (ms) per cluster, the clusters alternating query by query."""
    took: dict[str, list[float]] = {name: [] for name in clusters}
    with httpx.Client(timeout=120) as client:
        for n, (query, vector) in enumerate(zip(queries, vectors, strict=True)):
            names = list(clusters) if n % 2 == 0 else list(reversed(clusters))
            for name in names:
                started = time.perf_counter()
                index_search(client, clusters[name], query, vector)
                took[name].append(time.perf_counter() - started)
    return {name: round(1000 * percentile(values, 0.5), 2) for name, values in took.items()}


def index_sampler(cluster: LocalCluster) -> MemorySampler:
    """Peak RSS of one cluster's index process."""
    return MemorySampler(lambda: {"index": cluster.pid("index")})


def index_peaks(samplers: dict[str, MemorySampler]) -> dict[str, int]:
    """Each cluster's index peak RSS so far, in MB."""
    return {name: round(sampler.peaks.get("index", 0.0)) for name, sampler in samplers.items()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    texts, base_vectors, tokens = base_material(args.table.parent)
    queries = list(load(SCIFACT).queries.values())[: args.queries]
    rng = np.random.default_rng(11)
    workdir = Path(tempfile.mkdtemp(prefix="mvdb-folds-", dir=args.workdir))
    report: dict[str, Any] = {"command": args.command, "load_avg_before": load_avg()}
    try:
        for name in VARIANTS:
            shutil.copytree(args.table / "lancedb", workdir / name / "lancedb")
        deltas = {"INDEX_VECTOR_DELTAS": str(args.deltas)} if args.deltas else {}
        with (
            running(local_env(workdir / "merging", LOG_LEVEL="WARNING", **deltas)) as merging,
            running(
                local_env(workdir / "not_merging", LOG_LEVEL="WARNING", INDEX_VECTOR_DELTAS=NEVER)
            ) as not_merging,
        ):
            clusters = {"merging": merging, "not_merging": not_merging}
            with httpx.Client(timeout=120) as client:
                vectors = [
                    client.post(merging.embedder + "/embed", json={"texts": [q], "kind": "query"})
                    .raise_for_status()
                    .json()["vectors_b64"]
                    for q in queries
                ]
            searches(clusters, queries[:10], vectors[:10])  # warm-up
            checkpoints = [{"folds": 0, "p50_ms": searches(clusters, queries, vectors)}]
            fold_s: dict[str, list[float]] = {name: [] for name in clusters}
            samplers = {name: index_sampler(cluster) for name, cluster in clusters.items()}
            with contextlib.ExitStack() as sampling, httpx.Client(timeout=None) as client:
                for sampler in samplers.values():
                    sampling.enter_context(sampler)
                for fold in range(1, args.folds + 1):
                    body = bulk_body(texts, base_vectors, rng, args.chunks, tokens)
                    for name, cluster in clusters.items():
                        client.post(cluster.index + "/documents", json=body).raise_for_status()
                        started = time.perf_counter()
                        client.post(cluster.index + "/optimize").raise_for_status()
                        fold_s[name].append(round(time.perf_counter() - started, 2))
                    if fold % args.every == 0 or fold == args.folds:
                        p50 = searches(clusters, queries, vectors)
                        # The peak so far: whether the index's memory levels off.
                        checkpoints.append(
                            {"folds": fold, "p50_ms": p50, "rss_peak_mb": index_peaks(samplers)}
                        )
                        print(checkpoints[-1], file=sys.stderr, flush=True)
        first = checkpoints[0]["p50_ms"]
        for point in checkpoints:
            point["to_start"] = {n: round(v / first[n], 3) for n, v in point["p50_ms"].items()}
            merged, unmerged = point["p50_ms"]["merging"], point["p50_ms"]["not_merging"]
            point["merging_to_not_merging"] = round(merged / unmerged, 3)
        report["checkpoints"] = checkpoints
        report["fold_seconds"] = {
            name: {"mean": round(float(np.mean(v)), 2), "max": max(v), "each": v}
            for name, v in fold_s.items()
        }
        report["index_rss_peak_mb_while_folding"] = index_peaks(samplers)
        report["layout_after"] = {name: layout(workdir / name / "lancedb") for name in VARIANTS}
        report["load_avg_after"] = load_avg()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.folds", description=__doc__)
    parser.add_argument("--table", type=Path, default=Path("var/bench/scale/large"))
    parser.add_argument("--folds", type=int, default=24)
    parser.add_argument("--every", type=int, default=8)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument(
        "--deltas", type=int, default=0, help="INDEX_VECTOR_DELTAS when merging (0: the default)"
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="where the copies go (default: the temp dir)"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.command = command_line("bench.folds", argv)
    if not (args.table / "lancedb" / "chunks.lance").is_dir():
        parser.error(
            f"no built table under {args.table}: build one first "
            "(python -m bench.scale build --target 1000000)"
        )
    report = run(args)
    text = write_json(args.json, report) if args.json else None
    print(text or report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
