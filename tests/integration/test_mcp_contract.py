"""The MCP contract as a client sees it, through the real Python SDK client over real SSE and
streamable HTTP sockets: self-describing tools (titles, annotations, bounds, output schemas),
exact argument checks, failures marked `isError`, `server_info` as the spec has it, logging,
no answer after a cancellation, the protocol-version check, and answers to a raw client that
accepts only JSON or only an event stream. The gateway runs on the
hand-written fakes (`tests.fakes`), so this is about the MCP surface, not the pipeline.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import CallToolResult, LoggingMessageNotificationParams

from libs.contracts import TOOLS, WRITE_TOOLS
from libs.formats import CONVERTIBLE_EXTENSIONS
from services.gateway.transports import SPOKEN_VERSIONS
from tests.fakes import FakeEmbedder, fake_gateway
from tests.mcp_raw import events, initialize_message, open_session

pytestmark = pytest.mark.integration

EMBEDDER = FakeEmbedder()


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ingest-root")
    (folder / "notes").mkdir()
    (folder / "notes" / "good.txt").write_text("alpha\n\nbeta")
    (folder / "notes" / "blank.txt").write_text("   \n\n  ")  # no text: this file fails
    return folder


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, root: Path) -> Iterator[str]:
    with fake_gateway(tmp_path_factory, EMBEDDER, ingest_roots=[root]) as url:
        yield url


@asynccontextmanager
async def session(url: str, transport: str, **options: Any) -> AsyncIterator[ClientSession]:
    if transport == "sse":
        async with (
            sse_client(url + "/sse", timeout=30, sse_read_timeout=60) as (read, write),
            ClientSession(read, write, **options) as opened,
        ):
            await opened.initialize()
            yield opened
    else:
        async with (
            streamable_http_client(url + "/mcp") as (read, write),
            ClientSession(read, write, **options) as opened,
        ):
            await opened.initialize()
            yield opened


def structured(result: CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result
    text = "".join(getattr(c, "text", "") for c in result.content)
    assert json.loads(text) == result.structured_content  # the same JSON as text
    return result.structured_content


TRANSPORTS = ["sse", "streamable-http"]


# ----------------------------------------------------------------- self-describing


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_tools_describe_themselves(gateway: str, transport: str) -> None:
    async with session(gateway, transport) as opened:
        listed = {tool.name: tool for tool in (await opened.list_tools()).tools}
        capabilities = (await opened.initialize()).capabilities
    assert set(listed) == {tool.name for tool in TOOLS}
    assert capabilities is not None and capabilities.tools is not None
    assert capabilities.logging is not None
    # Documents are resources; prompts would only ever list empty, so they are not advertised.
    assert capabilities.prompts is None and capabilities.resources is not None
    for name, tool in listed.items():
        assert tool.title and tool.description, name
        hints = tool.annotations
        assert hints is not None and hints.title == tool.title
        assert hints.read_only_hint is (name not in WRITE_TOOLS), name
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        # Each result the tool can give, and the error shape.
        contract = next(t for t in TOOLS if t.name == name)
        assert len(tool.output_schema["anyOf"]) == len(contract.outputs) + 1, name
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
        assert tool.input_schema.get("additionalProperties") is False, name
    assert listed["delete_document"].annotations.destructive_hint is True  # type: ignore[union-attr]
    for name in ("ingest_file", "ingest_content", "ingest_url", "ingest_folder", "cancel_job"):
        assert listed[name].annotations.idempotent_hint is True  # type: ignore[union-attr]
    assert listed["ingest_url"].annotations.open_world_hint is True  # type: ignore[union-attr]
    assert listed["ingest_file"].annotations.open_world_hint is False  # type: ignore[union-attr]


BOUNDS = [
    ("search", "top_k", {"minimum": 1, "maximum": 100}),
    ("search", "query", {"minLength": 1, "maxLength": 10_000}),
    ("search", "max_per_document", {"minimum": 1, "maximum": 100}),
    ("search", "library", {"maxLength": 128}),
    ("list_documents", "limit", {"minimum": 1, "maximum": 1000}),
    ("list_documents", "offset", {"minimum": 0}),
    ("get_document", "context", {"minimum": 0, "maximum": 20}),
    ("get_document", "doc_id", {"maxLength": 64}),
    ("delete_document", "doc_id", {"maxLength": 64}),
    ("ingest_folder", "max_concurrency", {"minimum": 1, "maximum": 64}),
    ("ingest_content", "source", {"maxLength": 2048}),
    ("ingest_content", "library", {"maxLength": 128}),
]


async def test_input_schemas_carry_every_bound_the_server_enforces(gateway: str) -> None:
    async with session(gateway, "sse") as opened:
        schemas = {tool.name: tool.input_schema for tool in (await opened.list_tools()).tools}
        for tool, parameter, bounds in BOUNDS:
            prop = schemas[tool]["properties"][parameter]
            # Optional parameters carry the bounds on their non-null branch.
            branch = next(b for b in prop.get("anyOf", [prop]) if b.get("type") != "null")
            for key, value in bounds.items():
                assert branch.get(key) == value, (tool, parameter, key, branch)
            # ...and the server enforces exactly them: one past the bound is refused.
            if "maximum" in bounds or "maxLength" in bounds:
                over: Any = (
                    bounds["maximum"] + 1
                    if "maximum" in bounds
                    else "x" * (bounds["maxLength"] + 1)
                )
                required = {"query": "alpha", "doc_id": "d", "folder": "notes", "source": "s"}
                arguments = {
                    k: v for k, v in required.items() if k in schemas[tool].get("required", [])
                }
                if tool == "ingest_content":
                    arguments = {"content": "text", "source": "s"}
                result = await opened.call_tool(tool, {**arguments, parameter: over})
                assert result.is_error, (tool, parameter)
                assert structured(result)["error_code"] == "invalid_input"
                assert parameter in structured(result)["error"]


# ---------------------------------------------------------------- exact arguments


REFUSED = [
    ("search", {"query": "the", "topk": 50}, "topk"),  # a misspelt option is not ignored
    ("search", {"query": "the", "top_k": "5"}, "top_k"),  # no coercion from text
    ("ingest_folder", {"folder": "notes", "recursive": "no"}, "recursive"),
    ("list_documents", {"limit": 2.5}, "limit"),
    ("search", {}, "query"),  # named, not called 'input'
]


@pytest.mark.parametrize(("tool", "arguments", "named"), REFUSED)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_arguments_are_checked_exactly(
    gateway: str, transport: str, tool: str, arguments: dict[str, Any], named: str
) -> None:
    async with session(gateway, transport) as opened:
        result = await opened.call_tool(tool, arguments)
    payload = structured(result)
    assert result.is_error
    assert payload["error_code"] == "invalid_input"
    assert named in payload["error"], payload


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_results_match_their_output_schemas(gateway: str, transport: str) -> None:
    async with session(gateway, transport) as opened:
        schemas = {t.name: t.output_schema for t in (await opened.list_tools()).tools}
        ingested = await opened.call_tool(
            "ingest_content", {"content": "alpha beta\n\ngamma", "source": "schema-note"}
        )
        doc_id = structured(ingested)["doc_id"]
        calls = [
            ("ingest_content", {"content": "alpha beta\n\ngamma", "source": "schema-note"}),
            ("search", {"query": "alpha"}),
            ("list_documents", {}),
            ("list_libraries", {}),
            ("get_document", {"doc_id": doc_id, "chunk_index": 0}),
            ("get_document", {"doc_id": "no-such-document"}),  # an error, also in the schema
            ("server_info", {"check_path": "notes/good.txt"}),
            ("ingest_folder", {"folder": "notes"}),
            ("delete_document", {"doc_id": doc_id}),
        ]
        for tool, arguments in calls:
            result = await opened.call_tool(tool, arguments)
            jsonschema.validate(structured(result), schemas[tool])


# ------------------------------------------------------------------- server_info


@pytest.mark.parametrize(("transport", "expected"), [("sse", "sse"), ("streamable-http",) * 2])
async def test_server_info_is_exactly_the_spec(gateway: str, transport: str, expected: str) -> None:
    async with session(gateway, transport) as opened:
        plain = structured(await opened.call_tool("server_info", {}))
        readable = structured(
            await opened.call_tool("server_info", {"check_path": "notes/good.txt"})
        )
        missing = structured(
            await opened.call_tool("server_info", {"check_path": "notes/none.txt"})
        )
    assert "path_check" not in plain
    assert plain["transport"] == expected
    assert plain["supported_extensions"] == sorted(CONVERTIBLE_EXTENSIONS)
    assert readable["path_check"]["readable"] is True and readable["path_check"]["size_bytes"] > 0
    assert "error" not in readable["path_check"]
    assert missing["path_check"]["readable"] is False and missing["path_check"]["error"]
    assert "size_bytes" not in missing["path_check"]


# ------------------------------------------------------------------------ logging


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_ingest_failures_are_sent_as_log_notifications(gateway: str, transport: str) -> None:
    heard: list[LoggingMessageNotificationParams] = []

    async def listen(params: LoggingMessageNotificationParams) -> None:
        heard.append(params)

    async with session(gateway, transport, logging_callback=listen) as opened:
        with warnings.catch_warnings():
            # The SDK marks logging deprecated for the 2026-07-28 revision only.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await opened.set_logging_level("warning")
        result = await opened.call_tool("ingest_folder", {"folder": "notes"})
        failed = await opened.call_tool("ingest_file", {"path": "notes/absent.txt"})
        await asyncio.sleep(0.2)
    assert structured(result)["failed"] == 1 and not result.is_error
    assert failed.is_error
    texts = [str(p.data) for p in heard]
    assert any("blank.txt" in t for t in texts), texts
    assert any(t.startswith("ingest_file failed") for t in texts), texts
    assert {p.level for p in heard} <= {"warning", "error"}
    assert all(p.logger == "mcpvectordb" for p in heard)


async def test_a_session_hears_nothing_below_the_level_it_set(gateway: str) -> None:
    heard: list[LoggingMessageNotificationParams] = []

    async def listen(params: LoggingMessageNotificationParams) -> None:
        heard.append(params)

    async with session(gateway, "sse", logging_callback=listen) as opened:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await opened.set_logging_level("critical")
        await opened.call_tool("ingest_folder", {"folder": "notes"})
        await asyncio.sleep(0.2)
    assert heard == []


# ------------------------------------------------------- the streamable HTTP guards


def test_an_unknown_protocol_version_is_refused_with_every_version_spoken(gateway: str) -> None:
    response = httpx.post(
        gateway + "/mcp",
        headers={
            "mcp-protocol-version": "1999-01-01",
            "accept": "application/json, text/event-stream",
        },
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    )
    assert response.status_code == 400
    data = response.json()["error"]["data"]
    assert data["requested"] == "1999-01-01"
    assert data["supported"] == list(SPOKEN_VERSIONS)
    # ...which are the versions initialize negotiates, and the per-request one.
    assert {"2024-11-05", "2025-06-18", "2025-11-25", "2026-07-28"} <= set(data["supported"])


async def test_no_response_after_a_cancellation(gateway: str) -> None:
    """Raw streamable HTTP: start a slow call, cancel it, and read its stream to the end."""
    headers = {"accept": "application/json, text/event-stream"}
    EMBEDDER.delay_s = 3.0
    try:
        async with httpx.AsyncClient(base_url=gateway, timeout=30) as http:
            init = await http.post(
                "/mcp",
                headers=headers,
                json=initialize_message("2025-06-18"),
            )
            headers["mcp-session-id"] = init.headers["mcp-session-id"]
            headers["mcp-protocol-version"] = "2025-06-18"
            await http.post(
                "/mcp",
                headers=headers,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            )
            call = asyncio.create_task(
                http.post(
                    "/mcp",
                    headers=headers,
                    json={
                        "jsonrpc": "2.0",
                        "id": 7,
                        "method": "tools/call",
                        "params": {
                            "name": "ingest_content",
                            "arguments": {"content": "slow text", "source": "cancelled-note"},
                        },
                    },
                )
            )
            await asyncio.sleep(0.5)
            cancelled = await http.post(
                "/mcp",
                headers=headers,
                json={
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": 7, "reason": "the test cancels"},
                },
            )
            assert cancelled.status_code == 202
            stream = await asyncio.wait_for(call, 20)
    finally:
        EMBEDDER.delay_s = 0.0
    assert stream.status_code == 200
    answered = [e for e in events(stream.text) if e.get("id") == 7]
    assert answered == [], answered


@pytest.mark.parametrize("accept", ["application/json", "application/json;q=1.0, text/html"])
def test_a_client_that_accepts_only_json_gets_json(gateway: str, accept: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        headers = open_session(http, "2025-11-25", accept)
        listed = http.post(
            "/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        )
        assert listed.status_code == 200
        assert listed.headers["content-type"] == "application/json"
        assert listed.json()["id"] == 1
        assert {t["name"] for t in listed.json()["result"]["tools"]} == {t.name for t in TOOLS}
        # A call that sends progress on the way: the JSON body is its response alone.
        stored = http.post(
            "/mcp",
            headers=headers,
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {
                    "name": "ingest_content",
                    "arguments": {"content": "json only client", "source": "json-only-note"},
                    "_meta": {"progressToken": "p1"},
                },
            },
        )
        assert stored.status_code == 200
        assert stored.headers["content-type"] == "application/json"
        assert int(stored.headers["content-length"]) == len(stored.content)
        reply = stored.json()
        assert reply["id"] == 2 and reply["result"]["isError"] is False
        assert reply["result"]["structuredContent"]["status"] in {"indexed", "skipped"}
        # A JSON-RPC error travels the same way.
        unknown = http.post(
            "/mcp",
            headers=headers,
            json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "nope"}},
        )
        assert unknown.headers["content-type"] == "application/json"
        assert unknown.json()["id"] == 3 and unknown.json()["error"]["code"] == -32602


def test_a_client_that_accepts_only_an_event_stream_gets_one(gateway: str) -> None:
    with httpx.Client(base_url=gateway, timeout=30) as http:
        headers = open_session(http, "2025-11-25", "text/event-stream")
        listed = http.post(
            "/mcp", headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        )
    assert listed.headers["content-type"].startswith("text/event-stream")
    replies = [event for event in events(listed.text) if event.get("id") == 1]
    assert len(replies) == 1 and len(replies[0]["result"]["tools"]) == len(TOOLS)


@pytest.mark.parametrize("accept", ["text/html", "application/json;q=0, text/html"])
def test_a_client_that_accepts_neither_answer_type_is_told_so(gateway: str, accept: str) -> None:
    refused = httpx.post(
        gateway + "/mcp",
        headers={"accept": accept},
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    )
    assert refused.status_code == 406
    assert "application/json" in refused.json()["error"]["message"]
