"""`async with` for the service cores: enter starts the core, exit closes it."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self


class AsyncLifecycle:
    """Mixin for classes with `async start()` and `async aclose()`."""

    async def start(self) -> Any:
        return None

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
