"""The query session's 8-bit graph (`services.embedder.querygraph`) with the real bundled
model and real SciFact queries: its vectors stay within cosine 0.999 of the model's own (0.998
for single words), its
matrix products are MatMulNBits, it is derived once and reused, documents never use it, and a
graph that cannot be derived leaves queries on the model's own graph."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

from bench.beir import load
from bench.perf_corpus import SCIFACT
from services.embedder import querygraph
from services.embedder.core import EmbedderCore
from services.embedder.settings import EmbedderSettings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def queries() -> list[str]:
    if not SCIFACT.is_dir():
        pytest.skip(f"SciFact missing at {SCIFACT}")
    return list(load(SCIFACT).queries.values())[:100]


@pytest.fixture(scope="module")
def var_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("query-graph")


@pytest.fixture
async def cores(var_dir: Path) -> AsyncIterator[tuple[EmbedderCore, EmbedderCore]]:
    """The default embedder (8-bit queries) and one with EMBED_QUERY_INT8=false."""
    eight = EmbedderCore(EmbedderSettings(_env_file=None, var_dir=var_dir))  # type: ignore[call-arg]
    own = EmbedderCore(
        EmbedderSettings(_env_file=None, var_dir=var_dir, embed_query_int8=False)  # type: ignore[call-arg]
    )
    try:
        yield eight, own
    finally:
        await eight.aclose()
        await own.aclose()


def why(caplog: pytest.LogCaptureFixture) -> str:
    """The reasons the warnings give (a field of the JSON log line)."""
    return " ".join(str(getattr(r, "fields", {}).get("why")) for r in caplog.records)


def derived(var_dir: Path) -> list[Path]:
    return sorted((var_dir / "models").glob("query-int8-*.onnx"))


async def test_query_vectors_stay_next_to_the_models_own(
    cores: tuple[EmbedderCore, EmbedderCore], queries: list[str], var_dir: Path
) -> None:
    eight, own = cores
    fast = await eight.embed(queries, "query")
    exact = await own.embed(queries, "query")
    cosines = (fast * exact).sum(axis=1)
    assert cosines.min() > 0.999, cosines.min()
    # Short queries move most: single words of SciFact's corpus.
    words = sorted({w for q in queries for w in q.split() if w.isalpha() and len(w) > 3})[:100]
    singles = (await eight.embed(words, "query")) * (await own.embed(words, "query"))
    assert singles.sum(axis=1).min() > 0.998
    # Ranking a query's neighbours among the others barely moves.
    assert (np.argsort(-(fast @ exact.T), axis=1)[:, 0] == np.arange(len(queries))).all()

    [graph] = derived(var_dir)
    import onnx

    ops = [node.op_type for node in onnx.load(str(graph)).graph.node]
    assert ops.count("MatMulNBits") == 36  # six layers: Q, K, V, output, two feed-forward
    assert eight.lane_model("query") is not eight.lane_model("document")


async def test_documents_keep_the_models_own_graph(
    cores: tuple[EmbedderCore, EmbedderCore], queries: list[str]
) -> None:
    eight, own = cores
    texts = queries[:20]
    np.testing.assert_array_equal(
        await eight.embed(texts, "document"), await own.embed(texts, "document")
    )


def test_the_graph_is_derived_once_and_reused(var_dir: Path, tmp_path: Path) -> None:
    EmbedderCore(EmbedderSettings(_env_file=None, var_dir=var_dir))  # type: ignore[call-arg]
    [graph] = derived(var_dir)
    stamp = graph.stat().st_mtime_ns
    EmbedderCore(EmbedderSettings(_env_file=None, var_dir=var_dir))  # type: ignore[call-arg]
    assert derived(var_dir) == [graph] and graph.stat().st_mtime_ns == stamp
    # No work files are left beside it.
    assert [p.name for p in (var_dir / "models").iterdir() if p.suffix == ".partial"] == []


def test_a_graph_without_matrix_products_is_kept_as_it_is(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    model_file = tmp_path / "identity.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model_file)
    with caplog.at_level(logging.WARNING, logger=querygraph.__name__):
        assert querygraph.query_graph(model_file, tmp_path / "models") == model_file
    assert "no matrix product over constant weights" in why(caplog)
    assert not (tmp_path / "models").exists() or derived(tmp_path) == []


async def test_when_the_graph_cannot_be_derived_queries_use_the_models_own(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    queries: list[str],
) -> None:
    monkeypatch.setattr(querygraph, "DERIVE_TIMEOUT_S", 0.01)  # it takes seconds
    with caplog.at_level(logging.WARNING, logger=querygraph.__name__):
        core = EmbedderCore(EmbedderSettings(_env_file=None, var_dir=tmp_path))  # type: ignore[call-arg]
    try:
        assert "could not derive the 8-bit query graph" in caplog.text
        assert "TimeoutExpired" in why(caplog)
        assert derived(tmp_path) == []
        texts = queries[:10]
        np.testing.assert_array_equal(
            await core.embed(texts, "query"), core.lane_model("document").embed(texts, "query")
        )
    finally:
        await core.aclose()
