"""`POST /search/stream`: a search whose query vector follows its parameters, in one request.

A search needs the query's vector for its vector leg, but its full-text leg needs only the
words. So the gateway sends the search's parameters as soon as it has the query and the
vector once the embedder has made it, as the two lines of one NDJSON body
(`libs.contracts.SEARCH_STREAM_TYPE`, chunked):

    {"query": "...", "top_k": 10, ...}      an IndexSearchRequest without vector_b64
    {"vector_b64": "..."}                    a QueryVector, when the query is embedded

The search starts on the first line (the full-text leg runs while the vector comes) and goes
on when the second arrives; the answer is `POST /search`'s. A first line that is not a
request without a vector, or a body that is not exactly the two lines, is invalid_input
(400); a vector that has not come `VECTOR_WAIT_S` after the parameters is invalid_input
too. A caller that goes away before the vector comes (its embedding failed) gets no answer.
The body counts against INDEX_MAX_BODY_BYTES as it arrives (`libs.body_limit`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from libs.contracts import IndexSearchRequest, QueryVector
from libs.errors import InvalidInputError, parse_as
from libs.tasks import abandon
from services.index.core import IndexCore

log = logging.getLogger(__name__)

# The longest a search waits for its vector after its parameters: the embedder's own calls
# are bounded far below this (HTTP_TIMEOUT_S and their retries).
VECTOR_WAIT_S = 120.0

PATH = "/search/stream"


class _Lines:
    """The body's lines as they arrive: the first, then everything after it."""

    def __init__(self, chunks: AsyncIterator[bytes]) -> None:
        self._chunks = chunks
        self._held = b""

    async def first(self) -> bytes:
        async for chunk in self._chunks:
            self._held += chunk
            if b"\n" in chunk:
                break
        line, _, self._held = self._held.partition(b"\n")
        return line

    async def rest(self) -> bytes:
        async for chunk in self._chunks:
            self._held += chunk
        return self._held


async def _vector(lines: _Lines) -> str:
    try:
        rest = await asyncio.wait_for(lines.rest(), VECTOR_WAIT_S)
    except TimeoutError:
        raise InvalidInputError(
            f"the query vector did not follow the search's parameters within {VECTOR_WAIT_S:.0f}"
            " s; send it as the body's second line, or the whole search to POST /search"
        ) from None
    if not rest.strip():
        raise InvalidInputError(
            'the body ended before the query vector: its second line must be {"vector_b64": ...}'
        )
    if rest.strip().count(b"\n"):
        raise InvalidInputError(
            "the body holds more than two lines: the search's parameters, then the query vector"
        )
    return parse_as(QueryVector, rest, "the query vector (the body's second line)").vector_b64


async def streamed_search(request: Request, core_of: Callable[[Request], IndexCore]) -> Response:
    """The search `request`'s body asks for, by the index `core_of` gives once its first line
    is read (a body past the limit is refused before anything else)."""
    lines = _Lines(request.stream())
    try:
        head = await lines.first()
        parameters = parse_as(IndexSearchRequest, head, "the search's parameters (the first line)")
        core = core_of(request)
        if parameters.vector_b64 is not None:
            raise InvalidInputError(
                "the first line holds vector_b64: the vector comes on the second line (or send "
                "the whole search to POST /search)"
            )
        vector = asyncio.ensure_future(_vector(lines))
        try:
            result = await core.search(parameters, vector)
        finally:
            await abandon(vector)  # its failure, if the search needed it, was raised there
    except ClientDisconnect:
        log.info("a streamed search's caller went away before its query vector came")
        return Response(status_code=499)
    return Response(result.model_dump_json(), media_type="application/json")
