"""Letting go of an asyncio task or future whose result is no longer wanted."""

from __future__ import annotations

import asyncio
from typing import Any


async def abandon(future: asyncio.Future[Any]) -> None:
    """Cancel `future` unless it is done, wait until it has stopped, and take any failure it
    had: the caller reports another (or none), and asyncio would otherwise log this one as
    never retrieved."""
    if not future.done():
        future.cancel()
    await asyncio.wait({future})
    if not future.cancelled():
        future.exception()
