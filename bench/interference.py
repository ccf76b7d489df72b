"""Interference: one user's searches against a full-speed folder ingest, as ratios in one run.

    python -m bench.interference [--files 60] [--file-chars 4000] [--searches 100]
                                 [--pause-ms 200] [--settle 60] [--json PATH]

On a private local cluster (the four services like `make up`, free loopback ports, a
temporary var directory and LanceDB), one MCP SSE session searches (`search`, top_k 5,
query embedding included) in these phases, one after the other:

1. **idle**: `--searches` searches, nothing else running;
2. **ingest alone**: `POST /ingest_folder` of `--files` real-text files (`max_concurrency` 4),
   no searches; chunks/s;
3. **right after the write**: `--searches` searches as soon as that ingest has returned;
4. **steady**: the same searches `--settle` seconds later, with nothing running;
5. **ingest + one user**: another folder of the same size, while the session searches in a
   loop (one search, then `--pause-ms`) until the ingest returns; latency and chunks/s;
6. **ingest alone again**: a third folder, no searches (the alone figure is the mean of 2
   and 6, so the table's growth does not favour one side).

The after-write figure depends on what the index has not yet folded in: with the index's
defaults before issue 19 (optimize 60 s after the first write), an ingest shorter than that
left every one of its writes unfolded; the JSON keeps the ingest's seconds to tell.

Reported as ratios within the run (the machine's load moves absolute times): p50 and p95
during the ingest against idle (goals ≤ 3 and ≤ 5), ingest chunks/s with the user against
alone (goal ≥ 0.85), p50 right after the write against steady (goal ≤ 1.3).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from mcp import ClientSession
from mcp.client.sse import sse_client

from bench.cli import command_line, write_json
from bench.load import _payload, book_text, make_queries, seed, write_folder
from services.entrypoints.cluster import LocalCluster, local_env, running


def _summary(latencies_ms: list[float]) -> dict[str, float]:
    values = np.array(latencies_ms) if latencies_ms else np.array([np.nan])
    return {
        "count": len(latencies_ms),
        "p50": round(float(np.percentile(values, 50)), 1),
        "p95": round(float(np.percentile(values, 95)), 1),
        "max": round(float(np.max(values)), 1),
    }


class User:
    """One MCP session that searches; every latency as the client sees it."""

    def __init__(self, session: ClientSession, queries: list[str], seed_value: int) -> None:
        self.session = session
        self.queries = queries
        self.rng = random.Random(seed_value)
        self.errors: list[str] = []

    async def search(self) -> float | None:
        query = self.rng.choice(self.queries)
        started = time.perf_counter()
        try:
            result = await self.session.call_tool("search", {"query": query, "top_k": 5})
        except Exception as exc:
            self.errors.append(f"search raised {type(exc).__name__}: {exc}")
            return None
        elapsed_ms = (time.perf_counter() - started) * 1000
        payload = _payload(result)
        if result.is_error or payload.get("status") == "error":
            self.errors.append(f"search error: {payload.get('error', payload)}")
            return None
        return elapsed_ms

    async def run(self, count: int) -> list[float]:
        found = [await self.search() for _ in range(count)]
        return [v for v in found if v is not None]

    async def run_with_index(
        self, count: int, index: IndexProbe
    ) -> tuple[list[float], list[float]]:
        """`count` MCP searches, each followed by the same query straight to the index."""
        mcp: list[float] = []
        direct: list[float] = []
        for _ in range(count):
            value = await self.search()
            if value is not None:
                mcp.append(value)
            direct.append(await index.search(self.rng.choice(self.queries)))
        return mcp, direct

    async def run_until(self, done: asyncio.Event, pause_s: float) -> list[float]:
        latencies: list[float] = []
        while not done.is_set():
            value = await self.search()
            if value is not None:
                latencies.append(value)
            if pause_s:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), pause_s)
        return latencies


class IndexProbe:
    """Hybrid searches sent straight to the index service with one query vector embedded
    once: the index's own time, without the embedder, the gateway or MCP."""

    def __init__(self, client: httpx.AsyncClient, vector_b64: str) -> None:
        self.client = client
        self.vector_b64 = vector_b64

    async def search(self, query: str) -> float:
        body = {"query": query, "vector_b64": self.vector_b64, "top_k": 5, "mode": "hybrid"}
        started = time.perf_counter()
        response = await self.client.post("/search", json=body)
        elapsed_ms = (time.perf_counter() - started) * 1000
        response.raise_for_status()
        return elapsed_ms


async def ingest(cluster: LocalCluster, folder: Path, library: str) -> dict[str, Any]:
    """One folder through `POST /ingest_folder`; seconds, chunks and chunks/s."""
    request = {"folder": str(folder), "library": library, "max_concurrency": 4}
    started = time.perf_counter()
    async with httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10)) as client:
        response = await client.post(cluster.gateway + "/ingest_folder", json=request)
    seconds = time.perf_counter() - started
    body: dict[str, Any] = response.json()
    if response.status_code != 200 or body.get("errors"):
        raise SystemExit(f"ingest of {folder} failed: HTTP {response.status_code} {body}")
    chunks = sum(int(r.get("chunk_count", 0)) for r in body.get("results", []))
    return {
        "files": len(body.get("results", [])),
        "chunks": chunks,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(chunks / seconds, 2),
    }


async def measure(cluster: LocalCluster, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    text = book_text()
    seed_chunks = await seed(cluster, text, args.seed_docs, args.file_chars)
    queries = make_queries(text, 500, random.Random(args.seed))
    folders = []
    for n in range(3):
        folder = work / f"folder-{n}"
        start = (n + 1) * args.files * args.file_chars
        write_folder(folder, text, args.files, args.file_chars, start=start)
        folders.append(folder)
    load = [round(os.getloadavg()[0], 2)]
    async with httpx.AsyncClient(base_url=cluster.embedder, timeout=60) as embedder:
        embedded = await embedder.post("/embed", json={"texts": [queries[0]], "kind": "query"})
        vector_b64 = embedded.json()["vectors_b64"]
    async with (
        httpx.AsyncClient(base_url=cluster.index, timeout=60) as index_client,
        sse_client(cluster.gateway + "/sse", timeout=30, sse_read_timeout=600) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        user = User(session, queries, args.seed)
        index = IndexProbe(index_client, vector_b64)
        await user.run(args.warmup)
        idle = await user.run(args.searches)
        alone_1 = await ingest(cluster, folders[0], "interference-0")
        after, index_after = await user.run_with_index(args.searches, index)
        load.append(round(os.getloadavg()[0], 2))
        await asyncio.sleep(args.settle)
        steady, index_steady = await user.run_with_index(args.searches, index)
        done = asyncio.Event()
        searching = asyncio.create_task(user.run_until(done, args.pause_ms / 1000))
        try:
            with_user = await ingest(cluster, folders[1], "interference-1")
        finally:
            done.set()
        during = await searching
        await asyncio.sleep(args.gap)
        alone_2 = await ingest(cluster, folders[2], "interference-2")
    load.append(round(os.getloadavg()[0], 2))
    idle_s, during_s, after_s, steady_s = map(_summary, (idle, during, after, steady))
    index_after_s, index_steady_s = _summary(index_after), _summary(index_steady)
    alone_rate = (alone_1["chunks_per_s"] + alone_2["chunks_per_s"]) / 2
    return {
        "seed_chunks": seed_chunks,
        "search_ms": {
            "idle": idle_s,
            "during_ingest": during_s,
            "after_write": after_s,
            "steady": steady_s,
        },
        "index_search_ms": {"after_write": index_after_s, "steady": index_steady_s},
        "ingest": {"alone_1": alone_1, "with_user": with_user, "alone_2": alone_2},
        "ratios": {
            "p50_during_over_idle": round(during_s["p50"] / idle_s["p50"], 2),
            "p95_during_over_idle": round(during_s["p95"] / idle_s["p95"], 2),
            "ingest_with_user_over_alone": round(with_user["chunks_per_s"] / alone_rate, 3),
            "p50_after_write_over_steady": round(after_s["p50"] / steady_s["p50"], 2),
            "index_p50_after_write_over_steady": round(
                index_after_s["p50"] / index_steady_s["p50"], 2
            ),
        },
        "errors": user.errors[:10],
        "error_count": len(user.errors),
        "pause_ms": args.pause_ms,
        "settle_s": args.settle,
        "load_average_1m": load,
        "cpu_count": os.cpu_count(),
        "command": args.command,
    }


def report(result: dict[str, Any]) -> str:
    s, r, i = result["search_ms"], result["ratios"], result["ingest"]

    def line(name: str, key: str) -> str:
        v = s[key]
        return f"  {name:<22} n={v['count']:<4} p50 {v['p50']:>7} ms  p95 {v['p95']:>7} ms"

    return "\n".join(
        [
            f"one MCP session, {result['cpu_count']} CPUs, load average "
            f"{' -> '.join(map(str, result['load_average_1m']))}",
            line("idle", "idle"),
            line("during ingest", "during_ingest"),
            line("right after the write", "after_write"),
            line(f"steady ({result['settle_s']} s later)", "steady"),
            f"  ingest alone {i['alone_1']['chunks_per_s']} / {i['alone_2']['chunks_per_s']} "
            f"chunks/s, with the user {i['with_user']['chunks_per_s']} chunks/s",
            f"ratios: p50 during/idle {r['p50_during_over_idle']} (goal <= 3), "
            f"p95 during/idle {r['p95_during_over_idle']} (<= 5), "
            f"ingest with/alone {r['ingest_with_user_over_alone']} (>= 0.85), "
            f"p50 after write/steady {r['p50_after_write_over_steady']} (<= 1.3; index alone "
            f"{result['index_search_ms']['after_write']['p50']} / "
            f"{result['index_search_ms']['steady']['p50']} ms = "
            f"{r['index_p50_after_write_over_steady']})",
            f"errors: {result['error_count']}",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.interference", description=__doc__)
    parser.add_argument("--files", type=int, default=60, help="files per ingested folder")
    parser.add_argument("--file-chars", type=int, default=4000)
    parser.add_argument("--searches", type=int, default=100, help="searches per quiet phase")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument(
        "--pause-ms",
        type=float,
        default=200.0,
        help="the user's pause between searches during the ingest",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=60.0,
        help="seconds between the after-write and the steady searches",
    )
    parser.add_argument("--gap", type=float, default=5.0, help="seconds between phases")
    parser.add_argument("--seed-docs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path, default=Path("var/bench/interference.json"))
    args = parser.parse_args(argv)
    args.command = command_line("bench.interference", argv)
    with tempfile.TemporaryDirectory(prefix="mvdb-interference-") as tmp:
        env = local_env(Path(tmp) / "var", LOG_LEVEL="WARNING")
        print("starting a private cluster ...", file=sys.stderr)
        with running(env) as cluster:
            result = asyncio.run(measure(cluster, args, Path(tmp)))
    write_json(args.json, result)
    print(report(result))
    print(f"(details in {args.json})")
    return 0 if result["error_count"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
