"""Retrieval quality on a BEIR-format dataset through the product's real path.

    python -m bench.quality DATASET_DIR [--max-docs N] [--max-queries N] [--workdir DIR]

Every corpus entry goes through the `ingest_content` pipeline (chunking with the model's
tokenizer, embedding with the bundled model, the LanceDB index) as one document whose source
is its corpus id and whose Markdown starts with its title as a heading. Every test query then
goes through the index's search in three modes in the same run, BM25 only, vector only and
hybrid, and the chunk hits are folded into a document ranking (first hit wins). Reported:
nDCG@10, Recall@100 and MRR@10.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.beir import Dataset, from_arguments, mrr_at, ndcg_at, recall_at

MODES = ("bm25", "vector", "hybrid")
LIBRARY = "beir"


def subset(ds: Dataset, max_docs: int | None, max_queries: int | None) -> Dataset:
    queries = dict(list(ds.queries.items())[:max_queries]) if max_queries else ds.queries
    if not max_docs:
        return Dataset(ds.corpus, queries, {q: ds.qrels[q] for q in queries})
    wanted: list[str] = []
    for qid in queries:
        wanted.extend(d for d in ds.qrels[qid] if d in ds.corpus and d not in wanted)
    for did in ds.corpus:
        if len(wanted) >= max_docs:
            break
        if did not in wanted:
            wanted.append(did)
    corpus = {d: ds.corpus[d] for d in wanted[: max(max_docs, 1)]}
    kept = {q: ds.qrels[q] for q in queries if set(ds.qrels[q]) & set(corpus)}
    return Dataset(corpus, {q: queries[q] for q in kept}, kept)


def as_markdown(title: str, text: str) -> str:
    return f"# {title.strip()}\n\n{text.strip()}" if title.strip() else text.strip()


async def evaluate(ds: Dataset, concurrency: int) -> dict[str, Any]:
    from libs.contracts import IngestContentInput, SearchInput
    from services.entrypoints.inprocess import inprocess_ports
    from services.gateway.library import Library
    from services.gateway.settings import GatewaySettings

    settings = GatewaySettings(transport="bench")
    async with inprocess_ports(settings) as ports:
        library = Library(settings, ports)
        gate = asyncio.Semaphore(concurrency)
        chunks = 0
        done = 0

        async def ingest(doc_id: str, title: str, text: str) -> None:
            nonlocal chunks, done
            async with gate:
                content = as_markdown(title, text) or doc_id
                result = await library.ingest_content(
                    IngestContentInput(content=content, source=doc_id, library=LIBRARY)
                )
            chunks += result.chunk_count
            done += 1
            if done % 500 == 0:
                print(f"  ingested {done}/{len(ds.corpus)}", file=sys.stderr, flush=True)

        started = time.perf_counter()
        await asyncio.gather(*(ingest(d, t, x) for d, (t, x) in ds.corpus.items()))
        ingest_s = time.perf_counter() - started

        scores: dict[str, dict[str, list[float]]] = {
            m: {"ndcg@10": [], "recall@100": [], "mrr@10": []} for m in MODES
        }
        latency: dict[str, list[float]] = {m: [] for m in MODES}
        for qid, text in ds.queries.items():
            question = SearchInput(query=text, top_k=100, library=LIBRARY)
            for mode in MODES:
                t0 = time.perf_counter()
                found = await library.search(question, mode=mode)
                latency[mode].append(time.perf_counter() - t0)
                ranked: list[str] = []
                for hit in found.results:
                    if hit.source not in ranked:
                        ranked.append(hit.source)
                rel = ds.qrels[qid]
                scores[mode]["ndcg@10"].append(ndcg_at(ranked, rel, 10))
                scores[mode]["recall@100"].append(recall_at(ranked, rel, 100))
                scores[mode]["mrr@10"].append(mrr_at(ranked, rel, 10))
    summary = {
        mode: {name: sum(v) / max(len(v), 1) for name, v in metrics.items()}
        for mode, metrics in scores.items()
    }
    for mode in MODES:
        ordered = sorted(latency[mode])
        summary[mode]["p50_ms"] = 1000 * ordered[len(ordered) // 2] if ordered else 0.0
    return {
        "documents": len(ds.corpus),
        "chunks": chunks,
        "queries": len(ds.queries),
        "ingest_seconds": round(ingest_s, 1),
        "modes": summary,
    }


def render(name: str, report: dict[str, Any]) -> str:
    lines = [
        f"{name}: {report['documents']} documents ({report['chunks']} chunks, ingested in "
        f"{report['ingest_seconds']} s), {report['queries']} queries",
        "",
        "| mode | nDCG@10 | Recall@100 | MRR@10 | p50 search ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for mode in MODES:
        m = report["modes"][mode]
        lines.append(
            f"| {mode} | {m['ndcg@10']:.4f} | {m['recall@100']:.4f} | {m['mrr@10']:.4f} "
            f"| {m['p50_ms']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.quality", description=__doc__)
    parser.add_argument(
        "dataset", type=Path, help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/"
    )
    parser.add_argument(
        "--split", default=None, help="qrels split: test, dev, ... (default test, else dev)"
    )
    parser.add_argument("--max-docs", type=int, default=None)
    parser.add_argument("--max-queries", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=None, help="keep the store here")
    parser.add_argument("--json", type=Path, default=None, help="also write the report here")
    args = parser.parse_args(argv)
    ds = subset(from_arguments(parser, args), args.max_docs, args.max_queries)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="mvdb-bench-"))
    os.environ["LANCEDB_URI"] = str(workdir / "lancedb")
    os.environ.setdefault("VAR_DIR", str(workdir / "var"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    report = asyncio.run(evaluate(ds, args.concurrency))
    print(render(args.dataset.name, report))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
