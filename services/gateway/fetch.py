"""Fetching URLs for `ingest_url` without reaching private networks.

URL policy: http/https only; every address the host resolves to must be public unless the
host is in `URL_ALLOW_HOSTS`; the connection goes to the address that was checked (no second
DNS answer can slip in); the check is repeated on every redirect; the content type is checked
before the body is read, and the body is streamed with a size cap, the whole fetch under one
time limit. A text body in the charset its Content-Type names is handed on as UTF-8. The
downloaded file is named by the URL's path, or by its Content-Type when that does not say.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from urllib.parse import unquote, urljoin, urlsplit

import httpx

from libs.encodings import bom_codec, declared_codec, decodes
from libs.errors import FetchError, InvalidInputError, PathNotAllowedError, TooLargeError
from libs.formats import (
    CODE_EXTENSIONS,
    MARKUP_EXTENSIONS,
    TEXT_EXTENSIONS,
    extension_of,
    is_convertible,
)

_CONTENT_TYPES = {
    "text/html": ".html",
    "application/xhtml+xml": ".html",
    "application/pdf": ".pdf",
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/csv": ".csv",
    "text/tab-separated-values": ".tsv",
    "application/json": ".json",
    "application/xml": ".xml",
    "text/xml": ".xml",
    "application/rss+xml": ".xml",
    "application/atom+xml": ".xml",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": ".pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": ".xlsx",
    "application/vnd.ms-excel": ".xls",
    "application/zip": ".zip",
    "application/epub+zip": ".epub",
    "application/msword": ".doc",
    "application/vnd.ms-powerpoint": ".ppt",
    "application/vnd.oasis.opendocument.text": ".odt",
    "application/vnd.oasis.opendocument.spreadsheet": ".ods",
    "application/vnd.oasis.opendocument.presentation": ".odp",
    "application/vnd.oasis.opendocument.text-flat-xml": ".fodt",
    "application/vnd.oasis.opendocument.spreadsheet-flat-xml": ".fods",
    "application/vnd.oasis.opendocument.presentation-flat-xml": ".fodp",
    "application/rtf": ".rtf",
    "text/rtf": ".rtf",
    "message/rfc822": ".eml",
    "application/vnd.ms-outlook": ".msg",
    "text/vtt": ".vtt",
    "application/x-subrip": ".srt",
    "text/x-tex": ".tex",
    "application/x-tex": ".tex",
    "multipart/related": ".mhtml",
    "application/x-mimearchive": ".mhtml",
    "application/x-tar": ".tar",
    "application/x-gtar": ".tar",
    "application/gzip": ".gz",
    "application/x-gzip": ".gz",
    "application/x-bzip2": ".bz2",
    "application/x-xz": ".xz",
}
_TEXT = frozenset({".html", ".txt", ".md", ".csv", ".tsv", ".json", ".xml", ".vtt", ".tex"})
# Files a server sends under a broader content type whose name says how to read them: as
# text/plain source code (GitHub's raw files), LaTeX, Org mode, subtitles and documentation
# formats; as message/rfc822 (Python's and Apache's type for .mht) a saved web page; a
# compressed tar archive (.tgz) under its compression's content type.
_NAMED_UNDER = {
    "text/plain": frozenset({*CODE_EXTENSIONS, *TEXT_EXTENSIONS, *MARKUP_EXTENSIONS}),
    "message/rfc822": frozenset({".mhtml", ".mht"}),
    # A compressed tar archive under its compression's type, or a tar program's.
    "application/gzip": frozenset({".tgz"}),
    "application/x-gzip": frozenset({".tgz"}),
    "application/x-bzip2": frozenset({".tbz2"}),
    "application/x-xz": frozenset({".txz"}),
    "application/x-gtar": frozenset({".tgz", ".tbz2", ".txz", ".gz", ".bz2", ".xz"}),
}


@dataclass(frozen=True)
class Fetched:
    url: str
    data: bytes
    filename: str


def _is_public(address: str) -> bool:
    """Globally routable unicast only: refuses loopback, private, link-local (cloud metadata
    at 169.254.169.254), unique-local, carrier-grade NAT, reserved and multicast ranges."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


Resolver = Callable[[str, int], Awaitable[list[str]]]


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, through the operating system's resolver."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class Target:
    """One checked request: the URL as asked, and the address the connection must go to.

    Connecting to `address` rather than resolving the name again closes the DNS-rebinding
    window between the check and the connection. The `Host` header and the TLS server name
    (SNI, and so certificate verification) stay those of the URL's host.
    """

    url: str
    host: str
    address: str

    def request_url(self) -> httpx.URL:
        return httpx.URL(self.url).copy_with(host=self.address)

    def headers(self) -> dict[str, str]:
        return {"Host": httpx.URL(self.url).netloc.decode("ascii")}

    def extensions(self) -> dict[str, str]:
        return {"sni_hostname": self.host} if self.url.lower().startswith("https:") else {}


class UrlPolicy:
    def __init__(self, allow_hosts: list[str], resolver: Resolver = system_resolver) -> None:
        self.allow_hosts = {h.lower() for h in allow_hosts}
        self._resolve = resolver

    def _allowed_explicitly(self, host: str, port: int) -> bool:
        return host in self.allow_hosts or f"{host}:{port}" in self.allow_hosts

    async def check(self, url: str) -> Target:
        """Refuse `url` unless it is http(s) and every address of its host is public (or the
        host is in URL_ALLOW_HOSTS); return the address to connect to."""
        try:
            parts = urlsplit(url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            host = httpx.URL(url).raw_host.decode("ascii").lower()
        except (ValueError, httpx.InvalidURL) as exc:
            raise InvalidInputError(f"'{url}' is not a valid URL: {exc}") from exc
        if parts.scheme not in ("http", "https"):
            raise InvalidInputError(
                f"only http and https URLs can be ingested, not '{parts.scheme or url}'"
            )
        if not host:
            raise InvalidInputError(f"the URL '{url}' has no host name")
        try:
            addresses = await self._resolve(host, port)
        except OSError as exc:
            raise FetchError(f"cannot resolve host '{host}': {exc.strerror or exc}") from exc
        if not addresses:
            raise FetchError(f"host '{host}' has no addresses")
        if not self._allowed_explicitly(host, port):
            for address in addresses:
                if not _is_public(address):
                    raise PathNotAllowedError(
                        f"refusing to fetch {url}: {host} resolves to the non-public address "
                        f"{address}; add '{host}' to URL_ALLOW_HOSTS if this is intended"
                    )
        return Target(url=url, host=host, address=addresses[0].split("%")[0])


def _filename_for(url: str, content_type: str) -> str:
    name = unquote(PurePosixPath(urlsplit(url).path).name)
    mime = content_type.split(";")[0].strip().lower()
    ext = _CONTENT_TYPES.get(mime)
    if name and is_convertible(name) and (ext is None or extension_of(name) == ext):
        return name
    if name and extension_of(name) in _NAMED_UNDER.get(mime, ()):
        return name  # read as what its name says, not as .txt or .eml
    if ext is None:
        if name and is_convertible(name):
            return name
        raise FetchError(
            f"{url} returned content type '{mime or 'unknown'}', which cannot be converted; "
            "supported are HTML, PDF, text, Office documents, CSV, JSON and XML"
        )
    stem = PurePosixPath(name).stem if name else (urlsplit(url).hostname or "page")
    return f"{stem}{ext}"


def _as_utf8(data: bytes, response: httpx.Response) -> bytes:
    """A text body in the charset its Content-Type names, as UTF-8, which the converter reads
    first: the header's charset outranks the page's own declaration, as in browsers. A body
    with a byte order mark, one already UTF-8 (servers often name ISO-8859-1 for UTF-8
    files) and one the charset does not read are passed on as they came."""
    mime = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    label = response.charset_encoding  # httpx reads the charset parameter
    if label is None or _CONTENT_TYPES.get(mime) not in _TEXT or bom_codec(data):
        return data
    codec = None if decodes(data, "utf-8") else declared_codec(label, data)
    return data if codec is None else data.decode(codec).encode()


async def fetch_url(
    client: httpx.AsyncClient,
    url: str,
    policy: UrlPolicy,
    *,
    max_bytes: int,
    max_redirects: int,
    timeout_s: float,
) -> Fetched:
    """GET `url` under the policy, following at most `max_redirects` redirects (each checked
    again), within `timeout_s` in all and `max_bytes` of body."""
    try:
        async with asyncio.timeout(timeout_s):
            return await _fetch(client, url, policy, max_bytes, max_redirects)
    except TimeoutError as exc:
        raise FetchError(
            f"fetching {url} took longer than {timeout_s:g} s (FETCH_TIMEOUT_S) and was stopped"
        ) from exc


async def _fetch(
    client: httpx.AsyncClient, url: str, policy: UrlPolicy, max_bytes: int, max_redirects: int
) -> Fetched:
    current = url
    for _ in range(max_redirects + 1):
        target = await policy.check(current)
        try:
            async with client.stream(
                "GET",
                target.request_url(),
                headers=target.headers(),
                extensions=target.extensions(),
                follow_redirects=False,
            ) as response:
                if response.is_redirect:
                    location = response.headers.get("location")
                    if not location:
                        raise FetchError(f"{current} redirected without a Location header")
                    current = urljoin(current, location)
                    continue
                if response.status_code >= 400:
                    raise FetchError(f"{current} answered HTTP {response.status_code}")
                # Before the body: a type that cannot be converted is not worth downloading.
                filename = _filename_for(current, response.headers.get("content-type", ""))
                declared = response.headers.get("content-length")
                if declared and declared.isdigit() and int(declared) > max_bytes:
                    raise TooLargeError(
                        f"{current} is {declared} bytes, over the {max_bytes}-byte fetch limit"
                    )
                chunks: list[bytes] = []
                total = 0
                async for piece in response.aiter_bytes():
                    total += len(piece)
                    if total > max_bytes:
                        raise TooLargeError(
                            f"{current} is larger than the {max_bytes}-byte fetch limit"
                        )
                    chunks.append(piece)
                data = _as_utf8(b"".join(chunks), response)
                return Fetched(url=current, data=data, filename=filename)
        except httpx.TimeoutException as exc:
            raise FetchError(f"fetching {current} timed out") from exc
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            raise FetchError(f"could not fetch {current}: {type(exc).__name__}") from exc
    raise FetchError(f"{url} redirected more than {max_redirects} times")
