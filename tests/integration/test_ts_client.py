"""The official TypeScript MCP SDK as a second, independent client (`tests/ts/client.mjs`,
installed by `make test` with `npm ci`), over SSE and streamable HTTP against a gateway on the
hand-written fakes: the tools list and call as that SDK expects (it checks every structured
result against the tool's output schema itself), failures come back marked, logging works,
and a cancelled call leaves no stray response behind."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from libs.contracts import TOOLS
from tests.conftest import REPO
from tests.fakes import FakeEmbedder, fake_gateway

pytestmark = pytest.mark.integration

CLIENT = REPO / "tests" / "ts" / "client.mjs"
SDK = REPO / "tests" / "ts" / "node_modules" / "@modelcontextprotocol" / "sdk"
EMBEDDER = FakeEmbedder()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("node") is None:
        pytest.skip("node is not installed; `make test` installs the TypeScript client with npm")
    if not SDK.is_dir():
        pytest.skip("the TypeScript SDK is not installed: run `make ts-client` (npm ci)")
    root = tmp_path_factory.mktemp("root")
    (root / "notes").mkdir()
    (root / "notes" / "good.txt").write_text("alpha\n\nbeta")
    (root / "notes" / "blank.txt").write_text("  \n\n ")
    with fake_gateway(tmp_path_factory, EMBEDDER, ingest_roots=[root]) as url:
        yield url


def run_client(transport: str, url: str, scenario: str, arguments: Any) -> dict[str, Any]:
    done = subprocess.run(
        ["node", str(CLIENT), transport, url, scenario, json.dumps(arguments)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=CLIENT.parent,
    )
    report: dict[str, Any] = json.loads(done.stdout or "{}")
    assert done.returncode == 0, (report.get("fatal"), done.stderr[-2000:])
    return report


TRANSPORTS = ["sse", "http"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_typescript_sdk_sees_the_contract(gateway: str, transport: str) -> None:
    calls = [
        ["ingest_content", {"content": "alpha beta\n\ngamma", "source": "ts-note"}],
        ["search", {"query": "alpha", "top_k": 3}],
        ["list_documents", {"limit": 5}],
        ["list_libraries", {}],
        ["get_document", {"doc_id": "no-such-document"}],
        ["search", {"query": "alpha", "top_k": "5"}],
        ["search", {"query": "alpha", "topk": 50}],
        ["server_info", {}],
        ["ingest_folder", {"folder": "notes"}],
        ["drop_everything", {}],
    ]
    # The last call's answer is a JSON-RPC error: over streamable HTTP the client (1.x)
    # resumes the stream after it, so the run waits out its reconnection delays (1 s, then
    # 1.5 s) before the errors are counted.
    wait = 3000 if transport == "http" else 0
    report = run_client(transport, gateway, "contract", {"calls": calls, "wait_ms": wait})
    assert report["errors"] == []
    assert report["version"]["name"] == "mcpvectordb"
    assert "logging" in report["capabilities"] and "tools" in report["capabilities"]
    assert "prompts" not in report["capabilities"] and "resources" in report["capabilities"]
    tools = {tool["name"]: tool for tool in report["tools"]}
    assert set(tools) == {tool.name for tool in TOOLS}
    assert all(tool["title"] and tool["outputSchema"] for tool in tools.values())
    assert tools["delete_document"]["annotations"]["destructiveHint"] is True
    results = report["results"]
    # Successes passed the SDK's own check against each output schema (it throws otherwise).
    for result in results[:4]:
        assert "thrown" not in result and result["isError"] is False, result
    unknown_document, coerced, misspelt = results[4], results[5], results[6]
    assert unknown_document["isError"] is True
    assert unknown_document["structured"]["error_code"] == "not_found"
    assert coerced["isError"] is True and "top_k" in coerced["structured"]["error"]
    assert misspelt["isError"] is True and "topk" in misspelt["structured"]["error"]
    info = results[7]["structured"]
    assert info["transport"] == ("sse" if transport == "sse" else "streamable-http")
    assert "path_check" not in info
    assert results[8]["structured"]["failed"] == 1
    assert results[9]["code"] == -32602 and "drop_everything" in results[9]["thrown"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_the_typescript_sdk_hears_log_notifications(gateway: str, transport: str) -> None:
    report = run_client(
        transport,
        gateway,
        "logging",
        {"level": "warning", "tool": "ingest_folder", "args": {"folder": "notes"}},
    )
    assert report["errors"] == []
    assert any("blank.txt" in str(log["data"]) for log in report["logs"]), report["logs"]
    assert {log["level"] for log in report["logs"]} <= {"warning", "error"}


def test_a_cancelled_call_leaves_no_stray_response(gateway: str) -> None:
    """Over streamable HTTP, where the SDK used to answer a cancelled request anyway and the
    client reported 'a response for an unknown message ID'."""
    EMBEDDER.delay_s = 3.0
    try:
        report = run_client(
            "http",
            gateway,
            "cancel",
            {
                "tool": "ingest_content",
                "args": {"content": "slow text", "source": "ts-cancelled"},
                "after_ms": 500,
                "wait_ms": 3500,
            },
        )
    finally:
        EMBEDDER.delay_s = 0.0
    assert report["outcome"].startswith("rejected"), report
    assert report["errors"] == [], report["errors"]
    assert report["after_ok"] is True
