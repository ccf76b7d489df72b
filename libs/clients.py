"""Typed HTTP clients, one per downstream service, used by every caller (gateway, CLI,
benchmarks). They implement the ports in `libs.ports`."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable
from typing import Any
from urllib.parse import quote

from libs.contracts import (
    SEARCH_STREAM_TYPE,
    ChunkRequest,
    ConvertResult,
    DeleteResult,
    EmbedKind,
    EmbedRequest,
    EmbedResponse,
    GetDocumentResult,
    IndexInfo,
    IndexSearchRequest,
    JobRecord,
    JobRecords,
    JobsDeleted,
    ListDocumentsResult,
    ListLibrariesResult,
    LookupResponse,
    ModelInfo,
    PartReceived,
    QueryVector,
    SearchResult,
    SourceList,
    StoredVectors,
    UpsertPart,
    UpsertRequest,
    UpsertResponse,
)
from libs.errors import NotFoundError
from libs.http import ServiceClient
from libs.vectors import Matrix, decode


class ConverterClient(ServiceClient):
    target = "converter"

    async def convert(self, data: bytes, filename: str) -> ConvertResult:
        payload = await self.request(
            "POST",
            "/convert",
            params={"filename": filename},
            content=data,
            headers={"Content-Type": "application/octet-stream"},
        )
        return ConvertResult.model_validate(payload)

    async def chunk(self, request: ChunkRequest) -> ConvertResult:
        payload = await self.request("POST", "/chunk", json=request.model_dump())
        return ConvertResult.model_validate(payload)


class EmbedderClient(ServiceClient):
    """Each embed call may take the client's timeout plus `per_text_s` for every text in it:
    a batch of 64 long chunks is not held to the time a single query gets."""

    target = "embedder"

    def __init__(self, base_url: str, *, per_text_s: float = 0.0, **options: Any) -> None:
        super().__init__(base_url, **options)
        self.per_text_s = per_text_s

    async def info(self) -> ModelInfo:
        return ModelInfo.model_validate(await self.request("GET", "/info"))

    async def embed(self, texts: list[str], kind: EmbedKind) -> Matrix:
        timeout = self.timeout_s + self.per_text_s * len(texts)
        response = await self.fetch(
            EmbedResponse,
            "POST",
            "/embed",
            body=EmbedRequest(texts=texts, kind=kind),
            timeout_s=timeout,
        )
        return decode(response.vectors_b64, response.dim, response.count)


class IndexClient(ServiceClient):
    target = "index"

    async def lookup(self, library: str, source: str) -> LookupResponse:
        payload = await self.request(
            "GET", "/documents/lookup", params={"library": library, "source": source}
        )
        return LookupResponse.model_validate(payload)

    async def upsert(self, request: UpsertRequest) -> UpsertResponse:
        # The body is pydantic's JSON, the bytes `services.gateway.parts` measures.
        return await self.fetch(UpsertResponse, "POST", "/documents", body=request)

    async def stage(self, part: UpsertPart) -> PartReceived:
        return await self.fetch(PartReceived, "POST", "/documents/parts", body=part)

    async def search(
        self, request: IndexSearchRequest, later: Awaitable[str] | None = None
    ) -> SearchResult:
        """With `later` (the query vector still being computed) and no `vector_b64`, the
        parameters go ahead and the vector follows in the same request (`POST
        /search/stream`): the index runs the full-text leg while the vector comes."""
        if later is None or request.vector_b64:
            return await self.fetch(SearchResult, "POST", "/search", body=request)
        parameters = request.model_dump_json(exclude={"vector_b64"}).encode() + b"\n"

        async def lines() -> AsyncIterator[bytes]:
            yield parameters
            yield QueryVector(vector_b64=await later).model_dump_json().encode() + b"\n"

        return await self.fetch(
            SearchResult,
            "POST",
            "/search/stream",
            stream=lines,
            headers={"Content-Type": SEARCH_STREAM_TYPE},
        )

    async def list_documents(
        self, library: str | None, limit: int, offset: int
    ) -> ListDocumentsResult:
        params: dict[str, str | int] = {"limit": limit, "offset": offset}
        if library is not None:
            params["library"] = library
        return ListDocumentsResult.model_validate(
            await self.request("GET", "/documents", params=params)
        )

    async def list_sources(
        self, library: str, prefix: str = "", cursor: str | None = None, limit: int = 1000
    ) -> SourceList:
        params: dict[str, str | int] = {"library": library, "limit": limit}
        if prefix:
            params["prefix"] = prefix
        if cursor is not None:
            params["cursor"] = cursor
        return SourceList.model_validate(await self.request("GET", "/sources", params=params))

    async def list_libraries(self) -> ListLibrariesResult:
        return ListLibrariesResult.model_validate(await self.request("GET", "/libraries"))

    async def delete(self, doc_id: str) -> DeleteResult:
        payload = await self.request("DELETE", _document_path(doc_id))
        return DeleteResult.model_validate(payload)

    async def get(
        self, doc_id: str, chunk_index: int | None = None, context: int = 0
    ) -> GetDocumentResult:
        params: dict[str, int] = {}
        if chunk_index is not None:
            params = {"chunk_index": chunk_index, "context": context}
        payload = await self.request("GET", _document_path(doc_id), params=params)
        return GetDocumentResult.model_validate(payload)

    async def stored_vectors(self, doc_id: str) -> StoredVectors:
        return await self.fetch(StoredVectors, "GET", _document_path(doc_id) + "/vectors")

    async def info(self) -> IndexInfo:
        return IndexInfo.model_validate(await self.request("GET", "/info"))

    async def save_job(self, record: JobRecord) -> None:
        path = f"/jobs/{quote(record.job.job_id, safe='')}"
        await self.request("PUT", path, json=record.model_dump(mode="json"))

    async def get_job(self, job_id: str) -> JobRecord:
        path = f"/jobs/{_made_id(job_id, 'job_id', 'list_jobs gives them')}"
        payload = await self.request("GET", path)
        return JobRecord.model_validate(payload)

    async def list_jobs(self, status: str | None, limit: int) -> list[JobRecord]:
        params: dict[str, str | int] = {"limit": limit}
        if status is not None:
            params["status"] = status
        payload = await self.request("GET", "/jobs", params=params)
        return JobRecords.model_validate(payload).records

    async def delete_jobs(self, finished_before: str) -> int:
        payload = await self.request("DELETE", "/jobs", params={"finished_before": finished_before})
        return JobsDeleted.model_validate(payload).deleted


def _document_path(doc_id: str) -> str:
    return f"/documents/{_made_id(doc_id, 'doc_id', 'search and list_documents give them')}"


def _made_id(value: str, field: str, where: str) -> str:
    """An id the index made (a UUID), as its path segment. Any other text names nothing there,
    and in a path could name another route (`lookup`, `a/b`, `..`): not found, unasked."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise NotFoundError(f"no {field} {value!r} exists: a {field} is a UUID; {where}") from None
