"""BEIR-format datasets and the standard ranking metrics (nDCG@k, Recall@k, MRR@k).

Layout: `corpus.jsonl` ({_id, title, text}), `queries.jsonl` ({_id, text}) and
`qrels/<split>.tsv` (query-id, corpus-id, score, with a header line; `test`, or `dev` where a
set has no test split). Metrics follow the
definitions used by BEIR / trec_eval: graded gains, log2 discount, ideal ranking from qrels.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Dataset:
    corpus: dict[str, tuple[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def splits(folder: Path) -> list[str]:
    """The qrels splits `folder` has (`test`, `dev`, `train`: the files in `qrels/`)."""
    return sorted(path.stem for path in (folder / "qrels").glob("*.tsv"))


def default_split(folder: Path) -> str:
    """`test` where the set has it, else `dev` (MS MARCO ships only that), else its one split."""
    found = splits(folder)
    for split in ("test", "dev"):
        if split in found:
            return split
    if len(found) == 1:
        return found[0]
    raise ValueError(
        f"{folder}/qrels has no test.tsv or dev.tsv ({', '.join(found) or 'no .tsv file'}); "
        "choose one with --split"
    )


def from_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Dataset:
    """The set a benchmark's command line names (`dataset`, `--split`), or the parser's error
    saying what is missing."""
    if not (args.dataset / "corpus.jsonl").is_file():
        parser.error(f"{args.dataset} has no corpus.jsonl (BEIR layout expected)")
    try:
        return load(args.dataset, args.split or default_split(args.dataset))
    except ValueError as exc:
        parser.error(str(exc))


def load(folder: Path, split: str = "test") -> Dataset:
    if split not in splits(folder):
        raise ValueError(
            f"{folder}/qrels has no {split}.tsv; its splits: {', '.join(splits(folder)) or 'none'}"
        )
    corpus: dict[str, tuple[str, str]] = {}
    with (folder / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                corpus[str(row["_id"])] = (row.get("title") or "", row.get("text") or "")
    queries: dict[str, str] = {}
    with (folder / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                queries[str(row["_id"])] = row["text"]
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels" / f"{split}.tsv").open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            parts = line.strip().split("\t")
            if len(parts) < 3 or (number == 0 and not parts[2].lstrip("-").isdigit()):
                continue
            qid, did, score = parts[0], parts[1], int(parts[2])
            if score > 0:
                qrels.setdefault(qid, {})[did] = score
    return Dataset(corpus, {q: t for q, t in queries.items() if q in qrels}, qrels)


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    dcg = sum((relevant.get(doc, 0)) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    if not relevant:
        return 0.0
    return len(set(ranked[:k]) & set(relevant)) / len(relevant)


def mrr_at(ranked: list[str], relevant: dict[str, int], k: int) -> float:
    for i, doc in enumerate(ranked[:k]):
        if doc in relevant:
            return 1.0 / (i + 1)
    return 0.0
