"""The material of `bench.perf` and `bench.scale`: documents of real prose built from SciFact
abstracts, their chunk texts and embeddings, and the bulk load that tops a table up through
the index service's own API with vectors derived from real chunk embeddings (each a real
vector plus small noise, normalised), so the vector space keeps a realistic shape."""

from __future__ import annotations

import sys
import tempfile
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.beir import load
from bench.perf_measure import index_counts
from services.entrypoints.cluster import LocalCluster

REPO = Path(__file__).resolve().parents[1]
SCIFACT = REPO.parent / "shared" / "data" / "retrieval" / "scifact"


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


def converted_chunks(cluster: LocalCluster, folder: Path) -> list[dict[str, Any]]:
    """The chunks (text, token_count, ...) of the folder's Markdown files as the cluster's
    converter cuts them; the chunker is deterministic, so these are what an ingest embeds."""
    chunks: list[dict[str, Any]] = []
    with httpx.Client(timeout=120) as client:
        for path in sorted(folder.glob("*.md")):
            response = client.post(
                cluster.converter + "/convert",
                params={"filename": path.name},
                content=path.read_bytes(),
            )
            response.raise_for_status()
            chunks.extend(response.json()["chunks"])
    return chunks


def chunk_texts(cluster: LocalCluster, folder: Path) -> list[str]:
    return [c["text"] for c in converted_chunks(cluster, folder)]


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


def bulk_body(
    texts: list[str],
    vectors: np.ndarray,
    rng: np.random.Generator,
    n: int,
    tokens: list[int] | None = None,
) -> dict[str, Any]:
    """One bulk document of `n` chunks: real chunk texts, each with its real vector plus
    small noise, normalised. Without `tokens` (each text's token count) the index counts
    them."""
    from libs.vectors import encode

    picks = rng.integers(0, len(texts), n)
    noisy = vectors[picks] + rng.normal(0, 0.02, (n, vectors.shape[1])).astype(np.float32)
    noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
    return {
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
                "token_count": tokens[p] if tokens else 0,
            }
            for i, p in enumerate(picks)
        ],
        "model": "sentence-transformers/all-MiniLM-L6-v2",
        "dim": int(vectors.shape[1]),
        "vectors_b64": encode(noisy.astype(np.float32)),
    }


def bulk_load(
    cluster: LocalCluster,
    target_chunks: int,
    texts: list[str],
    vectors: np.ndarray,
    rng: np.random.Generator,
    per_doc: int = 500,
    tokens: list[int] | None = None,
    progress_every: int = 0,
) -> float:
    """Top the table up to `target_chunks` with bulk documents of `per_doc` chunks. The next
    body is built while the index writes the previous one (two requests in flight), so the
    index, not this process, sets the pace. Resumes from the table's count."""
    have = int(index_counts(cluster)["chunks"])
    started = time.perf_counter()
    sizes: list[int] = []
    while have + sum(sizes) < target_chunks:
        sizes.append(min(per_doc, target_chunks - have - sum(sizes)))
    done = have
    with httpx.Client(timeout=600) as client, ThreadPoolExecutor(2) as pool:

        def send(body: dict[str, Any]) -> None:
            client.post(cluster.index + "/documents", json=body).raise_for_status()

        pending: list[Future[None]] = []
        for n in sizes:
            body = bulk_body(texts, vectors, rng, n, tokens)
            while len(pending) >= 2:
                pending.pop(0).result()
            pending.append(pool.submit(send, body))
            done += n
            if progress_every and done // progress_every != (done - n) // progress_every:
                rate = (done - have) / (time.perf_counter() - started)
                print(f"bulk load: {done} chunks, {rate:.0f}/s", file=sys.stderr, flush=True)
        for future in pending:
            future.result()
    return time.perf_counter() - started
