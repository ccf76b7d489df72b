"""In-process embedder port: micro-batching across concurrent requests, queries first.

Requests are queued and cut into slices of at most `embed_coalesce_texts` texts. One worker
runs the model: every waiting query slice first (they are short and someone is waiting on
each), then one model call's worth of document slices, gathered across requests so that
many small requests share ONNX runs and length-sorted batches. A search that arrives during
a large ingest therefore waits for at most one slice, not for the whole ingest, and the
event loop never blocks on the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from libs.contracts import EmbedKind, ModelInfo
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


class EmbedderCore(AsyncLifecycle):
    def __init__(self, settings: EmbedderSettings) -> None:
        self.settings = settings
        self._model = Embedder(
            settings.embedding_model,
            model_dir=settings.embedding_model_path,
            cache_dir=settings.var_dir / "models",
            batch_size=settings.embed_batch_size,
            threads=settings.embed_threads,
        )
        self._pending: dict[EmbedKind, deque[_Slice]] = {"query": deque(), "document": deque()}
        self._arrived: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None

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
        self._wake()
        return await job.done

    def _wake(self) -> None:
        if self._worker is None or self._worker.done():
            self._arrived = asyncio.Event()
            self._worker = asyncio.create_task(self._run())
        assert self._arrived is not None
        self._arrived.set()

    async def _run(self) -> None:
        assert self._arrived is not None
        wait_s = self.settings.embed_coalesce_wait_ms / 1000
        while True:
            if not (self._pending["query"] or self._pending["document"]):
                self._arrived.clear()
                await self._arrived.wait()
                if wait_s and not self._pending["query"]:
                    # A lone document request waits briefly for others to share its model
                    # call; a query is run at once, since someone is waiting on it.
                    await asyncio.sleep(wait_s)
            kind: EmbedKind = "query" if self._pending["query"] else "document"
            await self._serve(kind, self._take(kind))

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

    async def _serve(self, kind: EmbedKind, pieces: list[_Slice]) -> None:
        if not pieces:
            return
        texts = [t for p in pieces for t in p.job.texts[p.start : p.end]]
        started = time.perf_counter()
        try:
            vectors = await asyncio.to_thread(self._model.embed, texts, kind)
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
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
