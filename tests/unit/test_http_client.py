"""The one retry policy: transport errors and 5xx are retried, 4xx never; errors keep their
type across the hop."""

from __future__ import annotations

import httpx
import pytest

from libs.clients import ConverterClient, IndexClient
from libs.errors import ConversionTimeoutError, NotFoundError, StoreError, UpstreamError
from libs.http import RetryPolicy
from libs.telemetry import RETRIES

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
        await _client(httpx.MockTransport(handle)).get("abc")
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

    with pytest.raises(UpstreamError, match="index service did not answer"):
        await _client(httpx.MockTransport(handle)).list_libraries()
    assert len(calls) == 3


async def test_doc_ids_are_escaped_in_paths() -> None:
    seen = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path)
        return httpx.Response(
            404, json={"status": "error", "error": "x", "error_code": "not_found"}
        )

    with pytest.raises(NotFoundError):
        await _client(httpx.MockTransport(handle)).delete("../../libraries")
    assert seen == [b"/documents/..%2F..%2Flibraries"]


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
