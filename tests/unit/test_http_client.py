"""The one retry policy and the one client factory: transport errors and 5xx are retried, 4xx
and final 5xx never, within attempts and total time, each retry counted; errors keep their
type across the hop; the default transport keeps connections alive. Against
`httpx.MockTransport` and real loopback servers, nothing patched."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from fastapi import FastAPI, Request

from libs.clients import ConverterClient, IndexClient
from libs.contracts import IndexSearchRequest
from libs.errors import ConversionTimeoutError, NotFoundError, StoreError, UpstreamError
from libs.http import RetryPolicy, call_with_retries, make_http_client
from libs.telemetry import RETRIES
from tests.fakes import search_hit
from tests.servers import serve

DOC_ID = "6f1c2d3e-4a5b-4c6d-8e7f-0a1b2c3d4e5f"
FAST = RetryPolicy(attempts=3, max_seconds=5, initial_wait=0.001, max_wait=0.002)


def _client(handler: httpx.MockTransport) -> IndexClient:
    return IndexClient("http://index", policy=FAST, transport=handler)


async def test_5xx_is_retried_then_succeeds() -> None:
    calls = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) < 3:
            return httpx.Response(
                503, json={"status": "error", "error": "busy", "error_code": "service_unavailable"}
            )
        return httpx.Response(200, json={"libraries": []})

    before = RETRIES.labels("index")._value.get()
    client = _client(httpx.MockTransport(handle))
    result = await client.list_libraries()
    assert result.libraries == [] and len(calls) == 3
    assert RETRIES.labels("index")._value.get() - before == 2
    assert calls[0].headers["X-Request-ID"]


async def test_4xx_is_not_retried_and_keeps_its_type() -> None:
    calls = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(
            404, json={"status": "error", "error": "no document abc", "error_code": "not_found"}
        )

    with pytest.raises(NotFoundError, match="no document abc"):
        await _client(httpx.MockTransport(handle)).get(DOC_ID)
    assert len(calls) == 1


async def test_persistent_5xx_surfaces_the_service_error() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            500, json={"status": "error", "error": "disk", "error_code": "store_error"}
        )

    with pytest.raises(StoreError, match="disk"):
        await _client(httpx.MockTransport(handle)).list_libraries()


async def test_connection_errors_become_upstream_errors() -> None:
    calls = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(UpstreamError, match="could not connect to the index service"):
        await _client(httpx.MockTransport(handle)).list_libraries()
    assert len(calls) == 3


async def test_an_id_that_is_no_uuid_is_not_sent() -> None:
    """In a path it would name another route (`/documents/../../libraries`); the index
    makes every doc_id, as a UUID, so no other names a document."""
    seen = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path)
        return httpx.Response(
            404, json={"status": "error", "error": "x", "error_code": "not_found"}
        )

    client = _client(httpx.MockTransport(handle))
    for doc_id in ("../../libraries", "lookup", "a/b", ""):
        with pytest.raises(NotFoundError, match="is a UUID; search and list_documents give"):
            await client.delete(doc_id)
    with pytest.raises(NotFoundError, match="list_jobs gives them"):
        await client.get_job("../documents")
    assert seen == []
    with pytest.raises(NotFoundError):
        await client.delete(DOC_ID.upper())
    assert seen == [f"/documents/{DOC_ID}".encode()]


async def test_a_5xx_the_service_marks_final_is_not_retried() -> None:
    calls = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(
            504,
            json={"status": "error", "error": "too slow", "error_code": "conversion_timeout"},
        )

    client = ConverterClient("http://converter", policy=FAST, transport=httpx.MockTransport(handle))
    with pytest.raises(ConversionTimeoutError, match="too slow"):
        await client.convert(b"data", "slow.pdf")
    assert len(calls) == 1


def retries(target: str) -> float:
    value: float = RETRIES.labels(target)._value.get()
    return value


def error(code: str) -> dict[str, object]:
    """The keyword arguments of an `httpx.Response` carrying a service's error body."""
    return {"json": {"status": "error", "error": "x", "error_code": code}}


async def test_a_transport_error_is_retried_counted_then_succeeds() -> None:
    calls = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            raise httpx.ReadError("connection reset", request=request)
        return httpx.Response(200, json={"libraries": []})

    before = retries("index")
    assert (await _client(httpx.MockTransport(handle)).list_libraries()).libraries == []
    assert len(calls) == 2
    assert retries("index") - before == 1


async def _always(status: int, body: dict[str, object]) -> tuple[httpx.Response, int, float]:
    """A service that always gives this answer: the final response, the calls it got and the
    retries counted in the metric."""
    calls = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(status, **body)  # type: ignore[arg-type]

    before = retries("probe")
    async with make_http_client("http://probe", 5.0, httpx.MockTransport(handle)) as http:
        response = await call_with_retries("probe", FAST, lambda: http.get("/"))
    return response, len(calls), retries("probe") - before


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, error("invalid_input")),
        (404, error("not_found")),
        (409, {"text": "conflict"}),
        (422, {"json": {"detail": "bad"}}),
        (504, error("conversion_timeout")),  # a 5xx the service marks final
    ],
    ids=["400", "404", "409-no-json", "422-fastapi", "504-final"],
)
async def test_answers_that_are_not_retried(status: int, body: dict[str, object]) -> None:
    response, calls, retried = await _always(status, body)
    assert response.status_code == status
    assert calls == 1
    assert retried == 0


@pytest.mark.parametrize(
    ("status", "body"),
    [(500, error("store_error")), (503, error("service_unavailable")), (502, {"text": ""})],
    ids=["500", "503", "502-no-json"],
)
async def test_retryable_5xx_are_retried_to_the_attempt_limit(
    status: int, body: dict[str, object]
) -> None:
    response, calls, retried = await _always(status, body)
    # The last answer comes back for the caller to turn into its typed error.
    assert response.status_code == status
    assert calls == FAST.attempts
    assert retried == FAST.attempts - 1


async def test_retries_stop_at_the_total_time_even_with_attempts_left() -> None:
    calls = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise httpx.ConnectError("refused", request=request)

    # Waits of up to 5 s against a 1 s budget: a wait that would end past the budget is not
    # started, so the call gives up within about a second, long before its 1,000 attempts.
    patient = RetryPolicy(attempts=1000, max_seconds=1.0, initial_wait=5.0, max_wait=5.0)
    client = IndexClient("http://index", policy=patient, transport=httpx.MockTransport(handle))
    started = time.monotonic()
    with pytest.raises(UpstreamError, match=r"\(ConnectError\) in (\d+) attempts") as raised:
        await client.list_libraries()
    assert time.monotonic() - started < 1.5
    assert 1 <= len(calls) < 1000
    assert f"in {len(calls)} attempts" in str(raised.value)


def _peer_app() -> FastAPI:
    app = FastAPI()

    @app.get("/libraries")
    async def libraries(request: Request) -> dict[str, object]:
        assert request.client is not None
        return {"libraries": [], "peer": request.client.port}

    return app


async def test_the_default_transport_keeps_one_connection_alive() -> None:
    with serve(_peer_app()) as url:
        client = IndexClient(url, policy=FAST)
        try:
            peers = {(await client.request("GET", "/libraries"))["peer"] for _ in range(20)}
            concurrent = await asyncio.gather(
                *(client.request("GET", "/libraries") for _ in range(10))
            )
        finally:
            await client.aclose()
    assert len(peers) == 1  # twenty requests, one kept-alive connection
    assert all(reply["libraries"] == [] for reply in concurrent)


@asynccontextmanager
async def drop_first_connection() -> AsyncIterator[tuple[str, list[int]]]:
    """A loopback server that closes its first connection without answering (a service
    restarting under the request) and answers on the next ones."""
    accepted: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(len(accepted))
        try:
            await reader.readuntil(b"\r\n\r\n")
            if len(accepted) > 1:
                body = b'{"libraries": []}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(body), body)
                )
                await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", accepted
    finally:
        server.close()
        await server.wait_closed()


async def test_a_dropped_connection_is_retried_on_a_new_one() -> None:
    async with drop_first_connection() as (url, accepted):
        before = retries("index")
        client = IndexClient(url, policy=FAST)
        try:
            assert (await client.list_libraries()).libraries == []
        finally:
            await client.aclose()
    assert len(accepted) == 2
    assert retries("index") - before == 1


async def test_nothing_listening_is_an_upstream_error_naming_the_service() -> None:
    async with drop_first_connection() as (url, _):
        pass  # closed again: every connection is refused
    client = IndexClient(url, policy=FAST)
    with pytest.raises(
        UpstreamError,
        match=r"could not connect to the index service \(ConnectError\) in 3 attempts",
    ):
        await client.list_libraries()
    await client.aclose()


async def test_an_attempt_that_runs_out_of_time_leaves_the_retries_their_budget() -> None:
    """A slow answer as long as the whole budget must not end the call untried: attempts that
    time out count against the attempts, not against the total time."""
    calls = []

    async def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) < 3:
            await asyncio.sleep(0.3)  # as if the read timed out after 0.3 s
            raise httpx.ReadTimeout("slow", request=request)
        return httpx.Response(200, json={"libraries": []})

    policy = RetryPolicy(attempts=4, max_seconds=0.4, initial_wait=0.01, max_wait=0.02)
    client = IndexClient("http://index", policy=policy, transport=httpx.MockTransport(handle))
    assert (await client.list_libraries()).libraries == []
    assert len(calls) == 3


async def test_a_service_that_keeps_timing_out_is_called_slow_not_down() -> None:
    async def handle(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    policy = RetryPolicy(attempts=2, max_seconds=5, initial_wait=0.01, max_wait=0.02)
    client = IndexClient(
        "http://index", timeout_s=7, policy=policy, transport=httpx.MockTransport(handle)
    )
    with pytest.raises(UpstreamError) as raised:
        await client.list_libraries()
    message = raised.value.message
    assert "is up but did not answer within 7 s (ReadTimeout) in 2 attempts" in message
    assert "check that it is running" not in message


async def test_typed_calls_send_what_the_async_client_would() -> None:
    """The typed clients send straight to the transport: the request is still the URL under
    the base URL (a path prefix kept, the query intact), with `Host`,
    the request id, a JSON body and the client's timeouts; the answer is the contract model,
    and an answer that is not the contract is an error, not a half-filled result."""
    from libs.contracts import IndexSearchRequest
    from libs.telemetry import request_id_var

    seen: list[httpx.Request] = []
    hit = search_hit(content="café")

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith("/search"):
            return httpx.Response(200, json={"results": [hit], "truncated": False})
        if request.url.path.endswith(f"/documents/{DOC_ID}"):
            return httpx.Response(200, json={"results": "not a document"})
        return httpx.Response(200, json={"documents": [], "count": 0, "total": 0})

    client = IndexClient(
        "http://index:8080/prefix",
        timeout_s=7.0,
        policy=FAST,
        transport=httpx.MockTransport(handle),
    )
    token = request_id_var.set("rid-123")
    try:
        found = await client.search(IndexSearchRequest(query="q é", top_k=3))
        await client.list_documents("lib", 5, 10)
        with pytest.raises(Exception, match="validation error"):
            await client.get(DOC_ID)
    finally:
        request_id_var.reset(token)
    assert found.results[0].content == "café" and found.results[0].doc_id == "d1"
    search, listing, get = seen
    assert (search.method, str(search.url)) == ("POST", "http://index:8080/prefix/search")
    assert search.headers["Host"] == "index:8080"
    assert search.headers["X-Request-ID"] == "rid-123"
    assert search.headers["Content-Type"] == "application/json"
    assert IndexSearchRequest.model_validate_json(search.content).query == "q é"
    assert search.extensions["timeout"] == {"connect": 5.0, "read": 7.0, "write": 7.0, "pool": 7.0}
    assert str(listing.url) == "http://index:8080/prefix/documents?limit=5&offset=10&library=lib"
    assert get.url.raw_path == f"/prefix/documents/{DOC_ID}".encode()


async def test_a_search_whose_vector_follows_sends_it_whole_again_on_a_retry() -> None:
    """`POST /search/stream`: the parameters, then the vector once it is there, chunked; a
    retry makes the body anew rather than sending what the first attempt used up."""
    sent: list[httpx.Request] = []
    bodies: list[bytes] = []

    async def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        bodies.append(await request.aread())
        if len(sent) == 1:
            raise httpx.ReadError("connection reset", request=request)
        return httpx.Response(200, json={"results": []})

    vector: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.05, vector.set_result, "AACAPw==")
    request = IndexSearchRequest(query="otters", top_k=3, library="zoo")
    result = await _client(httpx.MockTransport(handle)).search(request, vector)
    assert result.results == [] and len(sent) == 2
    expected = (
        request.model_dump_json(exclude={"vector_b64"}).encode()
        + b"\n"
        + b'{"vector_b64":"AACAPw=="}\n'
    )
    assert bodies == [expected, expected]
    for each in sent:
        assert each.url.path == "/search/stream"
        assert each.headers["content-type"] == "application/x-ndjson"
        assert each.headers.get("transfer-encoding") == "chunked"


async def test_a_search_with_its_vector_goes_whole_to_search() -> None:
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"results": []})

    vector: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    request = IndexSearchRequest(query="otters", vector_b64="AACAPw==")
    await _client(httpx.MockTransport(handle)).search(request, vector)
    await _client(httpx.MockTransport(handle)).search(IndexSearchRequest(query="otters"))
    assert [each.url.path for each in sent] == ["/search", "/search"]
    assert not vector.done()
