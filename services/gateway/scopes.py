"""What a caller may do: the `Grant` that authentication gives each request, and the checks
every entry point makes against it.

A grant holds the abstract scopes `read` (search, list, get, info, reading jobs) and `write`
(every ingest, delete and cancel), the libraries the caller may use (`None`: all of them) and,
for an OAuth caller, the OAuth scope names that stand for `read` and `write`, so a refusal can
name the scope to ask the authorization server for. Static tokens give `FULL` or `READ_ONLY`;
a JWT access token gives what its `scope` / `scp` claim and the libraries claim say
(`services.gateway.oauth`); stdio and an unauthenticated loopback gateway act as `FULL`.

    ForbiddenError (403 forbidden)
    ├── InsufficientScope       the grant lacks `read` or `write` for the action
    └── LibraryNotAllowed       the library is outside the grant's libraries
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from libs.errors import ForbiddenError

Need = Literal["read", "write"]


@dataclass(frozen=True)
class Grant:
    scopes: frozenset[Need]
    libraries: frozenset[str] | None = None
    # The OAuth scope each abstract scope is granted by; empty for a static token.
    scope_names: Mapping[str, str] = field(default_factory=dict)
    subject: str | None = None

    @property
    def oauth(self) -> bool:
        return bool(self.scope_names)

    def may_use(self, library: str) -> bool:
        return self.libraries is None or library in self.libraries


FULL = Grant(frozenset({"read", "write"}))
READ_ONLY = Grant(frozenset({"read"}))


class InsufficientScope(ForbiddenError):
    """The grant lacks a scope. `scope` is what the caller needs, as the `scope` parameter of
    an HTTP `WWW-Authenticate: Bearer error="insufficient_scope"` challenge."""

    def __init__(self, grant: Grant, need: Need, action: str) -> None:
        self.scope = grant.scope_names.get(need, need)
        if grant.oauth:
            message = (
                f"'{action}' needs the scope '{self.scope}', which this access token lacks; "
                f"sign in again asking the authorization server for '{self.scope}'"
            )
        elif need == "write":
            message = f"this token is read-only; '{action}' needs a full-access token"
        else:
            message = f"this token cannot read; '{action}' needs a token with read access"
        super().__init__(message)


class LibraryNotAllowed(ForbiddenError):
    def __init__(self, grant: Grant, library: str, action: str) -> None:
        allowed = ", ".join(sorted(grant.libraries or ())) or "none"
        super().__init__(
            f"'{action}' on library '{library}' is not allowed for this identity (its libraries: "
            f"{allowed}); use one of those, or ask the administrator of the authorization "
            "server to add the library to your token's libraries claim"
        )
        self.library = library


def require(grant: Grant, need: Need, action: str) -> None:
    """The one scope check, for MCP tools and HTTP routes alike."""
    if need not in grant.scopes:
        raise InsufficientScope(grant, need, action)


def require_library(grant: Grant, library: str, action: str) -> None:
    if not grant.may_use(library):
        raise LibraryNotAllowed(grant, library, action)
