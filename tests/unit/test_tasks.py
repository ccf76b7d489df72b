"""`libs.tasks.abandon`: a task still running is cancelled and waited for; one that failed
has its failure taken, so asyncio does not log it as never retrieved."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from libs.tasks import abandon


async def test_a_running_task_is_cancelled_and_has_stopped() -> None:
    stopped: list[str] = []

    async def waits() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.append("stopped")

    task = asyncio.ensure_future(waits())
    await asyncio.sleep(0)
    await abandon(task)
    assert task.cancelled() and stopped == ["stopped"]


async def test_a_failure_is_taken_and_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    async def fails() -> None:
        raise RuntimeError("the index refused")

    task = asyncio.ensure_future(fails())
    await asyncio.sleep(0)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        await abandon(task)
        del task
        gc.collect()
    assert "never retrieved" not in caplog.text


async def test_a_done_task_is_left_as_it_is() -> None:
    task = asyncio.ensure_future(asyncio.sleep(0, result="answer"))
    await task
    await abandon(task)
    assert task.result() == "answer"
