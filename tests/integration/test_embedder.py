"""The embedder with the real bundled model: golden vectors, batching across concurrent
requests, and its HTTP API through the typed client."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from libs.clients import EmbedderClient
from libs.contracts import EmbedKind
from libs.errors import InvalidInputError
from libs.vectors import Matrix
from services.embedder.app import create_app
from services.embedder.core import EmbedderCore
from services.embedder.settings import EmbedderSettings

# all-MiniLM-L6-v2 (int8 ONNX) on "hello world": the first six dimensions. The float model
# gives [-0.0345, 0.0310, 0.0067, 0.0261, -0.0394, -0.1603]; int8 stays within 0.01.
GOLDEN_HELLO = [-0.0348, 0.0301, 0.013, 0.0254, -0.0375, -0.1587]


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> EmbedderSettings:
    return EmbedderSettings(_env_file=None, var_dir=tmp_path_factory.mktemp("embedder"))


@pytest.fixture
async def core(settings: EmbedderSettings) -> AsyncIterator[EmbedderCore]:
    embedder = EmbedderCore(settings)
    yield embedder
    await embedder.aclose()


async def test_golden_vector_and_similarity(core: EmbedderCore) -> None:
    vectors = await core.embed(
        [
            "hello world",
            "A man is eating food.",
            "A man is eating a piece of bread.",
            "The girl is carrying a baby.",
        ],
        "document",
    )
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    np.testing.assert_allclose(vectors[0][:6], GOLDEN_HELLO, atol=2e-3)
    assert vectors[1] @ vectors[2] > 0.7
    assert vectors[1] @ vectors[3] < 0.1


async def test_concurrent_requests_get_their_own_rows(core: EmbedderCore) -> None:
    texts = [f"sentence number {i} about {'cats' if i % 2 else 'rivers'}" for i in range(40)]
    alone = await core.embed(texts, "document")
    parts = await asyncio.gather(
        *(core.embed(texts[i : i + 3], "document") for i in range(0, 40, 3)),
        core.embed(["a query"], "query"),
    )
    together = np.concatenate(parts[:-1])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert parts[-1].shape == (1, 384)


async def test_long_text_is_cut_at_the_models_limit(core: EmbedderCore) -> None:
    long = " ".join(["word"] * 2000)
    cut = " ".join(["word"] * 400)
    a, b = await core.embed([long, cut], "query")
    np.testing.assert_allclose(a, b, atol=1e-5)


async def test_too_many_texts_is_refused(settings: EmbedderSettings) -> None:
    small = EmbedderCore(settings.model_copy(update={"embed_max_texts": 3}))
    with pytest.raises(InvalidInputError, match="at most 3"):
        await small.embed(["x"] * 4, "document")
    await small.aclose()


async def test_http_api_through_the_typed_client(settings: EmbedderSettings) -> None:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        client = EmbedderClient("http://embedder", transport=httpx.ASGITransport(app=app))
        info = await client.info()
        assert (info.name, info.dim, info.max_tokens) == (
            "sentence-transformers/all-MiniLM-L6-v2",
            384,
            256,
        )
        vectors = await client.embed(["hello world"], "document")
        np.testing.assert_allclose(vectors[0][:6], GOLDEN_HELLO, atol=2e-3)
        # A query runs on the 8-bit graph (`querygraph`): next to the model's own vector.
        query = await client.embed(["hello world"], "query")
        assert float(query[0] @ vectors[0]) > 0.998
        empty = await client.embed([], "document")
        assert empty.shape == (0, 384)
        with pytest.raises(InvalidInputError, match="kind"):
            await client.request("POST", "/embed", json={"texts": ["x"], "kind": "other"})
        ready = await client.ready()
        assert ready[0] is True
        await client.aclose()


async def test_model_dir_is_assembled_from_the_packages(
    settings: EmbedderSettings, core: EmbedderCore
) -> None:
    assert (await core.info()).dim == 384
    folder = Path(settings.var_dir) / "models" / "bundled-minilm"
    assert (folder / "model.onnx").exists() and (folder / "tokenizer.json").exists()


async def test_a_query_does_not_wait_for_a_whole_ingest(core: EmbedderCore) -> None:
    ingest = asyncio.create_task(
        core.embed([f"paragraph {i} " + "long text " * 100 for i in range(160)], "document")
    )
    await asyncio.sleep(0.05)
    query = await core.embed(["where is the river"], "query")
    assert query.shape == (1, 384)
    assert not ingest.done(), "the query waited for the whole ingest"
    vectors = await ingest
    assert vectors.shape == (160, 384)
    assert np.isfinite(vectors).all() and np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-3)


async def test_a_query_is_embedded_while_a_document_batch_runs(core: EmbedderCore) -> None:
    # The document session is held inside its model call (the real model, behind a gate the
    # test opens), so the query can only finish first if it has a session of its own.
    documents = core.lane_model("document")
    assert core.lane_model("query") is not documents
    entered, release = threading.Event(), threading.Event()
    real_embed = documents.embed

    def held(texts: list[str], kind: EmbedKind) -> Matrix:
        entered.set()
        release.wait(30)
        return real_embed(texts, kind)

    documents.embed = held  # type: ignore[method-assign]
    try:
        batch = asyncio.create_task(core.embed(["a long document " * 50] * 8, "document"))
        assert await asyncio.to_thread(entered.wait, 30)
        query = await asyncio.wait_for(core.embed(["where is the river"], "query"), 30)
        assert query.shape == (1, 384)
        assert not batch.done(), "the document call was still held"
    finally:
        release.set()
    vectors = await batch
    assert vectors.shape == (8, 384)
    alone = await core.embed(["where is the river"], "query")
    np.testing.assert_allclose(query, alone, atol=1e-5)


@pytest.mark.parametrize("calls", [1, 2])
async def test_document_calls_run_side_by_side(settings: EmbedderSettings, calls: int) -> None:
    # Two requests of a model call's worth of texts each: with EMBED_DOCUMENT_CALLS=2 both
    # calls are inside the model at once (a barrier of two in the model call opens), with 1
    # the second waits for the first (the barrier times out and the first call goes on).
    core = EmbedderCore(settings.model_copy(update={"embed_document_calls": calls}))
    model = core.lane_model("document")
    together = threading.Barrier(2, timeout=3)
    met: list[bool] = []
    real_embed = model.embed

    def meeting(texts: list[str], kind: EmbedKind) -> Matrix:
        try:
            together.wait()
            met.append(True)
        except threading.BrokenBarrierError:
            met.append(False)
        return real_embed(texts, kind)

    model.embed = meeting  # type: ignore[method-assign]
    step = settings.embed_coalesce_texts
    try:
        first, second = await asyncio.gather(
            core.embed([f"first text {i}" for i in range(step)], "document"),
            core.embed([f"second text {i}" for i in range(step)], "document"),
        )
    finally:
        await core.aclose()
    assert met[0] is (calls == 2)
    alone = EmbedderCore(settings)
    try:
        expected = await alone.embed([f"first text {i}" for i in range(step)], "document")
    finally:
        await alone.aclose()
    np.testing.assert_allclose(first, expected, atol=1e-5)
    assert second.shape == (step, 384)


async def test_one_shared_session_still_serves_queries_first(settings: EmbedderSettings) -> None:
    # EMBED_QUERY_SESSION=false: one session, and waiting query slices go before waiting
    # document slices (served in order of the model calls made).
    shared = EmbedderCore(settings.model_copy(update={"embed_query_session": False}))
    model = shared.lane_model("query")
    assert shared.lane_model("document") is model
    calls: list[EmbedKind] = []
    entered, release = threading.Event(), threading.Event()
    real_embed = model.embed

    def recorded(texts: list[str], kind: EmbedKind) -> Matrix:
        calls.append(kind)
        entered.set()
        release.wait(30)
        return real_embed(texts, kind)

    model.embed = recorded  # type: ignore[method-assign]
    try:
        first = asyncio.create_task(shared.embed(["document one"] * 16, "document"))
        assert await asyncio.to_thread(entered.wait, 30)
        later = asyncio.create_task(shared.embed(["document two"] * 16, "document"))
        query = asyncio.create_task(shared.embed(["a query"], "query"))
        await asyncio.sleep(0.05)
        release.set()
        await asyncio.gather(first, later, query)
    finally:
        release.set()
        await shared.aclose()
    assert calls == ["document", "query", "document"]


def test_thread_spinning_follows_the_setting(settings: EmbedderSettings) -> None:
    """The session is opened by us, not fastembed, for the spinning option: it must carry the
    option asked for and embed exactly as fastembed's own session does."""
    from fastembed import TextEmbedding

    from services.embedder.embed import Embedder

    texts = ["hello world", "The girl is carrying a baby. " * 20]
    models = {
        spin: Embedder(
            settings.embedding_model,
            model_dir=None,
            cache_dir=settings.var_dir / "models",
            threads=2,
            spin_threads=spin,
        )
        for spin in (False, True)
    }
    for spin, model in models.items():
        options = model._model.model.model.get_session_options()
        for pool in ("intra", "inter"):
            entry = options.get_session_config_entry(f"session.{pool}_op.allow_spinning")
            assert entry == ("1" if spin else "0")
        assert options.intra_op_num_threads == 2
    model_dir = settings.var_dir / "models" / "bundled-minilm"
    reference = TextEmbedding(settings.embedding_model, specific_model_path=str(model_dir))
    expected = np.array(list(reference.embed(texts)))
    for model in models.values():
        np.testing.assert_allclose(model.embed(texts, "document"), expected, atol=1e-6)
