"""Bearer-token auth for every gateway route but the probes.

Tokens come from `AUTH_TOKEN` (full access) and `READ_ONLY_TOKEN` (search and read only),
each a comma-separated list. Comparison is constant-time. The caller's scope is kept in a
context variable so the MCP tools can refuse writes to a read-only caller.
"""

from __future__ import annotations

import contextvars
import hmac
from typing import Literal

from starlette.types import ASGIApp, Receive, Scope, Send

from libs.errors import UnauthorizedError
from libs.service_app import error_response
from services.gateway.errors import ReadOnlyToken

Access = Literal["full", "read"]
caller_access: contextvars.ContextVar[Access] = contextvars.ContextVar(
    "caller_access", default="full"
)
OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def access_of(request: object | None) -> Access:
    """The access this middleware gave the HTTP request an MCP message came in (full when
    there is none: stdio, or no tokens configured)."""
    scope = getattr(request, "scope", None)
    state = scope.get("state", {}) if isinstance(scope, dict) else {}
    return "read" if state.get("access") == "read" else "full"


def require_write(access: Access, action: str) -> None:
    """The one read-only refusal, for MCP tools and HTTP routes alike."""
    if access != "full":
        raise ReadOnlyToken(action)


def _matches(candidate: bytes, tokens: list[bytes]) -> bool:
    found = False
    for token in tokens:
        # No early exit: every configured token is compared.
        found |= hmac.compare_digest(candidate, token)
    return found


class BearerAuthMiddleware:
    def __init__(self, app: ASGIApp, full: list[str], read_only: list[str]) -> None:
        self.app = app
        self.full = [t.encode() for t in full]
        self.read_only = [t.encode() for t in read_only]

    @property
    def enabled(self) -> bool:
        return bool(self.full or self.read_only)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.enabled or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers") or []).get(b"authorization", b"")
        scheme, _, token = header.partition(b" ")
        access: Access | None = None
        if scheme.lower() == b"bearer" and token:
            if _matches(token.strip(), self.full):
                access = "full"
            elif _matches(token.strip(), self.read_only):
                access = "read"
        if access is None:
            refusal = UnauthorizedError(
                "missing or invalid bearer token; send 'Authorization: Bearer <token>'"
            )
            answer = error_response(refusal, {"WWW-Authenticate": 'Bearer realm="mcpvectordb"'})
            await answer(scope, receive, send)
            return
        scope.setdefault("state", {})["access"] = access
        reset = caller_access.set(access)
        try:
            await self.app(scope, receive, send)
        finally:
            caller_access.reset(reset)
