"""The sync client's HTTP: one retry policy (connection errors, 429 and 5xx with backoff;
never another 4xx), the gateway's error shape read back, and byte counting, against a real
`http.server` on loopback that answers from a script."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mcpvectordb_sync.transport import Gateway, GatewayError, RetryPolicy, SyncError
from tests.servers import free_port

FAST = RetryPolicy(attempts=4, total_s=10, first_s=0.01, max_s=0.02)


class Script:
    """Answers (status, body, headers) in order; the last one repeats. Records requests."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, dict[str, object], dict[str, str]]] = []
        self.seen: list[tuple[str, str, bytes]] = []


@pytest.fixture
def script() -> Iterator[tuple[Script, str]]:
    state = Script()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            state.seen.append((self.command, self.path, self.rfile.read(length)))
            index = min(len(state.seen) - 1, len(state.answers) - 1)
            status, body, headers = state.answers[index]
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


ERROR = {"status": "error", "error": "store busy", "error_code": "service_unavailable"}


def test_5xx_and_429_are_retried_until_an_answer(script: tuple[Script, str]) -> None:
    state, url = script
    state.answers = [(503, ERROR, {}), (429, ERROR, {"Retry-After": "0"}), (200, {"ok": 1}, {})]
    gateway = Gateway(url, "tok", policy=FAST)
    assert gateway.request("GET", "/sources", {"library": "a b"}) == {"ok": 1}
    assert len(state.seen) == 3 and gateway.retries == 2
    assert state.seen[0][1] == "/sources?library=a+b"
    assert gateway.bytes_sent > 0


def test_a_4xx_is_never_retried_and_keeps_its_code(script: tuple[Script, str]) -> None:
    state, url = script
    refusal = {"status": "error", "error": "cannot convert", "error_code": "unsupported_format"}
    state.answers = [(422, refusal, {})]
    with pytest.raises(GatewayError) as caught:
        Gateway(url, policy=FAST).upload(b"data", "a.bin", "x/a.bin", "lib")
    assert (caught.value.status, caught.value.error_code) == (422, "unsupported_format")
    assert caught.value.message == "cannot convert"
    assert len(state.seen) == 1
    body = state.seen[0][2]
    assert b'name="source"' in body and b"x/a.bin" in body and b'filename="a.bin"' in body


def test_retries_end_with_the_last_error(script: tuple[Script, str]) -> None:
    state, url = script
    state.answers = [(500, ERROR, {})]
    with pytest.raises(GatewayError, match="store busy"):
        Gateway(url, policy=FAST).request("GET", "/sources")
    assert len(state.seen) == FAST.attempts


def test_an_unreachable_gateway_is_a_sync_error() -> None:
    gateway = Gateway(f"http://127.0.0.1:{free_port()}", policy=FAST)
    with pytest.raises(SyncError, match="cannot reach the gateway"):
        gateway.request("GET", "/sources")
    assert gateway.retries == FAST.attempts - 1


def test_a_non_gateway_answer_is_named(script: tuple[Script, str]) -> None:
    state, url = script
    state.answers = [(401, {"detail": "nope"}, {})]
    with pytest.raises(GatewayError, match="--token"):
        Gateway(url, policy=FAST).request("GET", "/sources")
    with pytest.raises(SyncError, match="not an http"):
        Gateway("ftp://example.org")
