"""The transport of the hops between services (`libs.hops`) against real loopback servers
(uvicorn, and raw asyncio servers for what uvicorn never does): bodies arrive whole both
ways, streamed in chunks or not, large or small; connections are kept alive, expire, are
bounded, and are never reused after a cancelled, failed or closing exchange; failures are
httpx's exceptions."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from libs.clients import IndexClient
from libs.hops import HopTransport
from libs.http import POOL_LIMITS, RetryPolicy
from tests.servers import serve

TIMEOUTS = {"connect": 5.0, "read": 5.0, "write": 5.0, "pool": 5.0}


def _app() -> FastAPI:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request) -> Response:
        body = await request.body()
        return Response(
            body,
            headers={
                "x-peer": str(request.client.port if request.client else 0),
                "x-sha": hashlib.sha256(body).hexdigest(),
                "x-query": request.url.query,
            },
        )

    @app.get("/stream")
    async def stream() -> StreamingResponse:
        async def parts() -> AsyncIterator[bytes]:
            for i in range(5):
                yield f"part {i};".encode()
                await asyncio.sleep(0.01)

        return StreamingResponse(parts())

    @app.get("/slow")
    async def slow() -> Response:
        await asyncio.sleep(0.5)
        return Response(b"late")

    @app.get("/close")
    async def close() -> Response:
        return Response(b"bye", headers={"connection": "close"})

    return app


def _request(method: str, url: str, **kwargs: object) -> httpx.Request:
    timeouts = kwargs.pop("timeouts", TIMEOUTS)
    return httpx.Request(method, url, extensions={"timeout": timeouts}, **kwargs)  # type: ignore[arg-type]


@asynccontextmanager
async def hops(limits: httpx.Limits = POOL_LIMITS) -> AsyncIterator[HopTransport]:
    transport = HopTransport(limits)
    try:
        yield transport
    finally:
        await transport.aclose()


async def _send(transport: HopTransport, request: httpx.Request) -> httpx.Response:
    response = await transport.handle_async_request(request)
    await response.aread()
    return response


async def test_bodies_arrive_whole_both_ways_in_one_piece_or_streamed() -> None:
    big = bytes(range(256)) * 40_000  # 10 MB: the socket's buffer fills, the write waits
    sha = hashlib.sha256(big).hexdigest()

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(big), 1_000_000):
            yield big[start : start + 1_000_000]
            await asyncio.sleep(0)

    with serve(_app()) as url:
        async with hops() as transport:
            small = await _send(
                transport, _request("POST", f"{url}/echo?a=1&b=%C3%A9", content=b"hi")
            )
            assert (small.status_code, small.content) == (200, b"hi")
            assert small.headers["x-query"] == "a=1&b=%C3%A9"
            whole = await _send(transport, _request("POST", f"{url}/echo", content=big))
            assert whole.headers["x-sha"] == sha and whole.content == big
            streamed = await _send(transport, _request("POST", f"{url}/echo", content=pieces()))
            assert streamed.headers["x-sha"] == sha and streamed.content == big
            chunked = await _send(transport, _request("GET", f"{url}/stream"))
            assert chunked.content == b"part 0;part 1;part 2;part 3;part 4;"


async def test_one_connection_is_kept_alive_then_expires() -> None:
    limits = httpx.Limits(max_connections=8, max_keepalive_connections=2, keepalive_expiry=0.3)
    with serve(_app()) as url:
        async with hops(limits) as transport:

            async def peer() -> str:
                response = await _send(transport, _request("POST", f"{url}/echo", content=b"x"))
                return response.headers["x-peer"]

            first = {await peer() for _ in range(10)}
            assert len(first) == 1  # ten requests, one connection
            together = set(await asyncio.gather(*(peer() for _ in range(6))))
            assert len(together) == 6  # one connection each while in use...
            again = set(await asyncio.gather(*(peer() for _ in range(6))))
            assert len(again & together) == 2  # ...two of them kept idle, four new
            await asyncio.sleep(0.5)
            assert await peer() not in together | first | again  # idle past the expiry: a new one


async def test_a_cancelled_or_timed_out_exchange_never_hands_its_answer_to_the_next() -> None:
    with serve(_app()) as url:
        async with hops() as transport:
            call = asyncio.ensure_future(_send(transport, _request("GET", f"{url}/slow")))
            await asyncio.sleep(0.1)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            quick = await _send(transport, _request("POST", f"{url}/echo", content=b"mine"))
            assert quick.content == b"mine"  # not the slow answer arriving late
            hurried = {**TIMEOUTS, "read": 0.1}
            with pytest.raises(httpx.ReadTimeout):
                await _send(transport, _request("GET", f"{url}/slow", timeouts=hurried))
            await asyncio.sleep(0.6)  # the late answer comes on the closed connection
            again = await _send(transport, _request("POST", f"{url}/echo", content=b"again"))
            assert again.content == b"again"


async def test_an_answer_that_closes_its_connection_is_the_last_on_it() -> None:
    with serve(_app()) as url:
        async with hops() as transport:
            peers = set()
            for _ in range(3):
                closing = await _send(transport, _request("GET", f"{url}/close"))
                assert closing.content == b"bye"
                echoed = await _send(transport, _request("POST", f"{url}/echo", content=b"x"))
                peers.add(echoed.headers["x-peer"])
            assert len(peers) == 3  # a new connection after each close


@asynccontextmanager
async def raw_server(
    answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[str]:
    """A loopback server answering each connection with `answer` (then closing it)."""

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await answer(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (b"", httpx.RemoteProtocolError),  # closed before answering
        (b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf", httpx.RemoteProtocolError),
        (b"NOT HTTP AT ALL\r\n\r\n", httpx.RemoteProtocolError),
    ],
)
async def test_a_broken_answer_is_an_httpx_transport_error(
    reply: bytes, error: type[httpx.TransportError]
) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()

    async with raw_server(answer) as url, hops() as transport:
        with pytest.raises(error):
            await _send(transport, _request("GET", f"{url}/x"))


async def test_nothing_listening_is_a_connect_error_and_https_is_not_its_job() -> None:
    async with raw_server(lambda r, w: asyncio.sleep(0)) as url:
        pass  # closed again: connections are refused
    transport = HopTransport(POOL_LIMITS)
    with pytest.raises(httpx.ConnectError):
        await _send(transport, _request("GET", f"{url}/x"))
    with pytest.raises(httpx.UnsupportedProtocol):
        await _send(transport, _request("GET", "https://index.example/x"))
    client = IndexClient("https://index.example", policy=RetryPolicy(attempts=1))
    assert not isinstance(client._transport, HopTransport)  # httpx's, with TLS
    await client.aclose()


async def test_the_pool_waits_for_a_free_connection_within_its_timeout() -> None:
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=4.0)
    with serve(_app()) as url:
        async with hops(limits) as transport:
            slow = asyncio.ensure_future(_send(transport, _request("GET", f"{url}/slow")))
            await asyncio.sleep(0.05)
            hurried = {**TIMEOUTS, "pool": 0.1}
            with pytest.raises(httpx.PoolTimeout):
                await _send(transport, _request("GET", f"{url}/slow", timeouts=hurried))
            patient = await _send(transport, _request("POST", f"{url}/echo", content=b"after"))
            assert patient.content == b"after" and (await slow).content == b"late"


async def test_the_answer_to_a_head_request_has_no_body() -> None:
    app = _app()

    @app.head("/sized")
    async def sized() -> Response:
        return Response(headers={"content-length": "1000"})

    with serve(app) as url:
        async with hops() as transport:
            head = await _send(transport, _request("HEAD", f"{url}/sized"))
            assert (head.status_code, head.content) == (200, b"")
            after = await _send(transport, _request("POST", f"{url}/echo", content=b"next"))
            assert after.content == b"next"


async def test_bytes_after_the_answer_end_the_connection_not_the_next_answer() -> None:
    """A server that sends more than one answer (or anything) after the one asked for: the
    answer is what it was, and that connection is not used again."""
    count = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        count += 1
        await reader.readuntil(b"\r\n\r\n")
        extra = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nstale" if count == 1 else b""
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok" + extra)
        await writer.drain()
        await asyncio.sleep(0.2)

    async with raw_server(answer) as url, hops() as transport:
        first = await _send(transport, _request("GET", f"{url}/x"))
        assert (first.content, first.headers["content-length"]) == (b"ok", "2")
        second = await _send(transport, _request("GET", f"{url}/x"))
        assert second.content == b"ok" and count == 2  # a new connection, its own answer


async def test_without_an_expiry_an_idle_connection_is_kept() -> None:
    limits = httpx.Limits(max_connections=4, max_keepalive_connections=1, keepalive_expiry=None)
    with serve(_app()) as url:
        async with hops(limits) as transport:
            peers = set()
            for _ in range(3):
                echoed = await _send(transport, _request("POST", f"{url}/echo", content=b"x"))
                peers.add(echoed.headers["x-peer"])
                await asyncio.sleep(0.05)
            assert len(peers) == 1
