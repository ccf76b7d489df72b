"""Gateway HTTP routes besides MCP: `POST /upload`, `POST /ingest_folder` and the background
jobs (`GET /jobs`, `GET /jobs/{job_id}`, `POST /jobs/{job_id}/cancel`), a library's manifest
(`GET /sources`) and deletes (`DELETE /documents?library=&source=`, `DELETE /documents/{doc_id}`),
thin adapters over the `Library` (`GET /readyz` is the common one, fed by `Library.ready_checks`).

Errors are raised as `libs.errors` exceptions; the handler `install_common` registers turns
them into the MCP error shape with the class's status: 400 for a bad form, body or metadata,
401/403 for the token, 413 too large, 422 for content that cannot be converted, 5xx only for
the server's own faults.
"""

from __future__ import annotations

import email.errors
import email.header
import email.utils
import json
import re
from typing import Any, TypeVar
from urllib.parse import unquote

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError
from starlette.datastructures import UploadFile
from starlette.types import Message

from libs.contracts import (
    DeleteSourceInput,
    DocIdInput,
    IngestFolderInput,
    IngestRepoInput,
    JobIdInput,
    ListJobsInput,
    ListSourcesInput,
    UploadInput,
)
from libs.errors import InvalidInputError, TooLargeError, invalid_input
from services.gateway.auth import caller_access, require_read, require_write
from services.gateway.identity import run_tool
from services.gateway.library import Call, Library
from services.gateway.scopes import require_library

router = APIRouter()
Input = TypeVar("Input", bound=BaseModel)
_MULTIPART_SLACK = 64 * 1024
_HTTP = Call("http")


def _library(request: Request) -> Library:
    library: Library = request.app.state.library
    return library


@router.post("/upload")
async def upload(request: Request) -> JSONResponse:
    """Multipart upload: `file`, optional `library`, `source` (the document's identity,
    default the file's base name) and `metadata` (a JSON object string)."""
    require_write(caller_access.get(), "upload")
    library = _library(request)
    limit = library.settings.max_upload_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit + _MULTIPART_SLACK:
        raise TooLargeError(f"upload of {declared} bytes is over the {limit}-byte limit")

    received = 0

    async def limited_receive() -> Message:
        nonlocal received
        message = await request.receive()
        received += len(message.get("body", b""))
        if received > limit + _MULTIPART_SLACK:
            raise TooLargeError(f"upload is over the {limit}-byte limit (MAX_UPLOAD_BYTES)")
        return message

    try:
        form = await Request(request.scope, limited_receive).form(max_files=1, max_fields=16)
    except TooLargeError:
        raise
    except Exception as exc:
        raise InvalidInputError(f"could not parse the multipart form: {exc}") from exc
    try:
        file = form.get("file")
        if not isinstance(file, UploadFile):
            raise InvalidInputError(
                "missing 'file' field: send the document as multipart form field 'file'"
            )
        data = await file.read()
        if len(data) > limit:
            raise TooLargeError(
                f"'{file.filename}' is {len(data)} bytes, over the {limit}-byte limit"
            )
        fields: dict[str, Any] = {"filename": _client_filename(file), "data": data}
        library_field = form.get("library")
        if library_field is not None:
            if not isinstance(library_field, str):
                raise InvalidInputError("'library' must be a text field")
            fields["library"] = library_field
        source_field = form.get("source")
        if source_field is not None:
            if not isinstance(source_field, str):
                raise InvalidInputError("'source' must be a text field")
            fields["source"] = source_field
        fields["metadata"] = _parse_metadata(form.get("metadata"))
        try:
            req = UploadInput.model_validate(fields)
        except ValidationError as exc:
            raise invalid_input(exc, "upload") from exc
        require_library(caller_access.get(), req.library, "upload")
        result = await library.ingest_upload(req, _HTTP)
    finally:
        await form.close()
    return JSONResponse(result.model_dump())


_FILENAME_STAR = re.compile(r"""filename\*\s*=\s*"?([^";]+)"?""", re.IGNORECASE)


def _client_filename(file: UploadFile) -> str:
    """The file's name as the client meant it. .NET's HttpClient, and so PowerShell's
    `Invoke-RestMethod -Form`, send a name that is not ASCII twice: as RFC 5987's
    `filename*=utf-8''B%C3%A4ren.txt`, which Starlette does not read, and as a MIME encoded
    word, `filename="=?utf-8?B?QsOkcmVuLnR4dA==?="`. The first is taken when present, else
    the second is decoded; a plain name (curl, browsers, Python) is taken as it is."""
    name = file.filename or ""
    star = _FILENAME_STAR.search(file.headers.get("content-disposition", ""))
    if star:
        charset, _, value = email.utils.decode_rfc2231(star.group(1).strip())
        try:
            return unquote(value, encoding=charset or "utf-8", errors="strict")
        except (LookupError, UnicodeDecodeError):
            pass  # a charset or bytes that do not read: the plain name below
    if name.startswith("=?") and name.endswith("?="):
        try:
            return str(email.header.make_header(email.header.decode_header(name)))
        except (LookupError, UnicodeDecodeError, ValueError, email.errors.HeaderParseError):
            return name
    return name


def _parse_metadata(raw: Any) -> dict[str, Any] | None:
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise InvalidInputError("'metadata' must be a text field holding a JSON object")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f'\'metadata\' is not valid JSON ({exc.msg}); send an object like {{"author":"Alice"}}'
        ) from exc
    if not isinstance(value, dict):
        raise InvalidInputError('\'metadata\' must be a JSON object, e.g. {"author":"Alice"}')
    return value


async def _json_object(request: Request, required: str) -> dict[str, Any]:
    """The request's JSON body, which must be an object (with at least `required`)."""
    problem = f"the body must be a JSON object with at least '{required}'"
    try:
        body = await request.json()
    except ValueError as exc:
        raise InvalidInputError(problem) from exc
    if not isinstance(body, dict):
        raise InvalidInputError(problem)
    return body


@router.post("/ingest_folder")
async def ingest_folder(request: Request) -> JSONResponse:
    require_write(caller_access.get(), "ingest_folder")
    body = await _json_object(request, "folder")
    req = _validated(IngestFolderInput, body)
    require_library(caller_access.get(), req.library, "ingest_folder")
    result = await _library(request).ingest_folder(req, _HTTP)
    return JSONResponse(result.model_dump())


@router.post("/ingest_repo")
async def ingest_repo(request: Request) -> JSONResponse:
    require_write(caller_access.get(), "ingest_repo")
    body = await _json_object(request, "url")
    req = _validated(IngestRepoInput, body)
    require_library(caller_access.get(), req.library, "ingest_repo")
    result = await _library(request).ingest_repo(req, _HTTP)
    return JSONResponse(result.model_dump())


@router.get("/jobs")
async def list_jobs(request: Request) -> JSONResponse:
    req = _validated(ListJobsInput, dict(request.query_params))
    return await _answer(request, "list_jobs", req)


@router.get("/jobs/{job_id}")
async def get_job(request: Request, job_id: str) -> JSONResponse:
    req = _validated(JobIdInput, {"job_id": job_id})
    return await _answer(request, "get_job", req)


@router.post("/jobs/{job_id}/cancel")
async def cancel_job(request: Request, job_id: str) -> JSONResponse:
    require_write(caller_access.get(), "cancel_job")
    req = _validated(JobIdInput, {"job_id": job_id})
    return await _answer(request, "cancel_job", req)


@router.get("/sources")
async def list_sources(request: Request) -> JSONResponse:
    """The library's manifest, a page at a time (`next_cursor` until the last page)."""
    grant = caller_access.get()
    require_read(grant, "list_sources")
    req = _validated(ListSourcesInput, dict(request.query_params))
    return await _answer(request, "list_sources", req)


@router.delete("/documents")
async def delete_source(request: Request) -> JSONResponse:
    grant = caller_access.get()
    require_write(grant, "delete_source")
    req = _validated(DeleteSourceInput, dict(request.query_params))
    return await _answer(request, "delete_source", req)


@router.delete("/documents/{doc_id}")
async def delete_document(request: Request, doc_id: str) -> JSONResponse:
    grant = caller_access.get()
    require_write(grant, "delete_document")
    req = _validated(DocIdInput, {"doc_id": doc_id})
    return await _answer(request, "delete_document", req)


async def _answer(request: Request, tool: str, req: BaseModel) -> JSONResponse:
    """Run the `Library` method of that tool for this caller (confined to its libraries)."""
    result = await run_tool(caller_access.get(), tool, req, _library(request), _HTTP)
    return JSONResponse(result.model_dump())


def _validated(model: type[Input], fields: dict[str, Any]) -> Input:
    # Query parameters are text: the one place a number arrives as a string on purpose.
    if "limit" in fields:
        try:
            fields["limit"] = int(fields["limit"])
        except ValueError as exc:
            raise InvalidInputError(
                f"limit must be a whole number, got {fields['limit']!r}"
            ) from exc
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        raise invalid_input(exc, "request") from exc
