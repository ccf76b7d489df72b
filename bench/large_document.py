"""One very large document's write, in parts and in one request (`make bench-large-document`).

    python -m bench.large_document [--chunks 20000,40000] [--json var/bench/large-document.json]

For each size, a synthetic document of that many chunks (about 1,000 characters each, unit
vectors of the bundled model's width) is written through the gateway's `IndexWrites` to an
index process of its own on a fresh store, twice: with the default `INDEX_MAX_BODY_BYTES`
(64 MiB), so that it goes in parts and a last request, and with a limit large enough for one
request. Reported for each: the write's seconds, how many requests it took, and the index
process's resident memory before and at its peak (sampled every 20 ms), with the machine's
load. No model runs: the figures are the write's alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.cli import command_line, write_json
from bench.perf_measure import MemorySampler, rss_mb
from bench.scale import load_avg
from bench.scale_s3 import spawn_index, wait_answering
from libs.clients import IndexClient
from libs.contracts import Chunk, NewDocument
from services.entrypoints.cluster import free_port
from services.gateway.parts import IndexWrites

MODEL, DIM = "sentence-transformers/all-MiniLM-L6-v2", 384
ONE_REQUEST = 2**31 - 1
WORDS = ["river", "otter", "survey", "data", "stone", "reach", "water", "bank", "heron", "salmon"]


def document(n: int) -> tuple[NewDocument, list[Chunk], np.ndarray]:
    rng = np.random.default_rng(n)
    texts = [" ".join(rng.choice(WORDS, 170)) + f" {i}" for i in range(n)]
    chunks = [Chunk(chunk_index=i, text=t, token_count=200) for i, t in enumerate(texts)]
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    doc = NewDocument(
        source=f"large-{n}.md",
        library="bench",
        title="Large",
        file_type="md",
        content_hash=f"h{n}",
        last_modified="2026-11-24T00:00:00+00:00",
        markdown="\n\n".join(texts),
    )
    return doc, chunks, vectors


class CountingIndex:
    """The index port, counting the requests a write takes."""

    def __init__(self, client: IndexClient) -> None:
        self.client, self.requests = client, 0

    async def info(self) -> Any:
        return await self.client.info()

    async def stage(self, part: Any) -> Any:
        self.requests += 1
        return await self.client.stage(part)

    async def upsert(self, request: Any) -> Any:
        self.requests += 1
        return await self.client.upsert(request)


async def write_once(n: int, limit: int, workdir: Path) -> dict[str, Any]:
    port = free_port()
    env = {**os.environ, "BIND_HOST": "127.0.0.1", "INDEX_PORT": str(port)}
    env.update({"LANCEDB_URI": str(workdir / f"store-{n}-{limit}"), "LOG_LEVEL": "WARNING"})
    env.update({"INDEX_MAX_BODY_BYTES": str(limit), "INDEX_STAGED_MAX_BYTES": str(2**31)})
    url = f"http://127.0.0.1:{port}"
    doc, chunks, vectors = document(n)
    process = spawn_index(env, workdir / f"index-{port}.log")
    try:
        wait_answering(url + "/readyz", process)
        client = IndexClient(url)
        port_ = CountingIndex(client)
        await client.info()
        before = rss_mb(process.pid)
        with MemorySampler(lambda: {"index": process.pid}, interval_s=0.02) as memory:
            started = time.perf_counter()
            written = await IndexWrites(port_).write(doc, chunks, MODEL, DIM, vectors)  # type: ignore[arg-type]
            took = time.perf_counter() - started
        await client.aclose()
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert written.chunk_count == n
    return {
        "chunks": n,
        "markdown_mb": round(len(doc.markdown) / 2**20, 1),
        "limit": "one request" if limit == ONE_REQUEST else limit,
        "requests": port_.requests,
        "write_s": round(took, 2),
        "index_rss_before_mb": round(before),
        "index_rss_peak_mb": round(memory.peaks.get("index", before)),
        "load": load_avg(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.large_document")
    parser.add_argument("--chunks", default="20000,40000", help="sizes, comma-separated")
    parser.add_argument("--json", type=Path, default=Path("var/bench/large-document.json"))
    args = parser.parse_args(argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-large-") as tmp:
        for n in (int(x) for x in args.chunks.split(",")):
            for limit in (64 * 1024 * 1024, ONE_REQUEST):
                runs.append(asyncio.run(write_once(n, limit, Path(tmp))))
                print(runs[-1], flush=True)
    report = {"command": command_line("bench.large_document", argv), "runs": runs}
    print(write_json(args.json, report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
