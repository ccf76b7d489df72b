"""The OAuth integration tests' shared pieces: the public URL and audience the gateways are
set up with, the scopes and the libraries claim, a local authorization server on a loopback
socket (`serving_issuer`), and an MCP session over streamable HTTP with a bearer token
(`mcp_tools`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.jwt_issuer import LocalIssuer
from tests.mcp_client import Tools
from tests.servers import serve

PUBLIC = "https://mcp.example.org"
AUDIENCE = PUBLIC + "/mcp"
READ_SCOPE, WRITE_SCOPE = "mcpvectordb:read", "mcpvectordb:write"
LIBRARIES_CLAIM = "mcpvectordb_libraries"
METADATA = PUBLIC + "/.well-known/oauth-protected-resource"


@contextmanager
def serving_issuer() -> Iterator[LocalIssuer]:
    """A local authorization server (metadata and JWKS) served on a loopback port."""
    local = LocalIssuer.create()
    with serve(local.app()) as url:
        local.url = url
        yield local


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@asynccontextmanager
async def mcp_tools(url: str, token: str) -> AsyncIterator[Tools]:
    async with (
        httpx.AsyncClient(headers=bearer(token), timeout=30) as http,
        streamable_http_client(url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield Tools(session)
