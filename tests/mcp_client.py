"""A thin helper over the real MCP SDK client: connect over SSE, streamable HTTP or stdio
and call tools, returning their structured results."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client


class Tools:
    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, name: str, **arguments: Any) -> dict[str, Any]:
        result = await self.session.call_tool(name, arguments)
        structured = result.structured_content
        if isinstance(structured, dict):
            # Tools annotated `-> dict[str, Any]` may be wrapped as {"result": {...}}.
            inner = structured.get("result") if set(structured) == {"result"} else structured
            assert isinstance(inner, dict)
            return inner
        text = "".join(getattr(c, "text", "") for c in result.content)
        value = json.loads(text)
        assert isinstance(value, dict)
        return value


@asynccontextmanager
async def sse_tools(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[Tools]:
    async with (
        sse_client(url, headers=headers, timeout=30, sse_read_timeout=600) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield Tools(session)


@asynccontextmanager
async def streamable_session(
    url: str, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized session over streamable HTTP at `url` (the base URL; `/mcp` is added),
    through the SDK's own HTTP client."""
    import httpx2  # the SDK's own HTTP client, which its streamable HTTP transport takes

    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session
