"""Read-your-writes across index replicas: which caller a call belongs to, and which callers
wrote recently.

Index readers follow the writer's commits within `INDEX_READ_CONSISTENCY_S` (LanceDB's
`read_consistency_interval`: a read after that interval checks for the latest version first).
So a caller that wrote at time t reads its own write from any reader from t + that interval
on. Until then (plus `INDEX_READ_MARGIN_S`) its reads go to the writer. `RecentWrites` keeps,
per caller, when that holds again; the router (`services.gateway.replicas`) asks it on every
read and tells it after every write.

Why a time window and not the table version: it needs nothing from the index but the interval
it is configured with (the same variable, so one ConfigMap or compose file sets both), it
survives reader restarts and a reader's Service hiding several pods, and the cost is bounded:
a caller that writes reads from the writer for the window. The one way to break it is to give
the readers a longer interval than the gateway (documented in docs/deploy.md).

Who "a caller" is (`read_session`, a context variable):
- an MCP call: its connection (streamable HTTP session id, SSE session id, or stdio), set by
  the MCP adapter around each tool call and resource read;
- an HTTP API request (`/upload`, `/sources`, ...): its identity, set by `ReadSessionMiddleware`
  from a digest of the bearer token, or the client's address when there is no token;
- a background job: the caller that submitted it (`services.gateway.jobs` keeps the key), so a
  job's writes pin that caller's reads; a job resumed after a restart has none (key "").

Reads that decide writes (the listings a folder or repository sync prunes from) run inside
`reading_from_writer()` and always go to the writer.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator

from starlette.types import ASGIApp, Receive, Scope, Send

read_session: contextvars.ContextVar[str] = contextvars.ContextVar("read_session", default="")
# Reads that decide writes (which documents a folder or repository sync deletes) page through
# a whole library: they go to the writer, whose pages all come from one, current table.
writer_reads: contextvars.ContextVar[bool] = contextvars.ContextVar("writer_reads", default=False)

# The MCP transports' paths: their messages are handled in the session's own task, where the
# MCP adapter sets the key; this middleware would set it on the wrong task.
_MCP_PATHS = ("/mcp", "/sse", "/messages")


@contextlib.contextmanager
def reading_as(key: str) -> Iterator[None]:
    """Run the body's index calls as the caller `key`."""
    token = read_session.set(key)
    try:
        yield
    finally:
        read_session.reset(token)


@contextlib.contextmanager
def reading_from_writer() -> Iterator[None]:
    """Run the body's index reads on the writer, whatever the caller wrote."""
    token = writer_reads.set(True)
    try:
        yield
    finally:
        writer_reads.reset(token)


def http_caller(scope: Scope) -> str:
    """An HTTP API caller's key: its bearer token (digested: the key is kept in memory and
    may be logged) or, without one, its address. Callers behind one proxy without tokens
    share a key: they read each other's writes at once, which is stricter, not weaker."""
    headers = dict(scope.get("headers") or [])
    token = headers.get(b"authorization", b"")
    if token:
        return "http-token:" + hashlib.sha256(token).hexdigest()[:24]
    client = scope.get("client")
    host = client[0] if client else "unknown"
    return f"http-client:{host}"


class ReadSessionMiddleware:
    """Sets `read_session` for the gateway's plain HTTP routes (not the MCP transports)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or path.startswith(_MCP_PATHS):
            await self.app(scope, receive, send)
            return
        with reading_as(http_caller(scope)):
            await self.app(scope, receive, send)


class RecentWrites:
    """Per caller, until when its reads must go to the writer (monotonic seconds).

    Entries are kept in the order of their deadline (every write moves its caller to the end
    with a deadline `window_s` from now), so the expired ones are always at the front and are
    dropped as they expire: the map holds only the callers that wrote within the window.
    """

    def __init__(self, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self.clock = clock
        self._until: OrderedDict[str, float] = OrderedDict()

    def wrote(self, key: str) -> None:
        """`key` just finished a write (or a write that may have committed before it failed)."""
        now = self.clock()
        self._expire(now)
        self._until[key] = now + self.window_s
        self._until.move_to_end(key)

    def pinned(self, key: str) -> bool:
        """Whether `key` wrote within the window, so a reader might not show its write yet."""
        now = self.clock()
        self._expire(now)
        return key in self._until

    def __len__(self) -> int:
        return len(self._until)

    def _expire(self, now: float) -> None:
        while self._until:
            key, until = next(iter(self._until.items()))
            if until > now:
                return
            del self._until[key]
