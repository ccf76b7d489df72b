"""CORS for the origins the gateway already accepts, so that MCP clients in a web page can read
its answers.

A page's script may send to the gateway only what its origin is allowed (`hosts`: loopback
origins, `ALLOWED_ORIGINS`, and `https://` + each of `ALLOWED_HOSTS`). Without CORS headers
the browser still keeps every answer from the script, and sends no request with JSON or a
token at all, since those need a preflight (`OPTIONS`) the gateway did not answer: the MCP
Inspector's direct connection, or a web chat's own MCP client, could not connect. Here:

- a preflight from an allowed origin is answered, before the token is checked (a browser
  sends none with it), for the methods and headers an MCP client uses;
- every answer to an allowed origin names it (`Access-Control-Allow-Origin`) and lets the
  script read the headers MCP needs (`Mcp-Session-Id`, `WWW-Authenticate` for OAuth);
- any other origin is refused before this (403 `invalid_origin`, `hosts`). With
  `ALLOWED_HOSTS=*` the Host and Origin checks are off, and every origin is let read.

No credentials mode: the gateway uses no cookies, and a token travels in `Authorization`,
which a page's script sets itself.
"""

from __future__ import annotations

import re

from mcp.server.transport_security import TransportSecuritySettings
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp

METHODS = ("GET", "POST", "DELETE", "OPTIONS")
# What an MCP client sends beside the CORS-safelisted headers, and what it must read back.
REQUEST_HEADERS = (
    "authorization",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "mcp-method",  # 2026-07-28 names each request's method and tool in headers
    "mcp-name",
    "last-event-id",
    "x-request-id",
)
RESPONSE_HEADERS = ("mcp-session-id", "mcp-protocol-version", "www-authenticate", "x-request-id")
PREFLIGHT_MAX_AGE_S = 600


def origin_pattern(security: TransportSecuritySettings) -> str:
    """A regular expression matching the origins `security` lets through, as the SDK's own
    check reads its list: an exact origin, or `base:*` for `base` with any port."""
    if not security.enable_dns_rebinding_protection:
        return ".*"
    alternatives = [
        re.escape(allowed[:-2]) + r":[0-9]+" if allowed.endswith(":*") else re.escape(allowed)
        for allowed in security.allowed_origins
    ]
    return "|".join(alternatives) or "(?!)"


def cors(app: ASGIApp, security: TransportSecuritySettings) -> ASGIApp:
    """`app` answering CORS for the origins `security` allows; see the module docstring."""
    return CORSMiddleware(
        app,
        allow_origin_regex=origin_pattern(security),
        allow_methods=METHODS,
        allow_headers=REQUEST_HEADERS,
        expose_headers=RESPONSE_HEADERS,
        max_age=PREFLIGHT_MAX_AGE_S,
        # A page on a public origin that the user listed may reach a gateway on loopback or a
        # private address (Chrome's Private Network Access asks first).
        allow_private_network=True,
    )
