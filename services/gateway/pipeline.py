"""The ingest pipeline: dedup look-up, conversion, embedding and the index write, for files,
uploads, URLs and raw content (folders: `services.gateway.folders`).

Dedup happens before any conversion or embedding work: the same `(source, library)` with the
same content hash is `skipped`, unless an older converter made it (`found.current`): then the
same bytes are converted anew. Ingests of one source are serialised by a per-source lock so
that concurrent requests end with exactly one document; the index's replace is atomic, so a
failure anywhere before the write leaves the old version in place.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from libs.contracts import (
    ChunkRequest,
    ConvertResult,
    DocumentInfo,
    IngestResult,
    ModelInfo,
    NewDocument,
    SourceEntry,
)
from libs.errors import InvalidInputError, MvdbError
from libs.formats import CONVERTER_REVISION
from libs.ports import ConverterPort, EmbedderPort, IndexPort
from libs.telemetry import STAGE_SECONDS
from services.gateway.embedding import DocumentEmbedder, Row
from services.gateway.fetch import UrlPolicy, fetch_url
from services.gateway.metrics import INGESTED_CHUNKS, INGESTED_DOCUMENTS
from services.gateway.parts import IndexWrites
from services.gateway.settings import GatewaySettings
from services.gateway.sources import PathPolicy, read_file

log = logging.getLogger(__name__)


@asynccontextmanager
async def _stage(name: str) -> AsyncIterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        STAGE_SECONDS.labels(name).observe(time.perf_counter() - started)


@dataclass
class _SourceLocks:
    """One lock per (library, source), dropped when nobody holds or waits for it."""

    _locks: dict[tuple[str, str], tuple[asyncio.Lock, int]] = field(default_factory=dict)

    @asynccontextmanager
    async def hold(self, key: tuple[str, str]) -> AsyncIterator[None]:
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _skipped(doc_id: str, source: str, library: str, chunk_count: int) -> IngestResult:
    """The stored version holds these bytes, made as this release makes them."""
    return IngestResult(
        status="skipped", doc_id=doc_id, source=source, library=library, chunk_count=chunk_count
    )


class Pipeline:
    def __init__(
        self,
        settings: GatewaySettings,
        converter: ConverterPort,
        embedder: EmbedderPort,
        index: IndexPort,
        fetcher: httpx.AsyncClient | None = None,
    ) -> None:
        self.settings = settings
        self.converter = converter
        self.embedder = embedder
        self.index = index
        self.paths = PathPolicy.from_roots(settings.ingest_roots)
        self.urls = UrlPolicy(settings.url_allow_hosts)
        self._fetcher = fetcher
        self._locks = _SourceLocks()
        self.embedding = DocumentEmbedder(
            embedder, settings.embed_batch_texts, settings.embed_cache_texts
        )
        self._model: ModelInfo | None = None
        self.writes = IndexWrites(index)

    async def model(self) -> ModelInfo:
        if self._model is None:
            self._model = await self.embedder.info()
        return self._model

    # ----------------------------------------------------------------- entry points

    async def ingest_file(
        self,
        path: str,
        library: str,
        metadata: dict[str, Any] | None,
        *,
        stored: SourceEntry | None = None,
    ) -> IngestResult:
        resolved = self.paths.resolve(path)
        async with _stage("read"):
            read = await asyncio.to_thread(read_file, resolved, self.settings.max_file_bytes)
        return await self.ingest_bytes(
            read.data,
            resolved.name,
            str(resolved),
            library,
            metadata,
            last_modified=read.last_modified,
            stored=stored,
        )

    async def ingest_bytes(
        self,
        data: bytes,
        filename: str,
        source: str,
        library: str,
        metadata: dict[str, Any] | None,
        *,
        last_modified: str | None = None,
        stored: SourceEntry | None = None,
    ) -> IngestResult:
        """`stored`: the source's entry in the library's manifest, as a folder or repository
        run read it at its start (`folders.stored_sources`); when it holds these bytes, made
        as this release makes them, the file is skipped without a look-up of its own."""
        digest = content_hash(data)
        if stored is not None and stored.content_sha256 == digest and not stored.stale:
            return _skipped(stored.doc_id, source, library, stored.chunk_count)

        async def convert() -> ConvertResult:
            async with _stage("convert"):
                return await self.converter.convert(data, filename)

        return await self._ingest(
            source, library, metadata, digest, convert, last_modified or _now(), filename
        )

    async def ingest_content(
        self, content: str, source: str, library: str, metadata: dict[str, Any] | None
    ) -> IngestResult:
        digest = content_hash(content.encode("utf-8"))

        async def chunk() -> ConvertResult:
            async with _stage("chunk"):
                return await self.converter.chunk(
                    ChunkRequest(markdown=content, title="", file_type="md")
                )

        return await self._ingest(source, library, metadata, digest, chunk, _now(), source)

    async def ingest_url(
        self, url: str, library: str, metadata: dict[str, Any] | None
    ) -> IngestResult:
        if self._fetcher is None:
            raise InvalidInputError("URL ingestion is not available in this process")
        async with _stage("fetch"):
            fetched = await fetch_url(
                self._fetcher,
                url,
                self.urls,
                max_bytes=self.settings.fetch_max_bytes,
                max_redirects=self.settings.fetch_max_redirects,
                timeout_s=self.settings.fetch_timeout_s,
            )
        return await self.ingest_bytes(fetched.data, fetched.filename, url, library, metadata)

    # --------------------------------------------------------------------- the core

    async def _stored_vectors(
        self, existing: DocumentInfo, model: ModelInfo
    ) -> dict[bytes, Row] | None:
        """The vectors the stored version's chunks have, when the same model made them; None
        when the index cannot say (the ingest then embeds every text, as before)."""
        try:
            stored = await self.index.stored_vectors(existing.doc_id)
        except MvdbError as exc:
            log.warning(
                "stored vectors of %s unavailable (%s); embedding all", existing.doc_id, exc
            )
            return None
        if stored.model != model.name or stored.dim != model.dim:
            return None
        return stored.by_digest()

    async def _ingest(
        self,
        source: str,
        library: str,
        metadata: dict[str, Any] | None,
        digest: str,
        produce: Callable[[], Awaitable[ConvertResult]],
        last_modified: str,
        fallback_title: str,
    ) -> IngestResult:
        async with self._locks.hold((library, source)):
            found = await self.index.lookup(library, source)
            existing = found.document
            # Unchanged bytes that convert as this release would convert them are skipped;
            # made before their file type's conversion changed
            # (`libs.formats.CONVERTER_REVISION`), they are converted anew.
            if existing is not None and existing.content_hash == digest and found.current:
                return _skipped(existing.doc_id, source, library, existing.chunk_count)
            # The converter refuses a document without text (no_text_extracted).
            converted = await produce()
            model = await self.model()
            await self.writes.check(source, converted, metadata, model.dim)
            async with _stage("embed"):
                texts = [c.text for c in converted.chunks]
                stored = await self._stored_vectors(existing, model) if existing else None
                vectors = await self.embedding.embed(texts, model.name, model.dim, stored)
            title = converted.title.strip() or Path(fallback_title).stem or source
            document = NewDocument(
                source=source,
                library=library,
                title=title,
                file_type=converted.file_type,
                content_hash=digest,
                last_modified=last_modified,
                metadata=metadata or {},
                markdown=converted.markdown,
                conversion=CONVERTER_REVISION,
            )
            async with _stage("write"):
                written = await self.writes.write(
                    document, converted.chunks, model.name, model.dim, vectors
                )
        INGESTED_DOCUMENTS.labels(written.status).inc()
        INGESTED_CHUNKS.inc(written.chunk_count)
        return IngestResult(
            status=written.status,
            doc_id=written.doc_id,
            source=source,
            library=library,
            chunk_count=written.chunk_count,
        )
