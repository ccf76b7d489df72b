"""Load: concurrent MCP searches while a folder ingest runs, on a private local cluster.

    python -m bench.load [--sessions 20] [--duration 60] [--files 80] [--no-ingest]
                         [--no-compare] [--background] [--json PATH]

Starts the four services like `make up` (free loopback ports, a temporary var directory
and LanceDB), indexes a few seed documents so that searches have something to find, then
runs three phases: `--sessions` MCP SSE sessions searching in a loop with varied queries
(word windows drawn from the same novel) for `--duration` seconds alone; the same while
`POST /ingest_folder` works through `--files` real-text files; a second folder of the same
size ingested alone. Everything stays on loopback.

Reported: errors (goal: zero: failed calls, error results, sessions that could not open),
searches done and per second, search latency p50/p95/p99/max as the client sees it (query
embedding included), ingest progress (files done, chunks indexed per second), the load
average, and the ratios within the run (issue 19, goal 5): searches/s, p50 and p95 during
the ingest against alone, and the ingest's chunks/s with the searches against alone, with
the command. `--no-compare` runs only the middle phase, `--no-ingest` only the first;
`--background` runs the folders as background jobs (followed with `GET /jobs/{id}`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from mcp import ClientSession
from mcp.client.sse import sse_client

from bench.cli import command_line, write_json
from services.entrypoints.cluster import LocalCluster, local_env, running

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO.parent / "shared" / "data" / "files" / "gutenberg" / "1342-0.txt"
FOLDER_LIBRARY = "load-folder"
SEED_LIBRARY = "load-seed"


@dataclass
class SearchStats:
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    empty: int = 0


@dataclass
class Progress:
    """(seconds since the window opened, documents in the folder's library, chunk rows)."""

    samples: list[tuple[float, int, int]] = field(default_factory=list)


def book_text() -> str:
    if not BOOK.is_file():
        raise SystemExit(f"the novel used as corpus is missing: {BOOK}")
    text = BOOK.read_text(encoding="utf-8")
    return text[text.find("Chapter 1") :] if "Chapter 1" in text else text


def write_folder(folder: Path, text: str, files: int, chars: int, start: int) -> None:
    folder.mkdir(parents=True)
    for i in range(files):
        at = (start + i * chars) % max(1, len(text) - chars)
        (folder / f"part-{i:03d}.txt").write_text(text[at : at + chars], encoding="utf-8")


def make_queries(text: str, count: int, rng: random.Random) -> list[str]:
    words = text.split()
    queries = []
    for _ in range(count):
        size = rng.randint(3, 9)
        at = rng.randrange(0, len(words) - size)
        queries.append(" ".join(words[at : at + size]))
    return queries


def _payload(result: Any) -> dict[str, Any]:
    structured = result.structured_content
    if isinstance(structured, dict):
        inner = structured.get("result") if set(structured) == {"result"} else structured
        return inner if isinstance(inner, dict) else {}
    text = "".join(getattr(c, "text", "") for c in result.content)
    try:
        value = json.loads(text)
    except ValueError:
        return {"status": "error", "error": text[:200]}
    return value if isinstance(value, dict) else {}


async def search_loop(
    url: str, queries: list[str], deadline: float, seed: int, stats: SearchStats
) -> None:
    rng = random.Random(seed)
    try:
        async with (
            sse_client(url, timeout=30, sse_read_timeout=600) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            while time.monotonic() < deadline:
                query = rng.choice(queries)
                started = time.perf_counter()
                try:
                    result = await session.call_tool("search", {"query": query, "top_k": 5})
                except Exception as exc:
                    stats.errors.append(f"search raised {type(exc).__name__}: {exc}")
                    continue
                elapsed_ms = (time.perf_counter() - started) * 1000
                payload = _payload(result)
                if result.is_error or payload.get("status") == "error":
                    stats.errors.append(f"search error: {payload.get('error', payload)}")
                    continue
                stats.latencies_ms.append(elapsed_ms)
                stats.empty += not payload.get("results")
    except Exception as exc:
        stats.errors.append(f"session failed: {type(exc).__name__}: {exc}")


async def sample_progress(
    cluster: LocalCluster, opened: float, deadline: float, progress: Progress
) -> None:
    async with httpx.AsyncClient(base_url=cluster.index, timeout=10) as index:
        while True:
            now = time.monotonic()
            try:
                listed = await index.get(
                    "/documents", params={"library": FOLDER_LIBRARY, "limit": 1}
                )
                info = await index.get("/info")
                progress.samples.append(
                    (now - opened, int(listed.json()["total"]), int(info.json()["chunks"]))
                )
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            if now >= deadline:
                return
            await asyncio.sleep(min(1.0, max(0.0, deadline - now)))


async def run_ingest(
    cluster: LocalCluster, folder: Path, concurrency: int, background: bool
) -> dict[str, Any]:
    """The folder ingest: one call that returns when it is done, or (`background`) a job
    followed with GET /jobs/{id} until it ends. Its result or final job, with the HTTP status
    and the seconds it took."""
    request = {
        "folder": str(folder),
        "library": FOLDER_LIBRARY,
        "max_concurrency": concurrency,
        "background": background,
    }
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10)) as client:
        response = await client.post(cluster.gateway + "/ingest_folder", json=request)
        body: dict[str, Any] = response.json()
        while background and response.status_code == 200:
            response = await client.get(f"{cluster.gateway}/jobs/{body['job_id']}")
            body = response.json()
            if body.get("status") not in ("queued", "running"):
                break
            await asyncio.sleep(1.0)
    body["_status"] = response.status_code
    body["_seconds"] = time.monotonic() - started
    return body


async def seed(cluster: LocalCluster, text: str, docs: int, chars: int) -> int:
    async with (
        sse_client(cluster.gateway + "/sse", timeout=30, sse_read_timeout=600) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        chunks = 0
        for i in range(docs):
            at = len(text) // 2 + i * chars
            result = await session.call_tool(
                "ingest_content",
                {"content": text[at : at + chars], "source": f"seed-{i}", "library": SEED_LIBRARY},
            )
            payload = _payload(result)
            if payload.get("status") not in ("indexed", "skipped", "replaced"):
                raise SystemExit(f"seeding failed: {payload}")
            chunks += int(payload["chunk_count"])
        return chunks


async def load(cluster: LocalCluster, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    text = book_text()
    rng = random.Random(args.seed)
    seed_chunks = await seed(cluster, text, args.seed_docs, args.file_chars)
    queries = make_queries(text, 500, rng)
    folder = workdir / "folder"
    write_folder(folder, text, args.files, args.file_chars, start=0)
    if args.no_ingest or args.no_compare:
        result = await window(cluster, args, queries, None if args.no_ingest else folder)
        return {**result, "seed_chunks": seed_chunks}
    alone = await window(cluster, args, queries, None)
    during = await window(cluster, args, queries, folder, drain=True)
    other = workdir / "folder-alone"
    write_folder(other, text, args.files, args.file_chars, start=args.files * args.file_chars)
    before = int(httpx.get(cluster.index + "/info", timeout=30).json()["chunks"])
    solo = await run_ingest(cluster, other, args.ingest_concurrency, args.background)
    solo_chunks = int(httpx.get(cluster.index + "/info", timeout=30).json()["chunks"]) - before
    compared = {
        "searches_per_s_during_ingest_to_alone": ("searches_per_s",),
        "p50_during_ingest_to_alone": ("latency_ms", "p50"),
        "p95_during_ingest_to_alone": ("latency_ms", "p95"),
    }
    ratios = {name: _ratio(during, alone, keys) for name, keys in compared.items()}
    rate = solo_chunks / solo["_seconds"]
    ratios["ingest_chunks_per_s_with_searches_to_alone"] = round(
        during["ingest"]["chunks_per_s"] / rate, 3
    )
    return {
        **during,
        "seed_chunks": seed_chunks,
        "searches_alone": {k: alone[k] for k in ("searches", "searches_per_s", "latency_ms")},
        "ingest_alone": {"chunks": solo_chunks, "chunks_per_s": round(rate, 1)},
        "ratios": ratios,
        "load_average_1m": {"before": alone["load_average_1m"]["before"], "after": _load()},
    }


def _ratio(a: Any, b: Any, keys: tuple[str, ...]) -> float:
    for key in keys:
        a, b = a[key], b[key]
    return round(float(a) / float(b), 3)


def _load() -> float:  # the 1-minute load average
    return round(os.getloadavg()[0], 2)


async def window(
    cluster: LocalCluster,
    args: argparse.Namespace,
    queries: list[str],
    folder: Path | None,
    drain: bool = False,
) -> dict[str, Any]:
    """`--sessions` sessions searching for `--duration` s, `folder` ingested meanwhile."""
    stats = SearchStats()
    progress = Progress()
    load_before = os.getloadavg()[0]
    opened = time.monotonic()
    deadline = opened + args.duration
    ingest = None
    if folder is not None:
        ingest = asyncio.create_task(
            run_ingest(cluster, folder, args.ingest_concurrency, args.background)
        )
    await asyncio.gather(
        sample_progress(cluster, opened, deadline, progress),
        *(
            search_loop(cluster.gateway + "/sse", queries, deadline, args.seed + n, stats)
            for n in range(args.sessions)
        ),
    )
    window = time.monotonic() - opened
    ingest_result: dict[str, Any] | None = None
    if ingest is not None and ingest.done():
        ingest_result = ingest.result()
    elif ingest is not None and drain:
        await ingest  # phases follow: none may start while this folder is still ingesting
    elif ingest is not None:
        ingest.cancel()

    latencies = np.array(stats.latencies_ms) if stats.latencies_ms else np.array([np.nan])
    first, last = progress.samples[0], progress.samples[-1]
    files_done = last[1]
    chunks_in_window = last[2] - first[2]
    # An ingest that finished in the window ran for its own time, not the window's.
    ingest_seconds = ingest_result["_seconds"] if ingest_result else last[0] - first[0]
    ingest_errors: list[str] = []
    if ingest_result is not None:
        if ingest_result["_status"] != 200:
            ingest_errors.append(f"ingest_folder answered HTTP {ingest_result['_status']}")
        ingest_errors += [f"{e['file']}: {e['error']}" for e in ingest_result.get("errors", [])]
    return {
        "sessions": args.sessions,
        "duration_s": round(window, 1),
        "errors": len(stats.errors) + len(ingest_errors),
        "error_samples": (stats.errors + ingest_errors)[:10],
        "searches": len(stats.latencies_ms),
        "searches_per_s": round(len(stats.latencies_ms) / window, 1),
        "searches_without_results": stats.empty,
        "latency_ms": {
            "p50": round(float(np.percentile(latencies, 50)), 1),
            "p95": round(float(np.percentile(latencies, 95)), 1),
            "p99": round(float(np.percentile(latencies, 99)), 1),
            "max": round(float(np.max(latencies)), 1),
        },
        "ingest": {
            "files_total": args.files,
            "files_done_in_window": files_done,
            "finished_in_window": ingest_result is not None,
            "seconds_to_finish": round(ingest_result["_seconds"], 1) if ingest_result else None,
            "chunks_in_window": chunks_in_window,
            "chunks_per_s": round(chunks_in_window / max(ingest_seconds, 1e-9), 1),
        },
        "ingest_running": folder is not None,
        "ingest_as_job": args.background,
        # Other work on the machine shows here; the figures are only comparable between runs
        # on a similarly loaded machine.
        "load_average_1m": {"before": round(load_before, 2), "after": _load()},
        "cpu_count": os.cpu_count(),
    }


def report(result: dict[str, Any]) -> str:
    lat = result["latency_ms"]
    ing = result["ingest"]
    state = (
        f"finished in {ing['seconds_to_finish']} s"
        if ing["finished_in_window"]
        else "still running at the end"
    )
    during = "while a folder ingest runs" if result["ingest_running"] else "(no ingest)"
    if result["ingest_running"] and result.get("ingest_as_job"):
        during = "while a background folder job runs"
    load = result["load_average_1m"]
    lines = [
        f"{result['sessions']} MCP SSE sessions searching for {result['duration_s']} s "
        f"{during} (loopback; {result['cpu_count']} CPUs, load average {load['before']} "
        f"before, {load['after']} after)",
        f"errors:   {result['errors']}"
        + (f"  e.g. {result['error_samples'][0]}" if result["error_samples"] else ""),
        f"searches: {result['searches']} ({result['searches_per_s']}/s), "
        f"{result['searches_without_results']} with no results",
        f"latency:  p50 {lat['p50']} ms, p95 {lat['p95']} ms, p99 {lat['p99']} ms, "
        f"max {lat['max']} ms",
        f"ingest:   {ing['files_done_in_window']}/{ing['files_total']} files in the window "
        f"({state}), {ing['chunks_in_window']} chunks, {ing['chunks_per_s']} chunks/s",
    ]
    if not result["ingest_running"]:
        lines.pop()
    if "ratios" in result:
        alone = result["searches_alone"]
        lines.append(
            f"alone:    {alone['searches_per_s']} searches/s, p50 {alone['latency_ms']['p50']} ms, "
            f"p95 {alone['latency_ms']['p95']} ms; ingest alone "
            f"{result['ingest_alone']['chunks_per_s']} chunks/s"
        )
        lines.append("ratios:   " + json.dumps(result["ratios"]))
    lines.append(f"command:  {result['command']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__)
    parser.add_argument("--sessions", type=int, default=20, help="concurrent MCP SSE sessions")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    parser.add_argument("--files", type=int, default=80, help="files in the ingested folder")
    parser.add_argument("--file-chars", type=int, default=4000, help="characters per file")
    parser.add_argument("--ingest-concurrency", type=int, default=4)
    parser.add_argument(
        "--no-ingest", action="store_true", help="searches only, for comparison (no folder ingest)"
    )
    parser.add_argument(
        "--background",
        action="store_true",
        help="run the folder ingest as a background job (ingest_folder background=true)",
    )
    parser.add_argument("--no-compare", action="store_true", help="only the middle phase")
    parser.add_argument("--seed-docs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temp dir")
    parser.add_argument("--json", type=Path, default=Path("var/bench/load.json"))
    args = parser.parse_args(argv)
    if args.sessions < 1 or args.duration <= 0 or args.files < 1:
        parser.error("--sessions and --files must be at least 1, --duration positive")

    with tempfile.TemporaryDirectory(prefix="mvdb-load-") as tmp:
        workdir = args.workdir or Path(tmp)
        env = local_env(workdir / "var", LOG_LEVEL="WARNING")
        print("starting a private cluster ...", file=sys.stderr)
        with running(env) as cluster:
            result = asyncio.run(load(cluster, args, workdir))
    result["command"] = command_line("bench.load", argv)
    write_json(args.json, result)
    print(report(result))
    print(f"(details in {args.json})")
    return 0 if result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
