"""In-process embedder port, with micro-batching across concurrent requests.

Requests are queued; one worker takes whatever has arrived (up to `embed_coalesce_texts`
texts, waiting at most `embed_coalesce_wait_ms` for company), runs one model call per kind in
a thread, and hands each caller its rows. Many small requests (one query, a two-chunk note)
then share ONNX runs and length-sorted batches instead of paying for each alone, and the
event loop never blocks on the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

import numpy as np

from libs.contracts import EmbedKind, ModelInfo
from libs.errors import InvalidInputError, UpstreamError
from libs.vectors import Matrix
from services.embedder.embed import Embedder
from services.embedder.metrics import EMBED_BATCH, EMBED_SECONDS, EMBED_TEXTS
from services.embedder.settings import EmbedderSettings


@dataclass
class _Job:
    texts: list[str]
    kind: EmbedKind
    done: asyncio.Future[Matrix] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class EmbedderCore:
    def __init__(self, settings: EmbedderSettings) -> None:
        self.settings = settings
        self._model = Embedder(
            settings.embedding_model,
            model_dir=settings.embedding_model_path,
            cache_dir=settings.var_dir / "models",
            batch_size=settings.embed_batch_size,
            threads=settings.embed_threads,
        )
        self._queue: asyncio.Queue[_Job] | None = None
        self._worker: asyncio.Task[None] | None = None

    async def info(self) -> ModelInfo:
        return self._model.info()

    async def embed(self, texts: list[str], kind: EmbedKind) -> Matrix:
        if len(texts) > self.settings.embed_max_texts:
            raise InvalidInputError(
                f"{len(texts)} texts in one request; send at most {self.settings.embed_max_texts}"
            )
        if not texts:
            return np.zeros((0, self._model.spec.dim), dtype=np.float32)
        job = _Job(list(texts), kind)
        self._ensure_worker().put_nowait(job)
        return await job.done

    def _ensure_worker(self) -> asyncio.Queue[_Job]:
        if self._queue is None or self._worker is None or self._worker.done():
            self._queue = asyncio.Queue()
            self._worker = asyncio.create_task(self._run(self._queue))
        return self._queue

    async def _run(self, queue: asyncio.Queue[_Job]) -> None:
        limit = self.settings.embed_coalesce_texts
        wait_s = self.settings.embed_coalesce_wait_ms / 1000
        while True:
            jobs = [await queue.get()]
            size = len(jobs[0].texts)
            deadline = time.perf_counter() + wait_s
            while size < limit:
                remaining = deadline - time.perf_counter()
                try:
                    job = (
                        queue.get_nowait()
                        if remaining <= 0
                        else await asyncio.wait_for(queue.get(), remaining)
                    )
                except (asyncio.QueueEmpty, TimeoutError):
                    break
                jobs.append(job)
                size += len(job.texts)
            for kind in ("query", "document"):
                group = [j for j in jobs if j.kind == kind and not j.done.cancelled()]
                if group:
                    await self._serve(group, kind)

    async def _serve(self, jobs: list[_Job], kind: EmbedKind) -> None:
        texts = [t for job in jobs for t in job.texts]
        started = time.perf_counter()
        try:
            vectors = await asyncio.to_thread(self._model.embed, texts, kind)
        except Exception as exc:
            error = (
                exc
                if isinstance(exc, InvalidInputError)
                else UpstreamError(f"the embedding model failed: {type(exc).__name__}: {exc}")
            )
            for job in jobs:
                if not job.done.done():
                    job.done.set_exception(error)
            return
        EMBED_SECONDS.labels(kind).observe(time.perf_counter() - started)
        EMBED_BATCH.labels(kind).observe(len(texts))
        EMBED_TEXTS.labels(kind).inc(len(texts))
        offset = 0
        for job in jobs:
            rows = vectors[offset : offset + len(job.texts)]
            offset += len(job.texts)
            if not job.done.done():
                job.done.set_result(rows)

    async def ready(self) -> tuple[bool, str]:
        return True, f"{self._model.spec.name} loaded"

    async def aclose(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
