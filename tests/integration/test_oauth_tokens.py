"""OAuth access tokens at the gateway, with tokens minted here (`tests.jwt_issuer`): a local
authorization server's metadata and JWKS on a loopback socket, the gateway on another, real
HTTP and the real MCP SDK client in between.

Every way a token can be wrong is refused with 401, `error="invalid_token"` and the
protected-resource metadata URL in `WWW-Authenticate`; scopes decide read and write on MCP
tools and HTTP routes alike; the static tokens keep working beside OAuth; the metadata
documents say what RFC 9728 asks. The key cache and the settings checks are tested on their
own at the end. What an identity's libraries claim confines it to: `test_oauth_libraries`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from libs.errors import InvalidInputError, UpstreamError
from services.gateway.app import check_exposure, create_app
from services.gateway.oauth import InvalidToken, JwksCache
from services.gateway.settings import GatewaySettings
from tests.fakes import fake_ports
from tests.jwt_issuer import LocalIssuer
from tests.mcp_client import sse_tools
from tests.oauth_gateway import (
    AUDIENCE,
    METADATA,
    PUBLIC,
    READ_SCOPE,
    WRITE_SCOPE,
    bearer,
    mcp_tools,
)
from tests.servers import free_port, serve

pytestmark = pytest.mark.integration


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
