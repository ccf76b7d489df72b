"""Document embedding for the ingest pipeline: the texts of a document in batches of
`EMBED_BATCH_TEXTS`, each batch kept once embedded.

A new version of a stored document embeds only its new texts: the pipeline hands in the
vectors the stored version's chunks have (`IndexPort.stored_vectors`, by the SHA-256 of each
text), so an edited paragraph costs its own chunks, and the same bytes converted again by a
newer converter cost no embedding where the chunks came out the same.

A slow or briefly stopped embedder must not throw work away. Each batch is its own call, with
a time limit that fits its size (`libs.clients.EmbedderClient`) and its own retries; a batch
that finally fails fails the ingest, but the batches before it stay in a bounded cache keyed by
model and text (`EMBED_CACHE_TEXTS` vectors, least recently used first out), so the ingest
tried again embeds only what is left. The same cache spares re-embedding text a new version of
a document shares with the old one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from libs.ports import EmbedderPort
from libs.vectors import Matrix, text_digest
from services.gateway.metrics import REUSED_VECTORS

Key = tuple[str, bytes]
Row = np.ndarray[Any, np.dtype[np.float32]]


class VectorCache:
    """Least-recently-used vectors by (model, SHA-256 of the text)."""

    def __init__(self, max_items: int) -> None:
        self.max_items = max_items
        self._rows: OrderedDict[Key, np.ndarray[Any, np.dtype[np.float32]]] = OrderedDict()

    @staticmethod
    def key(model: str, text: str) -> Key:
        return model, text_digest(text)

    def get(self, key: Key) -> np.ndarray[Any, np.dtype[np.float32]] | None:
        row = self._rows.get(key)
        if row is not None:
            self._rows.move_to_end(key)
        return row

    def put(self, key: Key, row: np.ndarray[Any, np.dtype[np.float32]]) -> None:
        if self.max_items <= 0:
            return
        self._rows[key] = row
        self._rows.move_to_end(key)
        while len(self._rows) > self.max_items:
            self._rows.popitem(last=False)

    def __len__(self) -> int:
        return len(self._rows)


class DocumentEmbedder:
    """Embeds a document's chunk texts batch by batch through the embedder port."""

    def __init__(self, embedder: EmbedderPort, batch_texts: int, cache_texts: int) -> None:
        self.embedder = embedder
        self.batch_texts = batch_texts
        self.cache = VectorCache(cache_texts)

    async def embed(
        self, texts: list[str], model: str, dim: int, stored: Mapping[bytes, Row] | None = None
    ) -> Matrix:
        """The vectors of `texts`; `stored` holds vectors by the SHA-256 digest of their text
        (from the same model), which are taken as they are."""
        keys = [VectorCache.key(model, text) for text in texts]
        stored = stored or {}
        rows: list[Row | None] = [stored.get(k[1]) for k in keys]
        REUSED_VECTORS.inc(sum(row is not None for row in rows))
        rows = [
            self.cache.get(k) if row is None else row for k, row in zip(keys, rows, strict=True)
        ]
        todo = [i for i, row in enumerate(rows) if row is None]
        for start in range(0, len(todo), self.batch_texts):
            batch = todo[start : start + self.batch_texts]
            vectors = await self.embedder.embed([texts[i] for i in batch], "document")
            for i, vector in zip(batch, vectors, strict=True):
                row = np.array(vector, dtype=np.float32)
                self.cache.put(keys[i], row)
                rows[i] = row
        if not rows:
            return np.zeros((0, dim), dtype=np.float32)
        return np.stack([row for row in rows if row is not None]).astype(np.float32)
