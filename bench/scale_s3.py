"""The index on object storage, measured (`make bench-scale-s3`).

    python -m bench.scale_s3 [--chunks 100000] [--json var/bench/scale-s3.json]

A local S3-compatible server (`ministack`, on 127.0.0.1, its data in memory) holds the store:
`LANCEDB_URI=s3://bucket/prefix`, `LANCEDB_STORAGE_OPTIONS` with its endpoint. The table is
topped up through the index service's own API as in `bench.perf` (real chunk texts, their
embeddings plus small noise), then, on clusters started like `make up`:

1. warm search p50/p95 through MCP (the writer alone serving);
2. a cold reader's time to first answer: an index process started with `INDEX_ROLE=reader`
   on the table, from its start to its first `POST /search` answered, and to `/readyz`;
3. searches/s with `INDEX_READERS` 0, 1 and 2: concurrent MCP sessions searching for a fixed
   time, with the CPU seconds each process spent per search, so that a limit of the machine
   (two cores) shows as such;
4. a long ingest: rounds of new documents through the gateway's `POST /ingest_folder`, back
   to back, into the S3 store and into a store on local disk holding the same chunks, with
   the milliseconds per document and the index's folds in each round: whether a write slows
   down as table versions accumulate on object storage, and whether the folds bound it.
   `--skip-search` runs the load and this phase alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.beir import load
from bench.cli import write_json
from bench.perf_corpus import SCIFACT, bulk_load, prose_documents, write_folder
from bench.perf_measure import ingest_folder, mcp_latencies, percentile
from bench.scale import DEFAULT_VAR, base_material, folds, load_avg
from libs.vectors import encode
from services.entrypoints.cluster import LocalCluster, free_port, local_env, running

# ministack does not check credentials; they only have to be there.
KEYS = {"aws_access_key_id": "AKIABENCHSCALE00001", "aws_secret_access_key": "bench-secret-key"}


@contextlib.contextmanager
def s3_server(workdir: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """ministack on a free loopback port, stopped on exit."""
    port = free_port()
    env = {**os.environ, "BIND_HOST": "127.0.0.1", "GATEWAY_PORT": str(port)}
    env.update({"SERVICES": "s3", "LOG_LEVEL": "WARNING", "TMPDIR": str(workdir)})
    with (workdir / "ministack.log").open("wb") as log:
        process = subprocess.Popen(
            [str(Path(sys.executable).with_name("ministack"))],
            env=env,
            cwd=workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_answering(endpoint + "/", process)
        yield endpoint, process
    finally:
        process.terminate()
        process.wait(timeout=30)


def wait_answering(url: str, process: subprocess.Popen[bytes], limit_s: float = 120) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < limit_s:
        if process.poll() is not None:
            raise RuntimeError(f"process {process.pid} exited with {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code < 500:
                return time.perf_counter() - started
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within {limit_s} s")


def spawn_index(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """An index process (`serve index`) with exactly `env`, its output in `log`."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "services.entrypoints.serve", "index"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def store_env(endpoint: str) -> dict[str, str]:
    bucket = f"bench-{uuid.uuid4().hex[:8]}"
    httpx.put(f"{endpoint}/{bucket}", timeout=30).raise_for_status()
    options = {"endpoint": endpoint, "region": "us-east-1", "allow_http": "true", **KEYS}
    return {"LANCEDB_URI": f"s3://{bucket}/store", "LANCEDB_STORAGE_OPTIONS": json.dumps(options)}


def cold_reader(store: dict[str, str], workdir: Path, vector: np.ndarray) -> dict[str, float]:
    """An index reader started on the table: seconds to /readyz and to its first search."""
    port = free_port()
    env = {**os.environ, **store, "BIND_HOST": "127.0.0.1", "INDEX_PORT": str(port)}
    env.update({"INDEX_ROLE": "reader", "LOG_LEVEL": "WARNING", "VAR_DIR": str(workdir)})
    url = f"http://127.0.0.1:{port}"
    body = {"query": "", "vector_b64": encode(vector[None, :]), "top_k": 10, "mode": "hybrid"}
    started = time.perf_counter()
    process = spawn_index(env, workdir / f"reader-{port}.log")
    try:
        ready = wait_answering(url + "/readyz", process)
        with httpx.Client(timeout=120) as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    answer = client.post(url + "/search", json=body)
                    if answer.status_code == 200 and answer.json()["results"]:
                        break
                time.sleep(0.05)
            first = time.perf_counter() - started
            t0 = time.perf_counter()
            client.post(url + "/search", json=body).raise_for_status()
            second = time.perf_counter() - t0
    finally:
        process.terminate()
        process.wait(timeout=30)
    return {
        "ready_s": round(ready, 2),
        "first_search_s": round(first, 2),
        "next_search_ms": round(1000 * second, 1),
    }


def _cpu_s(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / os.sysconf(
        "SC_CLK_TCK"
    )


async def _throughput(
    cluster: LocalCluster, queries: list[str], sessions: int, seconds: float
) -> list[float]:
    from mcp import ClientSession
    from mcp.client.sse import sse_client

    done: list[float] = []

    async def one(n: int) -> None:
        async with (
            sse_client(cluster.gateway + "/sse", timeout=30, sse_read_timeout=600) as (rd, wr),
            ClientSession(rd, wr) as session,
        ):
            await session.initialize()
            await ready.wait()
            i = n
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                result = await session.call_tool(
                    "search", {"query": queries[i % len(queries)], "top_k": 10}
                )
                if result.is_error:
                    raise RuntimeError(f"search failed: {result.content}")
                done.append(time.perf_counter() - t0)
                i += sessions

    ready = asyncio.Event()
    deadline = float("inf")
    tasks = [asyncio.create_task(one(n)) for n in range(sessions)]
    await asyncio.sleep(3)  # sessions open
    deadline = time.perf_counter() + seconds
    ready.set()
    await asyncio.gather(*tasks)
    return done


def throughput(
    cluster: LocalCluster,
    readers: int,
    queries: list[str],
    sessions: int,
    seconds: float,
    server_pid: int,
) -> dict[str, Any]:
    names = [
        "converter",
        "embedder",
        "index",
        "gateway",
        *(f"index-reader-{i + 1}" for i in range(readers)),
    ]
    pids = {name: cluster.pid(name) for name in names} | {"s3_server": server_pid}
    before = {name: _cpu_s(pid) for name, pid in pids.items()}
    started = time.perf_counter()
    latencies = asyncio.run(_throughput(cluster, queries, sessions, seconds))
    wall = time.perf_counter() - started
    cpu = {name: _cpu_s(pid) - before[name] for name, pid in pids.items()}
    count = len(latencies)
    return {
        "readers": readers,
        "sessions": sessions,
        "searches": count,
        "searches_per_s": round(count / seconds, 1),
        "p50_ms": round(1000 * percentile(latencies, 0.5), 1),
        "p95_ms": round(1000 * percentile(latencies, 0.95), 1),
        "cpu_ms_per_search": {name: round(1000 * s / max(count, 1), 1) for name, s in cpu.items()},
        "cpu_busy_share": round(sum(cpu.values()) / (wall * (os.cpu_count() or 1)), 2),
        "load_avg": load_avg(),
    }


def long_ingest(cluster: LocalCluster, work: Path, rounds: int, docs: int) -> dict[str, Any]:
    """`rounds` folders of `docs` new prose documents each (about 150 words), ingested one
    after the other: milliseconds per document and the folds the index ran, per round."""
    per_round: list[dict[str, float]] = []
    for r in range(rounds):
        folder = work / f"long-{r}"
        write_folder(folder, prose_documents(docs, 150, offset=9000 + r * docs))
        before = folds(cluster)
        took, _ = ingest_folder(cluster, folder, "long-ingest")
        after = folds(cluster)
        per_round.append(
            {
                "ms_per_doc": round(1000 * took / docs, 1),
                "folds": round(after[0] - before[0]),
                "fold_s": round(after[1] - before[1], 1),
            }
        )
        print(json.dumps(per_round[-1]), file=sys.stderr, flush=True)
    values = [entry["ms_per_doc"] for entry in per_round]
    half = len(values) // 2
    return {
        "documents_per_round": docs,
        "rounds": per_round,
        "second_half_to_first": round(sum(values[half:]) / max(sum(values[:half]), 1e-9), 3),
        "load_avg": load_avg(),
    }


def _loaded(cluster: LocalCluster, args: argparse.Namespace, material: Any) -> dict[str, Any]:
    """The table topped up to `--chunks` and optimized, as `bench.perf` loads its tables."""
    texts, vectors, tokens = material
    took = bulk_load(cluster, args.chunks, texts, vectors, np.random.default_rng(5), tokens=tokens)
    started = time.perf_counter()
    httpx.post(cluster.index + "/optimize", timeout=None).raise_for_status()
    return {
        "chunks": args.chunks,
        "bulk_load_s": round(took, 1),
        "optimize_s": round(time.perf_counter() - started, 1),
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    material = base_material(args.var)
    vectors = material[1]
    workdir = Path(tempfile.mkdtemp(prefix="mvdb-s3-"))
    all_queries = list(load(SCIFACT).queries.values())
    queries, warmup = all_queries[: args.queries], all_queries[args.queries : args.queries + 50]
    report: dict[str, Any] = {"cores": os.cpu_count(), "load_avg_before": load_avg()}
    with s3_server(workdir) as (endpoint, server):
        store = store_env(endpoint)

        def cluster_env(readers: int) -> dict[str, str]:
            var = workdir / f"var-{readers}"
            return {**local_env(var, readers=readers, LOG_LEVEL="WARNING"), **store}

        with running(cluster_env(0)) as cluster:
            report["load"] = _loaded(cluster, args, material)
            if not args.skip_search:
                report["warm"] = asyncio.run(mcp_latencies(cluster, queries, warmup))
                report["warm"]["load_avg"] = load_avg()
                print(json.dumps(report["warm"]), file=sys.stderr, flush=True)
            if args.ingest_rounds:
                ingest = long_ingest(cluster, workdir, args.ingest_rounds, args.ingest_docs)
                report["long_ingest"] = {"s3": ingest}
        if args.ingest_rounds:  # the same on local disk, for comparison
            with running(local_env(workdir / "var-disk", LOG_LEVEL="WARNING")) as cluster:
                report["long_ingest"]["disk_load"] = _loaded(cluster, args, material)
                ingest = long_ingest(cluster, workdir, args.ingest_rounds, args.ingest_docs)
                report["long_ingest"]["disk"] = ingest
        if args.skip_search:
            return report
        report["cold_reader"] = [cold_reader(store, workdir, vectors[i]) for i in range(3)]
        print(json.dumps(report["cold_reader"]), file=sys.stderr, flush=True)
        report["throughput"] = []
        for readers in (0, 1, 2):
            with running(cluster_env(readers)) as cluster:
                asyncio.run(mcp_latencies(cluster, warmup[:10], warmup[10:20]))
                entry = throughput(
                    cluster, readers, queries, args.sessions, args.seconds, server.pid
                )
                report["throughput"].append(entry)
                print(json.dumps(entry), file=sys.stderr, flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_s3", description=__doc__)
    parser.add_argument("--var", type=Path, default=DEFAULT_VAR)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--ingest-rounds", type=int, default=10, help="0: no long ingest")
    parser.add_argument("--ingest-docs", type=int, default=30, help="documents per round")
    parser.add_argument("--skip-search", action="store_true", help="load and long ingest only")
    parser.add_argument("--json", type=Path, default=Path("var/bench/scale-s3.json"))
    args = parser.parse_args(argv)
    report = run(args)
    print(write_json(args.json, report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
