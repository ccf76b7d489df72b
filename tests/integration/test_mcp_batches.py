"""JSON-RPC batches from a raw client over real sockets (`services.gateway.batches`): taken
under the revisions that have them, on streamable HTTP and on SSE, and refused with a clear
error where MCP does not allow them. The gateway runs on the hand-written fakes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from libs.contracts import TOOLS
from tests.fakes import FakeEmbedder, fake_gateway
from tests.mcp_raw import events, initialize_message, open_session

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fake_gateway(tmp_path_factory, FakeEmbedder()) as url:
        yield url


def _by_id(messages: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {message["id"]: message for message in messages}


def _call(id_: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}


def test_a_batch_is_answered_as_one_stream_of_its_responses(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        headers = open_session(http, "2025-03-26")
        batch = [
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
            _call(3, "ingest_content", {"content": "batched words", "source": "batched-note"}),
        ]
        answered = http.post("/mcp", headers=headers, json=batch)
        assert answered.status_code == 200, answered.text
        assert answered.headers["content-type"].startswith("text/event-stream")
        replies = _by_id(events(answered.text))
        assert set(replies) == {1, 2, 3}  # the notification gets none
        assert replies[1]["result"] == {}
        assert len(replies[2]["result"]["tools"]) == len(TOOLS)
        assert replies[3]["result"]["structuredContent"]["status"] == "indexed"
        # The session goes on: the batch's write is there for the next request.
        found = http.post(
            "/mcp", headers=headers, json=[_call(4, "search", {"query": "batched words"})]
        )
        hits = events(found.text)[0]["result"]["structuredContent"]["results"]
        assert [hit["source"] for hit in hits] == ["batched-note"]


def test_a_client_that_accepts_only_json_gets_a_json_array(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        headers = open_session(http, "2025-03-26", accept="application/json")
        batch = [
            {"jsonrpc": "2.0", "id": "a", "method": "ping"},
            {"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": {"name": "nope"}},
        ]
        answered = http.post("/mcp", headers=headers, json=batch)
    assert answered.headers["content-type"] == "application/json"
    replies = _by_id(answered.json())
    assert replies["a"]["result"] == {}
    assert replies["b"]["error"]["code"] == -32602  # an unknown tool, as outside a batch


def test_a_batch_of_notifications_is_accepted_without_a_body(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        headers = open_session(http, "2024-11-05")
        note = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}
        answered = http.post("/mcp", headers=headers, json=[note, note])
    assert answered.status_code == 202 and answered.content == b""


@pytest.mark.parametrize(
    ("batch", "says"),
    [
        ([], "empty JSON-RPC batch"),
        (
            [{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in range(101)],
            "a JSON-RPC batch of 101 messages; at most 100",
        ),
        (
            [{"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {}}],
            "initialize must not be part of a JSON-RPC batch",
        ),
    ],
)
def test_batches_mcp_forbids_are_refused_with_the_reason(
    gateway: str, batch: list[Any], says: str
) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        headers = open_session(http, "2025-03-26")
        refused = http.post("/mcp", headers=headers, json=batch)
    assert refused.status_code == 400
    assert says in refused.json()["error"]["message"]


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-11-25"])
def test_a_batch_under_a_revision_without_batches_is_refused(gateway: str, revision: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        headers = open_session(http, revision)
        refused = http.post(
            "/mcp", headers=headers, json=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]
        )
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert f"not part of MCP {revision}" in message and "POST of its own" in message


def test_a_batch_for_a_session_that_is_gone_gets_404(gateway: str) -> None:
    refused = httpx.post(
        gateway + "/mcp",
        headers={"accept": "application/json, text/event-stream", "mcp-session-id": "0" * 32},
        json=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
    )
    assert refused.status_code == 404


async def _sse_lines(stream: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in stream.aiter_lines():
        if line.startswith("data:"):
            data = line.removeprefix("data:").strip()
            yield json.loads(data) if data.startswith("{") else {"endpoint": data}


async def test_a_batch_on_the_sse_transport_is_answered_on_the_stream(gateway: str) -> None:
    async with (
        httpx.AsyncClient(base_url=gateway, timeout=30) as http,
        http.stream("GET", "/sse") as stream,
    ):
        events = _sse_lines(stream)
        endpoint = (await anext(events))["endpoint"]
        init = initialize_message("2024-11-05")
        assert (await http.post(endpoint, json=init)).status_code == 202
        assert (await anext(events))["id"] == 0
        batch = [
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        ]
        assert (await http.post(endpoint, json=batch)).status_code == 202
        replies = _by_id([await asyncio.wait_for(anext(events), 10) for _ in range(2)])
    assert replies[1]["result"] == {}
    assert len(replies[2]["result"]["tools"]) == len(TOOLS)


def test_a_batch_for_an_sse_session_that_is_gone_gets_404(gateway: str) -> None:
    refused = httpx.post(
        gateway + "/messages/?session_id=" + "0" * 32,
        json=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}],
    )
    assert refused.status_code == 404


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fake_gateway(tmp_path_factory, read_only_token=["read-token"]) as url:
        yield url


def test_a_batch_carries_its_callers_access_to_every_message(guarded: str) -> None:
    """A read-only token's batch: the read is answered, the write refused, as alone."""
    token = {"Authorization": "Bearer read-token"}
    with httpx.Client(base_url=guarded, timeout=30, headers=token) as http:
        headers = open_session(http, "2025-03-26")
        batch = [
            _call(1, "list_libraries", {}),
            _call(2, "ingest_content", {"content": "not allowed", "source": "ro-note"}),
        ]
        answered = http.post("/mcp", headers=headers, json=batch)
        replies = _by_id(events(answered.text))
        assert "libraries" in replies[1]["result"]["structuredContent"]
        refused = replies[2]["result"]
        assert refused["isError"] is True
        assert refused["structuredContent"]["error_code"] == "forbidden"
        without = httpx.post(guarded + "/mcp", headers=headers, json=batch)
    assert without.status_code == 401  # no token, no batch
