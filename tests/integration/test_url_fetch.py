"""`ingest_url`'s fetcher against real HTTP servers on loopback: the connection goes to the
address that was checked (DNS rebinding), redirects are checked again, the content type is
refused before the body is read, and the whole fetch has one time limit and a size cap."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager, suppress

import httpx
import pytest

from libs.errors import FetchError, InvalidInputError, PathNotAllowedError, TooLargeError
from services.gateway.fetch import UrlPolicy, fetch_url

Handler = Callable[[http.server.BaseHTTPRequestHandler], None]


@contextmanager
def http_server(handle: Handler) -> Iterator[tuple[int, list[dict[str, str]]]]:
    """A threaded HTTP server on 127.0.0.1 answering every GET with `handle`; yields its
    port and the headers of every request it received."""
    seen: list[dict[str, str]] = []

    class _Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            with suppress(BrokenPipeError, ConnectionResetError):
                handle(self)

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


def _send(
    handler: http.server.BaseHTTPRequestHandler, body: bytes, content_type: str = "text/plain"
) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    # Built like the gateway's fetcher.
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(5.0), limits=httpx.Limits(max_keepalive_connections=0)
    ) as http_client:
        yield http_client


def _resolver(table: dict[str, list[str]]) -> Callable[[str, int], object]:
    async def resolve(host: str, port: int) -> list[str]:
        return table[host]

    return resolve


async def fetch(
    client: httpx.AsyncClient, url: str, policy: UrlPolicy, *, timeout_s: float = 10.0
) -> bytes:
    fetched = await fetch_url(
        client, url, policy, max_bytes=10_000, max_redirects=3, timeout_s=timeout_s
    )
    return fetched.data


async def test_the_connection_goes_to_the_checked_address_not_a_second_dns_answer(
    client: httpx.AsyncClient,
) -> None:
    """The policy's resolver says `localhost` is a public address; the operating system says
    127.0.0.1. A fetcher that resolved again would reach the local server; the pinned one
    connects to the public address (refused here by the tests' loopback guard)."""
    with http_server(lambda h: _send(h, b"internal secret")) as (port, seen):
        policy = UrlPolicy([], resolver=_resolver({"localhost": ["93.184.215.14"]}))  # type: ignore[arg-type]
        with pytest.raises(FetchError, match="could not fetch"):
            await fetch(client, f"http://localhost:{port}/secret.txt", policy)
        assert seen == []


async def test_a_pinned_fetch_keeps_the_host_name_in_the_host_header(
    client: httpx.AsyncClient,
) -> None:
    """`docs.example` exists only in the policy's resolver, so reaching the server at all
    shows the checked address was used; the server still sees the URL's host name."""
    with http_server(lambda h: _send(h, b"hello from docs")) as (port, seen):
        policy = UrlPolicy(
            ["docs.example"],
            resolver=_resolver({"docs.example": ["127.0.0.1"]}),  # type: ignore[arg-type]
        )
        data = await fetch(client, f"http://docs.example:{port}/guide.txt", policy)
        assert data == b"hello from docs"
        assert seen[0]["host"] == f"docs.example:{port}"


async def test_a_redirect_to_a_non_public_address_is_refused(client: httpx.AsyncClient) -> None:
    def redirect(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(302)
        h.send_header("Location", "http://127.0.0.2:9/latest/meta-data/")
        h.send_header("Content-Length", "0")
        h.end_headers()

    with http_server(redirect) as (port, seen):
        with pytest.raises(PathNotAllowedError, match=r"127\.0\.0\.2"):
            await fetch(client, f"http://127.0.0.1:{port}/go", UrlPolicy([f"127.0.0.1:{port}"]))
        assert len(seen) == 1


def _drip(content_type: str) -> Handler:
    def handle(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", content_type)
        h.end_headers()
        h.wfile.flush()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            h.wfile.write(b"x")
            h.wfile.flush()
            time.sleep(0.2)

    return handle


async def test_a_slow_drip_is_stopped_by_the_total_time_limit(client: httpx.AsyncClient) -> None:
    """Each byte arrives well within the per-read timeout; only the total limit stops it."""
    with http_server(_drip("text/plain")) as (port, _):
        started = time.monotonic()
        with pytest.raises(FetchError, match="FETCH_TIMEOUT_S"):
            await fetch(
                client,
                f"http://127.0.0.1:{port}/slow.txt",
                UrlPolicy(["127.0.0.1"]),
                timeout_s=1.0,
            )
        assert time.monotonic() - started < 5


async def test_an_unconvertible_type_is_refused_before_the_body(
    client: httpx.AsyncClient,
) -> None:
    with http_server(_drip("application/octet-stream")) as (port, _):
        started = time.monotonic()
        with pytest.raises(FetchError, match="content type 'application/octet-stream'"):
            await fetch(
                client, f"http://127.0.0.1:{port}/blob", UrlPolicy(["127.0.0.1"]), timeout_s=20
            )
        assert time.monotonic() - started < 5


async def test_a_body_without_length_is_capped(client: httpx.AsyncClient) -> None:
    def endless(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.end_headers()
        for _ in range(100):
            h.wfile.write(b"y" * 1000)

    with (
        http_server(endless) as (port, _),
        pytest.raises(TooLargeError, match="10000-byte fetch limit"),
    ):
        await fetch(client, f"http://127.0.0.1:{port}/big.txt", UrlPolicy(["127.0.0.1"]))


@pytest.mark.parametrize(
    "url", ["http://x.org:99999/", "http://[zz/", "http:///nohost", "javascript:alert(1)"]
)
async def test_malformed_urls_are_invalid_input(client: httpx.AsyncClient, url: str) -> None:
    with pytest.raises(InvalidInputError):
        await fetch(client, url, UrlPolicy([]))


CYRILLIC = "<html><body><p>Привет, мир! Это проверка кодировки текста.</p></body></html>"


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        # The server names the charset; the page does not: handed on as UTF-8.
        (CYRILLIC.encode("koi8_r"), "text/html; charset=KOI8-R", CYRILLIC.encode()),
        (CYRILLIC.encode("cp1251"), 'text/html;charset="windows-1251"', CYRILLIC.encode()),
        (
            "Crème “brûlée”".encode("cp1252"),
            "text/plain; charset=ISO-8859-1",
            "Crème “brûlée”".encode(),
        ),
        # Already UTF-8 although the server says otherwise (a common misconfiguration).
        ("Crème".encode(), "text/plain; charset=iso-8859-1", "Crème".encode()),
        # No charset, an unknown one, a byte order mark, a binary type: as they came.
        ("Crème".encode("cp1252"), "text/plain", "Crème".encode("cp1252")),
        ("Crème".encode("cp1252"), "text/plain; charset=x-klingon", "Crème".encode("cp1252")),
        (b"\xef\xbb\xbfCr\xc3\xa8me", "text/plain; charset=cp1251", b"\xef\xbb\xbfCr\xc3\xa8me"),
        (b"%PDF-1.4 \xe8", "application/pdf; charset=cp1251", b"%PDF-1.4 \xe8"),
    ],
)
async def test_a_text_body_is_handed_on_in_utf8_by_the_charset_its_server_names(
    client: httpx.AsyncClient, body: bytes, content_type: str, expected: bytes
) -> None:
    with http_server(lambda h: _send(h, body, content_type)) as (port, _):
        policy = UrlPolicy([f"127.0.0.1:{port}"])
        assert await fetch(client, f"http://127.0.0.1:{port}/page", policy) == expected


@pytest.mark.parametrize(
    ("content_type", "name"),
    [
        ("application/vnd.oasis.opendocument.text", "download.odt"),
        ("application/vnd.oasis.opendocument.spreadsheet", "download.ods"),
        ("application/vnd.oasis.opendocument.presentation", "download.odp"),
        ("text/rtf; charset=windows-1252", "download.rtf"),
        ("application/rtf", "download.rtf"),
        ("application/msword", "download.doc"),
        ("application/vnd.ms-powerpoint", "download.ppt"),
        ("application/vnd.oasis.opendocument.text-flat-xml", "download.fodt"),
        ("message/rfc822", "download.eml"),
    ],
)
async def test_a_page_without_extension_is_named_by_its_content_type(
    client: httpx.AsyncClient, content_type: str, name: str
) -> None:
    """The converter picks its reader by extension; a download URL without one gets it from
    the Content-Type. RTF is passed on as it came: its own header names its code page."""
    body = b"{\\rtf1\\ansi\\ansicpg1252 cr\xe8me\\par}"
    with http_server(lambda h: _send(h, body, content_type)) as (port, _):
        policy = UrlPolicy([f"127.0.0.1:{port}"])
        fetched = await fetch_url(
            client,
            f"http://127.0.0.1:{port}/download",
            policy,
            max_bytes=10_000,
            max_redirects=3,
            timeout_s=10,
        )
    assert (fetched.filename, fetched.data) == (name, body)
