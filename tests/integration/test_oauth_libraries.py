"""Per-identity libraries under OAuth: a token's libraries claim confines its holder to those
libraries in every tool, folder sync route, resource and job listing. Tokens minted here
(`tests.jwt_issuer`), the gateway over a real LanceDB index on a loopback socket, the real MCP
SDK client in between."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from services.gateway.app import create_app
from services.gateway.ports import Ports
from services.gateway.settings import GatewaySettings
from services.index.core import IndexCore
from services.index.settings import IndexSettings
from tests.fakes import FakeConverter, FakeEmbedder
from tests.jwt_issuer import LocalIssuer
from tests.oauth_gateway import AUDIENCE, LIBRARIES_CLAIM, PUBLIC, bearer, mcp_tools
from tests.servers import serve

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tenant_gateway(issuer: LocalIssuer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """OAuth with the libraries claim, over a real LanceDB index (filters are the index's)."""
    lancedb = tmp_path_factory.mktemp("lancedb")

    @asynccontextmanager
    async def ports(settings: GatewaySettings) -> AsyncIterator[Ports]:
        async with IndexCore(IndexSettings(_env_file=None, lancedb_uri=str(lancedb))) as index:  # type: ignore[call-arg]
            yield Ports(FakeConverter(), FakeEmbedder(), index)

    settings = GatewaySettings(
        _env_file=None,  # type: ignore[call-arg]
        var_dir=tmp_path_factory.mktemp("var"),
        public_url=PUBLIC,
        oauth_issuer=issuer.url,
        oauth_audience=[AUDIENCE],
        oauth_libraries_claim=LIBRARIES_CLAIM,
    )
    with serve(create_app(settings, ports)) as url:
        yield url


async def test_an_identity_sees_and_changes_only_its_libraries(
    tenant_gateway: str, issuer: LocalIssuer
) -> None:
    admin = issuer.mint(issuer.claims(AUDIENCE, **{LIBRARIES_CLAIM: ["*"]}))
    alice = issuer.mint(issuer.claims(AUDIENCE, **{LIBRARIES_CLAIM: ["team-a", "team-b"]}))
    nobody = issuer.mint(issuer.claims(AUDIENCE))  # the claim is missing: no library
    docs: dict[str, str] = {}
    async with mcp_tools(tenant_gateway, admin) as tools:
        for library in ("team-a", "team-b", "secret"):
            added = await tools.call(
                "ingest_content",
                content=f"shared words about {library}",
                source=f"{library}-note",
                library=library,
            )
            assert added["status"] in ("indexed", "skipped"), added
            docs[library] = added["doc_id"]
        everything = await tools.call("list_libraries")
        assert {lib["library"] for lib in everything["libraries"]} == {
            "team-a",
            "team-b",
            "secret",
        }
    async with mcp_tools(tenant_gateway, alice) as tools:
        listed = await tools.call("list_libraries")
        assert [lib["library"] for lib in listed["libraries"]] == ["team-a", "team-b"]
        found = await tools.call("search", query="shared words", top_k=10)
        assert {hit["library"] for hit in found["results"]} == {"team-a", "team-b"}
        narrowed = await tools.call(
            "search", query="shared words", filter={"library": {"$in": ["team-b", "secret"]}}
        )
        assert {hit["library"] for hit in narrowed["results"]} == {"team-b"}
        documents = await tools.call("list_documents", limit=10)
        assert documents["total"] == 2
        assert {doc["library"] for doc in documents["documents"]} == {"team-a", "team-b"}
        second = await tools.call("list_documents", limit=1, offset=1)
        assert second["count"] == 1 and second["documents"][0] == documents["documents"][1]
        got = await tools.call("get_document", doc_id=docs["team-a"])
        assert got["library"] == "team-a"
        for tool, args in (
            ("search", {"query": "shared", "library": "secret"}),
            ("search", {"query": "shared", "filter": {"library": "secret"}}),
            ("list_documents", {"library": "secret"}),
            ("get_document", {"doc_id": docs["secret"]}),
            ("delete_document", {"doc_id": docs["secret"]}),
            ("ingest_content", {"content": "x", "source": "y", "library": "secret"}),
        ):
            refused = await tools.call(tool, **args)
            assert refused["error_code"] == "forbidden", (tool, refused)
            assert "library 'secret' is not allowed" in refused["error"], (tool, refused)
    async with httpx.AsyncClient(base_url=tenant_gateway, headers=bearer(alice)) as http:
        upload = await http.post(
            "/upload", files={"file": ("a.txt", b"text")}, data={"library": "secret"}
        )
        assert upload.status_code == 403 and "'secret'" in upload.json()["error"]
    async with mcp_tools(tenant_gateway, nobody) as tools:
        assert (await tools.call("list_libraries"))["libraries"] == []
        refused = await tools.call("search", query="shared")
        assert refused["error_code"] == "forbidden" and "its libraries: none" in refused["error"]
    async with mcp_tools(tenant_gateway, admin) as tools:  # nothing was deleted
        assert (await tools.call("get_document", doc_id=docs["secret"]))["library"] == "secret"


async def test_folder_sync_and_resources_keep_to_the_identitys_libraries(
    tenant_gateway: str, issuer: LocalIssuer
) -> None:
    admin = issuer.mint(issuer.claims(AUDIENCE, **{LIBRARIES_CLAIM: ["*"]}))
    alice = issuer.mint(issuer.claims(AUDIENCE, **{LIBRARIES_CLAIM: ["team-a"]}))
    async with httpx.AsyncClient(base_url=tenant_gateway, headers=bearer(admin)) as http:
        for library in ("team-a", "secret"):
            answer = await http.post(
                "/upload",
                files={"file": ("plan.md", f"plan of {library}".encode())},
                data={"library": library, "source": "sync/plan.md"},
            )
            assert answer.status_code == 200, answer.text
        mine = {"library": "secret", "prefix": "sync/"}
        secret = (await http.get("/sources", params=mine)).json()["sources"][0]
    async with httpx.AsyncClient(base_url=tenant_gateway, headers=bearer(alice)) as http:
        own = await http.get("/sources", params={"library": "team-a", "prefix": "sync/"})
        assert [e["source"] for e in own.json()["sources"]] == ["sync/plan.md"]
        refusals = [
            await http.get("/sources", params={"library": "secret"}),
            await http.delete("/documents", params={"library": "secret", "source": "sync/plan.md"}),
            await http.delete(f"/documents/{secret['doc_id']}"),
        ]
        for refused in refusals:
            assert refused.status_code == 403, refused.text
            assert "library 'secret' is not allowed" in refused.json()["error"]
    async with (
        httpx.AsyncClient(headers=bearer(alice), timeout=30) as client,
        streamable_http_client(tenant_gateway + "/mcp", http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = (await session.list_resources()).resources
        assert listed and all(r.uri.startswith("mcpvectordb://team-a/") for r in listed)
        with pytest.raises(MCPError, match="library 'secret' is not allowed"):
            await session.read_resource(f"mcpvectordb://secret/{secret['doc_id']}")
    async with httpx.AsyncClient(base_url=tenant_gateway, headers=bearer(admin)) as http:
        kept = await http.get("/sources", params=mine)  # nothing was deleted
        assert [e["doc_id"] for e in kept.json()["sources"]] == [secret["doc_id"]]


async def test_an_identity_sees_only_the_jobs_of_its_libraries(
    tenant_gateway: str, issuer: LocalIssuer, tmp_path: Path
) -> None:
    admin = issuer.mint(issuer.claims(AUDIENCE, **{LIBRARIES_CLAIM: ["*"]}))
    alice = issuer.mint(issuer.claims(AUDIENCE, **{LIBRARIES_CLAIM: ["team-a"]}))
    (tmp_path / "memo.txt").write_text("a memo for the job test")
    jobs: dict[str, str] = {}
    async with mcp_tools(tenant_gateway, admin) as tools:
        for library in ("team-a", "secret"):
            accepted = await tools.call(
                "ingest_folder", folder=str(tmp_path), library=library, background=True
            )
            jobs[library] = accepted["job_id"]
    async with mcp_tools(tenant_gateway, alice) as tools:
        mine = await tools.call("get_job", job_id=jobs["team-a"])
        assert mine["library"] == "team-a"
        listed = await tools.call("list_jobs", limit=100)
        assert {job["library"] for job in listed["jobs"]} == {"team-a"}
        for tool in ("get_job", "cancel_job"):
            refused = await tools.call(tool, job_id=jobs["secret"])
            assert refused["error_code"] == "forbidden", (tool, refused)
            assert "library 'secret' is not allowed" in refused["error"], (tool, refused)
