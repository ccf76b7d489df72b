"""MCP search latency of this checkout's gateway against another checkout's, side by side.

    python -m bench.ab_gateway --other /path/to/other/checkout [--chunks 10000] [--rounds 3]

For changes to the gateway's side of a search (its clients, the HTTP between services),
where separate `bench.perf` runs on a shared 2-core machine differ by more than the change.
One private cluster runs this checkout's four services, filled as `bench.perf` fills it for
its search step (a folder of real prose through `POST /ingest_folder`, then bulk-loaded
through the index's API to `--chunks`); a second gateway, started from the other checkout,
talks to the same embedder and index. The same SciFact queries go through an MCP SSE session
to each gateway, query by query, the first of the pair alternating, so both meet the same
machine state; then `list_documents` (limit 20) and `list_libraries` the same way. Reports,
per tool, p50 / p95 / mean per gateway and the median of the per-call differences (other
minus this).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.beir import load
from bench.perf_corpus import (
    SCIFACT,
    bulk_load,
    chunk_texts,
    prose_documents,
    raw_fastembed,
    write_folder,
)
from bench.perf_measure import ingest_folder, percentile
from services.entrypoints.cluster import free_port, local_env, running


@contextmanager
def other_gateway(checkout: Path, env: dict[str, str], var_dir: Path) -> Iterator[str]:
    """The gateway of `checkout` on a free port, with this cluster's service URLs."""
    port = free_port()
    var_dir.mkdir(parents=True, exist_ok=True)
    other_env = {**env, "GATEWAY_PORT": str(port), "VAR_DIR": str(var_dir)}
    log = (var_dir / "gateway.log").open("wb")
    # Run from the checkout's root: `-m` puts it first on sys.path, so its `libs` and
    # `services` are imported, not this one's.
    process = subprocess.Popen(
        [sys.executable, "-m", "services.entrypoints.serve", "gateway"],
        cwd=checkout,
        env=other_env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the other gateway did not start; see {var_dir}/gateway.log")
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


async def paired(
    gateways: dict[str, str], queries: list[str], warmup: list[str], rounds: int
) -> dict[str, Any]:
    """Each call goes to both gateways, the first of the pair alternating; per tool, the
    latencies of each and the median of the per-call differences (other minus this)."""
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    calls: list[tuple[str, dict[str, Any]]] = [
        ("search", {"query": q, "top_k": 10}) for q in queries
    ]
    calls += [("list_documents", {"limit": 20}), ("list_libraries", {})] * 50
    names = list(gateways)
    times: dict[tuple[str, str], list[float]] = {}
    async with AsyncExitStack() as stack:
        sessions: dict[str, ClientSession] = {}
        for name, url in gateways.items():
            read, write = await stack.enter_async_context(
                sse_client(url + "/sse", timeout=30, sse_read_timeout=600)
            )
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions[name] = session
        for q in warmup:
            for session in sessions.values():
                await session.call_tool("search", {"query": q, "top_k": 10})
        for r in range(rounds):
            for i, (tool, arguments) in enumerate(calls):
                for name in names if (i + r) % 2 == 0 else names[::-1]:
                    t0 = time.perf_counter()
                    result = await sessions[name].call_tool(tool, arguments)
                    times.setdefault((tool, name), []).append(time.perf_counter() - t0)
                    assert not result.is_error, result
    this, other = names
    report: dict[str, Any] = {}
    for tool in dict.fromkeys(tool for tool, _ in calls):
        entry: dict[str, Any] = {}
        for name in names:
            ts = times[(tool, name)]
            entry[name] = {
                "p50_ms": round(1000 * percentile(ts, 0.5), 2),
                "p95_ms": round(1000 * percentile(ts, 0.95), 2),
                "mean_ms": round(1000 * statistics.fmean(ts), 2),
                "calls": len(ts),
            }
        pairs = zip(times[(tool, this)], times[(tool, other)], strict=True)
        entry["median_difference_ms"] = round(1000 * statistics.median(b - a for a, b in pairs), 2)
        report[tool] = entry
    return report


def run(args: argparse.Namespace) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="mvdb-ab-"))
    env = local_env(workdir / "var", LOG_LEVEL="WARNING")
    all_queries = list(load(SCIFACT).queries.values())
    queries = all_queries[: args.queries]
    warmup = all_queries[args.queries : args.queries + 50]
    with running(env) as cluster:
        folder = workdir / "prose"
        write_folder(folder, prose_documents(args.docs, 1500))
        ingest_folder(cluster, folder, "prose")
        texts = chunk_texts(cluster, folder)
        _, vectors = raw_fastembed(texts, 32)
        bulk_load(cluster, args.chunks, texts, vectors, np.random.default_rng(7))
        httpx.post(cluster.index + "/optimize", timeout=600).raise_for_status()
        with other_gateway(args.other.resolve(), cluster.env, workdir / "var-other") as url:
            gateways = {"this": cluster.gateway, "other": url}
            report = asyncio.run(paired(gateways, queries, warmup, args.rounds))
    report["this_checkout"] = str(Path(__file__).resolve().parents[1])
    report["other_checkout"] = str(args.other.resolve())
    report["chunks"] = args.chunks
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab_gateway", description=__doc__)
    parser.add_argument("--other", type=Path, required=True, help="another checkout's root")
    parser.add_argument("--docs", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    if not (args.other / "services" / "entrypoints" / "serve.py").is_file():
        parser.error(f"{args.other} is not a checkout of this repository")
    report = run(args)
    text = json.dumps(report, indent=2)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
