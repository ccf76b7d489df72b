"""HTTP routes of the converter, matching `libs.clients.ConverterClient`.

- `POST /convert?filename=NAME`, the raw file as the body -> `ConvertResult`
- `POST /chunk`, a `ChunkRequest` JSON body -> `ConvertResult`

Bodies are read with a running size check, so an oversized upload is refused (413) without
being held in memory whole. Errors are raised as `libs.errors` exceptions and shaped by the
handler `install_common` registers.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from libs.contracts import ChunkRequest, ConvertResult
from libs.errors import parse_as
from services.converter.core import Converter, too_large

router = APIRouter()


def get_converter(request: Request) -> Converter:
    converter: Converter = request.app.state.converter
    return converter


ConverterDep = Annotated[Converter, Depends(get_converter)]


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    body = bytearray()
    async for part in request.stream():
        body.extend(part)
        if len(body) > limit:
            raise too_large(limit)
    return bytes(body)


_OCTET_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    }
}
_CHUNK_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": ChunkRequest.model_json_schema()}},
    }
}


@router.post("/convert", response_model=ConvertResult, openapi_extra=_OCTET_BODY)
async def convert(
    request: Request,
    converter: ConverterDep,
    filename: Annotated[str, Query(min_length=1, max_length=1024)],
) -> ConvertResult:
    data = await read_body(request, converter.settings.max_convert_bytes)
    return await converter.convert(data, filename)


@router.post("/chunk", response_model=ConvertResult, openapi_extra=_CHUNK_BODY)
async def chunk(request: Request, converter: ConverterDep) -> ConvertResult:
    body = await read_body(request, converter.settings.max_convert_bytes)
    return await converter.chunk(parse_as(ChunkRequest, body, "request"))
