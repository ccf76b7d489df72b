"""Lines on the stdio transport that the SDK cannot take as one JSON-RPC message.

The SDK reads stdin a line at a time and passes each message it can parse to the server; a
line it cannot parse reaches the server as an exception, which is dropped without an answer,
so a client waiting for the response waits forever. Here, between the two:

- a line that is not JSON is answered with a parse error (`-32700`, id null);
- a JSON value that is not a JSON-RPC message is answered with an invalid-request error
  (`-32600`) that names what is wrong, with the message's id when it has one;
- a batch (a JSON array) is taken message by message under the revisions that have batches,
  as on HTTP (`services.gateway.batches`); the responses come a line each, with their ids.
  It is refused as on HTTP in a session whose `initialize` asked for 2025-06-18 or later,
  when empty, or with an `initialize` inside.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import INVALID_REQUEST, PARSE_ERROR
from pydantic import ValidationError

from services.gateway.batches import batch_refusal

Incoming = SessionMessage | Exception
Serve = Callable[[Any, Any], Awaitable[None]]


async def serve_lines(serve: Serve, read: Any, write: Any) -> None:
    """`serve(read, write)` with the lines of the module docstring answered or taken apart
    on the way from `read` (the SDK's stdio read stream) to the server."""
    send, receive = anyio.create_memory_object_stream[Incoming](0)
    revision: str | None = None

    async def pump() -> None:
        nonlocal revision
        async with send:
            async for item in read:
                if not isinstance(item, ValidationError):
                    revision = _revision_asked(item) or revision
                    await send.send(item)
                    continue
                taken, refused = taken_apart(item, revision)
                for message in taken:
                    await send.send(message)
                for error in refused:
                    await write.send(SessionMessage(error))

    async with receive, anyio.create_task_group() as tasks:
        tasks.start_soon(pump)
        await serve(receive, write)
        tasks.cancel_scope.cancel()


def _revision_asked(item: Incoming) -> str | None:
    """The revision an `initialize` request asks for, or None for any other message."""
    message = item.message if isinstance(item, SessionMessage) else None
    if isinstance(message, types.JSONRPCRequest) and message.method == "initialize":
        asked = (message.params or {}).get("protocolVersion")
        return asked if isinstance(asked, str) else None
    return None


def taken_apart(
    failure: ValidationError, revision: str | None
) -> tuple[list[SessionMessage], list[types.JSONRPCError]]:
    """What a line the SDK could not parse holds: the messages to pass on (a batch's) and
    the errors to answer."""
    errors = failure.errors()
    if any(error["type"] == "json_invalid" for error in errors):
        reason = errors[0]["msg"]
        return [], [
            _error(
                None, PARSE_ERROR, f"the line is not JSON ({reason}): send one JSON value a line"
            )
        ]
    whole = _whole(errors)
    if not isinstance(whole, list):
        return [], [_invalid(whole, failure)]
    refusal = batch_refusal(whole, revision, alone="on a line of its own")
    if refusal is not None:
        return [], [_error(None, INVALID_REQUEST, refusal)]
    taken: list[SessionMessage] = []
    refused: list[types.JSONRPCError] = []
    for value in whole:
        try:
            taken.append(SessionMessage(types.jsonrpc_message_adapter.validate_python(value)))
        except ValidationError as invalid:
            refused.append(_invalid(value, invalid))
    return taken, refused


def _whole(errors: list[Any]) -> Any:
    """The JSON value the line held, as pydantic's errors carry it: a union member's whole
    input, or the object a missing field was looked for in."""
    for error in errors:
        location = error["loc"]
        if len(location) == 1 or (len(location) == 2 and error["type"] == "missing"):
            return error["input"]
    return None


def _invalid(value: Any, failure: ValidationError) -> types.JSONRPCError:
    """The invalid-request error for `value`, with its id when it has a usable one."""
    if not isinstance(value, dict):
        found = type(value).__name__ if value is not None else "null"
        return _error(None, INVALID_REQUEST, f"a JSON-RPC message is a JSON object, not {found}")
    id_ = value.get("id")
    member = "JSONRPCRequest" if "id" in value else "JSONRPCNotification"
    problems = [
        f"{'.'.join(str(part) for part in error['loc'][1:]) or 'message'}: {error['msg']}"
        for error in failure.errors()
        if error["loc"] and error["loc"][0] == member
    ]
    if not problems:
        problems = [error["msg"] for error in failure.errors()[:1]]
    usable = isinstance(id_, str) or (isinstance(id_, int) and not isinstance(id_, bool))
    return _error(
        id_ if usable else None, INVALID_REQUEST, "invalid JSON-RPC message: " + "; ".join(problems)
    )


def _error(id_: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(
        jsonrpc="2.0", id=id_, error=types.ErrorData(code=code, message=message)
    )
