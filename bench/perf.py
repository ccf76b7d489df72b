"""Throughput and latency at scale, measured on a running local cluster in one run.

    python -m bench.perf [--docs 200] [--growth-docs 2000] [--sizes 10000,100000]

1. Ingestion: a folder of real-prose documents (about 1,500 words each, built from SciFact
   abstracts) through `POST /ingest_folder`; documents/s, chunks/s, and the ratio of chunks/s
   to fastembed's raw throughput on the same chunk texts, measured in the same run.
2. Growth: a 2,000-document ingest in ten equal batches; time per document of the last batch
   against the first.
3. Search latency through MCP (SSE client, query embedding included) at about 10k and 100k
   chunks, p50/p95 over real queries; `list_documents` (limit 20) and `list_libraries` p50.
   The large table is bulk-loaded through the index service's own API with vectors derived
   from the real chunk embeddings (each a real vector plus small noise, normalised), so the
   vector space keeps a realistic shape.
4. Memory: peak RSS per service (process tree) sampled during the ingests.
5. The approximate vector index: recall@10 of vector search against exact search computed
   here with numpy over every stored vector.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.beir import load
from services.entrypoints.cluster import LocalCluster, local_env, running

REPO = Path(__file__).resolve().parents[1]
SCIFACT = REPO.parent / "shared" / "data" / "retrieval" / "scifact"


# ------------------------------------------------------------------------ corpora


def prose_documents(count: int, words: int, offset: int = 0) -> list[tuple[str, str]]:
    """Documents of about `words` words made of consecutive SciFact abstracts."""
    corpus = list(load(SCIFACT).corpus.values())
    docs: list[tuple[str, str]] = []
    i = offset
    while len(docs) < count:
        parts: list[str] = []
        title = corpus[i % len(corpus)][0]
        total = 0
        while total < words:
            t, text = corpus[i % len(corpus)]
            parts.append(f"## {t}\n\n{text}")
            total += len(text.split())
            i += 1
        docs.append((title, "\n\n".join(parts)))
    return docs


def write_folder(folder: Path, docs: list[tuple[str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n, (title, body) in enumerate(docs):
        (folder / f"doc-{n:05d}.md").write_text(f"# {title}\n\n{body}\n", encoding="utf-8")


# ------------------------------------------------------------------------- memory


def _tree(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, stack = [], [pid]
    while stack:
        p = stack.pop()
        out.append(p)
        stack.extend(children.get(p, []))
    return out


def _rss_mb(pid: int) -> float:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class MemorySampler:
    cluster: LocalCluster
    peaks: dict[str, float] = field(default_factory=dict)
    peak_total: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> MemorySampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0.0
            for name in ("converter", "embedder", "index", "gateway"):
                pid = self.cluster.pid(name)
                if pid is None:
                    continue
                rss = sum(_rss_mb(p) for p in _tree(pid))
                total += rss
                self.peaks[name] = max(self.peaks.get(name, 0.0), rss)
            self.peak_total = max(self.peak_total, total)
            self._stop.wait(0.25)


# ------------------------------------------------------------------------ measures


def ingest_folder(
    cluster: LocalCluster, folder: Path, library: str
) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    response = httpx.post(
        cluster.gateway + "/ingest_folder",
        json={"folder": str(folder), "library": library, "max_concurrency": 4},
        timeout=None,
    )
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    body = response.json()
    if body["failed"]:
        raise RuntimeError(f"ingest failures: {body['errors'][:3]}")
    return elapsed, body


def chunk_texts(cluster: LocalCluster, folder: Path) -> list[str]:
    texts: list[str] = []
    with httpx.Client(timeout=120) as client:
        for path in sorted(folder.glob("*.md")):
            result = client.post(
                cluster.converter + "/convert",
                params={"filename": path.name},
                content=path.read_bytes(),
            ).json()
            texts.extend(c["text"] for c in result["chunks"])
    return texts


def raw_fastembed(texts: list[str], batch_size: int) -> tuple[float, np.ndarray]:
    """fastembed directly on the bundled model: no service, no HTTP, texts as given."""
    from fastembed import TextEmbedding

    from libs.modelfiles import assemble_bundled_model

    folder = assemble_bundled_model(Path(tempfile.mkdtemp(prefix="mvdb-raw-")))
    model = TextEmbedding(
        model_name="sentence-transformers/all-MiniLM-L6-v2", specific_model_path=str(folder)
    )
    list(model.embed(texts[:8], batch_size=batch_size))  # warm-up
    started = time.perf_counter()
    vectors = np.stack(list(model.embed(texts, batch_size=batch_size)))
    return len(texts) / (time.perf_counter() - started), vectors


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def mcp_latencies(
    cluster: LocalCluster, queries: list[str], warmup: list[str]
) -> dict[str, float]:
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    async with (
        sse_client(cluster.gateway + "/sse", timeout=30, sse_read_timeout=600) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        # Warm up on other queries than those measured: a running server has seen searches
        # before, but not these ones.
        for q in warmup:
            await session.call_tool("search", {"query": q, "top_k": 10})
        search: list[float] = []
        for q in queries:
            t0 = time.perf_counter()
            result = await session.call_tool("search", {"query": q, "top_k": 10})
            search.append(time.perf_counter() - t0)
            assert not result.is_error and (result.structured_content or {}).get("results")
        listing: list[float] = []
        libraries: list[float] = []
        for _ in range(50):
            t0 = time.perf_counter()
            await session.call_tool("list_documents", {"limit": 20})
            listing.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await session.call_tool("list_libraries", {})
            libraries.append(time.perf_counter() - t0)
    return {
        "search_p50_ms": 1000 * percentile(search, 0.5),
        "search_p95_ms": 1000 * percentile(search, 0.95),
        "list_documents_p50_ms": 1000 * percentile(listing, 0.5),
        "list_libraries_p50_ms": 1000 * percentile(libraries, 0.5),
        "queries": len(search),
    }


def hop_latencies(cluster: LocalCluster, queries: list[str]) -> dict[str, float]:
    """Where a search's time goes: the embedder and the index called directly, one after the
    other as the gateway does, then the index alone with the same vectors back to back."""
    embed: list[float] = []
    index_after: list[float] = []
    vectors: list[str] = []
    with httpx.Client(timeout=60) as client:

        def search(q: str, vector: str) -> None:
            body = {"query": q, "vector_b64": vector, "top_k": 10}
            client.post(cluster.index + "/search", json=body).raise_for_status()

        for q in queries:
            t0 = time.perf_counter()
            reply = client.post(cluster.embedder + "/embed", json={"texts": [q], "kind": "query"})
            t1 = time.perf_counter()
            vector = reply.json()["vectors_b64"]
            search(q, vector)
            embed.append(t1 - t0)
            index_after.append(time.perf_counter() - t1)
            vectors.append(vector)
        index_alone: list[float] = []
        for q, vector in zip(queries, vectors, strict=True):
            t0 = time.perf_counter()
            search(q, vector)
            index_alone.append(time.perf_counter() - t0)
    return {
        "embed_query_p50_ms": 1000 * percentile(embed, 0.5),
        "index_search_after_embed_p50_ms": 1000 * percentile(index_after, 0.5),
        "index_search_back_to_back_p50_ms": 1000 * percentile(index_alone, 0.5),
    }


def index_counts(cluster: LocalCluster) -> dict[str, Any]:
    info: dict[str, Any] = httpx.get(cluster.index + "/info", timeout=30).json()
    return info


def bulk_load(
    cluster: LocalCluster,
    target_chunks: int,
    texts: list[str],
    vectors: np.ndarray,
    rng: np.random.Generator,
    per_doc: int = 500,
) -> float:
    from libs.vectors import encode

    have = int(index_counts(cluster)["chunks"])
    started = time.perf_counter()
    with httpx.Client(timeout=300) as client:
        while have < target_chunks:
            n = min(per_doc, target_chunks - have)
            picks = rng.integers(0, len(texts), n)
            noisy = vectors[picks] + rng.normal(0, 0.02, (n, vectors.shape[1])).astype(np.float32)
            noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
            body = {
                "document": {
                    "source": f"bulk/{uuid.uuid4().hex}",
                    "library": "bulk",
                    "title": "bulk",
                    "file_type": "md",
                    "content_hash": uuid.uuid4().hex,
                    "last_modified": "2026-01-01T00:00:00+00:00",
                    "metadata": {},
                    "markdown": "bulk",
                },
                "chunks": [
                    {
                        "chunk_index": i,
                        "text": texts[p],
                        "page": 0,
                        "headings": [],
                        "token_count": 0,
                    }
                    for i, p in enumerate(picks)
                ],
                "model": "sentence-transformers/all-MiniLM-L6-v2",
                "dim": int(vectors.shape[1]),
                "vectors_b64": encode(noisy.astype(np.float32)),
            }
            client.post(cluster.index + "/documents", json=body).raise_for_status()
            have += n
    return time.perf_counter() - started


def ann_recall(cluster: LocalCluster, queries: np.ndarray, k: int = 10) -> dict[str, Any]:
    """Vector-mode results of the index service against exact top-k over every stored vector."""
    import lancedb

    from libs.vectors import encode

    db = lancedb.connect(cluster.env["LANCEDB_URI"])
    table = db.open_table("chunks").to_arrow().select(["doc_id", "chunk_index", "vector"])
    keys = list(
        zip(
            table.column("doc_id").to_pylist(), table.column("chunk_index").to_pylist(), strict=True
        )
    )
    matrix = np.stack(table.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32)
    hits = 0
    with httpx.Client(timeout=60) as client:
        for q in queries:
            exact = np.argsort(-(matrix @ q))[:k]
            truth = {keys[i] for i in exact}
            got = client.post(
                cluster.index + "/search",
                json={"query": "", "vector_b64": encode(q[None, :]), "top_k": k, "mode": "vector"},
            ).json()["results"]
            hits += len(truth & {(r["doc_id"], r["chunk_index"]) for r in got})
    return {"recall_at_10": hits / (k * len(queries)), "rows": len(keys), "queries": len(queries)}


# ---------------------------------------------------------------------------- main


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="mvdb-perf-"))
    env = local_env(workdir / "var", LOG_LEVEL="WARNING", **dict(args.env))
    report: dict[str, Any] = {"cores": os.cpu_count()}
    rng = np.random.default_rng(7)
    all_queries = list(load(SCIFACT).queries.values())
    queries = all_queries[: args.queries]
    warmup = all_queries[args.queries : args.queries + args.warmup_queries]
    with running(env) as cluster:
        folder = workdir / "prose"
        write_folder(folder, prose_documents(args.docs, 1500))
        with MemorySampler(cluster) as memory:
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

        query_vecs = np.stack(
            [vectors[i] for i in rng.integers(0, len(vectors), args.recall_queries)]
        )
        for size in args.sizes:
            took = bulk_load(cluster, size, texts, vectors, rng)
            httpx.post(cluster.index + "/optimize", timeout=600)
            counts = index_counts(cluster)
            latencies = asyncio.run(mcp_latencies(cluster, queries, warmup))
            entry = {"chunks": counts["chunks"], "bulk_load_s": round(took, 1), **latencies}
            entry["hops"] = hop_latencies(cluster, queries[:100])
            entry["vector_index"] = ann_recall(cluster, query_vecs)
            report.setdefault("search", []).append(entry)
            print(json.dumps(entry), file=sys.stderr, flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.perf", description=__doc__)
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--growth-docs", type=int, default=2000)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--warmup-queries", type=int, default=50)
    parser.add_argument("--recall-queries", type=int, default=100)
    parser.add_argument("--json", type=Path, default=Path("var/bench/perf.json"))
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        type=lambda s: tuple(s.split("=", 1)),
        help="extra KEY=VALUE for the services (repeatable)",
    )
    args = parser.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    report = run(args)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
