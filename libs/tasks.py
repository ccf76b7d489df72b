"""Letting go of an asyncio task or future whose result is no longer wanted: cancelled and
waited for (`abandon`), or left to finish (`to_the_end`) where stopping it halfway is unsafe."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")

# The calls whose callers stopped waiting, held until they end (asyncio keeps only weak
# references to running tasks).
_LEFT_RUNNING: set[asyncio.Future[Any]] = set()


async def abandon(future: asyncio.Future[Any]) -> None:
    """Cancel `future` unless it is done, wait until it has stopped, and take any failure it
    had: the caller reports another (or none), and asyncio would otherwise log this one as
    never retrieved."""
    if not future.done():
        future.cancel()
    await asyncio.wait({future})
    if not future.cancelled():
        future.exception()


async def to_the_end(call: Awaitable[T]) -> T:
    """`call`'s result. A caller cancelled meanwhile stops waiting at once, but `call` goes
    on until it ends, and its result or failure is dropped (taken, so asyncio does not log
    it as never retrieved). For calls that must not stop halfway: every LanceDB call the
    index store awaits (`services.index.store.lance` says why)."""
    future = asyncio.ensure_future(call)
    if not future.done():
        _LEFT_RUNNING.add(future)
        future.add_done_callback(_ended)
    return await asyncio.shield(future)


def _ended(future: asyncio.Future[Any]) -> None:
    _LEFT_RUNNING.discard(future)
    if not future.cancelled():
        future.exception()
