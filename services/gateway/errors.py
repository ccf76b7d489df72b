"""Gateway-specific errors, subclasses of the shared tree in `libs.errors` (they keep its
`error_code` and HTTP status, over HTTP and in MCP tool results alike). The refusals of
access (scope, library) are in `services.gateway.scopes`, the token's in
`services.gateway.oauth`.

    UpstreamError (503 service_unavailable)
    └── StillStarting       a tool called before the app's lifespan bound the library
"""

from __future__ import annotations

from libs.errors import UpstreamError


class StillStarting(UpstreamError):
    def __init__(self) -> None:
        super().__init__("the server is still starting; try again in a moment")
