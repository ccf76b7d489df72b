"""Host and Origin checks on every gateway route, not only the MCP transports.

A web page the user happens to open can send requests to the gateway on 127.0.0.1: directly
(a cross-site form POST to `/upload` or `/ingest_folder` needs no CORS preflight) or after
pointing its own host name at 127.0.0.1 (DNS rebinding). Browsers always name the page's
origin in `Origin` on such POSTs and the page's host name in `Host`, so both are checked
against the same allow-lists as the MCP SDK's transport security (`ALLOWED_HOSTS`,
`ALLOWED_ORIGINS`; loopback is always allowed): 421 for a Host, 403 for an Origin that is not
allowed, in the tool error shape. Requests without `Origin` (curl, scripts, MCP clients) pass
the Origin check. The probes and `/metrics` are exempt, because orchestrators and Prometheus
address pods by IP.

Doing this in front of the SDK's routes also spares its SSE endpoint, which answers a bad Host
and then raises into the app.
"""

from __future__ import annotations

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from libs.errors import InvalidHostError, InvalidOriginError, MvdbError
from libs.service_app import error_response
from services.gateway.auth import OPEN_PATHS

EXEMPT_PATHS = OPEN_PATHS | {"/metrics"}


class HostCheckMiddleware:
    def __init__(self, app: ASGIApp, security: TransportSecuritySettings) -> None:
        self.app = app
        self._checker = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refused = await self._checker.validate_request(request, is_post=False)
        if refused is None:
            await self.app(scope, receive, send)
            return
        if refused.status_code == 421:
            error: MvdbError = InvalidHostError(_not_allowed("Host", request.headers.get("host")))
        else:
            error = InvalidOriginError(_not_allowed("Origin", request.headers.get("origin")))
        await error_response(error)(scope, receive, send)


def _not_allowed(header: str, value: str | None) -> str:
    setting = "ALLOWED_HOSTS" if header == "Host" else "ALLOWED_ORIGINS"
    return (
        f"the {header} header {value!r} is not one this server answers to; if it is the name "
        f"the gateway is published under, add it to {setting}"
    )
