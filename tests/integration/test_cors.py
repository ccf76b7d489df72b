"""CORS on the real gateway over a real socket (`services.gateway.cors`): what a browser asks
before a page's MCP client may send (the preflight) and what it needs in each answer to let
the page read it, for the origins the gateway accepts, and nothing for the others."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest

from services.gateway.app import transport_security
from services.gateway.cors import origin_pattern
from services.gateway.settings import GatewaySettings
from tests.fakes import fake_gateway
from tests.mcp_raw import BOTH, initialize_message

pytestmark = pytest.mark.integration

TOKEN = {"Authorization": "Bearer full-token"}
INSPECTOR = "http://localhost:6274"  # the MCP Inspector's page
LISTED = "https://chat.example.com"
INITIALIZE = initialize_message("2025-11-25")
STREAMABLE = {"accept": BOTH}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fake_gateway(tmp_path_factory, auth_token=["full-token"], allowed_origins=[LISTED]) as url:
        yield url


def _preflight(gateway: str, origin: str, **extra: str) -> httpx.Response:
    return httpx.options(
        gateway + "/mcp",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": (
                "authorization,content-type,mcp-session-id,mcp-protocol-version,mcp-method,mcp-name"
            ),
            **extra,
        },
    )


@pytest.mark.parametrize("origin", [INSPECTOR, "http://127.0.0.1:5173", LISTED])
def test_a_preflight_from_an_allowed_origin_is_answered_without_a_token(
    gateway: str, origin: str
) -> None:
    answered = _preflight(gateway, origin)
    assert answered.status_code == 200, answered.text
    assert answered.headers["access-control-allow-origin"] == origin
    assert "POST" in answered.headers["access-control-allow-methods"]
    allowed = answered.headers["access-control-allow-headers"].lower()
    sent = ("authorization", "content-type", "mcp-session-id", "mcp-protocol-version")
    for name in (*sent, "mcp-method", "mcp-name"):  # the last two: 2026-07-28's
        assert name in allowed, name


def test_a_public_page_may_reach_a_gateway_on_a_private_address(gateway: str) -> None:
    answered = _preflight(gateway, LISTED, **{"Access-Control-Request-Private-Network": "true"})
    assert answered.status_code == 200
    assert answered.headers["access-control-allow-private-network"] == "true"


def test_a_preflight_from_another_origin_is_refused(gateway: str) -> None:
    refused = _preflight(gateway, "http://evil.example")
    assert refused.status_code == 403
    assert refused.json()["error_code"] == "invalid_origin"
    assert "access-control-allow-origin" not in refused.headers


def test_a_page_can_read_the_answer_and_the_session_id(gateway: str) -> None:
    answered = httpx.post(
        gateway + "/mcp", headers={"Origin": INSPECTOR, **TOKEN, **STREAMABLE}, json=INITIALIZE
    )
    assert answered.status_code == 200
    assert answered.headers["access-control-allow-origin"] == INSPECTOR
    exposed = answered.headers["access-control-expose-headers"].lower()
    assert "mcp-session-id" in exposed and answered.headers["mcp-session-id"]
    assert "origin" in answered.headers["vary"].lower()


def test_a_page_can_read_a_refusal_and_its_challenge(gateway: str) -> None:
    """An OAuth client in a page learns where to get a token from the 401's header."""
    refused = httpx.post(gateway + "/mcp", headers={"Origin": LISTED, **STREAMABLE}, json={})
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == LISTED
    assert "www-authenticate" in refused.headers["access-control-expose-headers"].lower()
    assert refused.headers["www-authenticate"].startswith("Bearer")


def test_no_cors_headers_without_an_origin(gateway: str) -> None:
    answered = httpx.post(gateway + "/mcp", headers={**TOKEN, **STREAMABLE}, json=INITIALIZE)
    assert answered.status_code == 200
    assert "access-control-allow-origin" not in answered.headers


def test_the_origins_allowed_are_the_host_checks_own() -> None:
    settings = GatewaySettings(
        _env_file=None,  # type: ignore[call-arg]
        allowed_origins=["https://chat.example.com"],
        allowed_hosts=["mcp.example.org"],
    )
    pattern = re.compile(origin_pattern(transport_security(settings)))
    for origin in (
        "http://localhost:6274",
        "http://127.0.0.1:3000",
        "http://[::1]:8080",
        "https://chat.example.com",
        "https://mcp.example.org",  # the public name the gateway is served under
    ):
        assert pattern.fullmatch(origin), origin
    for origin in (
        "http://localhost.evil.example:80",
        "http://localhost:80.evil.example",
        "https://chat.example.com.evil.example",
        "http://chat.example.com",
        "null",
    ):
        assert not pattern.fullmatch(origin), origin
    everything = GatewaySettings(_env_file=None, allowed_hosts=["*"])  # type: ignore[call-arg]
    assert re.fullmatch(origin_pattern(transport_security(everything)), "https://any.example")
