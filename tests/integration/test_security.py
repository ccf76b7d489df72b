"""The gateway's exposure policies through its real app on a loopback socket.

- Path policy (INGEST_ROOTS) as seen by every entry point: `server_info(check_path)`,
  `ingest_file`, `ingest_folder` (tool and HTTP) and the CLI's `--url` mode.
- Tokens per route and per tool; Host/Origin checks (DNS rebinding); refusing to listen
  beyond loopback without a token.
- Hostile files through a real converter service: a conversion that overruns
  CONVERT_TIMEOUT_S is stopped, reported once (not retried) and both services stay up; ZIP
  bombs (many entries, huge expansion, nested archives, an Office container) get clean
  errors in bounded time.

The embedder and index are the hand-written fakes: these tests are about the gateway and
the converter.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from libs.clients import ConverterClient
from libs.http import RetryPolicy
from services.converter.app import create_app as converter_app
from services.converter.metrics import CONVERSIONS
from services.converter.settings import ConverterSettings
from services.gateway.app import create_app
from services.gateway.ports import Ports
from services.gateway.settings import GatewaySettings
from tests.conftest import REPO, SHARED_FILES, zip_bytes
from tests.fakes import FakeEmbedder, FakeIndex, fake_ports
from tests.mcp_client import sse_tools
from tests.servers import serve

FULL = {"Authorization": "Bearer full-token"}
READ = {"Authorization": "Bearer read-token"}
WRITE_TOOLS: dict[str, dict[str, Any]] = {
    "ingest_file": {"path": "/tmp/x.txt"},
    "ingest_content": {"content": "x", "source": "y"},
    "ingest_url": {"url": "https://example.org/"},
    "ingest_folder": {"folder": "/tmp"},
    "delete_document": {"doc_id": "abc"},
}


@dataclass(frozen=True)
class Layout:
    root: Path
    outside: Path


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    base = tmp_path_factory.mktemp("roots")
    root, outside = base / "root", base / "outside"
    (root / "docs").mkdir(parents=True)
    outside.mkdir()
    (root / "docs" / "ok.txt").write_text("inside the root")
    (outside / "secret.txt").write_text("outside the root")
    os.symlink(outside / "secret.txt", root / "docs" / "link.txt")
    os.symlink(outside, root / "escape")
    return Layout(root, outside)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, layout: Layout) -> Iterator[str]:
    settings = GatewaySettings(
        _env_file=None,  # type: ignore[call-arg]
        var_dir=tmp_path_factory.mktemp("var"),
        auth_token=["full-token"],
        read_only_token=["read-token"],
        ingest_roots=[layout.root],
        allowed_hosts=["mcp.example.org"],
    )
    with serve(create_app(settings, fake_ports())) as url:
        yield url


# ------------------------------------------------------------------------ path policy


async def test_server_info_path_check_honours_ingest_roots(gateway: str, layout: Layout) -> None:
    root, outside = layout.root, layout.outside
    async with sse_tools(gateway + "/sse", READ) as tools:

        async def check(path: str) -> dict[str, Any]:
            info = await tools.call("server_info", check_path=path)
            result: dict[str, Any] = info["path_check"]
            return result

        inside = await check(str(root / "docs" / "ok.txt"))
        assert inside["readable"] is True and inside["size_bytes"] == len("inside the root")
        relative = await check("docs/ok.txt")  # relative paths are taken from the first root
        assert relative["readable"] is True and relative["path"] == str(root / "docs/ok.txt")
        for refused in (
            str(outside / "secret.txt"),
            str(root / "docs" / ".." / ".." / "outside" / "secret.txt"),
            str(root / "docs" / "link.txt"),
            str(root / "escape" / "secret.txt"),
            "/etc/passwd",
        ):
            result = await check(refused)
            assert result["readable"] is False, refused
            assert "outside the folders this server may read" in result["error"], refused
            assert "size_bytes" not in result or result["size_bytes"] is None
        nul = await check("docs/ok.txt\x00.pdf")
        assert nul["readable"] is False and "NUL" in nul["error"]


async def test_ingest_tools_refuse_paths_outside_the_roots(gateway: str, layout: Layout) -> None:
    async with sse_tools(gateway + "/sse", FULL) as tools:
        ok = await tools.call("ingest_file", path=str(layout.root / "docs" / "ok.txt"))
        assert ok["status"] == "indexed"
        for path in (str(layout.outside / "secret.txt"), str(layout.root / "docs/link.txt")):
            refused = await tools.call("ingest_file", path=path)
            assert refused["error_code"] == "path_not_allowed", refused
        folder = await tools.call("ingest_folder", folder=str(layout.root / "escape"))
        assert folder["error_code"] == "path_not_allowed"
    async with httpx.AsyncClient(base_url=gateway, headers=FULL) as http:
        response = await http.post("/ingest_folder", json={"folder": str(layout.outside)})
        assert response.status_code == 403
        assert response.json()["error_code"] == "path_not_allowed"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPVECTORDB_")}
    return subprocess.run(
        [sys.executable, "-m", "services.entrypoints.ingest", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )


def test_the_cli_url_mode_goes_through_the_gateway_policy(gateway: str, layout: Layout) -> None:
    outside = _cli(str(layout.outside), "--url", gateway, "--token", "full-token")
    assert outside.returncode == 1
    assert "outside the folders this server may read" in outside.stderr
    no_token = _cli(str(layout.root / "docs"), "--url", gateway)
    assert no_token.returncode == 1 and "bearer token" in no_token.stderr
    read_only = _cli(str(layout.root / "docs"), "--url", gateway, "--token", "read-token")
    assert read_only.returncode == 1 and "read-only" in read_only.stderr
    # The folder is inside the root, but its link.txt points out of it: that file is refused.
    inside = _cli(str(layout.root / "docs"), "--url", gateway, "--token", "full-token")
    assert inside.returncode == 1, inside.stderr
    assert "2 files" in inside.stdout and "1 failed" in inside.stdout
    assert "1 indexed" in inside.stdout or "1 skipped" in inside.stdout
    assert "link.txt" in inside.stderr and "outside the folders" in inside.stderr
    for run in (outside, no_token, read_only, inside):
        assert "Traceback" not in run.stderr


def test_the_cli_reports_a_url_that_is_not_a_gateway(tmp_path: Path) -> None:
    """Pointed at some other web server (an HTML 404 page), it says so instead of crashing."""
    with serve(_html_404_app()) as url:
        result = _cli(str(tmp_path), "--url", url)
    assert result.returncode == 1
    assert "HTTP 404" in result.stderr and "Traceback" not in result.stderr


def _html_404_app() -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b"<html><body>Not Found</body></html>"
        await send(
            {
                "type": "http.response.start",
                "status": 404,
                "headers": [(b"content-type", b"text/html"), (b"content-length", b"35")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


# ---------------------------------------------------------------- tokens and hosts


async def test_every_route_but_the_probes_needs_a_token(gateway: str) -> None:
    async with httpx.AsyncClient(base_url=gateway) as http:
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/readyz")).status_code == 200
        for method, path in (
            ("GET", "/metrics"),
            ("GET", "/sse"),
            ("POST", "/messages/"),
            ("POST", "/mcp"),
            ("POST", "/upload"),
            ("POST", "/ingest_folder"),
            ("GET", "/docs"),
        ):
            response = await http.request(method, path)
            assert response.status_code == 401, (method, path)
            assert response.json()["error_code"] == "unauthorized"
            assert response.headers["www-authenticate"].startswith("Bearer")
        wrong_scheme = await http.get("/metrics", headers={"Authorization": "Basic full-token"})
        assert wrong_scheme.status_code == 401
        assert (await http.get("/metrics", headers=READ)).status_code == 200
        folder = await http.post("/ingest_folder", headers=READ, json={"folder": "/tmp"})
        assert folder.status_code == 403 and folder.json()["error_code"] == "forbidden"


async def test_a_read_only_token_cannot_call_any_write_tool(gateway: str) -> None:
    async with sse_tools(gateway + "/sse", READ) as tools:
        for tool, args in WRITE_TOOLS.items():
            refused = await tools.call(tool, **args)
            assert refused["error_code"] == "forbidden", tool
        assert "libraries" in await tools.call("list_libraries")


async def test_host_and_origin_are_checked_on_every_route_but_probes_and_metrics(
    gateway: str,
) -> None:
    """DNS rebinding: a page on evil.example whose name now points at this server sends
    Host: evil.example (421). Cross-site requests: a page elsewhere posting a form to the
    gateway sends its Origin (403), whether or not the route is an MCP transport."""
    async with httpx.AsyncClient(base_url=gateway, headers=FULL, timeout=10) as http:
        evil_host = {"Host": "evil.example"}
        evil_origin = {"Origin": "http://evil.example"}
        for method, path in (
            ("GET", "/sse"),
            ("POST", "/messages/"),
            ("POST", "/mcp"),
            ("POST", "/upload"),
            ("POST", "/ingest_folder"),
        ):
            bad_host = await http.request(method, path, headers=evil_host)
            assert bad_host.status_code == 421, (method, path)
            assert bad_host.json()["error_code"] == "invalid_host"
            assert "ALLOWED_HOSTS" in bad_host.json()["error"]
            bad_origin = await http.request(method, path, headers=evil_origin)
            assert bad_origin.status_code == 403, (method, path)
            assert bad_origin.json()["error_code"] == "invalid_origin"
        csrf = await http.post(
            "/upload",
            headers=evil_origin,
            files={"file": ("planted.txt", b"written by another web page")},
        )
        assert csrf.status_code == 403
        # Orchestrators and Prometheus address the pod by IP.
        pod = {"Host": "10.42.0.7:8000"}
        assert (await http.get("/healthz", headers=pod)).status_code == 200
        assert (await http.get("/readyz", headers=pod)).status_code == 200
        assert (await http.get("/metrics", headers=pod)).status_code == 200
        # ALLOWED_HOSTS admits the public name the gateway is served under, with https.
        published = {"Host": "mcp.example.org", "Origin": "https://mcp.example.org"}
        async with http.stream("GET", "/sse", headers=published) as stream:
            assert stream.status_code == 200
        folder = await http.post("/ingest_folder", headers=published, json={"folder": "/nope"})
        assert folder.status_code == 403 and folder.json()["error_code"] == "path_not_allowed"


def test_the_gateway_refuses_to_listen_beyond_loopback_without_a_token() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("AUTH_TOKEN", "READ_ONLY_TOKEN")}
    env.update(BIND_HOST="0.0.0.0", ALLOW_UNAUTHENTICATED_REMOTE="false", GATEWAY_PORT="1")
    result = subprocess.run(
        [sys.executable, "-m", "services.entrypoints.serve", "gateway"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0 without AUTH_TOKEN" in result.stderr


@pytest.mark.parametrize(
    ("host", "tokens", "roots", "warned"),
    [
        ("127.0.0.1", [], [], False),  # a local user's own gateway
        ("127.0.0.1", ["t"], [], True),  # a token means callers through a tunnel or proxy
        ("0.0.0.0", ["t"], [], True),
        ("0.0.0.0", ["t"], ["/srv/ingest"], False),
    ],
)
def test_exposing_the_gateway_without_ingest_roots_is_warned_about(
    caplog: pytest.LogCaptureFixture, host: str, tokens: list[str], roots: list[str], warned: bool
) -> None:
    from services.gateway.app import check_exposure

    settings = GatewaySettings(
        _env_file=None,  # type: ignore[call-arg]
        auth_token=tokens,
        ingest_roots=[Path(r) for r in roots],
    )
    with caplog.at_level("WARNING", logger="services.gateway.app"):
        check_exposure(settings, host)
    assert ("INGEST_ROOTS is not set" in caplog.text) is warned


# ------------------------------------------------------- hostile files, real converter

TIMEOUT_S = 0.5


@pytest.fixture(scope="module")
def converter_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = ConverterSettings(
        _env_file=None,  # type: ignore[call-arg]
        var_dir=tmp_path_factory.mktemp("converter-var"),
        converter_workers=1,
        convert_timeout_s=TIMEOUT_S,
        archive_max_entries=200,
        archive_max_uncompressed_bytes=20_000_000,
        archive_max_depth=2,
    )
    with serve(converter_app(settings)) as url:
        deadline = time.monotonic() + 180
        while httpx.get(url + "/readyz", timeout=5).status_code != 200:
            assert time.monotonic() < deadline, "converter workers did not start"
            time.sleep(0.2)
        yield url


@pytest.fixture(scope="module")
def hostile_gateway(tmp_path_factory: pytest.TempPathFactory, converter_url: str) -> Iterator[str]:
    @asynccontextmanager
    async def ports(settings: GatewaySettings) -> AsyncIterator[Ports]:
        # The gateway's real client and retry policy, with a budget that would show retries.
        client = ConverterClient(
            converter_url, timeout_s=30, policy=RetryPolicy(attempts=4, max_seconds=60)
        )
        try:
            yield Ports(client, FakeEmbedder(), FakeIndex())
        finally:
            await client.aclose()

    settings = GatewaySettings(
        _env_file=None,  # type: ignore[call-arg]
        var_dir=tmp_path_factory.mktemp("gateway-var"),
    )
    with serve(create_app(settings, ports)) as url:
        yield url


@pytest.fixture(scope="module")
def slow_text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real, long text: the Gutenberg novel four times over (about 3 MB, several seconds
    of chunking, against a limit of a fraction of a second)."""
    source = SHARED_FILES / "gutenberg" / "1342-0.txt"
    if not source.is_file():
        pytest.skip(f"shared test files not found at {SHARED_FILES}")
    path = tmp_path_factory.mktemp("slow") / "pride-and-prejudice-x4.txt"
    path.write_bytes(source.read_bytes() * 4)
    return path


async def _ready(url: str) -> None:
    async with httpx.AsyncClient(base_url=url) as http:
        for _ in range(600):
            if (await http.get("/readyz")).status_code == 200:
                return
            await asyncio.sleep(0.2)
    raise AssertionError(f"{url} did not become ready again")


async def test_a_hung_conversion_is_stopped_reported_once_and_the_services_stay_up(
    hostile_gateway: str, converter_url: str, slow_text: Path
) -> None:
    timeouts = CONVERSIONS.labels("txt", "conversion_timeout")
    before = timeouts._value.get()
    async with sse_tools(hostile_gateway + "/sse") as tools:
        started = time.monotonic()
        result = await tools.call("ingest_file", path=str(slow_text))
        elapsed = time.monotonic() - started
        assert result["status"] == "error", result
        assert result["error_code"] == "conversion_timeout"
        assert "CONVERT_TIMEOUT_S" in result["error"]
        # One conversion, killed: the gateway did not send the same file again.
        assert timeouts._value.get() - before == 1
        assert elapsed < 30

        await _ready(converter_url)
        small = SHARED_FILES / "markitdown" / "test.json"
        after = await tools.call("ingest_file", path=str(small))
        assert after["status"] == "indexed", after
    await _ready(hostile_gateway)


def _bombs() -> dict[str, tuple[str, bytes, int, str]]:
    """name -> (upload file name, bytes, HTTP status, error_code)."""
    zeros = bytes(25_000_000)
    inner = zip_bytes({"zeros.txt": bytes(8_000_000)})
    nested = zip_bytes({f"{i}.zip": inner for i in range(4)})
    deep = zip_bytes({"l1.zip": zip_bytes({"l2.zip": zip_bytes({"l3.txt": b"deep"})})})
    many = zip_bytes({f"f{i}.txt": b"x" for i in range(500)})
    return {
        "many entries": ("many.zip", many, 413, "too_large"),
        "huge expansion": ("bomb.zip", zip_bytes({"zeros.txt": zeros}), 413, "too_large"),
        "nested expansion": ("nested.zip", nested, 413, "too_large"),
        # Content that cannot be converted is the caller's to fix: 422, the code says why.
        "nested too deep": ("deep.zip", deep, 422, "conversion_failed"),
        "office container": (
            "report.docx",
            zip_bytes({"word/document.xml": zeros}),
            413,
            "too_large",
        ),
    }


async def test_zip_bombs_are_refused_cleanly_in_bounded_time(hostile_gateway: str) -> None:
    async with httpx.AsyncClient(base_url=hostile_gateway, timeout=60) as http:
        for what, (name, data, status, code) in _bombs().items():
            assert len(data) < 200_000, what  # small on the wire
            started = time.monotonic()
            response = await http.post("/upload", files={"file": (name, data)})
            assert response.status_code == status, (what, response.text[:300])
            body = response.json()
            assert body["status"] == "error" and body["error_code"] == code, what
            assert time.monotonic() - started < 20, what
        normal = zip_bytes({"notes.txt": b"An ordinary archive with one short note in it."})
        ok = await http.post("/upload", files={"file": ("ok.zip", normal)})
        assert ok.status_code == 200, ok.text
        assert ok.json()["status"] == "indexed"
