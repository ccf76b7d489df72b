"""Hand-written fakes of the three ports, for unit tests of the gateway.

They keep the real contracts (pydantic models in, pydantic models out) so a changed
interface breaks them the same way it breaks the real services.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from libs.contracts import (
    Chunk,
    ChunkRequest,
    ConvertResult,
    DeleteResult,
    DocumentChunk,
    DocumentInfo,
    EmbedKind,
    GetDocumentResult,
    IndexInfo,
    IndexSearchRequest,
    JobRecord,
    LibraryInfo,
    ListDocumentsResult,
    ListLibrariesResult,
    LookupResponse,
    ModelInfo,
    PartReceived,
    SearchHit,
    SearchResult,
    SourceEntry,
    SourceList,
    StoredVectors,
    UpsertPart,
    UpsertRequest,
    UpsertResponse,
    decode_cursor,
    encode_cursor,
)
from libs.errors import ConversionError, NoTextError, NotFoundError, UnsupportedFormatError
from libs.formats import is_convertible
from libs.vectors import Matrix
from services.gateway.ports import Ports
from services.gateway.settings import GatewaySettings
from services.index.store.staging import Staging


class FakeConverter:
    def __init__(self) -> None:
        self.calls = 0
        self.fail_next = False

    async def convert(self, data: bytes, filename: str) -> ConvertResult:
        self.calls += 1
        if not is_convertible(filename):
            raise UnsupportedFormatError(f"{filename} is not supported")
        if self.fail_next:
            self.fail_next = False
            raise ConversionError("the fake converter was told to fail")
        text = data.decode("utf-8", errors="replace")
        return self._split(text, filename.rsplit(".", 1)[0], filename.rsplit(".", 1)[-1])

    async def chunk(self, request: ChunkRequest) -> ConvertResult:
        self.calls += 1
        return self._split(request.markdown, request.title, request.file_type)

    @staticmethod
    def _split(text: str, title: str, file_type: str) -> ConvertResult:
        parts = [p for p in text.split("\n\n") if p.strip()]
        if not parts:  # like the real converter: no result without text to index
            raise NoTextError("the fake converter found no text")
        chunks = [
            Chunk(chunk_index=i, text=p, token_count=len(p.split())) for i, p in enumerate(parts)
        ]
        return ConvertResult(markdown=text, title=title, file_type=file_type, chunks=chunks)

    async def ready(self) -> tuple[bool, str]:
        return True, "fake"


class FakeEmbedder:
    dim = 8

    def __init__(self) -> None:
        self.texts = 0
        self.delay_s = 0.0  # document embeddings take this long (a slow or busy embedder)

    async def info(self) -> ModelInfo:
        return ModelInfo(name="fake-model", dim=self.dim, max_tokens=256)

    async def embed(self, texts: list[str], kind: EmbedKind) -> Matrix:
        if kind == "document" and self.delay_s:
            await asyncio.sleep(self.delay_s)
        self.texts += len(texts)
        rows = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
            v = np.random.default_rng(seed).standard_normal(self.dim).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows) if rows else np.zeros((0, self.dim), np.float32)

    async def ready(self) -> tuple[bool, str]:
        return True, "fake"


class FakeIndex:
    """In-memory index with the real replace semantics: one live document per source."""

    def __init__(self) -> None:
        self.docs: dict[str, tuple[DocumentInfo, str, list[Chunk]]] = {}
        self.conversions: dict[str, int] = {}  # doc_id -> converter revision
        self.vectors: dict[str, tuple[str, int, Matrix]] = {}  # doc_id -> model, dim, vectors
        self.write_delay = 0.0
        self.max_body_bytes = 0  # what info() says the index takes in one write; 0 unknown
        # The parts of larger documents, held as the index holds them; info() says its budget.
        self.staging = Staging(max_bytes=0, ttl_s=900.0)
        self.parts_sent = 0
        self.jobs: dict[str, JobRecord] = {}
        self.searches: list[IndexSearchRequest] = []  # each as answered, its vector in it

    async def save_job(self, record: JobRecord) -> None:
        self.jobs[record.job.job_id] = record.model_copy(deep=True)

    async def get_job(self, job_id: str) -> JobRecord:
        if job_id not in self.jobs:
            raise NotFoundError(f"no job with job_id {job_id!r}")
        return self.jobs[job_id].model_copy(deep=True)

    async def list_jobs(self, status: str | None, limit: int) -> list[JobRecord]:
        records = [r for r in self.jobs.values() if status is None or r.job.status == status]
        records.sort(key=lambda r: (r.job.created_at, r.job.job_id), reverse=True)
        return [r.model_copy(deep=True) for r in records[:limit]]

    async def delete_jobs(self, finished_before: str) -> int:
        old = [
            job_id
            for job_id, r in self.jobs.items()
            if r.job.finished_at is not None and r.job.finished_at < finished_before
        ]
        for job_id in old:
            del self.jobs[job_id]
        return len(old)

    async def lookup(self, library: str, source: str) -> LookupResponse:
        for info, _, _ in self.docs.values():
            if info.library == library and info.source == source:
                return LookupResponse(document=info, conversion=self.conversions[info.doc_id])
        return LookupResponse(document=None)

    async def stage(self, part: UpsertPart) -> PartReceived:
        self.parts_sent += 1
        return self.staging.add(part)

    async def upsert(self, request: UpsertRequest) -> UpsertResponse:
        staged = request.staged
        request, vectors = self.staging.whole(request)
        if staged is not None:
            self.staging.drop(staged.upload_id)
        if self.write_delay:
            await asyncio.sleep(self.write_delay)
        doc = request.document
        old = await self.lookup(doc.library, doc.source)
        if old.document is not None:
            del self.docs[old.document.doc_id]
        doc_id = str(uuid.uuid4())
        info = DocumentInfo(
            doc_id=doc_id,
            source=doc.source,
            title=doc.title,
            library=doc.library,
            content_hash=doc.content_hash,
            created_at=datetime.now(UTC).isoformat(),
            metadata=doc.metadata,
            chunk_count=len(request.chunks),
            file_type=doc.file_type,
        )
        self.docs[doc_id] = (info, doc.markdown, request.chunks)
        self.conversions[doc_id] = doc.conversion
        self.vectors[doc_id] = (request.model, request.dim, vectors)
        status = "replaced" if old.document else "indexed"
        return UpsertResponse(status=status, doc_id=doc_id, chunk_count=len(request.chunks))

    async def stored_vectors(self, doc_id: str) -> StoredVectors:
        if doc_id not in self.docs:
            return StoredVectors()
        model, dim, vectors = self.vectors[doc_id]
        return StoredVectors.of(model, dim, [c.text for c in self.docs[doc_id][2]], vectors)

    async def search(
        self, request: IndexSearchRequest, later: Awaitable[str] | None = None
    ) -> SearchResult:
        if later is not None and not request.vector_b64:
            # As the index does: the vector that follows the search's parameters.
            request = request.model_copy(update={"vector_b64": await later})
        self.searches.append(request)
        hits = []
        words = set(request.query.lower().split())
        for info, _, chunks in self.docs.values():
            if request.library and info.library != request.library:
                continue
            for chunk in chunks:
                score = len(words & set(chunk.text.lower().split()))
                if score:
                    hits.append(
                        SearchHit(
                            doc_id=info.doc_id,
                            source=info.source,
                            title=info.title,
                            library=info.library,
                            file_type=info.file_type,
                            last_modified="",
                            page=chunk.page,
                            content=chunk.text,
                            chunk_index=chunk.chunk_index,
                            score=float(score),
                        )
                    )
        hits.sort(key=lambda h: -h.score)
        return SearchResult(results=hits[: request.top_k])

    async def list_documents(
        self, library: str | None, limit: int, offset: int
    ) -> ListDocumentsResult:
        docs = [i for i, _, _ in self.docs.values() if library in (None, i.library)]
        page = docs[offset : offset + limit]
        return ListDocumentsResult(documents=page, count=len(page), total=len(docs))

    async def list_sources(
        self, library: str, prefix: str = "", cursor: str | None = None, limit: int = 1000
    ) -> SourceList:
        after = decode_cursor(cursor, 1)[0] if cursor else None
        found = sorted(
            (i for i, _, _ in self.docs.values() if i.library == library),
            key=lambda i: i.source,
        )
        found = [
            i for i in found if i.source.startswith(prefix) and (after is None or i.source > after)
        ]
        page = [
            SourceEntry(
                source=i.source,
                doc_id=i.doc_id,
                content_sha256=i.content_hash,
                chunk_count=i.chunk_count,
                file_type=i.file_type,
                last_modified=i.last_modified,
                conversion=self.conversions[i.doc_id],
            )
            for i in found[:limit]
        ]
        more = len(found) > limit
        return SourceList(
            sources=page, next_cursor=encode_cursor(page[-1].source) if more else None
        )

    async def list_libraries(self) -> ListLibrariesResult:
        libs: dict[str, list[int]] = {}
        for info, _, _ in self.docs.values():
            entry = libs.setdefault(info.library, [0, 0])
            entry[0] += 1
            entry[1] += info.chunk_count
        return ListLibrariesResult(
            libraries=[
                LibraryInfo(library=k, document_count=v[0], chunk_count=v[1])
                for k, v in sorted(libs.items())
            ]
        )

    async def delete(self, doc_id: str) -> DeleteResult:
        if doc_id not in self.docs:
            raise NotFoundError(f"no document with doc_id {doc_id}")
        info, _, _ = self.docs.pop(doc_id)
        return DeleteResult(doc_id=doc_id, deleted_chunks=info.chunk_count)

    async def get(
        self, doc_id: str, chunk_index: int | None = None, context: int = 0
    ) -> GetDocumentResult:
        if doc_id not in self.docs:
            raise NotFoundError(f"no document with doc_id {doc_id}")
        info, markdown, chunks = self.docs[doc_id]
        window = None
        if chunk_index is not None:
            if not 0 <= chunk_index < len(chunks):
                raise NotFoundError(f"no chunk {chunk_index} in {doc_id}")
            window = [
                DocumentChunk(chunk_index=c.chunk_index, content=c.text, page=c.page)
                for c in chunks
                if abs(c.chunk_index - chunk_index) <= context
            ]
            markdown = "\n\n".join(c.content for c in window)
        return GetDocumentResult(
            doc_id=doc_id,
            source=info.source,
            title=info.title,
            library=info.library,
            content=markdown,
            chunk_count=info.chunk_count,
            metadata=info.metadata,
            chunks=window,
        )

    async def info(self) -> IndexInfo:
        chunks = sum(i.chunk_count for i, _, _ in self.docs.values())
        return IndexInfo(
            uri="memory://",
            model="fake-model",
            dim=8,
            documents=len(self.docs),
            chunks=chunks,
            max_body_bytes=self.max_body_bytes,
            max_staged_bytes=self.staging.max_bytes,
        )

    async def ready(self) -> tuple[bool, str]:
        return True, "fake"


def fake_ports(
    embedder: FakeEmbedder | None = None,
) -> Callable[[GatewaySettings], AbstractAsyncContextManager[Ports]]:
    """A gateway `ports` factory that gives each app fresh fakes (the embedder given, if any,
    so a test can slow it down)."""

    @asynccontextmanager
    async def factory(settings: GatewaySettings) -> AsyncIterator[Ports]:
        yield Ports(FakeConverter(), embedder or FakeEmbedder(), FakeIndex())

    return factory


@contextmanager
def fake_gateway(
    tmp_path_factory: pytest.TempPathFactory,
    embedder: FakeEmbedder | None = None,
    **settings: Any,
) -> Iterator[str]:
    """The real gateway app on a real loopback socket, over the fakes above; its URL. Settings
    not given are the defaults, read from no environment file."""
    gateway_settings = GatewaySettings(
        _env_file=None,  # type: ignore[call-arg]
        var_dir=tmp_path_factory.mktemp("var"),
        **settings,
    )
    from services.gateway.app import create_app  # the app, not only its ports
    from tests.servers import serve

    with serve(create_app(gateway_settings, fake_ports(embedder))) as url:
        yield url


def search_hit(**changes: Any) -> dict[str, Any]:
    """One search hit as the index's JSON carries it (`SearchHit`), with `changes` applied."""
    hit: dict[str, Any] = {
        "doc_id": "d1",
        "source": "a.md",
        "title": "A",
        "library": "lib",
        "file_type": "md",
        "last_modified": "",
        "page": 0,
        "content": "text",
        "chunk_index": 0,
    }
    return {**hit, **changes}
