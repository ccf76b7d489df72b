"""Resumable streams on streamable HTTP (services.gateway.resumption), with the real SDK
clients (Python, and the TypeScript SDK's) over real sockets, through a proxy that drops the
connection in the middle of a call (tests/cutting_proxy.py): the client reconnects with
`Last-Event-ID` and still gets its answer, whether it was given while the client was away or
comes later. With resumption off the same cut loses the answer, and one session never sees
another's events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from tests.cutting_proxy import Cutter, cutting_proxy
from tests.fakes import FakeEmbedder, fake_gateway
from tests.integration.test_ts_client import SDK, run_client
from tests.mcp_client import streamable_session
from tests.mcp_raw import event_fields, open_session

pytestmark = pytest.mark.integration

EMBEDDER = FakeEmbedder()
PROTOCOL = max(HANDSHAKE_PROTOCOL_VERSIONS)  # the newest with sessions (and priming events)
NOTE = {"content": "the heron stands in the reeds at dawn", "source": "heron-note"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fake_gateway(tmp_path_factory, EMBEDDER) as url:
        yield url


@pytest.fixture(scope="module")
def gateway_without_resumption(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fake_gateway(tmp_path_factory, EMBEDDER, mcp_resume_buffer_bytes=0) as url:
        yield url


@pytest.fixture(scope="module")
def gateway_keeping_little(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Room for a priming event, not for an answer."""
    with fake_gateway(tmp_path_factory, EMBEDDER, mcp_resume_buffer_bytes=300) as url:
        yield url


@pytest.fixture
def slow_embedder() -> Iterator[None]:
    EMBEDDER.delay_s = 2.5
    try:
        yield
    finally:
        EMBEDDER.delay_s = 0.0


def call(http: httpx.Client, headers: dict[str, str], name: str, **arguments: Any) -> list[Any]:
    """One `tools/call` (request ID 2) over raw HTTP in the session of `headers`: the fields
    of each event of its stream."""
    params = {"name": name, "arguments": arguments}
    request = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}
    return event_fields(http.post("/mcp", json=request, headers=headers).text)


def resume(http: httpx.Client, headers: dict[str, str], last: str) -> httpx.Response:
    """`GET /mcp` with `Last-Event-ID` in the session of `headers`."""
    resumed = {**headers, "accept": "text/event-stream", "last-event-id": last}
    return http.get("/mcp", headers=resumed)


async def call_through(url: str, cutter: Cutter, name: str, arguments: dict[str, Any]) -> Any:
    """One tool call by the Python SDK's client, through a proxy cutting as `cutter` says."""
    with cutting_proxy(url, cutter) as proxied:
        async with streamable_session(proxied) as session:
            return await session.call_tool(name, arguments)


async def test_an_answer_given_while_the_client_was_away_is_replayed(gateway: str) -> None:
    cutter = Cutter("before_answer")
    result = await call_through(gateway, cutter, "ingest_content", NOTE)
    assert cutter.cut == 1
    assert not result.is_error, result
    assert result.structured_content["source"] == "heron-note"
    assert len(cutter.resumed()) == 1  # one GET with Last-Event-ID brought it


@pytest.mark.usefixtures("slow_embedder")
async def test_a_call_still_running_when_the_client_comes_back_is_followed_to_its_answer(
    gateway: str,
) -> None:
    cutter = Cutter("after_first_id")  # the priming event, before the call has even started
    result = await call_through(gateway, cutter, "ingest_content", {**NOTE, "source": "slow"})
    assert cutter.cut == 1 and len(cutter.resumed()) == 1
    assert not result.is_error, result
    assert result.structured_content["source"] == "slow"


async def test_without_resumption_the_same_cut_loses_the_answer(
    gateway_without_resumption: str,
) -> None:
    cutter = Cutter("before_answer")
    try:
        result = await call_through(gateway_without_resumption, cutter, "list_libraries", {})
    except Exception as exc:  # the SDK may raise or answer with an error: either is a loss
        result = exc
    assert cutter.cut == 1 and cutter.resumed() == []
    assert isinstance(result, Exception) or result.is_error, result


async def test_an_answer_no_longer_kept_fails_the_call_with_an_error_that_says_so(
    gateway_keeping_little: str,
) -> None:
    """Before, the resumed stream ended empty and the SDK's client reconnected without end."""
    cutter = Cutter("before_answer")
    with cutting_proxy(gateway_keeping_little, cutter) as proxied:
        async with streamable_session(proxied) as session:
            with anyio.fail_after(20), pytest.raises(MCPError) as raised:
                await session.call_tool("ingest_content", NOTE)
    assert raised.value.error.data == {"error_code": "answer_lost"}
    assert "MCP_RESUME_BUFFER_BYTES" in raised.value.error.message
    assert cutter.cut == 1 and len(cutter.resumed()) == 1


def test_a_resumption_with_nothing_more_to_come_is_answered_no_content(gateway: str) -> None:
    """An answered stream resumed after its answer, or an event ID not kept: 204, which
    stops the TypeScript client, where a stream that ended at once had it come back."""
    with httpx.Client(base_url=gateway, timeout=30) as http:
        headers = open_session(http, PROTOCOL)
        answered = call(http, headers, "nope")
        assert "error" in json.loads(answered[-1]["data"])  # a JSON-RPC error, the 1.x case
        for last in (answered[-1]["id"], "987654321"):
            reply = resume(http, headers, last)
            assert reply.status_code == 204 and reply.content == b"", reply
            assert reply.headers["mcp-session-id"] == headers["mcp-session-id"]
            assert "content-type" not in reply.headers
        # Replayed as before when there is something to send: the answer after the priming.
        replay = resume(http, headers, answered[0]["id"])
        assert replay.status_code == 200 and '"error"' in replay.text
        # The session's own checks still come first.
        elsewhere = {**headers, "mcp-session-id": "no-such-session"}
        assert resume(http, elsewhere, last).status_code == 404


@pytest.mark.parametrize("mode", ["before_answer", "after_first_id"])
def test_the_typescript_sdk_resumes_too(gateway: str, mode: str) -> None:
    if not SDK.is_dir():
        pytest.skip("the TypeScript SDK is not installed: run `make ts-client` (npm ci)")
    cutter = Cutter(mode)
    EMBEDDER.delay_s = 2.5 if mode == "after_first_id" else 0.0
    try:
        with cutting_proxy(gateway, cutter) as proxied:
            calls = [["ingest_content", {**NOTE, "source": f"ts-{mode}"}]]
            report = run_client("http", proxied, "contract", {"calls": calls})
    finally:
        EMBEDDER.delay_s = 0.0
    assert cutter.cut == 1 and len(cutter.resumed()) == 1, cutter.requests
    [result] = report["results"]
    assert result.get("isError") is False, result
    assert result["structured"]["source"] == f"ts-{mode}"
    # What the client reports: the dropped connection, nothing else.
    assert all("SSE stream disconnected" in error for error in report["errors"]), report


def test_a_session_is_replayed_its_own_events_only(gateway: str) -> None:
    """Both sessions number their requests from 2; each stream is kept per session."""
    with httpx.Client(base_url=gateway, timeout=30) as http:
        first, second = open_session(http, PROTOCOL), open_session(http, PROTOCOL)
        answers = {}
        for headers, source in ((first, "first-session"), (second, "second-session")):
            answers[source] = call(http, headers, "ingest_content", **{**NOTE, "source": source})
        priming = answers["first-session"][0]
        assert priming.get("data", "") == "" and "id" in priming
        first_id = priming["id"]

        def replay(headers: dict[str, str]) -> str:
            return resume(http, headers, first_id).text

        mine = replay(first)
        assert "first-session" in mine and "second-session" not in mine
        answer = json.loads(event_fields(mine)[-1]["data"])
        assert answer["id"] == 2 and answer["result"]["structuredContent"]["source"] == (
            "first-session"
        )
        assert "first-session" not in replay(second)  # another session's ID: nothing
