"""The ranking metrics of the quality benchmark, on hand-computed cases."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench.beir import default_split, load, mrr_at, ndcg_at, recall_at


def test_ndcg_matches_the_definition() -> None:
    relevant = {"a": 1, "b": 1}
    assert ndcg_at(["a", "b", "c"], relevant, 10) == pytest.approx(1.0)
    got = ndcg_at(["c", "a", "d", "b"], relevant, 10)
    ideal = 1 + 1 / math.log2(3)
    assert got == pytest.approx((1 / math.log2(3) + 1 / math.log2(5)) / ideal)
    assert ndcg_at(["x", "y"], relevant, 10) == 0.0
    assert ndcg_at(["b"], {"a": 2, "b": 1}, 1) == pytest.approx(0.5)


def test_recall_and_mrr() -> None:
    relevant = {"a": 1, "b": 1}
    assert recall_at(["a", "z"], relevant, 100) == 0.5
    assert recall_at(["z"] * 3 + ["a"], relevant, 3) == 0.0
    assert mrr_at(["z", "y", "a"], relevant, 10) == pytest.approx(1 / 3)
    assert mrr_at(["z"] * 10 + ["a"], relevant, 10) == 0.0


def test_loader_reads_the_beir_layout(tmp_path: Path) -> None:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "T", "text": "x"}\n{"_id": "d2", "title": "", "text": "y"}\n'
    )
    (tmp_path / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "?"}\n{"_id": "q2", "text": "!"}\n'
    )
    (tmp_path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td1\t0\n"
    )
    ds = load(tmp_path)
    assert ds.corpus == {"d1": ("T", "x"), "d2": ("", "y")}
    assert ds.queries == {"q1": "?"}
    assert ds.qrels == {"q1": {"d2": 1}}


def test_a_set_without_a_test_split_is_read_by_its_dev_split(tmp_path: Path) -> None:
    """MS MARCO ships qrels/dev.tsv alone; a split the set lacks is named, with those it has."""
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "", "text": "x"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "?"}\n')
    (tmp_path / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (tmp_path / "qrels" / "train.tsv").write_text("q1\td1\t1\n")
    assert default_split(tmp_path) == "dev"
    assert load(tmp_path, "dev").qrels == {"q1": {"d1": 1}}
    with pytest.raises(ValueError, match=r"no test\.tsv; its splits: dev, train"):
        load(tmp_path)
    (tmp_path / "qrels" / "dev.tsv").unlink()
    assert default_split(tmp_path) == "train"  # the one split there is
    (tmp_path / "qrels" / "other.tsv").write_text("q1\td1\t1\n")
    with pytest.raises(ValueError, match="choose one with --split"):
        default_split(tmp_path)
