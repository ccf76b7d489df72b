"""JSON-RPC batches on the MCP transports over HTTP, for the protocol revisions that have them.

MCP 2025-03-26 says a server must receive JSON-RPC batches: a POST whose body is a JSON array
of messages. 2025-06-18 took them out, and the SDK refuses every array as an invalid message.
A client that negotiated an older revision may still send one, so:

- Streamable HTTP (`/mcp`): each message of the batch is posted to the SDK's transport on
  its own, at most `SIDE_BY_SIDE` at once, as the same request otherwise; the responses to
  the batch's requests come back together as one event stream (`StreamableGuards`, outside
  this, makes that a JSON array for a client that accepts only JSON). A batch of
  notifications and responses alone is answered 202. A batch the session cannot take (it is
  gone: 404) gets that answer.
- SSE (`/messages/`): each message is posted to the session on its own, the same way; the
  responses come on the session's stream, as every response does there. The POST is answered
  202, or as the first message the SDK refused was (an unknown session: 404).
- Refused with 400 and a JSON-RPC error that says why: a batch on `/mcp` under a revision
  without batches (an `MCP-Protocol-Version` header of 2025-06-18 or later), an empty batch,
  one of more than `MAX_BATCH` messages, and an `initialize` inside a batch (MCP forbids it).

Every other request goes through untouched, its body replayed as it was read.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcp_types.jsonrpc import INVALID_REQUEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.transports import header, is_event_stream, jsonrpc_error, replies_in

# The first revision without batches.
WITHOUT_BATCHES = "2025-06-18"
# The most messages one batch may hold, and how many of them run side by side.
MAX_BATCH = 100
SIDE_BY_SIDE = 8


class JsonRpcBatches:
    """ASGI middleware on the two MCP POST paths; see the module docstring."""

    def __init__(self, app: ASGIApp, streamable: str = "/mcp", messages: str = "/messages/"):
        self.app = app
        self.streamable = streamable
        self.messages = messages

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        on_streamable = path.startswith(self.streamable)
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or not (on_streamable or path.startswith(self.messages))
        ):
            await self.app(scope, receive, send)
            return
        body, receive = await _read(receive)
        batch = _batch_in(body)
        if batch is None:  # one message, or not JSON (the SDK says so): as it came
            await self.app(scope, receive, send)
            return
        refusal = batch_refusal(
            batch, header(scope, b"mcp-protocol-version") if on_streamable else None
        )
        if refusal is not None:
            await jsonrpc_error(400, INVALID_REQUEST, refusal)(scope, receive, send)
            return
        answers = await _each_alone(self.app, scope, batch)
        if on_streamable:
            await _answer(answers, send)
        else:  # the responses are on the session's stream; a refusal is the first one
            await next((a for a in answers if a.status >= 400), answers[0]).resend(send)


def _batch_in(body: bytes) -> list[Any] | None:
    """The messages of a body that is a JSON array, else None."""
    if not body.lstrip().startswith(b"["):
        return None
    try:
        batch = json.loads(body)
    except ValueError:
        return None
    return batch if isinstance(batch, list) else None


def batch_refusal(
    batch: list[Any], revision: str | None, alone: str = "in a POST of its own"
) -> str | None:
    """Why `batch` cannot be taken in a session at `revision` (None: not known, or before
    the header carried it), or None; `alone` says how a message is sent on its own."""
    if revision is not None and revision >= WITHOUT_BATCHES:
        return (
            f"JSON-RPC batches are not part of MCP {revision} (they were removed in "
            f"{WITHOUT_BATCHES}): send each message {alone}"
        )
    if not batch:
        return "an empty JSON-RPC batch: send at least one message"
    if len(batch) > MAX_BATCH:
        return (
            f"a JSON-RPC batch of {len(batch)} messages; at most {MAX_BATCH} are taken at once: "
            "split it"
        )
    if any(isinstance(m, dict) and m.get("method") == "initialize" for m in batch):
        return f"initialize must not be part of a JSON-RPC batch: send it {alone}"
    return None


async def _read(receive: Receive) -> tuple[bytes, Receive]:
    """The request's whole body, and a `receive` that gives it again, then the real one's."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client left while sending
            return b"".join(chunks), _replay(b"".join(chunks), receive, message)
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            body = b"".join(chunks)
            return body, _replay(body, receive)


def _replay(body: bytes, then: Receive, ending: Message | None = None) -> Receive:
    replayed = False

    async def receive() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return ending if ending is not None else await then()

    return receive


class _Answer:
    """One message's response from the app, held whole."""

    def __init__(self) -> None:
        self.status = 500
        self.headers: list[tuple[bytes, bytes]] = []
        self.body = bytearray()

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = list(message.get("headers") or [])
        elif message["type"] == "http.response.body":
            self.body.extend(message.get("body", b""))

    async def resend(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        await send({"type": "http.response.body", "body": bytes(self.body)})

    def replies(self) -> list[bytes]:
        """The JSON-RPC messages it carries: its events' data, or its JSON body."""
        if is_event_stream({"headers": self.headers}):
            return replies_in(bytes(self.body))
        content_type = dict(self.headers).get(b"content-type", b"")
        if bytes(content_type).startswith(b"application/json") and self.body.strip():
            return [bytes(self.body)]
        return []


async def _each_alone(app: ASGIApp, scope: Scope, batch: list[Any]) -> list[_Answer]:
    """Each message of `batch` posted to `app` on its own, `SIDE_BY_SIDE` at a time; their
    answers, in the batch's order."""
    done = asyncio.Event()
    turns = asyncio.Semaphore(SIDE_BY_SIDE)

    async def one(message: Any) -> _Answer:
        answer = _Answer()
        body = json.dumps(message, separators=(",", ":")).encode()
        headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
        alone = {**scope, "headers": [*headers, (b"content-length", b"%d" % len(body))]}

        async def until_done() -> Message:  # the app may wait for a disconnect
            await done.wait()
            return {"type": "http.disconnect"}

        async with turns:
            await app(alone, _replay(body, until_done), answer.send)
        return answer

    try:
        return list(await asyncio.gather(*(one(message) for message in batch)))
    finally:
        done.set()


async def _answer(answers: list[_Answer], send: Send) -> None:
    """The batch's answer on `/mcp`: a session-level refusal as it is, else every response
    as one event stream (202 when there is none)."""
    gone = next((a for a in answers if a.status == 404), None)
    if gone is not None:
        await gone.resend(send)
        return
    session = [(k, v) for a in answers for k, v in a.headers if k.lower() == b"mcp-session-id"]
    replies = [reply for answer in answers for reply in answer.replies()]
    if not replies:
        await send({"type": "http.response.start", "status": 202, "headers": session[:1]})
        await send({"type": "http.response.body", "body": b""})
        return
    # A JSON text holds a line break only between tokens, where a space does as well.
    lines = (reply.replace(b"\r", b" ").replace(b"\n", b" ") for reply in replies)
    stream = b"".join(b"event: message\r\ndata: " + line + b"\r\n\r\n" for line in lines)
    headers = [
        *session[:1],
        (b"content-type", b"text/event-stream"),
        (b"cache-control", b"no-cache, no-transform"),
        (b"content-length", b"%d" % len(stream)),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": stream})
