"""The resume buffer (services.gateway.resumption) on its own: what a replay gives, the byte
bound, a session's events going with it, request IDs used again, a cancelled reply."""

from __future__ import annotations

import gc

import anyio
from mcp.server.streamable_http import GET_STREAM_KEY, EventMessage
from mcp_types import (
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCResponse,
)

from services.gateway.resumption import ResumeBuffer, SessionEvents
from services.gateway.transports import REQUEST_CANCELLED


def note(text: str) -> JSONRPCNotification:
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"t": text})


def answer(request: int, text: str = "done") -> JSONRPCResponse:
    return JSONRPCResponse(jsonrpc="2.0", id=request, result={"t": text})


async def replayed(events: SessionEvents, after: str) -> tuple[list[str], str | None]:
    """What a replay after `after` sends (each message's text), and the stream it names."""
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    with anyio.fail_after(5):
        stream = await events.replay_events_after(after, send)
    texts = [
        str(getattr(e.message, "params", None) or getattr(e.message, "result", None)) for e in sent
    ]
    return texts, stream


async def replayed_while(
    events: SessionEvents, after: str, *messages: tuple[str, JSONRPCMessage]
) -> tuple[list[str], str | None]:
    """What a replay after `after` sends when it has waited (it has not ended yet) and then
    `messages` come, each (stream, message)."""
    async with anyio.create_task_group() as tg:
        result: list[tuple[list[str], str | None]] = []

        async def resume() -> None:
            result.append(await replayed(events, after))

        tg.start_soon(resume)
        await anyio.sleep(0.05)
        assert result == []  # still waiting
        for stream, message in messages:
            await events.store_event(stream, message)
    [outcome] = result
    return outcome


async def test_a_replay_sends_what_came_after_and_ends_with_the_answer() -> None:
    buffer = ResumeBuffer(1 << 20)
    events, other = buffer.session(), buffer.session()
    priming = await events.store_event("7", None)
    await events.store_event("7", note("one"))
    await events.store_event("8", note("another request"))
    await events.store_event("7", answer(7))
    texts, stream = await replayed(events, priming)
    assert texts == ["{'t': 'one'}", "{'t': 'done'}"] and stream is None
    assert await replayed(events, "not a number") == ([], None)
    assert await replayed(events, "999") == ([], None)
    assert await replayed(other, priming) == ([], None)  # another session's event


async def test_a_replay_of_a_running_request_waits_for_what_comes() -> None:
    events = ResumeBuffer(1 << 20).session()
    priming = await events.store_event("3", None)
    replay = await replayed_while(events, priming, ("3", note("halfway")), ("3", answer(3)))
    assert replay == (["{'t': 'halfway'}", "{'t': 'done'}"], None)


async def test_the_standalone_stream_is_handed_back_to_the_live_stream() -> None:
    events = ResumeBuffer(1 << 20).session()
    first = await events.store_event(GET_STREAM_KEY, note("a"))
    await events.store_event(GET_STREAM_KEY, note("b"))
    assert await replayed(events, first) == (["{'t': 'b'}"], GET_STREAM_KEY)


async def test_the_standalone_stream_resumes_after_an_event_no_longer_kept() -> None:
    buffer = ResumeBuffer(1_000)
    events = buffer.session()
    first = await events.store_event(GET_STREAM_KEY, note("a" * 300))
    for text in ("b" * 300, "c"):
        await events.store_event(GET_STREAM_KEY, note(text))
    assert not buffer.nothing_more(first)  # "a" is gone, the stream is not: "c" comes, then live
    texts, stream = await replayed(events, first)
    assert texts[-1] == "{'t': 'c'}" and stream == GET_STREAM_KEY


async def test_the_oldest_events_go_past_the_bound_and_a_replay_skips_what_was_dropped() -> None:
    buffer = ResumeBuffer(2_000)
    events = buffer.session()
    priming = await events.store_event("1", None)
    for n in range(20):
        await events.store_event("1", note(f"progress {n:02d} " + "x" * 100))
    assert buffer.bytes <= 2_000
    await events.store_event("1", note("late"))
    await events.store_event("1", note("y" * 5_000))  # larger than the whole buffer: not kept
    await events.store_event("1", note("later"))
    # The client's last event is gone, not its stream, and the request runs on: what is kept
    # comes, then the answer when it is given.
    assert not buffer.nothing_more(priming)
    texts, stream = await replayed_while(events, priming, ("1", answer(1)))
    assert texts[-3:] == ["{'t': 'late'}", "{'t': 'later'}", "{'t': 'done'}"] and stream is None
    progress = [f"{{'t': 'progress {n:02d} {'x' * 100}'}}" for n in range(20)]
    kept = len(texts) - 3
    assert 0 < kept < 20 and texts[:kept] == progress[-kept:]


async def test_an_answer_no_longer_kept_ends_the_replay_with_an_error_that_says_so() -> None:
    buffer = ResumeBuffer(2_000)
    events = buffer.session()
    last = await events.store_event("4", note("late"))
    await events.store_event("4", answer(4, "y" * 5_000))  # larger than the whole buffer
    sent: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        sent.append(event)

    assert not buffer.nothing_more(last)  # the replay has the error to send
    with anyio.fail_after(5):
        assert await events.replay_events_after(last, send) is None
    [lost] = [event.message for event in sent]
    assert isinstance(lost, JSONRPCError) and lost.id == 4
    assert lost.error.data == {"error_code": "answer_lost"}
    assert "MCP_RESUME_BUFFER_BYTES" in lost.error.message and "again" in lost.error.message


async def test_nothing_more_after_an_answer_or_an_event_not_kept() -> None:
    buffer = ResumeBuffer(1 << 20)
    events = buffer.session()
    priming = await events.store_event("2", None)
    assert not buffer.nothing_more(priming)  # running
    given = await events.store_event("2", answer(2))
    assert not buffer.nothing_more(priming)  # the answer is still to be replayed
    assert buffer.nothing_more(given)  # the client has it
    assert buffer.nothing_more("12345") and buffer.nothing_more("not a number")
    assert buffer.nothing_more("999-1")  # no such stream
    assert await replayed(events, given) == ([], None)


async def test_a_sessions_events_go_with_it() -> None:
    buffer = ResumeBuffer(1 << 20)
    events = buffer.session()
    await events.store_event("1", note("kept while the session lives"))
    assert buffer.bytes > 0
    del events
    gc.collect()
    assert buffer.bytes == 0


async def test_a_request_id_used_again_is_a_new_stream() -> None:
    events = ResumeBuffer(1 << 20).session()
    old = await events.store_event("5", None)
    await events.store_event("5", answer(5, "old"))
    new = await events.store_event("5", None)
    await events.store_event("5", answer(5, "new"))
    assert await replayed(events, old) == (["{'t': 'old'}"], None)
    assert await replayed(events, new) == (["{'t': 'new'}"], None)


async def test_a_cancelled_reply_is_never_replayed_and_its_stream_is_over() -> None:
    buffer = ResumeBuffer(1 << 20)
    events = buffer.session()
    priming = await events.store_event("9", None)
    cancelled = ErrorData(code=REQUEST_CANCELLED, message="Request cancelled")
    reply = JSONRPCError(jsonrpc="2.0", id=9, error=cancelled)
    # The waiting replay ends, with nothing sent.
    assert await replayed_while(events, priming, ("9", reply)) == ([], None)
    assert buffer.nothing_more(priming)
    assert await replayed(events, priming) == ([], None)
