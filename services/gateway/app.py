"""Gateway app factory.

One FastAPI app serves the MCP transports (SSE at `/sse` + `/messages/`, streamable HTTP at
`/mcp`), `POST /upload`, `POST /ingest_folder` and the probes. Its downstream ports are either
the typed HTTP clients (cluster mode) or the service cores in this process (standalone), chosen
by the `ports` factory given to `create_app`.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from fastapi import FastAPI
from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings

from libs.body_limit import BodyLimitMiddleware
from libs.clients import ConverterClient, EmbedderClient, IndexClient
from libs.errors import InvalidInputError
from libs.http import RetryPolicy
from libs.ports import ConverterPort, EmbedderPort, IndexPort
from libs.service_app import install_common
from services.gateway.api import router
from services.gateway.auth import OPEN_PATHS, BearerAuthMiddleware
from services.gateway.hosts import HostCheckMiddleware
from services.gateway.pipeline import Pipeline
from services.gateway.settings import GatewaySettings
from services.gateway.tools import ToolService, build_mcp_server, model_cache_dir

log = logging.getLogger(__name__)


@dataclass
class Ports:
    converter: ConverterPort
    embedder: EmbedderPort
    index: IndexPort
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


PortsFactory = Callable[[GatewaySettings], AbstractAsyncContextManager[Ports]]

# Every request body (MCP messages, /ingest_folder) is bounded by MAX_UPLOAD_BYTES plus room
# for multipart framing; /upload then checks the file itself against the exact limit.
_BODY_SLACK = 1024 * 1024


@asynccontextmanager
async def http_ports(settings: GatewaySettings) -> AsyncIterator[Ports]:
    policy = RetryPolicy(attempts=settings.retry_attempts, max_seconds=settings.retry_max_s)
    converter = ConverterClient(
        settings.converter_url, timeout_s=settings.convert_timeout_s + 10, policy=policy
    )
    embedder = EmbedderClient(
        settings.embedder_url, timeout_s=settings.http_timeout_s, policy=policy
    )
    index = IndexClient(settings.index_url, timeout_s=settings.http_timeout_s, policy=policy)
    try:
        yield Ports(converter, embedder, index)
    finally:
        for client in (converter, embedder, index):
            await client.aclose()


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
    tokens = bool(settings.auth_token or settings.read_only_token)
    if (tokens or not _is_loopback(host)) and not settings.ingest_roots:
        log.warning(
            "INGEST_ROOTS is not set: ingest_file and ingest_folder may read any file this "
            "user can read, and get_document then shows it to the caller; set INGEST_ROOTS "
            "to the folders meant for ingestion (see docs/security.md)"
        )
    if _is_loopback(host) or settings.auth_token or settings.allow_unauthenticated_remote:
        return
    raise InvalidInputError(
        f"refusing to listen on {host} without AUTH_TOKEN: anyone who can reach it could read "
        "and change the library. Set AUTH_TOKEN, bind 127.0.0.1, or set "
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


def _access_of(ctx: Context[Any, Any]) -> str:
    request = ctx.request_context.request
    state = getattr(request, "scope", {}).get("state", {}) if request is not None else {}
    return str(state.get("access", "full"))


def create_app(
    settings: GatewaySettings | None = None, ports: PortsFactory | None = None
) -> FastAPI:
    settings = settings or GatewaySettings()
    ports_factory = ports or http_ports
    service = ToolService(
        transport=settings.transport, model_cache=model_cache_dir(settings.var_dir)
    )
    mcp = build_mcp_server(service, access_of=_access_of)
    security = transport_security(settings)
    sse = mcp.sse_app(transport_security=security, host=settings.bind_host)
    streamable = mcp.streamable_http_app(transport_security=security, host=settings.bind_host)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with (
            ports_factory(settings) as bound,
            httpx.AsyncClient(
                timeout=httpx.Timeout(settings.fetch_timeout_s),
                # No pooled connections: each fetch connects to the address its check pinned.
                limits=httpx.Limits(max_keepalive_connections=0),
                trust_env=False,
                headers={"User-Agent": "mcpvectordb/ingest_url"},
            ) as fetcher,
        ):
            pipeline = Pipeline(settings, bound.converter, bound.embedder, bound.index, fetcher)
            app.state.pipeline = pipeline
            service.bind(pipeline)
            try:
                async with mcp.session_manager.run():
                    yield
            finally:
                service.bind(None)
                for close in bound.closers:
                    await close()

    app = FastAPI(title="mcpvectordb gateway", lifespan=lifespan)
    app.state.settings = settings
    # Each middleware added wraps the ones before: Host/Origin are checked first, then the
    # token, then the body size (a caller without a token is refused before its body is
    # read); the telemetry that install_common adds wraps them all.
    app.add_middleware(
        BodyLimitMiddleware,
        max_bytes=settings.max_upload_bytes + _BODY_SLACK,
        setting="MAX_UPLOAD_BYTES",
    )
    app.add_middleware(
        BearerAuthMiddleware, full=settings.auth_token, read_only=settings.read_only_token
    )
    app.add_middleware(HostCheckMiddleware, security=security)
    install_common(app, "gateway")  # telemetry outermost: refused requests are counted too
    app.include_router(router)
    app.router.routes.extend(sse.routes)
    app.router.routes.extend(streamable.routes)
    return app


__all__ = ["OPEN_PATHS", "Ports", "PortsFactory", "check_exposure", "create_app", "http_ports"]
