"""Per-identity libraries: a tool call confined to the libraries its `Grant` allows.

An OAuth token whose libraries claim (`OAUTH_LIBRARIES_CLAIM`) lists some libraries may use
only those. A tool that names a library outside them answers `forbidden`; a search without a
library searches only the allowed ones (a `library $in [...]` condition joined to the caller's
filter); `list_documents` without a library lists the allowed ones, newest first as the index
does; `list_libraries` leaves the others out; `get_document` and `delete_document` look the
document up first and refuse one that lives elsewhere; so do `get_job` and `cancel_job` with the
job, and `list_jobs` lists the allowed libraries' jobs only. A grant without a library list
(static tokens, OAuth without the claim, stdio) runs the tool as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from libs.contracts import (
    DocIdInput,
    GetDocumentInput,
    JobIdInput,
    JobList,
    ListDocumentsInput,
    ListDocumentsResult,
    ListLibrariesResult,
    SearchInput,
)
from services.gateway.library import Call, Library
from services.gateway.scopes import Grant, LibraryNotAllowed, require_library


async def run_tool(
    grant: Grant, name: str, request: BaseModel, library: Library, call: Call
) -> BaseModel:
    """Run the `Library` method `name` for a caller holding `grant`."""
    handler = getattr(library, name)
    if grant.libraries is None:
        result: BaseModel = await handler(request, call)
        return result
    named = getattr(request, "library", None)
    if isinstance(named, str):
        require_library(grant, named, name)
    if isinstance(request, SearchInput) and named is None:
        request = request.model_copy(update={"filter": confine_filter(grant, request.filter)})
    elif isinstance(request, ListDocumentsInput) and named is None:
        return await _list_allowed(grant, request, library, call)
    elif isinstance(request, DocIdInput):  # get_document, delete_document
        found = await library.get_document(GetDocumentInput(doc_id=request.doc_id), call)
        require_library(grant, found.library, name)
    elif isinstance(request, JobIdInput):  # get_job, cancel_job
        job = await library.get_job(request, call)
        require_library(grant, job.library, name)
    result = await handler(request, call)
    if isinstance(result, ListLibrariesResult):
        kept = [info for info in result.libraries if grant.may_use(info.library)]
        result = ListLibrariesResult(libraries=kept)
    elif isinstance(result, JobList):
        jobs = [job for job in result.jobs if grant.may_use(job.library)]
        result = JobList(jobs=jobs, count=len(jobs))
    return result


def confine_filter(grant: Grant, raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """The caller's search filter AND `library` in the grant's libraries."""
    allowed = sorted(grant.libraries or ())
    if not allowed:
        raise LibraryNotAllowed(grant, "(any)", "search")
    confined = dict(raw or {})
    spec = confined.get("library")
    if spec is None:
        confined["library"] = {"$in": allowed}
    elif isinstance(spec, Mapping):
        ops = dict(spec)
        listed = ops.get("$in")
        if isinstance(listed, list):
            kept = [value for value in listed if value in allowed]
            if not kept:
                raise LibraryNotAllowed(grant, str(listed[0]) if listed else "(none)", "search")
            ops["$in"] = kept
        else:
            ops["$in"] = allowed
        confined["library"] = ops
    else:
        require_library(grant, str(spec), "search")
    return confined


async def _list_allowed(
    grant: Grant, request: ListDocumentsInput, library: Library, call: Call
) -> ListDocumentsResult:
    """One page over the allowed libraries: each library's first `offset + limit` documents,
    merged newest first (the index's order), then the page cut from that."""
    wanted = request.offset + request.limit
    documents = []
    total = 0
    for name in sorted(grant.libraries or ()):
        # list_documents caps limit at MAX_LIST_LIMIT; deeper pages read in steps.
        fetched = 0
        while fetched < wanted:
            step = min(wanted - fetched, 1000)
            page = await library.list_documents(
                ListDocumentsInput(library=name, limit=step, offset=fetched), call
            )
            if fetched == 0:
                total += page.total
            documents.extend(page.documents)
            fetched += page.count
            if page.count < step:
                break
    documents.sort(key=lambda doc: doc.doc_id)
    documents.sort(key=lambda doc: doc.created_at, reverse=True)
    chosen = documents[request.offset : wanted]
    return ListDocumentsResult(documents=chosen, count=len(chosen), total=total)
