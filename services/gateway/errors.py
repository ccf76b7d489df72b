"""Gateway-specific errors, subclasses of the shared tree in `libs.errors` (they keep its
`error_code` and HTTP status, over HTTP and in MCP tool results alike).

    ForbiddenError (403 forbidden)
    └── ReadOnlyToken       a write (ingest, delete, upload) with a read-only token
    UpstreamError (503 service_unavailable)
    └── StillStarting       a tool called before the app's lifespan bound the library
"""

from __future__ import annotations

from libs.errors import ForbiddenError, UpstreamError


class ReadOnlyToken(ForbiddenError):
    def __init__(self, action: str) -> None:
        super().__init__(f"this token is read-only; '{action}' needs a full-access token")


class StillStarting(UpstreamError):
    def __init__(self) -> None:
        super().__init__("the server is still starting; try again in a moment")
