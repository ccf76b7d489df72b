"""The stdio server given lines the SDK cannot parse (`services.gateway.stdio_lines`): each
is answered with a JSON-RPC error, or taken apart when it is a batch, and the session goes
on. A raw client on the real `mcpvectordb --transport stdio` process."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from libs.contracts import TOOLS
from services.entrypoints.cluster import local_env
from tests.conftest import REPO
from tests.mcp_raw import initialize_message

pytestmark = pytest.mark.e2e

INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


async def _exchange(env: dict[str, str], lines: list[str], last_id: int) -> list[dict[str, Any]]:
    """Every message the server writes for `lines`, up to the response to `last_id`."""
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "services.entrypoints.mcpvectordb",
        "--transport",
        "stdio",
        cwd=REPO,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write("".join(line + "\n" for line in lines).encode())
    await server.stdin.drain()
    answers: list[dict[str, Any]] = []
    try:
        while not any(answer.get("id") == last_id for answer in answers):
            line = await asyncio.wait_for(server.stdout.readline(), 120)
            assert line, f"the server ended; it answered {answers}"
            answers.append(json.loads(line))
    finally:
        server.stdin.close()
        await asyncio.wait_for(server.wait(), 60)
    return answers


def _errors(answers: list[dict[str, Any]]) -> list[tuple[Any, int, str]]:
    return [(a["id"], a["error"]["code"], a["error"]["message"]) for a in answers if "error" in a]


def test_lines_the_sdk_cannot_parse_are_answered(tmp_path: Path) -> None:
    lines = [
        json.dumps(initialize_message("2025-03-26")),
        json.dumps(INITIALIZED),
        json.dumps(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 3, "method": 7},
            ]
        ),
        "{not json",
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": 5}),
        "5",
        "[]",
        json.dumps({"jsonrpc": "2.0", "id": 9, "method": "ping"}),
    ]
    answers = asyncio.run(_exchange(local_env(tmp_path / "var"), lines, 9))
    by_id = {a["id"]: a for a in answers if a["id"] is not None}
    assert by_id[1]["result"] == {} and len(by_id[2]["result"]["tools"]) == len(TOOLS)
    errors = _errors(answers)
    assert (3, -32600, "invalid JSON-RPC message: method: Input should be a valid string") in errors
    assert (4, -32600, "invalid JSON-RPC message: method: Input should be a valid string") in errors
    unnamed = [(code, message) for id_, code, message in errors if id_ is None]
    assert [code for code, _ in unnamed] == [-32700, -32600, -32600]
    assert "the line is not JSON" in unnamed[0][1]
    assert unnamed[1][1] == "a JSON-RPC message is a JSON object, not int"
    assert "empty JSON-RPC batch" in unnamed[2][1]
    assert by_id[9]["result"] == {}  # the session went on


def test_a_batch_under_a_revision_without_batches_is_refused(tmp_path: Path) -> None:
    lines = [
        json.dumps(initialize_message("2025-11-25")),
        json.dumps(INITIALIZED),
        json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "ping"}]),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    ]
    answers = asyncio.run(_exchange(local_env(tmp_path / "var"), lines, 2))
    assert not any(answer.get("id") == 1 for answer in answers)
    [(id_, code, message)] = _errors(answers)
    assert id_ is None and code == -32600
    assert "not part of MCP 2025-11-25" in message and "on a line of its own" in message
