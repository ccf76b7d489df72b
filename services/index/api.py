"""HTTP routes of the index service: a thin adapter over `IndexCore`, exactly the calls that
`libs.clients.IndexClient` makes. Errors are `libs.errors` exceptions; `install_common` turns
them into the MCP error shape with their HTTP status."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from libs.contracts import (
    MAX_CONTEXT_CHUNKS,
    MAX_LIST_LIMIT,
    DeleteResult,
    GetDocumentResult,
    IndexInfo,
    IndexSearchRequest,
    JobRecord,
    JobRecords,
    JobsDeleted,
    JobStatus,
    ListDocumentsResult,
    ListLibrariesResult,
    LookupResponse,
    PartReceived,
    SearchResult,
    SourceList,
    StoredVectors,
    UpsertPart,
    UpsertRequest,
    UpsertResponse,
)
from libs.contracts.fields import MAX_SOURCE_CHARS
from libs.contracts.jobs import MAX_JOB_LIST
from libs.contracts.sync import MAX_CURSOR_CHARS
from libs.errors import InvalidInputError
from services.index import search_stream
from services.index.core import IndexCore

router = APIRouter()


def get_core(request: Request) -> IndexCore:
    core: IndexCore = request.app.state.core
    return core


Core = Annotated[IndexCore, Depends(get_core)]


# Declared before /documents/{doc_id} so that "lookup" is never taken for a doc_id.
@router.get("/documents/lookup")
async def lookup(
    core: Core,
    library: Annotated[str, Query(min_length=1, max_length=128)],
    source: Annotated[str, Query(min_length=1, max_length=8192)],
) -> LookupResponse:
    return await core.lookup(library, source)


@router.post("/documents")
async def upsert(core: Core, body: UpsertRequest) -> UpsertResponse:
    return await core.upsert(body)


@router.post("/documents/parts")
async def stage(core: Core, body: UpsertPart) -> PartReceived:
    """A part of a document larger than one request, held until the upsert naming it."""
    return await core.stage(body)


@router.post("/search")
async def search(core: Core, body: IndexSearchRequest) -> SearchResult:
    return await core.search(body)


@router.post(search_stream.PATH, response_model=SearchResult)
async def search_with_vector_to_follow(request: Request) -> Response:
    """The search's parameters, then its query vector, as two NDJSON lines of one body."""
    return await search_stream.streamed_search(request, get_core)


@router.get("/documents")
async def list_documents(
    core: Core,
    library: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 20,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ListDocumentsResult:
    return await core.list_documents(library, limit, offset)


@router.get("/sources")
async def list_sources(
    core: Core,
    library: Annotated[str, Query(min_length=1, max_length=128)],
    prefix: Annotated[str, Query(max_length=MAX_SOURCE_CHARS)] = "",
    cursor: Annotated[str | None, Query(max_length=MAX_CURSOR_CHARS)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = MAX_LIST_LIMIT,
) -> SourceList:
    return await core.list_sources(library, prefix, cursor, limit)


@router.get("/libraries")
async def list_libraries(core: Core) -> ListLibrariesResult:
    return await core.list_libraries()


@router.delete("/documents/{doc_id}")
async def delete_document(core: Core, doc_id: str) -> DeleteResult:
    return await core.delete(doc_id)


@router.get("/documents/{doc_id}")
async def get_document(
    core: Core,
    doc_id: str,
    chunk_index: Annotated[int | None, Query(ge=0)] = None,
    context: Annotated[int, Query(ge=0, le=MAX_CONTEXT_CHUNKS)] = 0,
) -> GetDocumentResult:
    return await core.get(doc_id, chunk_index, context)


@router.get("/documents/{doc_id}/vectors")
async def stored_vectors(core: Core, doc_id: str) -> StoredVectors:
    """The vectors the document's chunks are stored with, by text: what a new version of it
    need not embed again."""
    return await core.stored_vectors(doc_id)


@router.put("/jobs/{job_id}")
async def save_job(core: Core, job_id: str, body: JobRecord) -> dict[str, str]:
    if body.job.job_id != job_id:
        raise InvalidInputError(
            f"the body is the record of job {body.job.job_id!r}, not {job_id!r}"
        )
    await core.save_job(body)
    return {"status": "saved", "job_id": job_id}


@router.get("/jobs/{job_id}")
async def get_job(core: Core, job_id: str) -> JobRecord:
    return await core.get_job(job_id)


@router.get("/jobs")
async def list_jobs(
    core: Core,
    status: Annotated[JobStatus | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_JOB_LIST)] = 20,
) -> JobRecords:
    return JobRecords(records=await core.list_jobs(status, limit))


@router.delete("/jobs")
async def delete_jobs(
    core: Core, finished_before: Annotated[str, Query(min_length=10, max_length=64)]
) -> JobsDeleted:
    return JobsDeleted(deleted=await core.delete_jobs(finished_before))


@router.get("/info")
async def info(core: Core) -> IndexInfo:
    return await core.info()


@router.post("/optimize")
async def optimize(core: Core) -> IndexInfo:
    """Fold rows written since the last maintenance into the indexes now (the service also
    does this on its own cadence); used by benchmarks and before backups."""
    await core.optimize()
    return await core.info()
