"""Where `min_score` should sit for the bundled model: cosine similarities measured on a
BEIR set (default the shared SciFact), the numbers behind the guidance in the tool spec.

    python -m bench.similarity [../shared/data/retrieval/scifact] [--pairs 200]

Prints percentiles (5/25/50/75/95) of the similarity between
- a query and a passage judged relevant to it (qrels `test.tsv`),
- a query and a random passage,
- a passage (cut to chunk size) and the same passage with one inner sentence dropped,
  and with a few words replaced: what a near-duplicate scores,
- a passage and a random other passage.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path

import numpy as np

from services.embedder.embed import Embedder

CHUNK_CHARS = 700  # about 150 tokens: a chunk, well inside the model's 256


def percentiles(values: np.ndarray) -> dict[int, float]:
    return {p: round(float(np.percentile(values, p)), 3) for p in (5, 25, 50, 75, 95)}


def drop_inner_sentence(text: str) -> str:
    sentences = text.split(". ")
    return ". ".join(sentences[:1] + sentences[2:]) if len(sentences) > 3 else text


def replace_words(text: str) -> str:
    words = text.split()
    for i in range(0, len(words), max(1, len(words) // 3)):
        words[i] = "data"
    return " ".join(words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", nargs="?", default="../shared/data/retrieval/scifact")
    parser.add_argument("--pairs", type=int, default=200)
    args = parser.parse_args()
    root = Path(args.dataset)
    corpus = {}
    for line in (root / "corpus.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        corpus[row["_id"]] = f"{row.get('title', '')}. {row['text']}"
    queries = {}
    for line in (root / "queries.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        queries[row["_id"]] = row["text"]
    qrels = [line.split("\t") for line in (root / "qrels/test.tsv").read_text().splitlines()[1:]]
    pairs = [(q, d) for q, d, _ in qrels if q in queries and d in corpus][: args.pairs]
    rng = random.Random(1)
    ids = list(corpus)
    model = Embedder(
        "sentence-transformers/all-MiniLM-L6-v2",
        model_dir=None,
        cache_dir=Path(tempfile.mkdtemp()),
    )
    qv = model.embed([queries[q] for q, _ in pairs], "query")
    relevant = model.embed([corpus[d][:CHUNK_CHARS] for _, d in pairs], "document")
    others = model.embed([corpus[rng.choice(ids)][:CHUNK_CHARS] for _ in pairs], "document")
    passages = [corpus[d][:CHUNK_CHARS] for _, d in pairs]
    dropped = model.embed([drop_inner_sentence(t) for t in passages], "document")
    replaced = model.embed([replace_words(t) for t in passages], "document")
    report = {
        "query_vs_relevant": percentiles((qv * relevant).sum(1)),
        "query_vs_random": percentiles((qv * others).sum(1)),
        "passage_vs_sentence_dropped": percentiles((relevant * dropped).sum(1)),
        "passage_vs_words_replaced": percentiles((relevant * replaced).sum(1)),
        "passage_vs_random_passage": percentiles((relevant * others).sum(1)),
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
