"""Gateway HTTP routes besides MCP: `POST /upload`, `POST /ingest_folder`, `GET /readyz`."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.types import Message

from libs.contracts import DEFAULT_LIBRARY, IngestFolderInput, ReadyStatus
from libs.errors import (
    InvalidInputError,
    MvdbError,
    TooLargeError,
    UnsupportedFormatError,
)
from libs.service_app import describe_validation
from services.gateway.auth import caller_access
from services.gateway.pipeline import Pipeline, check_upload_name

router = APIRouter()
_MULTIPART_SLACK = 64 * 1024


def _pipeline(request: Request) -> Pipeline:
    pipeline: Pipeline = request.app.state.pipeline
    return pipeline


def _error(exc: MvdbError, status: int | None = None) -> JSONResponse:
    return JSONResponse(exc.to_payload(), status_code=status or exc.http_status)


def _forbidden_if_read_only(tool: str) -> JSONResponse | None:
    if caller_access.get() != "full":
        return JSONResponse(
            {
                "status": "error",
                "error": f"this token is read-only; {tool} needs a full-access token",
                "error_code": "forbidden",
            },
            status_code=403,
        )
    return None


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    pipeline = _pipeline(request)
    checks: dict[str, str] = {}
    ok = True
    for name, port in (
        ("converter", pipeline.converter),
        ("embedder", pipeline.embedder),
        ("index", pipeline.index),
    ):
        ready, detail = await port.ready()
        checks[name] = detail
        ok = ok and ready
    body = ReadyStatus(status="ready" if ok else "not_ready", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


@router.post("/upload")
async def upload(request: Request) -> JSONResponse:
    """Multipart upload: `file`, optional `library` and `metadata` (a JSON object string).
    400 bad form or metadata, 413 too large, 422 unsupported type, 500 pipeline error."""
    if (refused := _forbidden_if_read_only("upload")) is not None:
        return refused
    pipeline = _pipeline(request)
    limit = pipeline.settings.max_upload_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit + _MULTIPART_SLACK:
        return _error(
            TooLargeError(f"upload of {declared} bytes is over the {limit}-byte limit"), 413
        )

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
    except TooLargeError as exc:
        return _error(exc, 413)
    except Exception as exc:
        return _error(InvalidInputError(f"could not parse the multipart form: {exc}"), 400)
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise InvalidInputError(
                "missing 'file' field: send the document as multipart form field 'file'"
            )
        library = form.get("library") or DEFAULT_LIBRARY
        if not isinstance(library, str) or not library.strip():
            raise InvalidInputError("'library' must be a non-empty text field")
        metadata = _parse_metadata(form.get("metadata"))
        name = check_upload_name(upload.filename or "")
        data = await upload.read()
        if len(data) > limit:
            raise TooLargeError(f"'{name}' is {len(data)} bytes, over the {limit}-byte limit")
        result = await pipeline.ingest_bytes(data, name, name, library.strip(), metadata)
    except (InvalidInputError, TooLargeError, UnsupportedFormatError) as exc:
        return _error(exc)
    except MvdbError as exc:
        return _error(exc, 500)
    finally:
        await form.close()
    return JSONResponse(result.model_dump())


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


@router.post("/ingest_folder")
async def ingest_folder(request: Request) -> JSONResponse:
    if (refused := _forbidden_if_read_only("ingest_folder")) is not None:
        return refused
    try:
        body = await request.json()
    except ValueError:
        return _error(InvalidInputError("the body must be a JSON object with at least 'folder'"))
    try:
        req = IngestFolderInput.model_validate(body)
    except ValidationError as exc:
        return _error(InvalidInputError(f"invalid request: {describe_validation(exc)}"))
    try:
        result = await _pipeline(request).ingest_folder(
            req.folder,
            req.library,
            req.metadata,
            recursive=req.recursive,
            max_concurrency=req.max_concurrency,
        )
    except MvdbError as exc:
        return _error(exc)
    return JSONResponse(result.model_dump())
