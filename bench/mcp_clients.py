"""The MCP clients a benchmark searches with besides the Python SDK's own (issue 19, goal 3).

A search's time through MCP includes the client's own work, and clients differ: the Python
SDK validates each result against the tool's output schema with jsonschema and passes it
through several tasks and streams, which timestamps on both sides put at about 3 ms of a
search on this machine (docs/benchmarks.md, 0.8.20). So `bench.perf_search` measures the same
queries with two more clients, each over the real SSE transport of the real gateway:

- `TypeScriptClient`: the official TypeScript SDK, which most MCP hosts are built on, run by
  node (`tests/ts/search_timer.mjs`); it validates results against the output schema too
  (ajv). Absent where node or `make ts-client`'s packages are missing.
- `BareClient`: JSON-RPC over the SSE transport with httpx and nothing else (no validation):
  what is left is the server's own share.

Each `search(query)` returns the seconds one `search` call (top_k 10) took, as its client
timed it.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
TS_TIMER = REPO / "tests" / "ts" / "search_timer.mjs"
TS_SDK = REPO / "tests" / "ts" / "node_modules" / "@modelcontextprotocol" / "sdk"
ARGUMENTS: dict[str, Any] = {"top_k": 10}


class TypeScriptClient:
    """The TypeScript SDK's client in a node process, one search per line on its stdin."""

    def __init__(self, gateway: str) -> None:
        self._node = subprocess.Popen(
            ["node", str(TS_TIMER), gateway],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    @staticmethod
    def available() -> bool:
        return shutil.which("node") is not None and TS_SDK.is_dir()

    def search(self, query: str) -> float:
        assert self._node.stdin is not None and self._node.stdout is not None
        self._node.stdin.write(json.dumps(query) + "\n")
        self._node.stdin.flush()
        answer = self._node.stdout.readline()
        if not answer:
            raise RuntimeError(f"the TypeScript client stopped (exit {self._node.poll()})")
        return float(answer) / 1000

    def __enter__(self) -> TypeScriptClient:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._node.stdin is not None:
            self._node.stdin.close()
        try:
            self._node.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._node.kill()
            self._node.wait()


class BareClient:
    """MCP over SSE by hand: a thread reads the event stream, each call posts its message and
    waits for the event that answers it."""

    def __init__(self, gateway: str) -> None:
        self._gateway = gateway
        self._http = httpx.Client(timeout=60)
        self._events: queue.Queue[str] = queue.Queue()
        self._endpoint: queue.Queue[str] = queue.Queue()
        self._stream = httpx.Client(timeout=httpx.Timeout(60, read=None))
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._post_to = gateway + self._endpoint.get(timeout=30)
        self._id = 0
        self._call(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "mcpvectordb-bench-bare", "version": "1.0.0"},
            },
        )
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _read(self) -> None:
        try:
            with self._stream.stream("GET", self._gateway + "/sse") as events:
                kind, data = "", []
                for line in events.iter_lines():
                    if line.startswith("event:"):
                        kind = line.removeprefix("event:").strip()
                    elif line.startswith("data:"):
                        data.append(line.removeprefix("data:").lstrip())
                    elif not line:
                        target = self._endpoint if kind == "endpoint" else self._events
                        if kind in ("endpoint", "message"):
                            target.put("\n".join(data))
                        kind, data = "", []
        except httpx.HTTPError:
            pass  # closed by __exit__

    def _post(self, message: dict[str, Any]) -> None:
        self._http.post(self._post_to, json=message).raise_for_status()

    def _call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._id += 1
        self._post({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        while True:
            message: dict[str, Any] = json.loads(self._events.get(timeout=60))
            if message.get("id") == self._id:
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                result: dict[str, Any] = message["result"]
                return result

    def search(self, query: str) -> float:
        started = time.perf_counter()
        result = self._call(
            "tools/call",
            {
                "name": "search",
                "arguments": {"query": query, **ARGUMENTS},
            },
        )
        took = time.perf_counter() - started
        if result.get("isError") or not result["structuredContent"]["results"]:
            raise RuntimeError(f"search failed for {query!r}: {result}")
        return took

    def __enter__(self) -> BareClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._http.close()
        self._stream.close()
        self._reader.join(timeout=5)
