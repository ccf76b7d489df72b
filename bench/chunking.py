"""What chunk size and overlap buy in retrieval quality, and what they cost in tokens.

    python -m bench.chunking [DATASET_DIR] [--setting 256:32 --setting 256:0 ...]
                             [--max-docs N] [--max-queries N] [--long-docs K] [--json PATH]

For each setting `MAX_TOKENS:OVERLAP_TOKENS` (`CHUNK_MAX_TOKENS`, `CHUNK_OVERLAP_TOKENS`),
in this process and through the product's own parts: the converter core (its worker process
and the chunker with that setting), the embedder core with the bundled model, the index core
on a temporary LanceDB of its own, and the gateway's `Library` over them (`ingest_content`,
then `search` in hybrid and vector mode, top_k 100), as `bench.quality` does. Every corpus
entry is one document (its title as a `#` heading); chunk hits fold into a document ranking
(first hit wins); nDCG@10 and Recall@100 per mode.

With `--long-docs K`, K entries in corpus order make one long document instead, each entry a
`##` section under the document's `#` title, as in a report or a manual: what chunking does
where sections are packed together and split across chunks. A hit then stands for every
entry whose lines its chunk overlaps (its `start_line`..`end_line`), in line order, and the
ranking is of entries as before, so the judgements still apply.

One embedder core serves every setting, behind a cache of vectors by text: a chunk text that
an earlier setting already embedded (an abstract short enough to be one chunk at both, the
first window of a long one) is not embedded again. The model's vector for a text does not
depend on what else is in its batch, so the numbers are those of separate runs; only the time
is saved.

Reported per setting, besides the metrics: documents split into more than one chunk (what the
setting can change at all), chunks, text tokens (each document's, without special tokens),
tokens embedded (the chunks' `token_count`, special tokens included) and their ratio. Each
setting after the first is also compared with the first query by query (`paired`): the mean
difference of each metric, a 95 % interval from a paired bootstrap over the queries, and how
many queries went up and down, so that a difference within what another sample of queries
would give is read as none.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.beir import Dataset, from_arguments, ndcg_at, recall_at
from bench.cli import command_line, write_json
from bench.quality import as_markdown, subset
from libs.contracts import ChunkRequest, ConvertResult, EmbedKind, ModelInfo
from libs.modelfiles import bundled_tokenizer
from libs.vectors import Matrix
from services.gateway.embedding import VectorCache

REPO = Path(__file__).resolve().parents[1]
SCIFACT = REPO.parent / "shared" / "data" / "retrieval" / "scifact"
MODES = ("hybrid", "vector")
LIBRARY = "beir"


@dataclass
class Corpus:
    """What is ingested (source -> Markdown) and, for long documents, where each entry's
    lines are (source -> [(first line, last line, entry id)])."""

    documents: dict[str, str]
    spans: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)

    @classmethod
    def of(cls, ds: Dataset, long_docs: int) -> Corpus:
        entries = list(ds.corpus.items())
        if long_docs <= 0:
            return cls({d: as_markdown(t, x) or d for d, (t, x) in entries})
        corpus = cls({})
        for start in range(0, len(entries), long_docs):
            source = f"collection-{start // long_docs:05d}"
            lines = [f"# Collection {start // long_docs}", ""]
            corpus.spans[source] = []
            for entry, (title, text) in entries[start : start + long_docs]:
                section = [f"## {title.strip() or entry}", "", *text.strip().splitlines(), ""]
                first = len(lines) + 1
                lines += section
                corpus.spans[source].append((first, len(lines), entry))
            corpus.documents[source] = "\n".join(lines)
        return corpus

    def ranked(self, hits: list[Any]) -> list[str]:
        """Entry ids in the order the hits first show them."""
        ranked: list[str] = []
        for hit in hits:
            spans = self.spans.get(hit.source)
            found = (
                [hit.source]
                if spans is None
                else [e for a, b, e in spans if a <= hit.end_line and b >= hit.start_line]
            )
            ranked += [entry for entry in found if entry not in ranked]
        return ranked


class CachedEmbedder:
    """An embedder port over another one that embeds each distinct text once per kind."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.cache = VectorCache(10**7)
        self.embedded_texts = 0

    async def info(self) -> ModelInfo:
        info: ModelInfo = await self.inner.info()
        return info

    async def ready(self) -> tuple[bool, str]:
        ready: tuple[bool, str] = await self.inner.ready()
        return ready

    async def embed(self, texts: list[str], kind: EmbedKind) -> Matrix:
        keys = [VectorCache.key(kind, text) for text in texts]
        missing = [i for i, key in enumerate(keys) if self.cache.get(key) is None]
        if missing:
            vectors = await self.inner.embed([texts[i] for i in missing], kind)
            self.embedded_texts += len(missing)
            for i, vector in zip(missing, vectors, strict=True):
                self.cache.put(keys[i], np.asarray(vector, dtype=np.float32))
        rows = [self.cache.get(key) for key in keys]
        return np.stack([row for row in rows if row is not None]).astype(np.float32)


class RecordingConverter:
    """A converter port over the converter core that keeps every chunk's token count."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.token_counts: dict[str, list[int]] = {}

    async def convert(self, data: bytes, filename: str) -> ConvertResult:
        result: ConvertResult = await self.inner.convert(data, filename)
        return result

    async def chunk(self, request: ChunkRequest) -> ConvertResult:
        result: ConvertResult = await self.inner.chunk(request)
        self.token_counts[request.markdown] = [c.token_count for c in result.chunks]
        return result

    async def ready(self) -> tuple[bool, str]:
        ready: tuple[bool, str] = await self.inner.ready()
        return ready


@asynccontextmanager
async def setting_library(
    max_tokens: int, overlap: int, embedder: CachedEmbedder, store: Path
) -> AsyncIterator[tuple[Any, RecordingConverter]]:
    """The gateway's `Library` over a converter with this chunk setting, the shared embedder
    and an index core on its own LanceDB."""
    from services.converter.core import Converter
    from services.converter.settings import ConverterSettings
    from services.gateway.library import Library
    from services.gateway.ports import Ports
    from services.gateway.settings import GatewaySettings
    from services.index.core import IndexCore
    from services.index.settings import IndexSettings

    async with AsyncExitStack() as stack:
        converter = await stack.enter_async_context(
            Converter(ConverterSettings(chunk_max_tokens=max_tokens, chunk_overlap_tokens=overlap))
        )
        index = await stack.enter_async_context(IndexCore(IndexSettings(lancedb_uri=str(store))))
        recording = RecordingConverter(converter)
        settings = GatewaySettings(
            transport="bench", chunk_max_tokens=max_tokens, chunk_overlap_tokens=overlap
        )
        yield Library(settings, Ports(recording, embedder, index)), recording


async def evaluate_setting(
    ds: Dataset,
    corpus: Corpus,
    max_tokens: int,
    overlap: int,
    embedder: CachedEmbedder,
    store: Path,
    concurrency: int,
) -> dict[str, Any]:
    from libs.contracts import IngestContentInput, SearchInput

    async with setting_library(max_tokens, overlap, embedder, store) as (library, converter):
        gate = asyncio.Semaphore(concurrency)
        embedded_before = embedder.embedded_texts

        async def ingest(source: str, markdown: str) -> None:
            async with gate:
                await library.ingest_content(
                    IngestContentInput(content=markdown, source=source, library=LIBRARY)
                )

        started = time.perf_counter()
        await asyncio.gather(*(ingest(s, m) for s, m in corpus.documents.items()))
        ingest_s = time.perf_counter() - started
        await library.ports.index.optimize()
        scores: dict[str, dict[str, list[float]]] = {
            m: {"ndcg@10": [], "recall@100": []} for m in MODES
        }
        for qid, text in ds.queries.items():
            for mode in MODES:
                found = await library.search(
                    SearchInput(query=text, top_k=100, library=LIBRARY), mode=mode
                )
                ranked = corpus.ranked(found.results)
                scores[mode]["ndcg@10"].append(ndcg_at(ranked, ds.qrels[qid], 10))
                scores[mode]["recall@100"].append(recall_at(ranked, ds.qrels[qid], 100))
    counts = list(converter.token_counts.values())
    embedded = sum(sum(c) for c in counts)
    texts = list(corpus.documents.values())
    text_tokens = sum(
        len(e.ids) for e in bundled_tokenizer().encode_batch(texts, add_special_tokens=False)
    )
    return {
        "max_tokens": max_tokens,
        "overlap_tokens": overlap,
        "documents": len(counts),
        "documents_split": sum(1 for c in counts if len(c) > 1),
        "chunks": sum(len(c) for c in counts),
        "text_tokens": text_tokens,
        "tokens_embedded": embedded,
        "embedded_over_text": round(embedded / text_tokens, 3),
        "mean_tokens_per_chunk": round(embedded / max(1, sum(len(c) for c in counts)), 1),
        "texts_newly_embedded": embedder.embedded_texts - embedded_before,
        "ingest_seconds": round(ingest_s, 1),
        "modes": {
            mode: {name: round(sum(v) / max(len(v), 1), 4) for name, v in metrics.items()}
            for mode, metrics in scores.items()
        },
        "per_query": scores,
    }


def paired(base: dict[str, Any], other: dict[str, Any], draws: int = 10_000) -> dict[str, Any]:
    """`other` against `base` on the same queries, per mode and metric: the mean difference,
    its 95 % paired-bootstrap interval (fixed seed) and the queries that rose and fell."""
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {}
    for mode, metrics in base["per_query"].items():
        for name, before in metrics.items():
            diff = np.asarray(other["per_query"][mode][name]) - np.asarray(before)
            picks = rng.integers(0, len(diff), size=(draws, len(diff)))
            means = diff[picks].mean(axis=1)
            low, high = np.percentile(means, [2.5, 97.5])
            out[f"{mode} {name}"] = {
                "mean_difference": round(float(diff.mean()), 4),
                "interval_95": [round(float(low), 4), round(float(high), 4)],
                "queries_up": int((diff > 0).sum()),
                "queries_down": int((diff < 0).sum()),
            }
    return out


async def evaluate(
    ds: Dataset,
    settings: list[tuple[int, int]],
    work: Path,
    concurrency: int,
    long_docs: int = 0,
) -> list[dict[str, Any]]:
    from services.embedder.core import EmbedderCore
    from services.embedder.settings import EmbedderSettings

    corpus = Corpus.of(ds, long_docs)
    results: list[dict[str, Any]] = []
    async with EmbedderCore(EmbedderSettings()) as core:
        embedder = CachedEmbedder(core)
        for max_tokens, overlap in settings:
            store = work / f"lancedb-{max_tokens}-{overlap}"
            result = await evaluate_setting(
                ds, corpus, max_tokens, overlap, embedder, store, concurrency
            )
            if results:
                result["paired_with_first"] = paired(results[0], result)
            print(render_row(result), file=sys.stderr, flush=True)
            results.append(result)
    return results


def render_row(r: dict[str, Any]) -> str:
    h, v = r["modes"]["hybrid"], r["modes"]["vector"]
    return (
        f"| {r['max_tokens']} | {r['overlap_tokens']} | {r['documents_split']} / "
        f"{r['documents']} | {r['chunks']} | {r['embedded_over_text']} | "
        f"{h['ndcg@10']:.4f} | {h['recall@100']:.4f} | {v['ndcg@10']:.4f} | "
        f"{v['recall@100']:.4f} |"
    )


def render(results: list[dict[str, Any]]) -> str:
    head = [
        "| max tokens | overlap | documents split | chunks | tokens embedded / text | "
        "hybrid nDCG@10 | hybrid Recall@100 | vector nDCG@10 | vector Recall@100 |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines = head + [render_row(r) for r in results]
    if len(results) > 1:
        first = results[0]
        lines += [
            "",
            f"Against {first['max_tokens']}:{first['overlap_tokens']}, query by query (mean "
            "difference [95 % paired-bootstrap interval], queries up / down):",
            "",
            "| max tokens | overlap | " + " | ".join(PAIRED) + " |",
            "|---:|---:|" + "---|" * len(PAIRED),
        ]
        for r in results[1:]:
            cells = [_paired_cell(r["paired_with_first"][key]) for key in PAIRED]
            lines.append(
                f"| {r['max_tokens']} | {r['overlap_tokens']} | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines)


PAIRED = ("hybrid ndcg@10", "hybrid recall@100", "vector ndcg@10", "vector recall@100")


def _paired_cell(p: dict[str, Any]) -> str:
    low, high = p["interval_95"]
    return (
        f"{p['mean_difference']:+.4f} [{low:+.4f}, {high:+.4f}], "
        f"{p['queries_up']} / {p['queries_down']}"
    )


def parse_setting(text: str) -> tuple[int, int]:
    size, _, overlap = text.partition(":")
    return int(size), int(overlap or 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chunking", description=__doc__)
    parser.add_argument("dataset", type=Path, nargs="?", default=SCIFACT)
    parser.add_argument(
        "--setting",
        type=parse_setting,
        action="append",
        default=None,
        help="MAX_TOKENS:OVERLAP_TOKENS (repeatable; the first is what the others are compared "
        "with; default 192:0 256:0 256:32 128:0)",
    )
    parser.add_argument(
        "--split", default=None, help="qrels split: test, dev, ... (default test, else dev)"
    )
    parser.add_argument("--max-docs", type=int, default=None)
    parser.add_argument("--max-queries", type=int, default=None)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--long-docs",
        type=int,
        default=0,
        metavar="K",
        help="ingest K corpus entries per document, each a ## section (default: one each)",
    )
    parser.add_argument("--json", type=Path, default=Path("var/bench/chunking.json"))
    args = parser.parse_args(argv)
    settings = args.setting or [(192, 0), (256, 0), (256, 32), (128, 0)]
    ds = subset(from_arguments(parser, args), args.max_docs, args.max_queries)
    with tempfile.TemporaryDirectory(prefix="mvdb-chunking-") as tmp:
        os.environ.setdefault("VAR_DIR", str(Path(tmp) / "var"))
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        results = asyncio.run(evaluate(ds, settings, Path(tmp), args.concurrency, args.long_docs))
    report = {
        "dataset": args.dataset.name,
        "documents": len(ds.corpus),
        "queries": len(ds.queries),
        "entries_per_document": args.long_docs or 1,
        "settings": results,
        "command": command_line("bench.chunking", argv),
    }
    write_json(args.json, report)
    per = f", {args.long_docs} to a document" if args.long_docs else ""
    print(f"{args.dataset.name}: {len(ds.corpus)} entries{per}, {len(ds.queries)} queries")
    print(render(results))
    print(f"(details in {args.json})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
