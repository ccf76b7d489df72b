"""The gateway over HTTP, with the standard library only.

    SyncError            the sync cannot go on (bad URL, refused token, gateway unreachable)
    └── GatewayError     the gateway answered with an error: its HTTP status, error_code, text

One retry policy: connection errors, timeouts, 429 and 5xx are retried with exponential
backoff and jitter (a `Retry-After` the gateway sends is honoured), capped by attempts and by
total time; a 4xx other than 429 is the caller's mistake and never retried. Error bodies in
the gateway's shape (`status`, `error`, `error_code`) are read back into `GatewayError`.
`bytes_sent` counts every request (request line, headers, body) sent, `bytes_received` every
response body read.
"""

from __future__ import annotations

import http.client
import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

from mcpvectordb_sync import __version__

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class SyncError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class GatewayError(SyncError):
    def __init__(self, status: int, error_code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    total_s: float = 120.0
    first_s: float = 0.5
    max_s: float = 20.0

    def delay(self, attempt: int) -> float:
        """Full jitter: a random wait up to the exponential backoff of this attempt."""
        return random.uniform(0, min(self.max_s, self.first_s * 2**attempt))


def multipart(fields: dict[str, str], filename: str, data: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body with text `fields` and one file field `file`."""
    boundary = f"mcpvectordb-{uuid.uuid4().hex}"
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n'
            f"Content-Type: text/plain; charset=utf-8\r\n\r\n".encode()
            + value.encode("utf-8")
            + b"\r\n"
        )
    # Browsers' way (HTML5): the name as UTF-8, with quote and line breaks percent-encoded.
    quoted = filename.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{quoted}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + data
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class Gateway:
    """One gateway at `url`; thread-safe (each request its own connection)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout_s: float = 300.0,
        policy: RetryPolicy | None = None,
    ) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise SyncError(f"--url {url!r} is not an http(s) URL; e.g. https://docs.example.org")
        self.base = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s
        self.policy = policy or RetryPolicy()
        self.bytes_sent = 0
        self.bytes_received = 0
        self.retries = 0

    def request(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        """Send one request (retrying as the policy says) and return its JSON object."""
        url = self.base + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        headers = {"Accept": "application/json", "User-Agent": f"mcpvectordb-sync/{__version__}"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if content_type:
            headers["Content-Type"] = content_type
        started = time.monotonic()
        attempt = 0
        while True:
            error: SyncError
            request = urllib.request.Request(url, data=body, headers=headers, method=method)
            self.bytes_sent += _size(method, url, headers, body)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                    raw = response.read()
                self.bytes_received += len(raw)
                return _json_object(raw, url)
            except urllib.error.HTTPError as exc:
                error = _gateway_error(exc)
                retry_after = _retry_after(exc)
                if exc.code not in RETRY_STATUSES:
                    raise error from None
            except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
                reason = getattr(exc, "reason", exc)
                error = SyncError(
                    f"cannot reach the gateway at {self.base}: {reason}; check --url and "
                    "that the gateway (or its tunnel) is up"
                )
                retry_after = None
            wait = retry_after if retry_after is not None else self.policy.delay(attempt)
            attempt += 1
            spent = time.monotonic() - started
            if attempt >= self.policy.attempts or spent + wait > self.policy.total_s:
                raise error
            self.retries += 1
            time.sleep(wait)

    def upload(self, data: bytes, filename: str, source: str, library: str) -> dict[str, Any]:
        body, content_type = multipart({"library": library, "source": source}, filename, data)
        return self.request("POST", "/upload", body=body, content_type=content_type)

    def sources(
        self, library: str, prefix: str, cursor: str | None, limit: int = 1000
    ) -> dict[str, Any]:
        params = {"library": library, "limit": str(limit)}
        if prefix:
            params["prefix"] = prefix
        if cursor:
            params["cursor"] = cursor
        return self.request("GET", "/sources", params=params)

    def delete_source(self, library: str, source: str) -> dict[str, Any]:
        return self.request("DELETE", "/documents", params={"library": library, "source": source})


def _size(method: str, url: str, headers: dict[str, str], body: bytes | None) -> int:
    head = f"{method} {url} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return len(head.encode("utf-8")) + 2 + (len(body) if body else 0)


def _json_object(raw: bytes, url: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise SyncError(f"{url} did not answer like an mcpvectordb gateway; check --url")
    return value


def _gateway_error(exc: urllib.error.HTTPError) -> GatewayError:
    try:
        payload = json.loads(exc.read())
    except (ValueError, OSError):
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("error"), str):
        code = payload.get("error_code")
        return GatewayError(exc.code, code if isinstance(code, str) else "", payload["error"])
    hint = {
        401: "the gateway wants a token: pass --token (or set MCPVECTORDB_TOKEN)",
        403: "the token may not do this (a read-only token cannot upload or delete)",
        404: "is --url the gateway's base URL (without /sse or /mcp)?",
    }.get(exc.code, "")
    text = f"the gateway answered HTTP {exc.code} {exc.reason}" + (f"; {hint}" if hint else "")
    return GatewayError(exc.code, "", text)


def _retry_after(exc: urllib.error.HTTPError) -> float | None:
    value = exc.headers.get("Retry-After") if exc.headers else None
    if value and value.strip().isdigit():
        return min(float(value), 60.0)
    return None
