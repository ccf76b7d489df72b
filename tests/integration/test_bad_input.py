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

import asyncio
import io
import json
import threading
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult
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
    SearchResult,
    ServerInfoResult,
)
from libs.filters import FIELDS, OPERATORS
from services.gateway.app import create_app
from services.gateway.settings import GatewaySettings
from tests.conftest import SHARED_FILES
from tests.fakes import fake_gateway as gateway_on_fakes
from tests.servers import serve

pytestmark = pytest.mark.integration

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
    with gateway_on_fakes(
        tmp_path_factory, ingest_roots=[fake_root], max_upload_bytes=50_000, fetch_timeout_s=3
    ) as url:
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
    ("list_documents", {"limit": 5000}),
    ("get_document", {"doc_id": ""}),
    ("ingest_folder", {"folder": "x", "max_concurrency": 0}),
    ("ingest_content", {"content": "   ", "source": "s"}),  # caught by a field validator
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


def _assert_http_clean(response: httpx.Response, allowed: set[int]) -> dict[str, Any]:
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
    body = _assert_http_clean(response, {400, 413, 422})
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
        _assert_http_clean(response, {400, 403, 413, 422})


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
    body = _assert_http_clean(response, {400, 403})
    if response.status_code == 200:
        FolderIngestResult.model_validate(body)


# ------------------------------------------------------------------- real cores


@pytest.fixture(scope="module")
def real_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from services.entrypoints.inprocess import inprocess_ports

    var_dir = tmp_path_factory.mktemp("real-var")
    with pytest.MonkeyPatch.context() as env:
        # The cores read their settings from the environment, like the services.
        env.setenv("VAR_DIR", str(var_dir))
        env.setenv("LANCEDB_URI", str(var_dir / "lancedb"))
        env.setenv("CONVERTER_WORKERS", "1")
        env.setenv("CONVERT_TIMEOUT_S", "30")
        gateway_settings = GatewaySettings(
            _env_file=None,  # type: ignore[call-arg]
            var_dir=var_dir,
            ingest_roots=[var_dir],
            fetch_timeout_s=3,
        )
        with serve(create_app(gateway_settings, inprocess_ports)) as url:
            deadline = time.monotonic() + 240
            while httpx.get(url + "/readyz", timeout=30).status_code != 200:
                assert time.monotonic() < deadline, "the in-process cores did not get ready"
                time.sleep(0.5)
            yield url


SEEDED = {
    "harbour.md": "# Harbour\n\nThe harbour master logs every ship that enters the bay.",
    "orchard.md": "# Orchard\n\nApple trees in the orchard blossom in late spring.",
}


@pytest.fixture(scope="module")
def real_session(real_gateway: str) -> Iterator[Session]:
    session = Session(real_gateway + "/sse")
    try:
        for source, content in SEEDED.items():
            seeded = session.call(
                "ingest_content",
                {"content": content, "source": source, "library": "seed", "metadata": {"k": "v"}},
            )
            assert payload_of(seeded)["status"] == "indexed"
        yield session
    finally:
        session.close()


READ_TOOLS = ("search", "list_documents", "get_document", "delete_document", "server_info")


REAL_SWEEP = settings(
    max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


@pytest.fixture(scope="module")
def real_schemas(real_session: Session) -> dict[str, dict[str, Any]]:
    return real_session.tools()


@REAL_SWEEP
@given(data=st.data())
def test_random_arguments_against_the_real_cores(
    real_session: Session, real_schemas: dict[str, dict[str, Any]], data: st.DataObject
) -> None:
    tool = data.draw(st.sampled_from(READ_TOOLS), label="tool")
    arguments = data.draw(tool_arguments(real_schemas[tool], tool), label="arguments")
    assert_clean(tool, real_session.call(tool, arguments))


def _field_of(hit: dict[str, Any], field: str) -> Any:
    if field.startswith("metadata."):
        return hit["metadata"].get(field.removeprefix("metadata."))
    return hit[field]


@REAL_SWEEP
@given(
    field=st.sampled_from(["source", "title", "file_type", "doc_id", "metadata.k"]),
    value=st.one_of(st.sampled_from(SQL_FRAGMENTS), st.text(max_size=40)),
    operator=st.sampled_from(["plain", "$eq", "$ne", "$contains", "$in"]),
)
def test_filter_values_are_bound_not_parsed(
    real_session: Session, field: str, value: str, operator: str
) -> None:
    """Quotes and SQL in a filter value are only ever part of the value: every hit satisfies
    the condition as written, `$ne` still finds every seeded document, and the store is
    unchanged afterwards."""
    condition: Any = {
        "plain": value,
        "$eq": {"$eq": value},
        "$ne": {"$ne": value},
        "$contains": {"$contains": value},
        "$in": {"$in": [value, value + "'"]},
    }[operator]
    result = real_session.call(
        "search",
        {
            "query": "harbour orchard ship apple",
            "top_k": 10,
            "library": "seed",
            "filter": {field: condition},
        },
    )
    payload = assert_clean("search", result)
    if payload.get("status") == "error":
        assert payload["error_code"] == "invalid_input", payload
        return
    for hit in payload["results"]:
        actual = _field_of(hit, field)
        if operator in ("plain", "$eq"):
            assert actual == value, (field, value, actual)
        elif operator == "$in":
            assert actual in (value, value + "'"), (field, value, actual)
        elif operator == "$contains":
            assert isinstance(actual, str) and value in actual, (field, value, actual)
        else:
            assert actual != value, (field, value, actual)
    if operator == "$ne" and value not in ("v", *SEEDED, "Harbour", "Orchard", "md"):
        assert {hit["source"] for hit in payload["results"]} == set(SEEDED)
    listed = payload_of(real_session.call("list_documents", {"library": "seed"}))
    assert {d["source"] for d in listed["documents"]} == set(SEEDED)


DAMAGED = [
    "markitdown/test.pdf",
    "markitdown/test.docx",
    "markitdown/test.xlsx",
    "markitdown/test.pptx",
    "markitdown/test_files.zip",
]


def _halve(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _flip_middle(data: bytes) -> bytes:
    """Invert 2 KiB in the middle: the container usually still opens, the parser meets it."""
    damaged = bytearray(data)
    middle = len(data) // 2
    for i in range(middle, min(len(data), middle + 2048)):
        damaged[i] ^= 0xFF
    return bytes(damaged)


def _flip_sprinkled(data: bytes) -> bytes:
    """Change every 101st byte after the first kilobyte, structure and content alike."""
    damaged = bytearray(data)
    for i in range(1024, len(data), 101):
        damaged[i] ^= 0x5A
    return bytes(damaged)


@pytest.mark.parametrize("relative", DAMAGED)
@pytest.mark.parametrize(
    "damage",
    [_halve, _flip_middle, _flip_sprinkled],
    ids=["cut-in-half", "middle-flipped", "bytes-sprinkled"],
)
def test_damaged_real_files_give_clean_errors_quickly(
    real_gateway: str, relative: str, damage: Any
) -> None:
    source = SHARED_FILES / relative
    if not source.is_file():
        pytest.skip(f"shared test files not found at {SHARED_FILES}")
    data = damage(source.read_bytes())
    started = time.monotonic()
    response = httpx.post(
        real_gateway + "/upload",
        files={"file": (source.name, data)},
        data={"library": "damaged"},
        timeout=120,
    )
    assert time.monotonic() - started < 60
    body = _assert_http_clean(response, {413, 422})
    if response.status_code == 200:
        IngestResult.model_validate(body)  # a parser that read past the damage is fine too


def test_an_archive_of_damaged_files_is_refused_cleanly(real_gateway: str) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for relative in DAMAGED[:4]:
            path = SHARED_FILES / relative
            if path.is_file():
                archive.writestr(path.name, _halve(path.read_bytes()))
    response = httpx.post(
        real_gateway + "/upload", files={"file": ("damaged.zip", buffer.getvalue())}, timeout=120
    )
    _assert_http_clean(response, {413, 422})


UPLOAD_MISTAKES = [
    # (what, file name, bytes, form fields, status, error_code, words in the message)
    ("a scanned PDF", "MEDRPT.pdf", None, {}, 422, "no_text_extracted", "ingest_content"),
    ("an empty file", "empty.txt", b"", {}, 422, "no_text_extracted", "text"),
    ("random bytes named .pdf", "random.pdf", bytes(range(256)) * 64, {}, 422, None, ""),
    (
        "an image",
        "photo.png",
        b"\x89PNG\r\n\x1a\n" + bytes(64),
        {},
        422,
        "unsupported_format",
        "OCR",
    ),
    ("an empty library", "note.txt", b"hello", {"library": ""}, 400, "invalid_input", "library"),
]


@pytest.mark.parametrize(
    ("what", "name", "data", "fields", "status", "code", "words"),
    UPLOAD_MISTAKES,
    ids=[m[0] for m in UPLOAD_MISTAKES],
)
def test_upload_answers_the_callers_mistakes_with_4xx(
    real_gateway: str,
    what: str,
    name: str,
    data: bytes | None,
    fields: dict[str, str],
    status: int,
    code: str | None,
    words: str,
) -> None:
    if data is None:
        scan = SHARED_FILES / "markitdown" / "MEDRPT-2024-PAT-3847_medical_report_scan.pdf"
        if not scan.is_file():
            pytest.skip(f"shared test files not found at {SHARED_FILES}")
        data = scan.read_bytes()
    response = httpx.post(
        real_gateway + "/upload", files={"file": (name, data)}, data=fields, timeout=120
    )
    body = response.json()
    assert response.status_code == status, (what, body)
    assert body["status"] == "error" and body["error"], body
    if code is not None:
        assert body["error_code"] == code, body
    else:  # a parser that fails on noise says so one way or another, never as a 5xx
        assert body["error_code"] in {"conversion_failed", "no_text_extracted"}, body
    assert words in body["error"], body
