"""Remote assistants sign in: a real authorization server (`oidc-provider`, started from
`tests/oauth/provider.mjs` on loopback), a real gateway process with OAuth on in front of the
package's real services, and real MCP clients doing what remote assistants do.

- The Python MCP SDK's own OAuth client: its first request gets 401, it reads the
  protected-resource metadata named there, the authorization server's metadata, registers
  itself (dynamic client registration), runs the authorization code flow with PKCE (the user
  "signs in" on the provider's login and consent pages, driven over HTTP here) and trades the
  code for a JWT access token for the gateway's resource, then calls tools with it.
- The scopes and the libraries claim the provider puts in its tokens are honoured.
- `mcp-remote`, what Claude Desktop users run to reach a remote server, as a stdio bridge
  with a bearer token header, driven by the SDK's stdio client.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import httpx2
import jwt
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.conftest import REPO
from tests.e2e.conftest import Cluster
from tests.mcp_client import Tools
from tests.servers import free_port

pytestmark = pytest.mark.e2e

HARNESS = REPO / "tests" / "oauth"
PROVIDER = HARNESS / "provider.mjs"
MCP_REMOTE = HARNESS / "node_modules" / "mcp-remote" / "dist" / "proxy.js"
LIBRARIES_CLAIM = "mcpvectordb_libraries"
STATIC_TOKEN = "e2e-static-token"


def _need_harness() -> None:
    if shutil.which("node") is None:
        pytest.skip(
            "node is not installed; the OAuth end-to-end tests need it (make oauth-harness)"
        )
    if not (HARNESS / "node_modules" / "oidc-provider").is_dir():
        pytest.skip("oidc-provider is not installed: run `make oauth-harness` (npm ci)")


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _need_harness()
    # What the provider says on stderr goes to a file: a pipe nobody reads would block it.
    log_path = tmp_path_factory.mktemp("oidc-provider") / "provider.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            ["node", str(PROVIDER), str(free_port())],
            cwd=HARNESS,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
    try:
        assert process.stdout is not None
        # The provider prints one line once it listens.
        ready = select.select([process.stdout], [], [], 60)[0]
        line = process.stdout.readline() if ready else ""
        if not line:
            said = log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"oidc-provider did not start within 60 s: {said}")
        yield str(json.loads(line)["issuer"])
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@dataclass(frozen=True)
class Gateway:
    url: str
    issuer: str


@pytest.fixture(scope="module")
def gateway(
    cluster: Cluster, issuer: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    """A second gateway process over the package cluster's services, with OAuth on."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(cluster.env)
    env.update(
        VAR_DIR=str(tmp_path_factory.mktemp("oauth-gateway-var")),
        GATEWAY_PORT=str(port),
        OAUTH_ISSUER=issuer,
        OAUTH_AUDIENCE=f"{url}/mcp,{url}/sse",
        OAUTH_LIBRARIES_CLAIM=LIBRARIES_CLAIM,
        AUTH_TOKEN=STATIC_TOKEN,
    )
    log = (tmp_path_factory.mktemp("oauth-gateway-log") / "gateway.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "services.entrypoints.serve", "gateway"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the OAuth gateway did not become ready (see {log.name})")
            time.sleep(0.2)
        yield Gateway(url, issuer)
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


# ------------------------------------------------------- the SDK's own OAuth client


class MemoryStorage:
    """The SDK's `TokenStorage`, in memory: what a desktop client keeps in its keychain."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """The user at the provider's development login and consent pages: follows the
    authorization URL, signs in as `user`, consents, and stops at the redirect back to the
    client, whose query it keeps."""

    def __init__(self, user: str) -> None:
        self.user = user
        self.visited: list[str] = []
        self.callback: dict[str, str] = {}

    async def open(self, authorization_url: str) -> None:
        self.visited.append(authorization_url)
        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as http:
            response = await http.get(authorization_url)
            for _ in range(12):
                if response.status_code in (302, 303):
                    target = urljoin(str(response.url), response.headers["location"])
                    if target.startswith(REDIRECT_URI):
                        query = parse_qs(urlsplit(target).query)
                        self.callback = {key: values[0] for key, values in query.items()}
                        return
                    response = await http.get(target)
                    continue
                assert response.status_code == 200, response.text[:500]
                page = response.text
                if 'name="login"' in page:
                    form = {"prompt": "login", "login": self.user, "password": "any"}
                else:
                    assert 'value="consent"' in page, page[:500]
                    form = {"prompt": "consent"}
                response = await http.post(str(response.url), data=form)
        raise AssertionError(f"the sign-in did not come back to the client: {response.text[:300]}")

    async def returned(self) -> AuthorizationCodeResult:
        assert "code" in self.callback, self.callback
        return AuthorizationCodeResult(
            code=self.callback["code"],
            state=self.callback.get("state"),
            iss=self.callback.get("iss"),
        )


# Where the provider sends the browser back; the Browser stops at that redirect, so nothing
# needs to listen here (a desktop client would run a one-shot server on it).
REDIRECT_URI = "http://127.0.0.1:33418/callback"


@asynccontextmanager
async def signed_in(
    url: str, user: str, client_name: str = "mcpvectordb e2e assistant"
) -> AsyncIterator[tuple[Tools, MemoryStorage, Browser]]:
    storage, browser = MemoryStorage(), Browser(user)
    auth = OAuthClientProvider(
        server_url=url + "/mcp",
        client_metadata=OAuthClientMetadata(
            client_name=client_name,
            redirect_uris=[REDIRECT_URI],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.returned,
    )
    async with (
        httpx2.AsyncClient(auth=auth, timeout=60) as http,
        streamable_http_client(url + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield Tools(session), storage, browser


def claims_of(storage: MemoryStorage) -> dict[str, Any]:
    assert storage.tokens is not None
    return jwt.decode(storage.tokens.access_token, options={"verify_signature": False})


async def test_the_sdk_signs_in_through_discovery_registration_and_pkce(gateway: Gateway) -> None:
    async with signed_in(gateway.url, "alice") as (tools, storage, browser):
        added = await tools.call(
            "ingest_content",
            content="The quarterly report shows growth in the northern region.",
            source="oauth-e2e-report",
            library="team-a",
        )
        assert added["status"] in ("indexed", "skipped"), added
        found = await tools.call("search", query="quarterly growth", library="team-a")
        assert any(hit["source"] == "oauth-e2e-report" for hit in found["results"]), found
    # Registered dynamically at the provider, and the authorization request carried PKCE
    # and the resource indicator that the protected-resource metadata named.
    assert storage.client is not None and storage.client.client_id
    request = parse_qs(urlsplit(browser.visited[0]).query)
    assert urlsplit(browser.visited[0]).netloc == urlsplit(gateway.issuer).netloc
    assert request["code_challenge_method"] == ["S256"] and request["code_challenge"]
    assert request["resource"] == [gateway.url + "/mcp"]
    claims = claims_of(storage)
    assert claims["iss"] == gateway.issuer and claims["aud"] == gateway.url + "/mcp"
    assert set(claims["scope"].split()) >= {"mcpvectordb:read", "mcpvectordb:write"}
    assert claims["sub"] == "alice" and claims[LIBRARIES_CLAIM] == ["*"]


async def test_a_read_only_grant_from_the_provider_cannot_write(gateway: Gateway) -> None:
    async with signed_in(gateway.url, "carol", "read-only e2e assistant") as (tools, storage, _):
        assert claims_of(storage)["scope"] == "mcpvectordb:read"
        assert "libraries" in await tools.call("list_libraries")
        refused = await tools.call("ingest_content", content="nope", source="e2e-read-only")
        assert refused["error_code"] == "forbidden"
        assert "needs the scope 'mcpvectordb:write'" in refused["error"]
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        assert storage.tokens is not None
        upload = await http.post(
            "/upload",
            headers={"Authorization": f"Bearer {storage.tokens.access_token}"},
            files={"file": ("note.txt", b"read-only callers cannot upload")},
        )
    assert upload.status_code == 403
    assert (
        'error="insufficient_scope", scope="mcpvectordb:write"'
        in (upload.headers["www-authenticate"])
    )


async def test_the_providers_libraries_claim_confines_an_identity(gateway: Gateway) -> None:
    async with signed_in(gateway.url, "alice") as (tools, _, _):
        secret = await tools.call(
            "ingest_content",
            content="Only alice may read this.",
            source="e2e-secret",
            library="secret",
        )
        assert secret["status"] in ("indexed", "skipped"), secret
    async with signed_in(gateway.url, "bob") as (tools, storage, _):
        assert claims_of(storage)[LIBRARIES_CLAIM] == ["team-a"]
        listed = await tools.call("list_libraries")
        assert {lib["library"] for lib in listed["libraries"]} <= {"team-a"}
        refused = await tools.call("get_document", doc_id=secret["doc_id"])
        assert refused["error_code"] == "forbidden" and "'secret'" in refused["error"]
        found = await tools.call("search", query="alice read", top_k=20)
        assert all(hit["library"] == "team-a" for hit in found["results"]), found


async def test_a_forged_token_next_to_real_ones_is_refused(gateway: Gateway) -> None:
    """A token for the right resource, with the provider's key id, signed by someone else."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    attacker = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    now = int(time.time())
    forged = jwt.encode(
        {
            "iss": gateway.issuer,
            "aud": gateway.url + "/mcp",
            "sub": "mallory",
            "iat": now,
            "exp": now + 300,
            "scope": "mcpvectordb:read mcpvectordb:write",
            LIBRARIES_CLAIM: ["*"],
        },
        attacker,
        algorithm="RS256",
        headers={"kid": "rsa-e2e"},
    )
    async with httpx.AsyncClient(base_url=gateway.url) as http:
        response = await http.post("/mcp", json={}, headers={"Authorization": f"Bearer {forged}"})
    assert response.status_code == 401
    assert "does not verify" in response.json()["error"]
    assert (
        f'resource_metadata="{gateway.url}/.well-known/oauth-protected-resource/mcp"'
        in (response.headers["www-authenticate"])
    )


# ------------------------------------------------------------------- mcp-remote


async def test_mcp_remote_bridges_a_stdio_client_with_a_token_header(
    gateway: Gateway, tmp_path: Path
) -> None:
    if not MCP_REMOTE.is_file():
        pytest.skip("mcp-remote is not installed: run `make oauth-harness` (npm ci)")
    home = tmp_path / "mcp-remote"  # its config and token cache, not the user's ~/.mcp-auth
    params = StdioServerParameters(
        command="node",
        args=[
            str(MCP_REMOTE),
            gateway.url + "/mcp",
            "--allow-http",
            "--transport",
            "http-only",
            "--header",
            "Authorization:${MCP_TOKEN}",
        ],
        env={
            "PATH": os.environ.get("PATH", ""),
            "MCP_TOKEN": f"Bearer {STATIC_TOKEN}",
            "MCP_REMOTE_CONFIG_DIR": str(home),
        },
        cwd=str(HARNESS),
    )
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = Tools(session)
        listed = await session.list_tools()
        assert {tool.name for tool in listed.tools} >= {"search", "ingest_content"}
        added = await tools.call(
            "ingest_content", content="Bridged through mcp-remote.", source="e2e-bridge"
        )
        assert added["status"] in ("indexed", "skipped"), added
        found = await tools.call("search", query="bridged mcp-remote")
        assert any(hit["source"] == "e2e-bridge" for hit in found["results"]), found
