"""Ingest rate against the model's own rate on the same kind of text, in tokens per second.

    python -m bench.ingest_rate [--docs 60] [--words 1500] [--rounds 3] [--concurrency 4]
                                [--raw-docs 20] [--raw-batch 1 --raw-batch 4 ...]
                                [--env KEY=VALUE] [--json PATH]

On a private local cluster (the four services like `make up`, free loopback ports, a temporary
var directory and LanceDB), after a warm-up folder of four documents, `--rounds` folders of
`--docs` Markdown documents of real prose (about `--words` words each, built from consecutive
SciFact abstracts under `##` headings, as `bench.perf`'s corpus; other abstracts each round,
so nothing is a repeat) go through `POST /ingest_folder` (`max_concurrency` `--concurrency`).
Before the first ingest and after each one, the bundled model in this process (the product's
own `Embedder`: fastembed, the model's 256-token limit, length-sorted batches) embeds the
first `--raw-docs` documents cut into full windows of the model's size (254 text tokens plus
[CLS] and [SEP], cut at the model tokenizer's token boundaries), once per `--raw-batch` size.
Each ingest is compared with the mean of the raw passes just before and just after it, at the
best batch size, so the machine's changing load favours neither side; the report gives every
round and the median of the rounds' ratios.

Tokens are counted with the model's tokenizer, as the converter's chunker counts them:
- **text tokens**: each document's (or window's) tokens without special tokens, summed;
- **tokens embedded**: the tokens the model ran on, special tokens included (the ingest's
  chunks as the converter cut them, each chunk's `token_count`; the raw windows' own).

The ratios ingest / raw: in text tokens per second (the goal, >= 0.85: how fast the same text
is ingested, whatever the chunking costs in tokens), in tokens embedded per second, in chunks
per second, and inside the embedder's document model calls (tokens embedded over the seconds
those calls took, from the embedder's `/metrics`): with the model busy all through the ingest,
the gap between that figure and 1 is the model running slower in the service than alone. And,
since on a machine shared with other work the wall-clock figures move with what else runs,
text tokens per CPU second: the text over the CPU seconds the four services (and the
converter's workers) used during the ingest (/proc, Linux), against the text of the raw
windows over the CPU seconds of the raw passes: what the ingest path costs beside the model.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.cli import add_env_option, command_line, write_json
from bench.perf_corpus import converted_chunks, prose_documents, write_folder
from libs.modelfiles import bundled_tokenizer
from services.entrypoints.cluster import LocalCluster, local_env, running

MODEL_TOKENS = 256  # the bundled model's window, [CLS] and [SEP] included
WARMUP_DOCS = 4


def documents(folder: Path) -> list[str]:
    return [p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.md"))]


def text_tokens(texts: list[str]) -> int:
    encodings = bundled_tokenizer().encode_batch(texts, add_special_tokens=False)
    return sum(len(e.ids) for e in encodings)


def full_windows(texts: list[str], size: int = MODEL_TOKENS - 2) -> list[str]:
    """Each text cut into consecutive windows of `size` tokens (no overlap), sliced from the
    text at the tokenizer's offsets; the last window of a text holds what is left."""
    windows: list[str] = []
    for text, encoding in zip(
        texts, bundled_tokenizer().encode_batch(texts, add_special_tokens=False), strict=True
    ):
        offsets = encoding.offsets
        for start in range(0, len(offsets), size):
            end = min(start + size, len(offsets)) - 1
            windows.append(text[offsets[start][0] : offsets[end][1]])
    return windows


class RawModel:
    """The bundled model in this process (the product's `Embedder`), one session per batch
    size, timed on a fixed list of windows."""

    def __init__(self, windows: list[str], batch_sizes: list[int], cache: Path) -> None:
        from libs.settings import DEFAULT_MODEL
        from services.embedder.embed import Embedder

        self.windows = windows
        self.text_tokens = text_tokens(windows)
        self.tokens_embedded = sum(
            min(len(e.ids), MODEL_TOKENS) for e in bundled_tokenizer().encode_batch(windows)
        )
        self.models = {
            b: Embedder(DEFAULT_MODEL, model_dir=None, cache_dir=cache, batch_size=b)
            for b in batch_sizes
        }
        for model in self.models.values():
            model.embed(windows[:8], "document")  # warm-up
        self.seconds: dict[int, list[float]] = {b: [] for b in batch_sizes}
        self.cpu_seconds: dict[int, list[float]] = {b: [] for b in batch_sizes}

    def run(self) -> dict[int, float]:
        """One timed pass per batch size: tokens embedded per second."""
        rates: dict[int, float] = {}
        for batch, model in self.models.items():
            started, cpu = time.perf_counter(), time.process_time()
            model.embed(self.windows, "document")
            seconds = time.perf_counter() - started
            self.seconds[batch].append(seconds)
            self.cpu_seconds[batch].append(time.process_time() - cpu)
            rates[batch] = self.tokens_embedded / seconds
        return rates


def metric_sum(text: str, name: str, labels: str) -> float:
    """The value of one Prometheus sample (`name{labels}`) in `text`; 0 when absent."""
    match = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", text, re.MULTILINE)
    return float(match.group(1)) if match else 0.0


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return tree


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def service_cpu(var_dir: Path) -> dict[str, float]:
    """CPU seconds (user + system) used so far by each service with its child processes (the
    converter's workers), from the pid files of a private cluster and /proc (Linux)."""
    tree = _children()
    used: dict[str, float] = {}
    for pid_file in sorted((var_dir / "run").glob("*.pid")):
        todo = [int(pid_file.read_text().strip())]
        total = 0.0
        while todo:
            pid = todo.pop()
            total += _cpu_seconds(pid)
            todo.extend(tree.get(pid, []))
        used[pid_file.stem] = total
    return used


def embedder_seconds(cluster: LocalCluster) -> float:
    """Seconds the embedder's document model calls have taken so far."""
    text = httpx.get(cluster.embedder + "/metrics", timeout=30).text
    return metric_sum(text, "mvdb_embed_seconds_sum", 'kind="document"')


def ingest(
    cluster: LocalCluster, var_dir: Path, folder: Path, library: str, concurrency: int
) -> dict[str, Any]:
    request = {"folder": str(folder), "library": library, "max_concurrency": concurrency}
    busy_before = embedder_seconds(cluster)
    cpu_before = service_cpu(var_dir)
    started = time.perf_counter()
    response = httpx.post(
        cluster.gateway + "/ingest_folder", json=request, timeout=httpx.Timeout(None, connect=10)
    )
    seconds = time.perf_counter() - started
    body: dict[str, Any] = response.json()
    if response.status_code != 200 or body.get("errors"):
        raise SystemExit(f"ingest of {folder} failed: HTTP {response.status_code} {body}")
    results = body.get("results", [])
    return {
        "files": len(results),
        "chunks": sum(int(r.get("chunk_count", 0)) for r in results),
        "seconds": round(seconds, 2),
        "model_seconds": round(embedder_seconds(cluster) - busy_before, 2),
        "cpu_seconds": {
            name: round(value - cpu_before.get(name, 0.0), 2)
            for name, value in service_cpu(var_dir).items()
        },
    }


def chunk_tokens(cluster: LocalCluster, folder: Path) -> tuple[int, int]:
    """Chunks and tokens embedded (each chunk's `token_count`) of the folder's files: what
    the ingest embedded."""
    found = converted_chunks(cluster, folder)
    return len(found), sum(int(c["token_count"]) for c in found)


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    folders: list[tuple[Path, int]] = []
    for n in range(args.rounds):
        folder = work / f"docs-{n}"
        write_folder(folder, prose_documents(args.docs, args.words, offset=args.offset + 700 * n))
        folders.append((folder, text_tokens(documents(folder))))
    warm_folder = work / "warm"
    write_folder(warm_folder, prose_documents(WARMUP_DOCS, args.words, offset=args.offset + 4000))
    raw_texts = documents(folders[0][0])[: args.raw_docs]
    load = [round(os.getloadavg()[0], 2)]
    env = local_env(work / "var", LOG_LEVEL="WARNING", **dict(args.env))
    print("starting a private cluster ...", file=sys.stderr)
    rounds: list[dict[str, Any]] = []
    with running(env) as cluster:
        ingest(cluster, work / "var", warm_folder, "warm-up", args.concurrency)
        raw = RawModel(full_windows(raw_texts), args.raw_batch, work / "models")
        raw_rates = [raw.run()]
        for n, (folder, tokens) in enumerate(folders):
            done = ingest(cluster, work / "var", folder, f"rate-{n}", args.concurrency)
            chunks, embedded = chunk_tokens(cluster, folder)
            if chunks != done["chunks"]:
                raise SystemExit(f"the converter cut {chunks} chunks, the ingest stored {done}")
            raw_rates.append(raw.run())
            load.append(round(os.getloadavg()[0], 2))
            rounds.append(
                _round(done, (chunks, embedded, tokens), raw, raw_rates[-2], raw_rates[-1])
            )
            print(_round_line(n, rounds[-1]), file=sys.stderr, flush=True)
    by_batch = {str(b): [round(r[b], 1) for r in raw_rates] for b in args.raw_batch}
    return {
        "documents_per_round": args.docs,
        "rounds": rounds,
        "median_ratios": {
            key: round(float(np.median([r["ratios"][key] for r in rounds])), 3)
            for key in rounds[0]["ratios"]
        },
        "raw": {
            "windows": len(raw.windows),
            "tokens_embedded": raw.tokens_embedded,
            "tokens_embedded_per_s_by_batch": by_batch,
            "tokens_embedded_per_cpu_s_by_batch": {
                str(b): [round(raw.tokens_embedded / c, 1) for c in raw.cpu_seconds[b]]
                for b in args.raw_batch
            },
        },
        "concurrency": args.concurrency,
        "env": dict(args.env),
        "load_average_1m": load,
        "cpu_count": os.cpu_count(),
        "command": args.command,
    }


def _round(
    done: dict[str, Any],
    counts: tuple[int, int, int],
    model: RawModel,
    before: dict[int, float],
    after: dict[int, float],
) -> dict[str, Any]:
    """One ingest against the raw model's best batch size, its rate the mean of the passes
    just before and just after the ingest."""
    raw_rates = {b: (before[b] + after[b]) / 2 for b in before}
    best = max(raw_rates, key=lambda b: raw_rates[b])
    chunks, embedded, text = counts
    raw_embedded_per_s = raw_rates[best]
    raw_text_per_s = raw_embedded_per_s * model.text_tokens / model.tokens_embedded
    raw_chunks_per_s = raw_embedded_per_s * len(model.windows) / model.tokens_embedded
    seconds = done["seconds"]
    # CPU seconds, which other work on the machine moves less: the four services with their
    # workers against this process's raw passes (the two around this ingest), at the batch
    # size that used the least CPU (not necessarily the one fastest by the clock).
    cluster_cpu = sum(done["cpu_seconds"].values())
    raw_cpu = min(sum(seconds[-2:]) / 2 for seconds in model.cpu_seconds.values())
    raw_text_per_cpu_s = model.text_tokens / raw_cpu
    got = {
        "seconds": seconds,
        "chunks": chunks,
        "text_tokens": text,
        "tokens_embedded": embedded,
        "chunks_per_s": round(chunks / seconds, 2),
        "tokens_embedded_per_s": round(embedded / seconds, 1),
        "text_tokens_per_s": round(text / seconds, 1),
        "embedded_over_text": round(embedded / text, 3),
        "mean_tokens_per_chunk": round(embedded / chunks, 1),
        "model_seconds": done["model_seconds"],
        "model_busy_share": round(done["model_seconds"] / seconds, 3),
        "cpu_seconds": done["cpu_seconds"],
        "text_tokens_per_cpu_s": round(text / cluster_cpu, 1),
        "model_tokens_embedded_per_s": round(embedded / max(done["model_seconds"], 1e-9), 1),
    }
    return {
        "ingest": got,
        "raw": {
            "batch_size": best,
            "tokens_embedded_per_s": round(raw_embedded_per_s, 1),
            "text_tokens_per_s": round(raw_text_per_s, 1),
            "text_tokens_per_cpu_s": round(raw_text_per_cpu_s, 1),
            "chunks_per_s": round(raw_chunks_per_s, 2),
        },
        "ratios": {
            "text_tokens_per_s": round(got["text_tokens_per_s"] / raw_text_per_s, 3),
            "tokens_embedded_per_s": round(got["tokens_embedded_per_s"] / raw_embedded_per_s, 3),
            "model_calls_tokens_per_s": round(
                got["model_tokens_embedded_per_s"] / raw_embedded_per_s, 3
            ),
            "chunks_per_s": round(got["chunks_per_s"] / raw_chunks_per_s, 3),
            "text_tokens_per_cpu_s": round(got["text_tokens_per_cpu_s"] / raw_text_per_cpu_s, 3),
        },
    }


def _round_line(n: int, r: dict[str, Any]) -> str:
    i, w, q = r["ingest"], r["raw"], r["ratios"]
    return (
        f"  round {n}: ingest {i['seconds']} s, {i['chunks']} chunks, "
        f"{i['tokens_embedded_per_s']} tok emb/s, {i['text_tokens_per_s']} text tok/s "
        f"(emb/text {i['embedded_over_text']}, mean {i['mean_tokens_per_chunk']} tok/chunk, "
        f"model busy {i['model_busy_share']:.0%} at {i['model_tokens_embedded_per_s']} tok/s; "
        f"CPU s {i['cpu_seconds']}); "
        f"raw batch {w['batch_size']} {w['tokens_embedded_per_s']} tok emb/s; ratios text "
        f"{q['text_tokens_per_s']}, embedded {q['tokens_embedded_per_s']}, in model calls "
        f"{q['model_calls_tokens_per_s']}, chunks {q['chunks_per_s']}, text tokens per CPU "
        f"second {q['text_tokens_per_cpu_s']}"
    )


def report(result: dict[str, Any]) -> str:
    m = result["median_ratios"]
    lines = [
        f"{len(result['rounds'])} rounds of {result['documents_per_round']} documents, "
        f"{result['cpu_count']} CPUs, load average "
        f"{' -> '.join(map(str, result['load_average_1m']))}",
        *(_round_line(n, r) for n, r in enumerate(result["rounds"])),
        f"raw tokens embedded/s by batch size (passes around the ingests): "
        f"{result['raw']['tokens_embedded_per_s_by_batch']}",
        f"median ratios ingest / raw: text tokens/s {m['text_tokens_per_s']} (goal >= 0.85), "
        f"tokens embedded/s {m['tokens_embedded_per_s']}, inside the embedder's model calls "
        f"{m['model_calls_tokens_per_s']}, chunks/s {m['chunks_per_s']}, text tokens per CPU "
        f"second (the four services against the raw model) {m['text_tokens_per_cpu_s']}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest_rate", description=__doc__)
    parser.add_argument("--docs", type=int, default=60, help="documents in the folder")
    parser.add_argument("--words", type=int, default=1500, help="words per document")
    parser.add_argument("--offset", type=int, default=0, help="first SciFact abstract used")
    parser.add_argument("--concurrency", type=int, default=4, help="ingest max_concurrency")
    parser.add_argument("--rounds", type=int, default=3, help="ingests, each between raw passes")
    parser.add_argument(
        "--raw-docs", type=int, default=20, help="documents cut into windows for the raw model"
    )
    parser.add_argument(
        "--raw-batch",
        type=int,
        action="append",
        default=None,
        help="batch size of the raw model (repeatable; default 1, 2 and 4); the best is the "
        "reference",
    )
    parser.add_argument("--json", type=Path, default=Path("var/bench/ingest_rate.json"))
    add_env_option(parser)
    args = parser.parse_args(argv)
    args.command = command_line("bench.ingest_rate", argv)
    args.raw_batch = args.raw_batch or [1, 2, 4]
    with tempfile.TemporaryDirectory(prefix="mvdb-ingest-rate-") as tmp:
        result = measure(args, Path(tmp))
    write_json(args.json, result)
    print(report(result))
    print(f"(details in {args.json})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
