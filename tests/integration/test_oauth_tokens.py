"""OAuth access tokens at the gateway, with tokens minted here (`tests.jwt_issuer`): a local
authorization server's metadata and JWKS on a loopback socket, the gateway on another, real
HTTP and the real MCP SDK client in between.

Every way a token can be wrong is refused with 401, `error="invalid_token"` and the
protected-resource metadata URL in `WWW-Authenticate`; scopes decide read and write on MCP
tools and HTTP routes alike; the static tokens keep working beside OAuth; the metadata
documents say what RFC 9728 asks. The key cache and the settings checks are tested on their
own at the end.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from libs.errors import InvalidInputError, UpstreamError
from services.gateway.app import check_exposure, create_app
from services.gateway.oauth import InvalidToken, JwksCache
from services.gateway.ports import Ports
from services.gateway.settings import GatewaySettings
from services.index.core import IndexCore
from services.index.settings import IndexSettings
from tests.fakes import FakeConverter, FakeEmbedder, fake_ports
from tests.jwt_issuer import LocalIssuer
from tests.mcp_client import Tools, sse_tools
from tests.servers import free_port, serve

pytestmark = pytest.mark.integration

PUBLIC = "https://mcp.example.org"
AUDIENCE = PUBLIC + "/mcp"
READ_SCOPE, WRITE_SCOPE = "mcpvectordb:read", "mcpvectordb:write"
LIBRARIES_CLAIM = "mcpvectordb_libraries"
METADATA = PUBLIC + "/.well-known/oauth-protected-resource"


@pytest.fixture(scope="module")
def issuer() -> Iterator[LocalIssuer]:
    local = LocalIssuer.create()
    with serve(local.app()) as url:
        local.url = url
        yield local


@pytest.fixture(scope="module")
def gateway(issuer: LocalIssuer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = GatewaySettings(
        _env_file=None,  # type: ignore[call-arg]
        var_dir=tmp_path_factory.mktemp("var"),
        auth_token=["static-full"],
        read_only_token=["static-read"],
        public_url=PUBLIC,
        oauth_issuer=issuer.url,
        oauth_audience=[AUDIENCE, PUBLIC + "/sse"],
        allowed_hosts=["mcp.example.org"],
    )
    with serve(create_app(settings, fake_ports())) as url:
        yield url


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


# ------------------------------------------------------------------ refused tokens


def _refusals(issuer: LocalIssuer) -> dict[str, tuple[str, str]]:
    """case -> (token, words the refusal must contain)."""
    now = int(time.time())
    good = issuer.claims(AUDIENCE)
    return {
        "expired": (
            issuer.mint(issuer.claims(AUDIENCE, iat=now - 3600, exp=now - 120)),
            "expired",
        ),
        "not yet valid": (
            issuer.mint(issuer.claims(AUDIENCE, nbf=now + 600, exp=now + 1200)),
            "not valid yet",
        ),
        "wrong issuer": (
            issuer.mint(issuer.claims(AUDIENCE, iss="https://login.example.com")),
            "not issued by",
        ),
        "wrong audience": (
            issuer.mint(issuer.claims("https://other.example.org/mcp")),
            "not meant for this server",
        ),
        "no audience": (issuer.mint(issuer.claims(AUDIENCE, aud=None)), "lacks the claim 'aud'"),
        "no expiry": (issuer.mint(issuer.claims(AUDIENCE, exp=None)), "lacks the claim 'exp'"),
        "bad signature": (issuer.mint(good, kid="rsa-1", signer="attacker"), "does not verify"),
        "alg none": (issuer.unsigned(good), "'none'"),
        "HS256 with the public key": (issuer.hmac_with_public_key(good), "'HS256'"),
        "unknown kid": (issuer.mint(good, kid="attacker"), "key id 'attacker'"),
        "RS256 key used for ES256": (issuer.mint(good, kid="rsa-1", signer="ec-1"), "is for RS256"),
        "not a JWT": ("a.b.c", "not a JWT"),
    }


CASES = [
    "expired",
    "not yet valid",
    "wrong issuer",
    "wrong audience",
    "no audience",
    "no expiry",
    "bad signature",
    "alg none",
    "HS256 with the public key",
    "unknown kid",
    "RS256 key used for ES256",
    "not a JWT",
]


@pytest.mark.parametrize("case", CASES)
async def test_a_bad_access_token_is_refused(gateway: str, issuer: LocalIssuer, case: str) -> None:
    token, words = _refusals(issuer)[case]
    async with httpx.AsyncClient(base_url=gateway, headers=bearer(token)) as http:
        for method, path, resource in (
            ("POST", "/mcp", "/mcp"),
            ("GET", "/sse", "/sse"),
            ("POST", "/messages/", "/sse"),
            ("POST", "/upload", ""),
            ("GET", "/metrics", ""),
        ):
            response = await http.request(method, path)
            assert response.status_code == 401, (case, path, response.text)
            body = response.json()
            assert body["error_code"] == "unauthorized"
            assert words in body["error"], (case, body["error"])
            challenge = response.headers["www-authenticate"]
            assert challenge.startswith("Bearer "), challenge
            assert f'resource_metadata="{METADATA}{resource}"' in challenge, challenge
            assert 'error="invalid_token"' in challenge, challenge


async def test_no_token_gets_the_metadata_url_without_an_error_code(gateway: str) -> None:
    async with httpx.AsyncClient(base_url=gateway) as http:
        response = await http.post("/mcp", json={})
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge == f'Bearer resource_metadata="{METADATA}/mcp"'


# ------------------------------------------------------------------- scopes


async def test_a_read_scope_token_reads_and_cannot_write(gateway: str, issuer: LocalIssuer) -> None:
    writer = issuer.mint(issuer.claims(AUDIENCE))
    reader = issuer.mint(issuer.claims(AUDIENCE, scope=READ_SCOPE))
    async with mcp_tools(gateway, writer) as tools:
        added = await tools.call("ingest_content", content="alpha beta", source="scoped-note")
        assert added["status"] == "indexed", added
    async with mcp_tools(gateway, reader) as tools:
        found = await tools.call("search", query="alpha")
        assert found["results"][0]["source"] == "scoped-note"
        assert "libraries" in await tools.call("list_libraries")
        for tool, args in (
            ("ingest_content", {"content": "x", "source": "y"}),
            ("ingest_url", {"url": "https://example.org/"}),
            ("delete_document", {"doc_id": added["doc_id"]}),
        ):
            refused = await tools.call(tool, **args)
            assert refused["error_code"] == "forbidden", refused
            assert f"needs the scope '{WRITE_SCOPE}'" in refused["error"], refused
    async with httpx.AsyncClient(base_url=gateway, headers=bearer(reader)) as http:
        for path, request in (
            ("/upload", {"files": {"file": ("a.txt", b"text")}}),
            ("/ingest_folder", {"json": {"folder": "/tmp"}}),
        ):
            response = await http.post(path, **request)  # type: ignore[arg-type]
            assert response.status_code == 403, response.text
            assert response.json()["error_code"] == "forbidden"
            challenge = response.headers["www-authenticate"]
            assert 'error="insufficient_scope"' in challenge, challenge
            assert f'scope="{WRITE_SCOPE}"' in challenge, challenge
            assert f'resource_metadata="{METADATA}"' in challenge, challenge


async def test_a_write_only_token_cannot_read(gateway: str, issuer: LocalIssuer) -> None:
    token = issuer.mint(issuer.claims(AUDIENCE, scope=None, scp=[WRITE_SCOPE]))
    async with mcp_tools(gateway, token) as tools:
        refused = await tools.call("search", query="alpha")
        assert refused["error_code"] == "forbidden"
        assert f"'{READ_SCOPE}'" in refused["error"]
        written = await tools.call("ingest_content", content="gamma", source="write-only")
        assert written["status"] == "indexed", written


async def test_an_es256_token_over_sse_works(gateway: str, issuer: LocalIssuer) -> None:
    token = issuer.mint(issuer.claims(PUBLIC + "/sse", scope=READ_SCOPE), kid="ec-1")
    async with sse_tools(gateway + "/sse", bearer(token)) as tools:
        assert "libraries" in await tools.call("list_libraries")


async def test_static_tokens_keep_working_beside_oauth(gateway: str) -> None:
    async with sse_tools(gateway + "/sse", bearer("static-read")) as tools:
        refused = await tools.call("ingest_content", content="x", source="y")
        assert refused["error_code"] == "forbidden" and "read-only" in refused["error"]
    async with mcp_tools(gateway, "static-full") as tools:
        added = await tools.call("ingest_content", content="delta", source="static-note")
        assert added["status"] == "indexed"
    async with httpx.AsyncClient(base_url=gateway) as http:
        wrong = await http.get("/metrics", headers=bearer("static-wrong"))
        assert wrong.status_code == 401
        assert "missing or invalid bearer token" in wrong.json()["error"]


# ------------------------------------------------------------------ metadata


async def test_the_protected_resource_metadata_documents(gateway: str, issuer: LocalIssuer) -> None:
    async with httpx.AsyncClient(base_url=gateway) as http:  # no token needed
        for suffix in ("", "/mcp", "/sse"):
            response = await http.get("/.well-known/oauth-protected-resource" + suffix)
            assert response.status_code == 200, suffix
            assert response.json() == {
                "resource": PUBLIC + suffix,
                "authorization_servers": [issuer.url],
                "scopes_supported": [READ_SCOPE, WRITE_SCOPE],
                "bearer_methods_supported": ["header"],
                "resource_name": "mcpvectordb",
            }
        other = await http.get("/.well-known/oauth-protected-resource/upload")
        assert other.status_code in (401, 404)
        # The Host check still applies to the metadata (DNS rebinding).
        rebound = await http.get(
            "/.well-known/oauth-protected-resource", headers={"Host": "evil.example"}
        )
        assert rebound.status_code == 421


async def test_without_an_issuer_there_is_no_metadata(tmp_path_factory: Any) -> None:
    settings = GatewaySettings(
        _env_file=None,  # type: ignore[call-arg]
        var_dir=tmp_path_factory.mktemp("var"),
        auth_token=["t"],
    )
    with serve(create_app(settings, fake_ports())) as url:
        async with httpx.AsyncClient(base_url=url) as http:
            response = await http.get("/.well-known/oauth-protected-resource")
            assert response.status_code == 404
            assert "OAUTH_ISSUER" in response.json()["error"]
            refused = await http.post("/mcp", headers=bearer("a.b.c"))
            assert refused.status_code == 401
            assert refused.headers["www-authenticate"] == 'Bearer realm="mcpvectordb"'


# ------------------------------------------------------------------ the key cache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_keys_are_fetched_again_for_an_unknown_kid_at_most_once_a_minute(
    issuer: LocalIssuer,
) -> None:
    clock = Clock()
    async with httpx.AsyncClient() as client:
        cache = JwksCache(issuer.url, None, client, clock=clock)
        issuer.published = ["rsa-1", "ec-1"]
        assert (await cache.key("rsa-1")).alg == "RS256"
        assert cache.fetches == 1 and cache.jwks_url == issuer.url + "/jwks"
        assert (await cache.key("ec-1")).alg is None  # cached: no fetch
        assert cache.fetches == 1
        issuer.published = ["rsa-next", "ec-1"]  # the authorization server rotates its key
        clock.now += 10
        for _ in range(20):  # a flood of unknown key ids inside the minute: no fetch
            with pytest.raises(InvalidToken, match="rsa-next"):
                await cache.key("rsa-next")
        assert cache.fetches == 1
        clock.now += 60
        assert (await cache.key("rsa-next")).alg == "RS256"
        assert cache.fetches == 2
        with pytest.raises(InvalidToken, match="rsa-1"):  # the retired key is gone
            await cache.key("rsa-1")
    issuer.published = ["rsa-1", "ec-1"]


async def test_metadata_naming_another_issuer_is_refused(issuer: LocalIssuer) -> None:
    async with httpx.AsyncClient() as client:
        cache = JwksCache(issuer.url + "/", None, client)  # not exactly the announced issuer
        with pytest.raises(Exception, match="names the issuer"):
            await cache.key("rsa-1")


async def test_an_unreachable_authorization_server_is_a_503_not_a_bad_token() -> None:
    clock = Clock()
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    async with httpx.AsyncClient(timeout=5) as client:
        cache = JwksCache(closed, None, client, clock=clock)
        for _ in range(3):
            with pytest.raises(UpstreamError, match="could not read the metadata") as refused:
                await cache.key("rsa-1")
        assert "at most every 60 s" in refused.value.message
        assert cache.fetches == 1  # not once per request


# ------------------------------------------------------------------ settings


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"oauth_issuer": "https://login.example.com"}, "OAUTH_AUDIENCE is required"),
        (
            {"oauth_issuer": "http://login.example.com", "oauth_audience": "x"},
            "OAUTH_ISSUER must be an https:// URL",
        ),
        (
            {
                "oauth_issuer": "https://login.example.com",
                "oauth_audience": "x",
                "oauth_jwks_url": "http://10.0.0.5/jwks",
            },
            "OAUTH_JWKS_URL must be an https:// URL",
        ),
        (
            {
                "oauth_issuer": "https://login.example.com",
                "oauth_audience": "x",
                "oauth_write_scope": "mcpvectordb:read",
            },
            "must differ",
        ),
        ({"public_url": "mcp.example.org"}, "PUBLIC_URL must be"),
    ],
)
def test_oauth_settings_that_do_not_hang_together_are_refused(
    env: dict[str, str], words: str
) -> None:
    with pytest.raises(ValidationError, match=words):
        GatewaySettings(_env_file=None, **env)  # type: ignore[call-arg]


def test_plain_http_issuers_are_accepted_on_loopback() -> None:
    settings = GatewaySettings(
        _env_file=None,  # type: ignore[call-arg]
        oauth_issuer="http://127.0.0.1:9000",
        oauth_audience="a, b",  # type: ignore[arg-type]
    )
    assert settings.oauth_audience == ["a", "b"]


# ------------------------------------------------------------ per-identity libraries


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


def test_an_oauth_gateway_may_listen_beyond_loopback() -> None:
    settings = GatewaySettings(
        _env_file=None,  # type: ignore[call-arg]
        oauth_issuer="https://login.example.com",
        oauth_audience=["https://mcp.example.org/mcp"],
        ingest_roots=["/srv/ingest"],
    )
    check_exposure(settings, "0.0.0.0")  # no error: OAuth authenticates every caller
    with pytest.raises(InvalidInputError, match="without AUTH_TOKEN"):
        check_exposure(GatewaySettings(_env_file=None), "0.0.0.0")  # type: ignore[call-arg]


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


async def test_manifests_deletes_and_resources_keep_to_an_identitys_libraries(
    tenant_gateway: str, issuer: LocalIssuer
) -> None:
    admin = issuer.mint(issuer.claims(AUDIENCE, **{LIBRARIES_CLAIM: ["*"]}))
    alice = issuer.mint(issuer.claims(AUDIENCE, **{LIBRARIES_CLAIM: ["team-a"]}))
    async with mcp_tools(tenant_gateway, admin) as tools:
        hidden = await tools.call(
            "ingest_content", content="words kept apart", source="apart.md", library="secret"
        )
        await tools.call(
            "ingest_content", content="words in the open", source="open.md", library="team-a"
        )
    async with httpx.AsyncClient(base_url=tenant_gateway, headers=bearer(alice)) as http:
        own = await http.get("/sources", params={"library": "team-a"})
        assert own.status_code == 200 and own.json()["sources"]
        for response in (
            await http.get("/sources", params={"library": "secret"}),
            await http.delete("/documents", params={"library": "secret", "source": "apart.md"}),
            await http.delete(f"/documents/{hidden['doc_id']}"),
        ):
            assert response.status_code == 403, response.text
            assert "library 'secret' is not allowed" in response.json()["error"]
    async with mcp_tools(tenant_gateway, alice) as tools:
        listed = await tools.session.list_resources()
        assert listed.resources and all("/team-a/" in str(r.uri) for r in listed.resources)
        with pytest.raises(MCPError, match="library 'secret' is not allowed"):
            await tools.session.read_resource(f"mcpvectordb://secret/{hidden['doc_id']}")
