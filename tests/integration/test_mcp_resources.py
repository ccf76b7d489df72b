"""Documents as MCP resources, through the real Python SDK client over SSE and streamable HTTP
against a gateway on the hand-written fakes: the template, a list that pages through every
document of every library, reads that return exactly what `get_document` returns, and clear
errors for URIs that name nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import httpx
import pytest
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, PaginatedRequestParams, TextResourceContents

from libs.contracts import document_uri, parse_document_uri
from libs.errors import InvalidInputError
from services.gateway.app import create_app
from services.gateway.settings import GatewaySettings
from tests.fakes import fake_ports
from tests.servers import serve

pytestmark = pytest.mark.integration

FULL = {"Authorization": "Bearer full-token"}
READ = {"Authorization": "Bearer read-token"}
LIBRARIES = {"main": 103, "team/Q3 reports": 2}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = GatewaySettings(
        _env_file=None,
        var_dir=tmp_path_factory.mktemp("var"),
        auth_token=["full-token"],
        read_only_token=["read-token"],
    )
    with serve(create_app(settings, fake_ports())) as url:
        with httpx.Client(base_url=url, headers=FULL) as http:
            for library, count in LIBRARIES.items():
                for i in range(count):
                    body = f"# Note {i}\n\nAbout {library}, part {i}.\n\nSecond paragraph.".encode()
                    answer = http.post(
                        "/upload",
                        files={"file": (f"note-{i:03d}.md", body)},
                        data={"library": library, "source": f"notes/note-{i:03d}.md"},
                    )
                    assert answer.status_code == 200, answer.text
        yield url


@asynccontextmanager
async def session(
    url: str, transport: str, headers: dict[str, str]
) -> AsyncIterator[ClientSession]:
    if transport == "sse":
        async with (
            sse_client(url + "/sse", headers=headers, timeout=30) as (read, write),
            ClientSession(read, write) as opened,
        ):
            await opened.initialize()
            yield opened
    else:
        async with (
            httpx.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(url + "/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as opened,
        ):
            await opened.initialize()
            yield opened


def test_document_uris_round_trip() -> None:
    uri = document_uri("team/Q3 reports", "0f8e")
    assert uri == "mcpvectordb://team%2FQ3%20reports/0f8e"
    assert parse_document_uri(uri) == ("team/Q3 reports", "0f8e")
    for bad in ("https://x/y", "mcpvectordb://lib", "mcpvectordb:///id", "mcpvectordb://a/b/c"):
        with pytest.raises(InvalidInputError, match="not a document URI"):
            parse_document_uri(bad)


@pytest.mark.parametrize("transport", ["sse", "streamable-http"])
async def test_every_document_is_a_resource(gateway: str, transport: str) -> None:
    async with session(gateway, transport, READ) as opened:
        templates = (await opened.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["mcpvectordb://{library}/{doc_id}"]
        assert templates[0].mime_type == "text/markdown"

        listed = []
        pages = 0
        cursor = None
        while True:
            page = await opened.list_resources(params=PaginatedRequestParams(cursor=cursor))
            pages += 1
            listed += page.resources
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages == 2  # 105 documents, 100 a page
        assert len(listed) == sum(LIBRARIES.values())
        assert len({r.uri for r in listed}) == len(listed)
        assert {parse_document_uri(r.uri)[0] for r in listed} == set(LIBRARIES)
        assert all(r.mime_type == "text/markdown" for r in listed)

        for resource in (listed[0], listed[-1]):
            read = await opened.read_resource(resource.uri)
            [content] = read.contents
            assert isinstance(content, TextResourceContents)
            assert content.uri == resource.uri and content.mime_type == "text/markdown"
            _, doc_id = parse_document_uri(resource.uri)
            got = await opened.call_tool("get_document", {"doc_id": doc_id})
            assert got.structured_content is not None
            assert content.text == got.structured_content["content"]
            assert content.text.startswith("# Note")


@pytest.mark.parametrize(
    ("uri", "words"),
    [
        ("mcpvectordb://main/00000000-0000-0000-0000-000000000000", "no document"),
        ("https://example.org/a.md", "not a document URI"),
    ],
)
async def test_unknown_resources_are_clear_errors(gateway: str, uri: str, words: str) -> None:
    async with session(gateway, "streamable-http", FULL) as opened:
        with pytest.raises(MCPError) as refused:
            await opened.read_resource(uri)
    assert refused.value.code == INVALID_PARAMS
    assert words in refused.value.error.message
    assert "resources/list" in refused.value.error.message


async def test_a_document_is_found_only_in_its_own_library(gateway: str) -> None:
    async with session(gateway, "sse", FULL) as opened:
        first = (await opened.list_resources()).resources[0]
        library, doc_id = parse_document_uri(first.uri)
        other = next(name for name in LIBRARIES if name != library)
        with pytest.raises(MCPError, match="no document"):
            await opened.read_resource(document_uri(other, doc_id))
        with pytest.raises(MCPError, match="cursor"):
            await opened.list_resources(params=PaginatedRequestParams(cursor="garbage"))
    assert json.dumps(first.model_dump(mode="json"))  # serialisable as sent
