"""Bad input at every door of the gateway: random JSON-ish arguments at every MCP tool (real
SDK client over a real SSE socket), random multipart uploads and `/ingest_folder` bodies,
hostile filter values, and truncated or corrupted real files.

The rule everywhere: the answer is a valid result or a structured error (`status`, `error`,
`error_code`) with a code from the spec, and over MCP with `isError` set; never an
unexpected-exception code, never a 500 (bad input is the caller's mistake: 4xx), never a crash
or a hang.

The random sweeps run against the hand-written fakes (fast); a smaller sweep, the filter
injection checks and the damaged files run against the real cores in this process (real
converter workers, model and LanceDB).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from libs.contracts import (
    FolderIngestResult,
)
from tests.bad_input import (
    HOSTILE_TEXT,
    NO_EGRESS_ENV,
    RESULTS,
    SWEEP,
    Session,
    assert_clean,
    assert_http_clean,
    json_values,
    payload_of,
    text,
    tool_arguments,
)
from tests.fakes import fake_gateway as gateway_on_fakes

pytestmark = pytest.mark.integration


# ------------------------------------------------------------------ gateway on fakes


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ingest-root")
    (root / "a.txt").write_text("alpha\n\nbeta")
    (root / "sub").mkdir()
    (root / "sub" / "b.md").write_text("# Bee\n\nbuzz")
    return root


@pytest.fixture(scope="module")
def fake_gateway(tmp_path_factory: pytest.TempPathFactory, fake_root: Path) -> Iterator[str]:
    with (
        pytest.MonkeyPatch.context() as env,
        gateway_on_fakes(
            tmp_path_factory, ingest_roots=[fake_root], max_upload_bytes=50_000, fetch_timeout_s=3
        ) as url,
    ):
        for name, value in NO_EGRESS_ENV.items():
            env.setenv(name, value)
        yield url


@pytest.fixture(scope="module")
def fake_session(fake_gateway: str) -> Iterator[Session]:
    session = Session(fake_gateway + "/sse")
    try:
        yield session
    finally:
        session.close()


@pytest.fixture(scope="module")
def tool_schemas(fake_session: Session) -> dict[str, dict[str, Any]]:
    schemas = fake_session.tools()
    assert set(schemas) == set(RESULTS)
    return schemas


@pytest.mark.parametrize("tool", sorted(RESULTS))
@settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_arguments_at_every_tool(
    fake_session: Session, tool_schemas: dict[str, dict[str, Any]], tool: str, data: st.DataObject
) -> None:
    arguments = data.draw(tool_arguments(tool_schemas[tool], tool), label="arguments")
    assert_clean(tool, fake_session.call(tool, arguments))


BENIGN: dict[str, Any] = {
    "path": "a.txt",
    "content": "some text",
    "source": "note",
    "url": "http://127.0.0.1:1/",
    "folder": ".",
    "query": "alpha",
    "doc_id": "d",
    "job_id": "j",
}


def test_every_hostile_string_in_every_parameter(
    fake_session: Session, tool_schemas: dict[str, dict[str, Any]]
) -> None:
    """The table the random sweep samples from, exhaustively: each hostile string in each
    parameter of each tool, the required ones otherwise filled with harmless values."""
    calls = 0
    for tool, schema in sorted(tool_schemas.items()):
        required = {name: BENIGN[name] for name in schema.get("required", [])}
        for param in schema.get("properties", {}):
            for value in HOSTILE_TEXT:
                assert_clean(tool, fake_session.call(tool, {**required, param: value}))
                calls += 1
    assert calls > 20 * len(HOSTILE_TEXT)


INVALID_ARGUMENTS: list[tuple[str, dict[str, Any]]] = [
    ("search", {}),  # caught by the input model: a required argument missing
    ("search", {"query": "alpha", "top_k": 0}),  # out of range
    ("search", {"query": ["alpha"]}),  # wrong type
    ("search", {"query": "alpha", "top_k": 2.5}),  # a number with a fraction is no integer
    ("search", {"query": "alpha", "top_k": "3"}),  # nor is a string of digits
    ("list_documents", {"limit": 5000}),
    ("get_document", {"doc_id": ""}),
    ("ingest_folder", {"folder": "x", "max_concurrency": 0}),
    ("ingest_content", {"content": "   ", "source": "s"}),  # caught by a field validator
    ("ingest_content", {"content": "text", "source": "   "}),  # a source names a document
    ("ingest_content", {"content": "text", "source": "notes/a\nb.md"}),
]


@pytest.mark.parametrize(("tool", "arguments"), INVALID_ARGUMENTS)
def test_invalid_input_is_one_result_on_every_path(
    fake_session: Session, tool: str, arguments: dict[str, Any]
) -> None:
    """However the input is wrong, the answer has one shape: isError set and the structured
    invalid_input error naming the argument."""
    result = fake_session.call(tool, arguments)
    payload = payload_of(result)
    assert result.is_error, payload
    assert set(payload) == {"status", "error", "error_code"}, payload
    assert payload["status"] == "error" and payload["error_code"] == "invalid_input", payload
    assert payload["error"].startswith("invalid arguments: "), payload
    named = {"search": "query", "list_documents": "limit", "get_document": "doc_id"}
    if tool in named and arguments:
        assert any(name in payload["error"] for name in arguments), payload
    if tool == "ingest_content":
        wrong = "source" if arguments["content"] == "text" else "content"
        assert payload["error"].startswith(f"invalid arguments: {wrong}: "), payload


def test_a_number_without_a_fraction_is_an_integer(fake_session: Session) -> None:
    """As in JSON Schema, whose `integer` the input schemas publish: a client whose numbers
    are all floating point sends top_k 3 as 3.0. An error's text is its structured content
    as compact JSON, like a success's."""
    for arguments in ({"query": "alpha", "top_k": 3.0}, {"limit": 2.0, "offset": 0.0}):
        tool = "search" if "query" in arguments else "list_documents"
        result = fake_session.call(tool, arguments)
        assert not result.is_error, payload_of(result)
    refused = fake_session.call("search", {"query": "alpha", "top_k": 0.0})
    text = refused.content[0].text  # type: ignore[union-attr]
    assert text == json.dumps(refused.structured_content, separators=(",", ":"))


def test_a_failure_inside_a_tool_is_marked_as_an_error(fake_session: Session) -> None:
    result = fake_session.call("get_document", {"doc_id": "no-such-document"})
    assert result.is_error
    assert payload_of(result)["error_code"] == "not_found"


def test_an_unknown_tool_is_a_protocol_error(fake_session: Session) -> None:
    """MCP: an unknown tool is a JSON-RPC error (invalid params), not a tool result."""
    with pytest.raises(MCPError) as refused:
        fake_session.call("drop_everything", {})
    assert refused.value.error.code == INVALID_PARAMS
    assert "drop_everything" in refused.value.error.message
    # The session survived every example above and this one.
    assert_clean("list_libraries", fake_session.call("list_libraries", {}))


# ----------------------------------------------------------------- HTTP endpoints


filenames = st.one_of(
    text,
    st.sampled_from(
        [
            "C:\\Users\\me\\Documents\\report.txt",
            "..\\..\\boot.ini",
            "../../etc/cron.d/x.txt",
            "/abs/path/notes.md",
            "noext",
            ".txt",
            "a.TXT",
            "evil.txt\x00.pdf",
            'weird "quoted" name.txt',
            "ümlaut-名前.md",
        ]
    ),
)


@SWEEP
@given(
    filename=filenames,
    content=st.binary(max_size=3000),
    library=st.one_of(st.none(), text),
    metadata=st.one_of(st.none(), text, json_values.map(json.dumps)),
    extra=st.dictionaries(st.text(min_size=1, max_size=10), text, max_size=3),
    send_file=st.booleans(),
)
def test_random_uploads(
    fake_gateway: str,
    filename: str,
    content: bytes,
    library: str | None,
    metadata: str | None,
    extra: dict[str, str],
    send_file: bool,
) -> None:
    fields = {**extra}
    if library is not None:
        fields["library"] = library
    if metadata is not None:
        fields["metadata"] = metadata
    files = {"file": (filename, content)} if send_file else None
    response = httpx.post(fake_gateway + "/upload", data=fields, files=files, timeout=30)
    body = assert_http_clean(response, {400, 413, 422})
    if response.status_code == 200:
        assert "/" not in body["source"] and "\\" not in body["source"], body


@SWEEP
@given(
    body=st.one_of(st.binary(max_size=500), json_values.map(lambda v: json.dumps(v).encode())),
    content_type=st.sampled_from(
        ["multipart/form-data; boundary=xyz", "multipart/form-data", "application/json", ""]
    ),
)
def test_garbage_bodies(fake_gateway: str, body: bytes, content_type: str) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    for path in ("/upload", "/ingest_folder"):
        response = httpx.post(fake_gateway + path, content=body, headers=headers, timeout=30)
        assert_http_clean(response, {400, 403, 413, 422})


@SWEEP
@given(
    request=st.one_of(
        json_values,
        st.fixed_dictionaries(
            {"folder": st.one_of(text, st.sampled_from([".", "sub", "/", "/tmp"]))},
            optional={
                "library": json_values,
                "metadata": json_values,
                "recursive": json_values,
                "max_concurrency": json_values,
            },
        ),
    )
)
def test_random_ingest_folder_requests(fake_gateway: str, request: Any) -> None:
    response = httpx.post(fake_gateway + "/ingest_folder", json=request, timeout=60)
    body = assert_http_clean(response, {400, 403})
    if response.status_code == 200:
        FolderIngestResult.model_validate(body)
