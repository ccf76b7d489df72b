"""How an MCP client finds the authorization server: the gateway's protected-resource
metadata (RFC 9728) at `/.well-known/oauth-protected-resource` and at the path-suffixed forms
for `/mcp` and `/sse`, and the `WWW-Authenticate: Bearer resource_metadata="..."` challenge
every 401 carries. The public base URL is `PUBLIC_URL` (behind a tunnel the Host header need
not be the public name), else the request's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from libs import SERVER_NAME
from libs.errors import NotFoundError
from libs.service_app import error_response

if TYPE_CHECKING:
    from services.gateway.settings import GatewaySettings

METADATA_PATH = "/.well-known/oauth-protected-resource"
# The MCP endpoints that have a path-suffixed metadata document of their own.
RESOURCE_PATHS = ("/mcp", "/sse")


def public_base(settings: GatewaySettings, request: Request) -> str:
    if settings.public_url:
        return settings.public_url.rstrip("/")
    return f"{request.url.scheme}://{request.url.netloc}"


def metadata_url_for(path: str, base: str) -> str:
    """The metadata document that describes the resource a request path belongs to."""
    for resource in RESOURCE_PATHS:
        if path == resource or path.startswith(resource + "/"):
            return f"{base}{METADATA_PATH}{resource}"
    if path.startswith("/messages"):  # the SSE transport's POST half
        return f"{base}{METADATA_PATH}/sse"
    return f"{base}{METADATA_PATH}"


def protected_resource_metadata(
    settings: GatewaySettings, base: str, suffix: str
) -> dict[str, Any]:
    assert settings.oauth_issuer is not None
    return {
        "resource": base + suffix,
        "authorization_servers": [settings.oauth_issuer],
        "scopes_supported": [settings.oauth_read_scope, settings.oauth_write_scope],
        "bearer_methods_supported": ["header"],
        "resource_name": SERVER_NAME,
    }


def metadata_routes(settings: GatewaySettings) -> list[Route]:
    """`GET /.well-known/oauth-protected-resource[/mcp|/sse]`; 404 saying why while OAuth is
    not configured."""

    def endpoint(suffix: str) -> Callable[[Request], Any]:
        async def answer(request: Request) -> JSONResponse:
            if not settings.oauth_issuer:
                return error_response(
                    NotFoundError(
                        "this gateway does not accept OAuth access tokens (OAUTH_ISSUER is not "
                        "set); use its bearer token"
                    )
                )
            document = protected_resource_metadata(settings, public_base(settings, request), suffix)
            return JSONResponse(document, headers={"Cache-Control": "max-age=3600"})

        return answer

    return [
        Route(METADATA_PATH + suffix, endpoint(suffix), methods=["GET"])
        for suffix in ("", *RESOURCE_PATHS)
    ]


def challenge(
    settings: GatewaySettings,
    request: Request,
    *,
    error: str | None = None,
    description: str | None = None,
    scope: str | None = None,
) -> str:
    """A `WWW-Authenticate` value: `Bearer` with the metadata URL when OAuth is on."""
    params: list[tuple[str, str]] = []
    if settings.oauth_issuer:
        base = public_base(settings, request)
        params.append(("resource_metadata", metadata_url_for(request.url.path, base)))
    else:
        params.append(("realm", SERVER_NAME))
    if error:
        params.append(("error", error))
    if description:
        params.append(("error_description", description))
    if scope:
        params.append(("scope", scope))
    quoted = ", ".join(f'{name}="{_quote(value)}"' for name, value in params)
    return f"Bearer {quoted}"


def _quote(value: str) -> str:
    # RFC 6750 limits error_description to printable ASCII without '"' and '\'.
    return "".join(c for c in value if 0x20 <= ord(c) < 0x7F and c not in '"\\')
