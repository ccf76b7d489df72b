"""Bearer-token auth for every gateway route but the probes and the OAuth metadata.

A request's token is one of the static tokens, `AUTH_TOKEN` (full access) or
`READ_ONLY_TOKEN` (search and read only), each a comma-separated list compared in constant
time; or, with `OAUTH_ISSUER` set, a JWT access token that `services.gateway.oauth` checks.
Either way it becomes a `Grant` (`services.gateway.scopes`), kept in the request's state and a
context variable, so the MCP tools and the HTTP routes check the same thing. A refused request
is 401 in the error shape with `WWW-Authenticate: Bearer`, naming the protected-resource
metadata when OAuth is on (how MCP clients find the authorization server).
"""

from __future__ import annotations

import contextvars
import hmac
import logging
from collections.abc import Callable

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from libs.errors import MvdbError, UnauthorizedError
from libs.service_app import error_response
from services.gateway.oauth import InvalidToken, TokenVerifier
from services.gateway.resource_metadata import METADATA_PATH, challenge
from services.gateway.scopes import FULL, READ_ONLY, Grant, require
from services.gateway.settings import GatewaySettings

log = logging.getLogger(__name__)

Access = Grant
caller_access: contextvars.ContextVar[Grant] = contextvars.ContextVar("caller_access", default=FULL)
OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def access_of(request: object | None) -> Grant:
    """The grant this middleware gave the HTTP request an MCP message came in (full when
    there is none: stdio, or no tokens configured)."""
    scope = getattr(request, "scope", None)
    state = scope.get("state", {}) if isinstance(scope, dict) else {}
    grant = state.get("access")
    return grant if isinstance(grant, Grant) else FULL


def require_write(access: Grant, action: str) -> None:
    """The one write check, for MCP tools and HTTP routes alike."""
    require(access, "write", action)


def require_read(access: Grant, action: str) -> None:
    require(access, "read", action)


def _matches(candidate: bytes, tokens: list[bytes]) -> bool:
    found = False
    for token in tokens:
        # No early exit: every configured token is compared.
        found |= hmac.compare_digest(candidate, token)
    return found


class BearerAuthMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        settings: GatewaySettings,
        verifier: Callable[[], TokenVerifier | None],
    ) -> None:
        self.app = app
        self.settings = settings
        self.full = [t.encode() for t in settings.auth_token]
        self.read_only = [t.encode() for t in settings.read_only_token]
        self.verifier = verifier

    @property
    def enabled(self) -> bool:
        return bool(self.full or self.read_only or self.settings.oauth_issuer)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if (
            scope["type"] != "http"
            or not self.enabled
            or path in OPEN_PATHS
            or path.startswith(METADATA_PATH)
        ):
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers") or []).get(b"authorization", b"")
        scheme, _, raw = header.partition(b" ")
        token = raw.strip()
        try:
            if scheme.lower() != b"bearer" or not token:
                raise UnauthorizedError(
                    "missing or invalid bearer token; send 'Authorization: Bearer <token>'"
                )
            grant = await self._grant(token)
        except InvalidToken as exc:
            # Why, for the operator (a clock skew, a wrong audience setting); never the token.
            log.info("refused an access token: %s", exc.message)
            await self._refuse(scope, receive, send, exc, invalid=True)
            return
        except MvdbError as exc:
            await self._refuse(scope, receive, send, exc, invalid=False)
            return
        scope.setdefault("state", {})["access"] = grant
        reset = caller_access.set(grant)
        try:
            await self.app(scope, receive, send)
        finally:
            caller_access.reset(reset)

    async def _grant(self, token: bytes) -> Grant:
        if _matches(token, self.full):
            return FULL
        if _matches(token, self.read_only):
            return READ_ONLY
        verifier = self.verifier()
        if verifier is None or token.count(b".") != 2:
            raise UnauthorizedError(
                "missing or invalid bearer token; send 'Authorization: Bearer <token>'"
            )
        return await verifier.verify(token.decode("ascii", "replace"))

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, error: MvdbError, *, invalid: bool
    ) -> None:
        headers = {}
        if error.http_status == 401:
            headers["WWW-Authenticate"] = challenge(
                self.settings,
                Request(scope),
                error="invalid_token" if invalid else None,
                description=error.message if invalid else None,
            )
        await error_response(error, headers)(scope, receive, send)
