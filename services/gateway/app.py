"""Gateway app factory.

One FastAPI app serves the MCP transports (SSE at `/sse` + `/messages/`, streamable HTTP at
`/mcp`), `POST /upload`, `POST /ingest_folder`, the OAuth protected-resource metadata and the
probes, all over one `Library` built in the lifespan (with the OAuth token verifier, when
`OAUTH_ISSUER` is set). Its downstream ports are either the typed HTTP clients (cluster mode)
or the service cores in this process (standalone), chosen by the `ports` factory given to
`create_app`.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from mcp.server.transport_security import TransportSecuritySettings

from libs.body_limit import BodyLimitMiddleware
from libs.errors import InvalidInputError
from libs.service_app import error_response, install_common
from services.gateway.api import router
from services.gateway.auth import OPEN_PATHS, BearerAuthMiddleware
from services.gateway.batches import JsonRpcBatches
from services.gateway.consistency import ReadSessionMiddleware
from services.gateway.cors import cors
from services.gateway.hosts import HostCheckMiddleware
from services.gateway.library import Library
from services.gateway.oauth import TokenVerifier, verifier
from services.gateway.ports import Ports, PortsFactory, http_ports
from services.gateway.resource_metadata import challenge, metadata_routes
from services.gateway.resumption import streamable_http
from services.gateway.scopes import InsufficientScope
from services.gateway.settings import GatewaySettings
from services.gateway.tools import LibraryServer
from services.gateway.transport_errors import TransportErrors
from services.gateway.transports import StreamableGuards, sse_routes

log = logging.getLogger(__name__)


# Every request body (MCP messages, /ingest_folder) is bounded by MAX_UPLOAD_BYTES plus room
# for multipart framing; /upload then checks the file itself against the exact limit.
_BODY_SLACK = 1024 * 1024


def _is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(settings: GatewaySettings, host: str) -> None:
    """Refuse to listen beyond loopback without a token, unless explicitly told to. Warn when
    callers from elsewhere (a non-loopback address, or tokens, which mean a tunnel or proxy)
    could have any file of the server user read: that needs INGEST_ROOTS."""
    tokens = bool(settings.auth_token or settings.read_only_token or settings.oauth_issuer)
    if (tokens or not _is_loopback(host)) and not settings.ingest_roots:
        log.warning(
            "INGEST_ROOTS is not set: ingest_file and ingest_folder may read any file this "
            "user can read, and get_document then shows it to the caller; set INGEST_ROOTS "
            "to the folders meant for ingestion (see docs/security.md)"
        )
    if (
        _is_loopback(host)
        or settings.auth_token
        or settings.oauth_issuer
        or settings.allow_unauthenticated_remote
    ):
        return
    raise InvalidInputError(
        f"refusing to listen on {host} without AUTH_TOKEN: anyone who can reach it could read "
        "and change the library. Set AUTH_TOKEN (or OAUTH_ISSUER), bind 127.0.0.1, or set "
        "ALLOW_UNAUTHENTICATED_REMOTE=true if a trusted proxy does the auth."
    )


def transport_security(settings: GatewaySettings) -> TransportSecuritySettings:
    if "*" in settings.allowed_hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", *settings.allowed_hosts]
    origins = [
        "http://127.0.0.1:*",
        "http://localhost:*",
        "http://[::1]:*",
        *settings.allowed_origins,
        *(f"https://{h}" for h in settings.allowed_hosts),
    ]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


def create_app(
    settings: GatewaySettings | None = None, ports: PortsFactory | None = None
) -> FastAPI:
    settings = settings or GatewaySettings()
    ports_factory = ports or http_ports

    def running_library() -> Library:
        library: Library | None = getattr(app.state, "library", None)
        if library is None:
            raise LookupError("the library is not bound yet")
        return library

    mcp = LibraryServer(running_library).server
    security = transport_security(settings)
    sessions, streamable = streamable_http(mcp, security, settings.mcp_resume_buffer_bytes)

    def running_verifier() -> TokenVerifier | None:
        found: TokenVerifier | None = getattr(app.state, "verifier", None)
        return found

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with (
            verifier(settings) as tokens,
            ports_factory(settings) as bound,
            httpx.AsyncClient(
                timeout=httpx.Timeout(settings.fetch_timeout_s),
                # No pooled connections: each fetch connects to the address its check pinned.
                limits=httpx.Limits(max_keepalive_connections=0),
                trust_env=False,
                headers={"User-Agent": "mcpvectordb/ingest_url"},
            ) as fetcher,
        ):
            library = Library(settings, bound, fetcher)
            app.state.verifier = tokens
            app.state.library = library
            app.state.ready_checks = library.ready_checks()
            try:
                await library.start()
                async with sessions.run():
                    yield
            finally:
                await library.aclose()
                app.state.library = None
                app.state.verifier = None
                app.state.ready_checks = None
                for close in bound.closers:
                    await close()

    app = FastAPI(title="mcpvectordb gateway", lifespan=lifespan)
    app.state.settings = settings
    # Each middleware added wraps the ones before: Host/Origin are checked first, then CORS
    # for the origins allowed (services.gateway.cors), then the token, then the body size (a
    # caller without a token is refused before its body is read); the telemetry that
    # install_common adds wraps them all. Innermost, the caller
    # whose writes the HTTP routes' reads must see (services.gateway.consistency); outside
    # it, a JSON-RPC batch is taken apart (services.gateway.batches) after the streamable
    # HTTP corrections have looked at the request (services.gateway.transports), and the
    # transports' refusals are made to say what to do (services.gateway.transport_errors).
    app.add_middleware(ReadSessionMiddleware)
    app.add_middleware(JsonRpcBatches)
    app.add_middleware(StreamableGuards)
    app.add_middleware(TransportErrors)
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_upload_bytes + _BODY_SLACK,
        setting="MAX_UPLOAD_BYTES",
    )
    app.add_middleware(BearerAuthMiddleware, settings=settings, verifier=running_verifier)
    app.add_middleware(cors, security=security)  # a preflight carries no token
    app.add_middleware(HostCheckMiddleware, security=security)
    install_common(app, "gateway")  # telemetry outermost: refused requests are counted too

    @app.exception_handler(InsufficientScope)
    async def _insufficient_scope(request: Request, exc: InsufficientScope) -> JSONResponse:
        # RFC 6750: the scope the caller lacks, so an OAuth client can ask for it (step-up).
        header = challenge(settings, request, error="insufficient_scope", scope=exc.scope)
        return error_response(exc, {"WWW-Authenticate": header})

    app.include_router(router)
    app.router.routes.extend(metadata_routes(settings))
    # The MCP transports first: every MCP message is a request to `/messages/` or `/mcp`, and
    # routes are tried in order (by the router, and by the telemetry that names the route);
    # no other route's path starts with theirs.
    app.router.routes[0:0] = [*sse_routes(mcp, security), streamable]
    return app


__all__ = ["OPEN_PATHS", "Ports", "PortsFactory", "check_exposure", "create_app", "http_ports"]
