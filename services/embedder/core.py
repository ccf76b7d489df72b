"""In-process embedder port: the model behind async methods that keep the event loop free."""

from __future__ import annotations

import asyncio
import time

from libs.contracts import EmbedKind, ModelInfo
from libs.errors import InvalidInputError
from libs.vectors import Matrix
from services.embedder.embed import Embedder
from services.embedder.metrics import EMBED_BATCH, EMBED_SECONDS, EMBED_TEXTS
from services.embedder.settings import EmbedderSettings


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

    async def info(self) -> ModelInfo:
        return self._model.info()

    async def embed(self, texts: list[str], kind: EmbedKind) -> Matrix:
        if len(texts) > self.settings.embed_max_texts:
            raise InvalidInputError(
                f"{len(texts)} texts in one request; send at most {self.settings.embed_max_texts}"
            )
        started = time.perf_counter()
        vectors = await asyncio.to_thread(self._model.embed, texts, kind)
        EMBED_BATCH.labels(kind).observe(len(texts))
        EMBED_TEXTS.labels(kind).inc(len(texts))
        EMBED_SECONDS.labels(kind).observe(time.perf_counter() - started)
        return vectors

    async def ready(self) -> tuple[bool, str]:
        return True, f"{self._model.spec.name} loaded"

    async def aclose(self) -> None:
        return None
