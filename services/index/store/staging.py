"""Parts of documents larger than one request, held in memory until their write.

A document whose write is larger than `INDEX_MAX_BODY_BYTES` reaches the index as parts
(`UpsertPart`: chunks `start` .. with their vectors, under an upload id) and then one upsert
with the document and its last chunks that names them (`StagedChunks`). `Staging` keeps the
parts, checked as they come (model, width, vectors), and `whole` puts the upsert together:
the parts in chunk order, then the upsert's own chunks, with their vectors decoded once. The
write is then the usual atomic replace (`writes.Writes.upsert`), so a document's parts are
never searchable alone and a failure before it leaves the stored version as it was.

Nothing here is written to the store: parts not followed by another part or their write
within `INDEX_STAGED_TTL_S` are dropped, and so are all of them when the process stops. The
caller, which holds the document until its write succeeds, sends them again when the upsert
answers `parts_missing`. All uploads together hold at most `INDEX_STAGED_MAX_BYTES`
(`held_bytes`: chunk text and float32 vectors); a part past that is refused with `too_large`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from libs.contracts import Chunk, PartReceived, UpsertPart, UpsertRequest, held_bytes
from libs.errors import InvalidInputError, PartsMissingError, TooLargeError
from libs.vectors import Matrix


@dataclass
class _Part:
    chunks: list[Chunk]
    vectors: Matrix
    size: int


@dataclass
class _Upload:
    model: str
    dim: int
    touched: float
    parts: dict[int, _Part] = field(default_factory=dict)

    def chunk_count(self) -> int:
        return sum(len(part.chunks) for part in self.parts.values())


class Staging:
    """Thread-safe: the store's methods run in worker threads."""

    def __init__(self, max_bytes: int, ttl_s: float) -> None:
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._uploads: dict[str, _Upload] = {}
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        """The bytes every upload's parts hold (`held_bytes`)."""
        return self._held

    def add(self, part: UpsertPart) -> PartReceived:
        """Keep `part` (replacing one sent before with the same start); too_large past the
        budget, invalid_input for a part whose model or width is not its upload's."""
        vectors = part.vectors()
        size = held_bytes(part.chunks, part.dim)
        with self._lock:
            self._expire()
            upload = self._uploads.get(part.upload_id)
            if upload is None:
                upload = _Upload(part.model, part.dim, time.monotonic())
                self._uploads[part.upload_id] = upload
            elif (upload.model, upload.dim) != (part.model, part.dim):
                raise InvalidInputError(
                    f"part at chunk {part.start} of upload {part.upload_id!r} was embedded with "
                    f"{part.model} ({part.dim} dimensions), the upload's earlier parts with "
                    f"{upload.model} ({upload.dim}); send the whole document with one model"
                )
            before = upload.parts.get(part.start)
            freed = before.size if before is not None else 0
            if self._held - freed + size > self.max_bytes:
                if not upload.parts:
                    del self._uploads[part.upload_id]
                raise TooLargeError(
                    f"the index holds {self._held} bytes of parts of large documents and this "
                    f"part needs {size} more, over INDEX_STAGED_MAX_BYTES ({self.max_bytes}); "
                    "try again when the other large documents are written, or raise "
                    "INDEX_STAGED_MAX_BYTES on the index service"
                )
            upload.parts[part.start] = _Part(part.chunks, vectors, size)
            upload.touched = time.monotonic()
            self._held += size - freed
            return PartReceived(
                upload_id=part.upload_id, chunks=upload.chunk_count(), held_bytes=self._held
            )

    def whole(self, request: UpsertRequest) -> tuple[UpsertRequest, Matrix]:
        """The upsert with the chunks its parts hold first, then its own, and all their
        vectors; parts_missing when the parts do not make up exactly `staged.chunk_count`
        chunks from the first on. The request's `vectors_b64` stays its own."""
        staged = request.staged
        if staged is None:
            return request, request.vectors()
        with self._lock:
            self._expire()
            upload = self._uploads.get(staged.upload_id)
            parts = sorted(upload.parts.items()) if upload is not None else []
            chunks: list[Chunk] = []
            vectors: list[Matrix] = []
            for start, part in parts:
                if start != len(chunks):
                    break
                chunks.extend(part.chunks)
                vectors.append(part.vectors)
            held = 0
            if upload is not None:
                upload.touched = time.monotonic()
                held = upload.chunk_count()
        if held > staged.chunk_count:
            raise InvalidInputError(
                f"the write of {request.document.source!r} names {staged.chunk_count} chunks "
                f"sent before under upload {staged.upload_id!r}, and the index holds {held}: "
                "send each part once, at the chunk it starts with"
            )
        if len(chunks) != staged.chunk_count:
            raise PartsMissingError(
                f"the write of {request.document.source!r} names {staged.chunk_count} chunks "
                f"sent before under upload {staged.upload_id!r}, and the index holds "
                f"{len(chunks)} of them in order (parts are dropped "
                "INDEX_STAGED_TTL_S after the last one, and when the index restarts); send "
                "the parts again, then the write"
            )
        if upload is not None and (upload.model, upload.dim) != (request.model, request.dim):
            raise InvalidInputError(
                f"the write of {request.document.source!r} was embedded with {request.model} "
                f"({request.dim} dimensions), its parts with {upload.model} ({upload.dim})"
            )
        matrix = np.vstack([*vectors, request.vectors()])
        whole = request.model_copy(update={"chunks": [*chunks, *request.chunks], "staged": None})
        return whole, matrix

    def drop(self, upload_id: str) -> None:
        """Forget an upload's parts (its write succeeded)."""
        with self._lock:
            upload = self._uploads.pop(upload_id, None)
            if upload is not None:
                self._held -= sum(part.size for part in upload.parts.values())

    def _expire(self) -> None:
        """Drop the uploads no part or write touched for `ttl_s`; the lock is held."""
        cutoff = time.monotonic() - self.ttl_s
        for upload_id in [u for u, up in self._uploads.items() if up.touched < cutoff]:
            upload = self._uploads.pop(upload_id)
            self._held -= sum(part.size for part in upload.parts.values())
