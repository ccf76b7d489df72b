"""Bad input against the real cores in this process (real converter workers, model and
LanceDB): a smaller random sweep, the filter injection checks, damaged real files and the
caller's upload mistakes. The rules are those of `test_bad_input.py` (see `tests.bad_input`)."""

from __future__ import annotations

import io
import time
import zipfile
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from libs.contracts import (
    IngestResult,
)
from services.gateway.app import create_app
from services.gateway.settings import GatewaySettings
from tests.bad_input import (
    NO_EGRESS_ENV,
    SQL_FRAGMENTS,
    Session,
    assert_clean,
    assert_http_clean,
    payload_of,
    tool_arguments,
)
from tests.conftest import SHARED_FILES
from tests.servers import serve

pytestmark = pytest.mark.integration


# ------------------------------------------------------------------- real cores


@pytest.fixture(scope="module")
def real_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from services.entrypoints.inprocess import inprocess_ports

    var_dir = tmp_path_factory.mktemp("real-var")
    with pytest.MonkeyPatch.context() as env:
        for name, value in NO_EGRESS_ENV.items():
            env.setenv(name, value)
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
    body = assert_http_clean(response, {413, 422})
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
    assert_http_clean(response, {413, 422})


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
