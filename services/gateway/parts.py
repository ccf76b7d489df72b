"""A document's write to the index: one request, or parts and then one request when the
document is larger than the index takes in one (`INDEX_MAX_BODY_BYTES`).

The index says what it takes (`IndexInfo.max_body_bytes`, and `max_staged_bytes` for the
parts of larger documents), asked for once a minute. A larger document sends its first
chunks as parts (`UpsertPart`), each within one request, and then the document with its last
chunks, naming the parts (`StagedChunks`); the index writes them all in the one atomic
replace. When the index no longer holds the parts (it restarted, or they expired), it answers
`parts_missing` and they are sent once more: the vectors are still here, nothing is embedded
again.

`check` refuses, before any embedding, a document that cannot be written: its converted text
alone larger than one request, or its parts more than the index holds.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pydantic_core

from libs.contracts import (
    Chunk,
    ConvertResult,
    NewDocument,
    StagedChunks,
    UpsertPart,
    UpsertRequest,
    UpsertResponse,
    held_bytes,
)
from libs.errors import MvdbError, PartsMissingError, TooLargeError
from libs.ports import IndexPort
from libs.vectors import Matrix, encode

log = logging.getLogger(__name__)

# How long the index's limits are taken as known, and what a request carries besides what
# is measured (the document, the chunks, the vectors): its other fields and JSON framing.
_LIMITS_TTL_S = 60.0
_OVERHEAD = 4 * 1024


@dataclass(frozen=True)
class Limits:
    body: int  # the largest request; 0 unknown
    staged: int  # what parts may hold in the index; 0 none


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"


def _measured(head: object, chunks: list[Chunk], dim: int) -> tuple[int, list[int]]:
    """The bytes a request takes for `head` (the document, or its fields) with its framing,
    and each chunk's share: its JSON and its base64 vector. Straight from pydantic's
    serialiser, in a worker thread: the Markdown of a large document takes tens of ms."""
    vector = 4 * -(-(4 * dim) // 3)
    chunk_bytes = [len(pydantic_core.to_json(c)) + 1 + vector for c in chunks]
    return len(pydantic_core.to_json(head)) + _OVERHEAD, chunk_bytes


def plan(chunk_bytes: list[int], head: int, limit: int) -> tuple[list[tuple[int, int]], int]:
    """The parts (start, end) the first chunks go in, each request within `limit`, and where
    the last request's chunks start: as many as fit beside its `head` (the document's own
    bytes), at least one. TooLargeError when not even one fits."""
    room = limit - head
    start, used = len(chunk_bytes), 0
    while start > 0 and used + chunk_bytes[start - 1] <= room:
        start -= 1
        used += chunk_bytes[start]
    if start == len(chunk_bytes):
        raise TooLargeError(
            f"a write of the document alone, without its chunks, is about {_size(head)}: "
            f"with one chunk it is more than the index takes in one request "
            f"(INDEX_MAX_BODY_BYTES, {_size(limit)}); split the file into smaller files, or "
            "raise INDEX_MAX_BODY_BYTES on the index service"
        )
    parts: list[tuple[int, int]] = []
    first, used = 0, _OVERHEAD
    for i in range(start):
        if i > first and used + chunk_bytes[i] > limit:
            parts.append((first, i))
            first, used = i, _OVERHEAD
        used += chunk_bytes[i]
    if start:
        parts.append((first, start))
    return parts, start


class IndexWrites:
    def __init__(self, index: IndexPort) -> None:
        self.index = index
        self._limits = Limits(0, 0)
        self._asked = -_LIMITS_TTL_S

    async def limits(self) -> Limits:
        if time.monotonic() - self._asked > _LIMITS_TTL_S:
            try:
                info = await self.index.info()
                self._limits = Limits(info.max_body_bytes, info.max_staged_bytes)
            except MvdbError:
                self._limits = Limits(0, 0)  # the write itself will say
            self._asked = time.monotonic()
        return self._limits

    async def check(
        self, source: str, converted: ConvertResult, metadata: dict[str, Any] | None, dim: int
    ) -> None:
        """Refuse, before any embedding, a document the index cannot take (module docstring):
        it would fail at the very end, after all the embedding."""
        limits = await self.limits()
        if not limits.body:
            return
        fields = (converted.markdown, converted.title, source, metadata)
        head, chunk_bytes = await asyncio.to_thread(_measured, fields, converted.chunks, dim)
        size = head + sum(chunk_bytes)
        if size <= limits.body:
            return
        what = f"{source!r} converts to {len(converted.chunks)} chunks, a write of about "
        if not limits.staged:
            raise TooLargeError(
                f"{what}{_size(size)}, more than the index takes in one request "
                f"(INDEX_MAX_BODY_BYTES, {_size(limits.body)}), and this index takes no "
                "documents in parts (INDEX_STAGED_MAX_BYTES is 0); split the file into "
                "smaller files, or raise INDEX_MAX_BODY_BYTES on the index service"
            )
        plan(chunk_bytes, head, limits.body)
        held = held_bytes(converted.chunks, dim)
        if held > limits.staged:
            raise TooLargeError(
                f"{what}{_size(size)}, written in parts that the index would hold as "
                f"{_size(held)} until the write, more than it holds for large documents "
                f"(INDEX_STAGED_MAX_BYTES, {_size(limits.staged)}); split the file into "
                "smaller files, or raise INDEX_STAGED_MAX_BYTES on the index service"
            )

    async def write(
        self, document: NewDocument, chunks: list[Chunk], model: str, dim: int, vectors: Matrix
    ) -> UpsertResponse:
        """The document and its chunks stored as one new version, in parts if need be."""
        limit = (await self.limits()).body
        head, chunk_bytes = await asyncio.to_thread(_measured, document, chunks, dim)
        if not limit or head + sum(chunk_bytes) <= limit:
            return await self.index.upsert(
                UpsertRequest(
                    document=document,
                    chunks=chunks,
                    model=model,
                    dim=dim,
                    vectors_b64=encode(vectors),
                )
            )
        parts, last = plan(chunk_bytes, head, limit)
        upload_id = uuid.uuid4().hex
        request = UpsertRequest(
            document=document,
            chunks=chunks[last:],
            model=model,
            dim=dim,
            vectors_b64=encode(vectors[last:]),
            staged=StagedChunks(upload_id=upload_id, chunk_count=last),
        )
        log.info(
            "writing %s in %d parts and a last request",
            document.source,
            len(parts),
            extra={"fields": {"upload_id": upload_id, "chunks": len(chunks)}},
        )

        async def send_parts() -> None:
            for start, end in parts:
                part = UpsertPart(
                    upload_id=upload_id,
                    start=start,
                    chunks=chunks[start:end],
                    model=model,
                    dim=dim,
                    vectors_b64=encode(vectors[start:end]),
                )
                await self.index.stage(part)

        await send_parts()
        try:
            return await self.index.upsert(request)
        except PartsMissingError as exc:
            log.warning(
                "the index lost the parts of %s (%s); sending them again", document.source, exc
            )
            await send_parts()
            return await self.index.upsert(request)
