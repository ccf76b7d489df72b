"""What `bench.perf` and `bench.scale` measure on a running cluster: peak memory per service,
folder ingests, MCP latencies, the hops of a search, and the recall of the approximate vector
index against exact search."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from services.entrypoints.cluster import LocalCluster


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


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB (0 when it is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


SERVICES = ("converter", "embedder", "index", "gateway")


@dataclass
class MemorySampler:
    """Peak resident memory of named processes (each with its children), sampled every
    `interval_s` while the block runs: `pids` says which, at each sample."""

    pids: Callable[[], dict[str, int | None]]
    interval_s: float = 0.25
    peaks: dict[str, float] = field(default_factory=dict)
    peak_total: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    @classmethod
    def of_cluster(cls, cluster: LocalCluster) -> MemorySampler:
        return cls(lambda: {name: cluster.pid(name) for name in SERVICES})

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
            for name, pid in self.pids().items():
                if pid is None:
                    continue
                rss = sum(rss_mb(p) for p in _tree(pid))
                total += rss
                self.peaks[name] = max(self.peaks.get(name, 0.0), rss)
            self.peak_total = max(self.peak_total, total)
            self._stop.wait(self.interval_s)


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
        for q in queries:
            took_embed, took_index, vector = _direct_search(client, cluster, q)
            embed.append(took_embed)
            index_after.append(took_index)
            vectors.append(vector)
        index_alone: list[float] = []
        for q, vector in zip(queries, vectors, strict=True):
            t0 = time.perf_counter()
            index_search(client, cluster, q, vector)
            index_alone.append(time.perf_counter() - t0)
    return {
        "embed_query_p50_ms": 1000 * percentile(embed, 0.5),
        "index_search_after_embed_p50_ms": 1000 * percentile(index_after, 0.5),
        "index_search_back_to_back_p50_ms": 1000 * percentile(index_alone, 0.5),
    }


def index_search(client: httpx.Client, cluster: LocalCluster, q: str, vector: str) -> None:
    """One hybrid search (top_k 10) straight to the index, the query already embedded."""
    body = {"query": q, "vector_b64": vector, "top_k": 10}
    client.post(cluster.index + "/search", json=body).raise_for_status()


def _direct_search(client: httpx.Client, cluster: LocalCluster, q: str) -> tuple[float, float, str]:
    """The two hops of a search sent straight to the services, one after the other as the
    gateway sends them: (embedding seconds, index seconds, the query vector)."""
    t0 = time.perf_counter()
    reply = client.post(cluster.embedder + "/embed", json={"texts": [q], "kind": "query"})
    t1 = time.perf_counter()
    reply.raise_for_status()
    vector: str = reply.json()["vectors_b64"]
    index_search(client, cluster, q, vector)
    return t1 - t0, time.perf_counter() - t1, vector


async def search_overhead(
    cluster: LocalCluster, queries: list[str], warmup: list[str]
) -> dict[str, float]:
    """Issue 19, goal 3: MCP `search` p50 against the work it carries (query embedding p50 +
    index search p50), measured in one run and interleaved query by query, so that a change in
    the machine's load moves every figure alike. For each query: the MCP search over SSE, the
    same over streamable HTTP (two Python SDK sessions open side by side, top_k 10, query
    embedding included), the same over SSE with the TypeScript SDK's client and with a bare
    one (`bench.mcp_clients`), and the query's two hops sent straight to the embedder and the
    index with httpx; the order rotates from query to query."""
    from mcp import ClientSession
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    from bench.mcp_clients import BareClient, TypeScriptClient

    times: dict[str, list[float]] = {"sse": [], "http": [], "ts": [], "bare": []}
    times |= {"embed": [], "index": []}
    async with (
        sse_client(cluster.gateway + "/sse", timeout=30, sse_read_timeout=600) as (read, write),
        ClientSession(read, write) as sse,
        streamable_http_client(cluster.gateway + "/mcp") as (http_read, http_write),
        ClientSession(http_read, http_write) as http,
    ):
        await sse.initialize()
        await http.initialize()
        with contextlib.ExitStack() as stack:
            client = stack.enter_context(httpx.Client(timeout=60))
            bare = stack.enter_context(BareClient(cluster.gateway))
            ts = None
            if TypeScriptClient.available():
                ts = stack.enter_context(TypeScriptClient(cluster.gateway))

            async def mcp(session: ClientSession, q: str) -> float:
                t0 = time.perf_counter()
                result = await session.call_tool("search", {"query": q, "top_k": 10})
                took = time.perf_counter() - t0
                assert not result.is_error and (result.structured_content or {}).get("results")
                return took

            async def step(part: str, q: str) -> None:
                if part in ("sse", "http"):
                    times[part].append(await mcp(sse if part == "sse" else http, q))
                elif part == "bare":
                    times[part].append(bare.search(q))
                elif part == "ts" and ts is not None:
                    times[part].append(ts.search(q))
                elif part == "hops":
                    took_embed, took_index, _ = _direct_search(client, cluster, q)
                    times["embed"].append(took_embed)
                    times["index"].append(took_index)

            parts = ["sse", "http", "ts", "bare", "hops"]
            for q in warmup:
                for part in parts:
                    await step(part, q)
            for times_list in times.values():
                times_list.clear()
            for n, q in enumerate(queries):
                for i in range(len(parts)):
                    await step(parts[(n + i) % len(parts)], q)
    p50 = {name: percentile(values, 0.5) for name, values in times.items() if values}
    parts_s = p50["embed"] + p50["index"]
    measured = {
        "mcp_search_p50_ms": round(1000 * p50["sse"], 2),
        "mcp_search_p95_ms": round(1000 * percentile(times["sse"], 0.95), 2),
        "embed_query_p50_ms": round(1000 * p50["embed"], 2),
        "index_search_p50_ms": round(1000 * p50["index"], 2),
        "rest_p50_ms": round(1000 * (p50["sse"] - parts_s), 2),
        "ratio_mcp_to_embed_plus_index": round(p50["sse"] / parts_s, 3),
        "streamable_http_search_p50_ms": round(1000 * p50["http"], 2),
        "streamable_http_ratio": round(p50["http"] / parts_s, 3),
        "bare_client_search_p50_ms": round(1000 * p50["bare"], 2),
        "bare_client_ratio": round(p50["bare"] / parts_s, 3),
        "queries": len(queries),
    }
    if "ts" in p50:
        measured["ts_sdk_search_p50_ms"] = round(1000 * p50["ts"], 2)
        measured["ts_sdk_ratio"] = round(p50["ts"] / parts_s, 3)
    return measured


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def cpu_per_search(cluster: LocalCluster, queries: list[str]) -> dict[str, float]:
    """CPU milliseconds each process spends per search (user + system, every thread), over
    the MCP searches (SSE) and then over the same queries' two hops sent straight to the
    services: where the rest of an MCP search goes, free of the waits for a core that make
    wall-clock profiles of a loaded machine hard to read. `client` is this process (the MCP
    SDK's client, or httpx for the hops). Clock ticks are 10 ms: use 100+ queries."""
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    pids = {name: cluster.pid(name) for name in ("gateway", "embedder", "index")}
    procs = {name: pid for name, pid in pids.items() if pid is not None}
    procs["client"] = os.getpid()

    def sample() -> dict[str, float]:
        return {name: _cpu_seconds(pid) for name, pid in procs.items()}

    def per_search(before: dict[str, float]) -> dict[str, float]:
        after = sample()
        return {k: round(1000 * (after[k] - before[k]) / len(queries), 2) for k in procs}

    async with (
        sse_client(cluster.gateway + "/sse", timeout=30, sse_read_timeout=600) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await session.call_tool("search", {"query": queries[0], "top_k": 10})
        before = sample()
        for q in queries:
            await session.call_tool("search", {"query": q, "top_k": 10})
        mcp = per_search(before)
    with httpx.Client(timeout=60) as client:
        _direct_search(client, cluster, queries[0])
        before = sample()
        for q in queries:
            _direct_search(client, cluster, q)
        direct = per_search(before)
    return {
        **{f"mcp_{k}_cpu_ms": v for k, v in mcp.items()},
        **{f"direct_{k}_cpu_ms": v for k, v in direct.items()},
    }


def index_counts(cluster: LocalCluster) -> dict[str, Any]:
    info: dict[str, Any] = httpx.get(cluster.index + "/info", timeout=30).json()
    return info


def exact_top_k(
    uri: str,
    queries: np.ndarray,
    k: int = 10,
    block: int = 65_536,
    storage_options: dict[str, str] | None = None,
) -> tuple[list[set[tuple[str, int]]], int]:
    """Exact top-k by cosine (the stored vectors are normalised) over every stored vector,
    read in blocks so that a table of a million rows never sits in memory whole."""
    import lancedb

    table = lancedb.connect(uri, storage_options=storage_options).open_table("chunks")
    scan = table.search().select(["doc_id", "chunk_index", "vector"]).limit(None)
    best_scores = np.full((len(queries), k), -np.inf, np.float32)
    best_keys: list[list[tuple[str, int]]] = [[("", -1)] * k for _ in queries]
    rows = 0
    for batch in scan.to_batches(block):
        n = batch.num_rows
        flat = batch.column("vector").values.to_numpy(zero_copy_only=False)
        matrix = flat.reshape(n, -1).astype(np.float32, copy=False)
        scores = queries @ matrix.T  # (queries, n)
        doc_ids = batch.column("doc_id").to_pylist()
        chunk_indexes = batch.column("chunk_index").to_pylist()
        take = min(k, n)
        top = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        for qi in range(len(queries)):
            merged = [
                *zip(best_scores[qi].tolist(), best_keys[qi], strict=True),
                *((float(scores[qi, j]), (doc_ids[j], chunk_indexes[j])) for j in top[qi]),
            ]
            merged.sort(key=lambda item: -item[0])
            best_scores[qi] = [score for score, _ in merged[:k]]
            best_keys[qi] = [key for _, key in merged[:k]]
        rows += n
    return [set(keys) for keys in best_keys], rows


def ann_recall(cluster: LocalCluster, queries: list[str], k: int = 10) -> dict[str, Any]:
    """Vector-mode results of the index service against exact top-k over every stored
    vector, for real queries embedded by the cluster's embedder (a stored chunk's own vector
    as the query would find that chunk's near copies in one partition, which flatters an
    approximate index)."""
    from libs.vectors import decode, encode

    with httpx.Client(timeout=60) as client:
        reply = client.post(cluster.embedder + "/embed", json={"texts": queries, "kind": "query"})
        reply.raise_for_status()
        body = reply.json()
        vectors = decode(body["vectors_b64"], body["dim"], len(queries))
        truths, rows = exact_top_k(cluster.env["LANCEDB_URI"], vectors, k)
        hits = 0
        for q, truth in zip(vectors, truths, strict=True):
            got = client.post(
                cluster.index + "/search",
                json={"query": "", "vector_b64": encode(q[None, :]), "top_k": k, "mode": "vector"},
            ).json()["results"]
            hits += len(truth & {(r["doc_id"], r["chunk_index"]) for r in got})
    return {"recall_at_10": hits / (k * len(queries)), "rows": rows, "queries": len(queries)}
