"""In-process embedder port: micro-batching across concurrent requests, queries apart.

Requests are queued and cut into slices of at most `embed_coalesce_texts` texts. Queries and
documents have lanes of their own, each with its own worker and its own ONNX session
(`EMBED_QUERY_SESSION`, on by default): a query is embedded at once by the query session
(on a graph with 8-bit matrix products, `EMBED_QUERY_INT8`: `querygraph`),
beside a document batch that may be running, instead of waiting for that batch to finish (a
document model call of 16 texts takes most of a second on two cores, a query a few
milliseconds). Document slices are gathered across requests, so that many small requests
share ONNX runs and length-sorted batches. The document lane has `EMBED_DOCUMENT_CALLS`
workers (2 by default), so that many document calls run at once on its session, each on its
share of `EMBED_THREADS`.

With `EMBED_QUERY_SESSION=false` both kinds share one session and one worker that runs every
waiting query slice first, then one model call's worth of document slices: a search then
waits for at most one document call, not for the whole ingest. Either way the event loop
never blocks on the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from libs.contracts import EmbedKind, ModelInfo
from libs.cpus import usable_cores
from libs.errors import InvalidInputError
from libs.lifecycle import AsyncLifecycle
from libs.vectors import Matrix
from services.embedder.embed import Embedder
from services.embedder.errors import EmbeddingFailed, TooManyTexts
from services.embedder.metrics import EMBED_BATCH, EMBED_SECONDS, EMBED_TEXTS
from services.embedder.settings import EmbedderSettings


@dataclass
class _Job:
    texts: list[str]
    kind: EmbedKind
    out: Matrix
    remaining: int
    done: asyncio.Future[Matrix] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


@dataclass(frozen=True)
class _Slice:
    job: _Job
    start: int
    end: int


@dataclass
class _Lane:
    """A model session with the kinds it serves, in priority order, and its worker."""

    model: Embedder
    kinds: tuple[EmbedKind, ...]
    calls: int = 1
    workers: list[asyncio.Task[None]] = field(default_factory=list)
    arrived: asyncio.Event | None = None


class EmbedderCore(AsyncLifecycle):
    def __init__(self, settings: EmbedderSettings) -> None:
        self.settings = settings
        calls = settings.embed_document_calls
        self._model = self._load(document_threads(settings), calls)
        self._pending: dict[EmbedKind, deque[_Slice]] = {"query": deque(), "document": deque()}
        if settings.embed_query_session:
            query_model = self._load(settings.embed_query_threads, int8=settings.embed_query_int8)
            queries = _Lane(query_model, ("query",))
            documents = _Lane(self._model, ("document",), calls)
            self._lanes = {"query": queries, "document": documents}
        else:
            shared = _Lane(self._model, ("query", "document"), calls)
            self._lanes = {"query": shared, "document": shared}

    def _load(self, threads: int | None, calls: int = 1, *, int8: bool = False) -> Embedder:
        settings = self.settings
        return Embedder(
            settings.embedding_model,
            model_dir=settings.embedding_model_path,
            cache_dir=settings.var_dir / "models",
            batch_size=settings.embed_batch_size,
            threads=threads,
            spin_threads=settings.embed_spin_threads,
            calls=calls,
            int8_graph=int8,
        )

    def lane_model(self, kind: EmbedKind) -> Embedder:
        """The model session that embeds texts of `kind`."""
        return self._lanes[kind].model

    async def info(self) -> ModelInfo:
        return self._model.info()

    async def embed(self, texts: list[str], kind: EmbedKind) -> Matrix:
        if len(texts) > self.settings.embed_max_texts:
            raise TooManyTexts(len(texts), self.settings.embed_max_texts)
        dim = self._model.spec.dim
        if not texts:
            return np.zeros((0, dim), dtype=np.float32)
        step = self.settings.embed_coalesce_texts
        job = _Job(list(texts), kind, np.empty((len(texts), dim), np.float32), len(texts))
        for start in range(0, len(texts), step):
            self._pending[kind].append(_Slice(job, start, min(start + step, len(texts))))
        self._wake(self._lanes[kind])
        return await job.done

    def _wake(self, lane: _Lane) -> None:
        if lane.arrived is None:
            lane.arrived = asyncio.Event()
        lane.workers = [w for w in lane.workers if not w.done()]
        while len(lane.workers) < lane.calls:
            lane.workers.append(asyncio.create_task(self._run(lane)))
        lane.arrived.set()

    async def _run(self, lane: _Lane) -> None:
        assert lane.arrived is not None
        wait_s = self.settings.embed_coalesce_wait_ms / 1000
        while True:
            waiting = [kind for kind in lane.kinds if self._pending[kind]]
            if not waiting:
                lane.arrived.clear()
                await lane.arrived.wait()
                if wait_s and not self._pending["query"]:
                    # A lone document request waits briefly for others to share its model
                    # call; a query is run at once, since someone is waiting on it.
                    await asyncio.sleep(wait_s)
                continue
            kind = waiting[0]
            await self._serve(lane.model, kind, self._take(kind))

    def _take(self, kind: EmbedKind) -> list[_Slice]:
        queue = self._pending[kind]
        taken: list[_Slice] = []
        size = 0
        while queue and size < self.settings.embed_coalesce_texts:
            piece = queue.popleft()
            if piece.job.done.done():
                continue  # the caller went away
            taken.append(piece)
            size += piece.end - piece.start
        return taken

    async def _serve(self, model: Embedder, kind: EmbedKind, pieces: list[_Slice]) -> None:
        if not pieces:
            return
        texts = [t for p in pieces for t in p.job.texts[p.start : p.end]]
        started = time.perf_counter()
        try:
            vectors = await asyncio.to_thread(model.embed, texts, kind)
        except Exception as exc:
            error = exc if isinstance(exc, InvalidInputError) else EmbeddingFailed(exc)
            for piece in pieces:
                if not piece.job.done.done():
                    piece.job.done.set_exception(error)
            return
        EMBED_SECONDS.labels(kind).observe(time.perf_counter() - started)
        EMBED_BATCH.labels(kind).observe(len(texts))
        EMBED_TEXTS.labels(kind).inc(len(texts))
        offset = 0
        for piece in pieces:
            count = piece.end - piece.start
            job = piece.job
            job.out[piece.start : piece.end] = vectors[offset : offset + count]
            offset += count
            job.remaining -= count
            if job.remaining == 0 and not job.done.done():
                job.done.set_result(job.out)

    async def ready(self) -> tuple[bool, str]:
        return True, f"{self._model.spec.name} loaded"

    async def aclose(self) -> None:
        for lane in {id(lane): lane for lane in self._lanes.values()}.values():
            workers, lane.workers = lane.workers, []
            for worker in workers:
                worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await worker


def document_threads(settings: EmbedderSettings) -> int | None:
    """ONNX threads of one document model call: EMBED_THREADS (default every usable core,
    `libs.cpus`) shared by the EMBED_DOCUMENT_CALLS that run at once; ONNX Runtime's own
    default for one call."""
    calls = settings.embed_document_calls
    if calls == 1:
        return settings.embed_threads
    total = settings.embed_threads or usable_cores()
    return max(1, total // calls)
