"""MCP over plain HTTP, without an SDK: the messages and headers a raw client sends, and the
JSON-RPC messages an event-stream answer carries. For tests of what the gateway does with
requests that the SDK clients never send."""

from __future__ import annotations

import json
from typing import Any

import httpx

BOTH = "application/json, text/event-stream"


def initialize_message(revision: str, id_: int = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id_,
        "method": "initialize",
        "params": {
            "protocolVersion": revision,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }


def open_session(http: httpx.Client, revision: str, accept: str = BOTH) -> dict[str, str]:
    """A streamable HTTP session at `revision` opened through `http` with `accept` as the
    `Accept` header: the headers of its later requests (`MCP-Protocol-Version` from
    2025-06-18 on, as clients send it)."""
    init = http.post("/mcp", headers={"accept": accept}, json=initialize_message(revision))
    assert init.status_code == 200, init.text
    headers = {"accept": accept, "mcp-session-id": init.headers["mcp-session-id"]}
    if revision >= "2025-06-18":
        headers["mcp-protocol-version"] = revision
    notified = http.post(
        "/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    assert notified.status_code == 202
    return headers


def event_fields(body: str) -> list[dict[str, str]]:
    """Each event of an event stream as its fields (`id`, `event`, `data`, ...)."""
    blocks = body.replace("\r\n", "\n").split("\n\n")
    fields = [dict(_field(line) for line in block.splitlines()) for block in blocks]
    return [event for event in fields if event]


def _field(line: str) -> tuple[str, str]:
    name, _, value = line.partition(":")
    return name, value.removeprefix(" ")


def events(body: str) -> list[dict[str, Any]]:
    """The JSON-RPC messages of an event stream's `data:` lines."""
    return [json.loads(event["data"]) for event in event_fields(body) if event.get("data")]
