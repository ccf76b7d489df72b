"""Progress notifications for one MCP call: what the work reports (a folder: files done out
of files found), and a heartbeat in between, so a client that resets its timeout on progress
(as the TypeScript SDK can) never gives up on a live call.

Values only ever increase, as MCP requires: the heartbeat adds thousandths to the last value
the work reported, staying below the next whole step, and a repeated value is nudged up.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Awaitable, Callable
from types import TracebackType

Send = Callable[[float, float | None, str | None], Awaitable[None]]

HEARTBEAT_S = 2.0


class ProgressReporter:
    def __init__(self, send: Send, every_s: float = HEARTBEAT_S) -> None:
        self._send = send
        self.every_s = every_s
        self._last = -1.0
        self._total: float | None = None
        self._message: str | None = None
        self._sent_at = time.monotonic()
        self._started = time.monotonic()
        self._lock = asyncio.Lock()
        self._beat: asyncio.Task[None] | None = None

    async def report(self, progress: float, total: float | None, message: str | None) -> None:
        """What the work has done (`progress` out of `total`, may be None)."""
        self._total, self._message = total, message
        await self._emit(max(progress, math.nextafter(self._last, math.inf)), message)

    async def _emit(self, value: float, message: str | None) -> None:
        async with self._lock:
            if value <= self._last:
                return
            self._last = value
            self._sent_at = time.monotonic()
            await self._send(value, self._total, message)

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.every_s)
            if time.monotonic() - self._sent_at < self.every_s / 2:  # the work spoke lately
                continue
            base = max(self._last, 0.0)
            ceiling = math.floor(base) + 0.999
            elapsed = int(time.monotonic() - self._started)
            note = f"working ({elapsed} s)" + (f"; last: {self._message}" if self._message else "")
            await self._emit(min(base + 0.001, ceiling) if base < ceiling else base + 0.0001, note)

    async def __aenter__(self) -> ProgressReporter:
        self._beat = asyncio.create_task(self._heartbeat())
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._beat is not None:
            self._beat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beat
