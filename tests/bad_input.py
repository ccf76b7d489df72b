"""What the bad-input tests share (tests/integration/test_bad_input*.py): the codes a caller
may get back, the strategies that make hostile arguments, a real MCP SDK session over SSE on
its own loop, and the checks that an answer is clean: a valid result, or the structured error
with a code from the spec (`isError` set over MCP; a 4xx over HTTP, never a 500)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.types import CallToolResult
from pydantic import BaseModel

from libs.contracts import (
    TOOLS_BY_NAME,
    DeleteResult,
    FolderIngestResult,
    GetDocumentResult,
    IngestResult,
    Job,
    JobList,
    ListDocumentsResult,
    ListLibrariesResult,
    RepoIngestResult,
    SearchResult,
    ServerInfoResult,
)
from libs.filters import FIELDS, OPERATORS

# Codes a caller may legitimately get back; "internal_error" and "store_error" mean an
# exception escaped a check, which bad input must never cause.
EXPECTED_CODES = {
    "invalid_input",
    "file_not_readable",
    "path_not_allowed",
    "not_found",
    "too_large",
    "unsupported_format",
    "conversion_failed",
    "no_text_extracted",
    "conversion_timeout",
    "fetch_failed",
}

RESULTS: dict[str, type[BaseModel]] = {
    "ingest_file": IngestResult,
    "ingest_content": IngestResult,
    "ingest_url": IngestResult,
    "ingest_folder": FolderIngestResult,
    "search": SearchResult,
    "list_documents": ListDocumentsResult,
    "list_libraries": ListLibrariesResult,
    "delete_document": DeleteResult,
    "get_document": GetDocumentResult,
    "server_info": ServerInfoResult,
    "get_job": Job,
    "list_jobs": JobList,
    "cancel_job": Job,
    "ingest_repo": RepoIngestResult,
}

# `ingest_repo` runs git in a child process, which the loopback guard of tests/conftest.py
# does not reach: the sweeps' gateways give git a proxy on a closed loopback port, so a
# random URL that happens to resolve can still send nothing off this machine.
NO_EGRESS_ENV = {
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "all_proxy": "http://127.0.0.1:9",
    "no_proxy": "127.0.0.1,localhost,::1",  # the tests' own loopback traffic goes direct
}

SWEEP = settings(
    max_examples=80,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# ------------------------------------------------------------------------ strategies

SQL_FRAGMENTS = [
    "x' OR '1'='1",
    "'; DROP TABLE chunks; --",
    '") OR 1=1 --',
    "%' OR source LIKE '%",
    "\\' OR 1=1",
    "doc_id IS NOT NULL",
]
HOSTILE_TEXT = [
    *SQL_FRAGMENTS,
    "",
    " ",
    "\x00",
    "../../../../etc/passwd",
    "/etc/passwd",
    "/dev/zero",
    "C:\\Windows\\win.ini",
    "file:///etc/passwd",
    "http://169.254.169.254/latest/meta-data/",
    "http://127.0.0.1:1/",
    "http://[::1]/x.html",
    "http://10.0.0.1/",
    "http://8.8.8.8/paper.pdf",
    "http://x.org:99999/",
    "http://[zz/",
    "https://user:pw@[::ffff:127.0.0.1]:8000/",
    "gopher://x/",
    "ftp://example.org/x",
    "*",
    "default",
    "a" * 5000,
    "😀" * 50,
    "metadata.author",
]

text = st.one_of(st.text(max_size=80), st.sampled_from(HOSTILE_TEXT))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=10,
)
filter_fields = st.one_of(
    st.sampled_from(sorted(FIELDS)),
    st.sampled_from(["metadata.author", "metadata.x-y.z", "metadata.", "metadata.a b", "$or"]),
    text,
)
filter_values = st.one_of(
    json_values,
    st.dictionaries(st.sampled_from([*OPERATORS, "$regex", "$where"]), json_values, max_size=3),
)
filters = st.one_of(json_values, st.dictionaries(filter_fields, filter_values, max_size=4))


def tool_arguments(schema: dict[str, Any], name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments for one tool: each known parameter present or not, with any JSON value,
    plus now and then a parameter the tool does not have."""
    optional: dict[str, st.SearchStrategy[Any]] = {}
    for param in schema.get("properties", {}):
        hostile = st.sampled_from(HOSTILE_TEXT)
        optional[param] = st.one_of(hostile, filters if param == "filter" else json_values)
    known = st.fixed_dictionaries({}, optional=optional)
    extra = st.dictionaries(text, json_values, max_size=2)
    return st.tuples(known, extra).map(lambda pair: {**pair[1], **pair[0]})


# ------------------------------------------------------------------ the MCP session


class Session:
    """One MCP SSE session kept open in a background event loop, so that synchronous
    hypothesis tests can call tools on it. The session lives in a single task (anyio's
    scopes must be left in the task that entered them); calls run as other tasks."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.session: ClientSession | None = None
        self._ready = threading.Event()
        self._closing: asyncio.Event | None = None
        self._main = asyncio.run_coroutine_threadsafe(self._hold(url), self.loop)
        if not self._ready.wait(60):
            raise RuntimeError(f"no MCP session with {url}: {self._main}")

    async def _hold(self, url: str) -> None:
        self._closing = asyncio.Event()
        async with (
            sse_client(url, timeout=30, sse_read_timeout=600) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            self.session = session
            self._ready.set()
            await self._closing.wait()

    def call(self, tool: str, arguments: dict[str, Any], timeout: float = 60) -> CallToolResult:
        assert self.session is not None
        future = asyncio.run_coroutine_threadsafe(
            self.session.call_tool(tool, arguments), self.loop
        )
        return future.result(timeout)

    def tools(self) -> dict[str, dict[str, Any]]:
        assert self.session is not None
        listed = asyncio.run_coroutine_threadsafe(self.session.list_tools(), self.loop).result(30)
        return {tool.name: tool.input_schema for tool in listed.tools}

    def close(self) -> None:
        if self._closing is not None:
            self.loop.call_soon_threadsafe(self._closing.set)
        self._main.result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def payload_of(result: CallToolResult) -> dict[str, Any]:
    structured = result.structured_content
    if isinstance(structured, dict):
        inner = structured.get("result") if set(structured) == {"result"} else structured
        assert isinstance(inner, dict), structured
        return inner
    text_parts = "".join(getattr(c, "text", "") for c in result.content)
    value = json.loads(text_parts)  # a bare exception message would not parse
    assert isinstance(value, dict)
    return value


def _fits(model: type[BaseModel], payload: dict[str, Any]) -> bool:
    try:
        model.model_validate(payload)
    except ValueError:
        return False
    return True


def assert_clean(tool: str, result: CallToolResult) -> dict[str, Any]:
    payload = payload_of(result)
    if payload.get("status") == "error":
        assert result.is_error, (tool, payload)
        assert isinstance(payload.get("error"), str) and payload["error"], payload
        assert payload.get("error_code") in EXPECTED_CODES, (tool, payload)
    else:
        assert not result.is_error, (tool, payload)
        models = TOOLS_BY_NAME[tool].outputs
        assert RESULTS[tool] in models, tool
        assert any(_fits(model, payload) for model in models), (tool, payload)
    return payload


def assert_http_clean(response: httpx.Response, allowed: set[int]) -> dict[str, Any]:
    body = response.json()
    assert isinstance(body, dict), body
    if response.status_code == 200:
        assert body.get("status") != "error", body
        return body
    assert body.get("status") == "error" and body.get("error"), body
    assert body.get("error_code") in EXPECTED_CODES, body
    if body["error_code"] == "conversion_timeout":  # the server gave up: its 504, not a 500
        assert response.status_code == 504, body
    else:
        assert response.status_code in allowed, (response.status_code, body)
    return body
