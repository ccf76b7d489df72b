"""What the MCP transports over HTTP answer a raw client that gets the protocol wrong
(`services.gateway.transport_errors`): each refusal a JSON-RPC error naming the problem and
the fix, on the real gateway over a real socket. Every rewrite is here, so a change of the
SDK's words fails a test rather than leaving a refusal unexplained."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.fakes import fake_gateway
from tests.mcp_raw import BOTH, open_session

pytestmark = pytest.mark.integration

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fake_gateway(tmp_path_factory) as url:
        yield url


def _error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["error"]["code"] == -32600 and body["id"] is None
    message: str = body["error"]["message"]
    return message


@pytest.mark.parametrize("path", ["/mcp", "/messages/?session_id=" + "0" * 32])
def test_a_body_that_is_not_json_is_refused_with_the_type_wanted(gateway: str, path: str) -> None:
    refused = httpx.post(
        gateway + path,
        headers={"accept": BOTH, "content-type": "text/plain"},
        content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
    )
    message = _error(refused, 415)
    assert "application/json" in message and "'text/plain'" in message


def test_a_request_before_initialize_is_told_to_initialize(gateway: str) -> None:
    refused = httpx.post(gateway + "/mcp", headers={"accept": BOTH}, json=PING)
    assert "send initialize first" in _error(refused, 400)


def test_a_request_for_a_session_that_ended_is_told_to_initialize_again(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        headers = open_session(http, "2025-11-25")
        assert http.delete("/mcp", headers=headers).status_code == 200
        refused = http.post("/mcp", headers=headers, json=PING)
    assert "send initialize again" in _error(refused, 404)


@pytest.mark.parametrize(
    ("query", "status", "says"),
    [
        ("", 400, "open the SSE stream with GET /sse"),
        ("?session_id=nope", 400, "endpoint event"),
        ("?session_id=" + "0" * 32, 404, "open a new one with GET /sse"),
    ],
)
def test_a_message_without_its_sse_session_says_where_to_get_one(
    gateway: str, query: str, status: int, says: str
) -> None:
    refused = httpx.post(gateway + "/messages/" + query, json=PING)
    assert says in _error(refused, status)
