"""The lean transport between services, against scripted HTTP servers on loopback: kept-alive
connections, connections the server closed, every way of framing an answer, and every
failure surfacing as the httpx error the retry policy understands."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from libs.clients import IndexClient
from libs.errors import UpstreamError
from libs.http import RetryPolicy, make_http_client
from libs.transport import LeanTransport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A server on 127.0.0.1 running `handler` per connection; yields its URL and a list
    that grows by one per accepted connection."""
    accepted: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(len(accepted))
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", accepted
    finally:
        server.close()
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, dict[bytes, bytes], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.rstrip(b"\r\n").split(b"\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get(b"content-length", b"0")))
    return lines[0], headers, body


def answer(body: bytes, *extra: bytes, status: bytes = b"200 OK") -> bytes:
    head = [b"HTTP/1.1 " + status, b"content-length: " + str(len(body)).encode(), *extra]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


async def echo_forever(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers every request on the connection with what it received, as JSON."""
    while True:
        line, headers, body = await read_request(reader)
        sender = headers.get(b"x-id", b"").decode()
        reply = {"line": line.decode(), "body": body.decode(), "id": sender}
        writer.write(answer(json.dumps(reply).encode(), b"content-type: application/json"))
        await writer.drain()


def client(url: str, **timeouts: float) -> httpx.AsyncClient:
    timeout = httpx.Timeout(5.0, **timeouts)
    return httpx.AsyncClient(base_url=url, transport=LeanTransport(httpx.Limits()), timeout=timeout)


async def test_requests_share_one_kept_alive_connection() -> None:
    async with serving(echo_forever) as (url, accepted), client(url) as http:
        for i in range(20):
            response = await http.post("/echo", params={"n": i}, json={"i": i})
            assert response.status_code == 200
            assert response.json()["line"] == f"POST /echo?n={i} HTTP/1.1"
            assert json.loads(response.json()["body"]) == {"i": i}
    assert len(accepted) == 1


async def test_concurrent_requests_each_get_their_own_answer() -> None:
    async with serving(echo_forever) as (url, accepted), client(url) as http:
        replies = await asyncio.gather(
            *(http.get("/", headers={"x-id": str(i)}) for i in range(30))
        )
    assert [r.json()["id"] for r in replies] == [str(i) for i in range(30)]
    assert 1 <= len(accepted) <= 30


async def test_a_connection_the_server_closed_while_idle_is_replaced() -> None:
    async def one_answer_then_close(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await read_request(reader)
        writer.write(answer(b"{}"))  # says nothing about closing, then closes
        await writer.drain()

    async with serving(one_answer_then_close) as (url, accepted), client(url) as http:
        for i in range(10):
            assert (await http.get("/")).json() == {}
            # Seen closed while idle, or found closed only when the next request is sent:
            # either way the request goes out again on a new connection.
            await asyncio.sleep(0.01 if i % 2 else 0)
    assert len(accepted) == 10


async def test_a_request_met_by_a_closing_kept_alive_connection_goes_out_again() -> None:
    # The server's idle timeout closes a kept-alive connection just as a request reaches it.
    async def one_answer_then_drop(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await read_request(reader)
        writer.write(answer(b"{}"))
        await writer.drain()
        await read_request(reader)  # the next one is dropped unanswered

    async with serving(one_answer_then_drop) as (url, accepted), client(url) as http:
        for _ in range(5):
            assert (await http.get("/")).json() == {}
    assert len(accepted) == 5


async def test_chunked_close_delimited_and_large_answers() -> None:
    big = b"x" * (3 * 1024 * 1024)

    async def framings(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, _, body = await read_request(reader)
        if line.startswith(b"GET /chunked"):
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
            for part in (b"hello ", b"chunked ", b"world"):
                writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                await writer.drain()
            writer.write(b"0\r\n\r\n")
        elif line.startswith(b"GET /eof"):
            writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end")
            await writer.drain()
            return
        else:
            writer.write(answer(body[::-1]))
        await writer.drain()
        await framings(reader, writer)

    async with serving(framings) as (url, _), client(url) as http:
        assert (await http.get("/chunked")).text == "hello chunked world"
        assert (await http.get("/eof")).text == "until the end"
        echoed = await http.post("/big", content=big + b"y")
        assert echoed.content == b"y" + big


async def test_failures_are_the_httpx_errors_retries_know() -> None:
    async def misbehave(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, _, _ = await read_request(reader)
        if line.startswith(b"GET /slow"):
            await asyncio.sleep(2)
        elif line.startswith(b"GET /garbage"):
            writer.write(b"this is not http\r\n\r\n")
        elif line.startswith(b"GET /cut"):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly part")
        await writer.drain()

    async with (
        serving(misbehave) as (url, _),
        client(url, read=0.2, connect=1.0, write=1.0, pool=1.0) as http,
    ):
        with pytest.raises(httpx.ReadTimeout):
            await http.get("/slow")
        with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
            await http.get("/garbage")
        with pytest.raises(httpx.RemoteProtocolError, match="before its answer"):
            await http.get("/cut")
    # Nothing listens there any more.
    async with client(url) as http:
        with pytest.raises(httpx.ConnectError, match="cannot connect"):
            await http.get("/")


async def test_the_service_clients_use_it_and_retry_through_it() -> None:
    answers = [answer(b"", status=b"503 Service Unavailable"), answer(b'{"libraries": []}')]

    async def busy_then_fine(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while answers:
            await read_request(reader)
            writer.write(answers.pop(0))
            await writer.drain()

    async with serving(busy_then_fine) as (url, accepted):
        fast = RetryPolicy(attempts=3, max_seconds=5, initial_wait=0.001, max_wait=0.002)
        index = IndexClient(url, policy=fast)
        assert isinstance(index._http._transport, LeanTransport)
        assert (await index.list_libraries()).libraries == []
        await index.aclose()
    assert len(accepted) == 1
    # https keeps httpx's own transport (TLS is not this transport's business).
    secure = make_http_client("https://index.internal:8443", 5.0)
    assert not isinstance(secure._transport, LeanTransport)
    await secure.aclose()


async def test_retries_stop_at_the_time_limit() -> None:
    async with serving(echo_forever) as (url, _):
        pass  # closed: every attempt is refused
    patient = RetryPolicy(attempts=1000, max_seconds=0.3, initial_wait=0.01, max_wait=0.02)
    started = asyncio.get_running_loop().time()
    with pytest.raises(UpstreamError, match="did not answer"):
        await IndexClient(url, policy=patient).list_libraries()
    assert asyncio.get_running_loop().time() - started < 2.0
