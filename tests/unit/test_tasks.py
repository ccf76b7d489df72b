"""`libs.tasks.abandon`: a task still running is cancelled and waited for; one that failed
has its failure taken, so asyncio does not log it as never retrieved. `libs.tasks.to_the_end`:
a call whose caller is cancelled runs to its end, its failure taken the same way."""

from __future__ import annotations

import asyncio
import gc
import logging

import anyio
import pytest

from libs.tasks import abandon, to_the_end


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


async def test_a_call_whose_caller_is_cancelled_runs_to_its_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release, ended = asyncio.Event(), asyncio.Event()

    async def call(fails: bool) -> str:
        await release.wait()
        ended.set()
        if fails:
            raise RuntimeError("the call's own failure")
        return "done"

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        for fails in (False, True):
            release.clear()
            ended.clear()
            caller = asyncio.ensure_future(to_the_end(call(fails)))
            await asyncio.sleep(0)
            caller.cancel()
            with pytest.raises(asyncio.CancelledError):
                await caller
            assert not ended.is_set(), "the call stopped with its caller"
            release.set()
            with anyio.fail_after(5):
                await ended.wait()
            await asyncio.sleep(0)
        gc.collect()
    # The dropped failure is taken, not logged as never retrieved.
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


async def test_a_call_that_is_not_cancelled_gives_its_result_or_failure() -> None:
    async def answer() -> int:
        return 42

    async def failure() -> int:
        raise ValueError("bad filter")

    assert await to_the_end(answer()) == 42
    with pytest.raises(ValueError, match="bad filter"):
        await to_the_end(failure())
