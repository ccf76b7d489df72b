"""The one HTTP client factory and the one retry policy for calls between services.

Retries happen on transport errors (connect, read, timeouts) and 5xx answers only, never on
4xx nor on a 5xx whose error the service marks final (`libs.errors.is_retryable`, e.g. a
conversion timeout); they back off exponentially with jitter and stop at whichever comes
first, a number of attempts or a total time. Each retry is counted in
`mvdb_client_retries_total{target}`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from libs.errors import UpstreamError, from_payload, is_retryable
from libs.telemetry import REQUEST_ID_HEADER, RETRIES, request_id_var
from libs.transport import LeanTransport

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    max_seconds: float = 30.0
    initial_wait: float = 0.2
    max_wait: float = 5.0


def _retryable_status(response: httpx.Response) -> bool:
    if response.status_code < 500:
        return False
    try:
        payload = response.json()
    except ValueError:
        return True
    return not isinstance(payload, dict) or is_retryable(payload.get("error_code"))


def make_http_client(
    base_url: str, timeout_s: float, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """Every inter-service client is built here: explicit timeouts, pooled connections, and
    for plain http the lean transport (`libs.transport`) instead of httpx's own."""
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=32)
    if transport is None and base_url.startswith("http://"):
        transport = LeanTransport(limits)
    return httpx.AsyncClient(
        base_url=base_url,
        timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)),
        limits=limits,
        transport=transport,
        trust_env=False,
    )


async def call_with_retries(
    target: str,
    policy: RetryPolicy,
    send: Callable[[], Awaitable[httpx.Response]],
) -> httpx.Response:
    """Run `send` under the retry policy; return the final response or raise an MvdbError.

    A plain loop: a retrying library's per-call machinery cost ~0.1 ms on every hop, retried
    or not, and a search makes two hops."""
    started = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        failure: httpx.TransportError | None = None
        try:
            response = await send()
        except httpx.TransportError as exc:
            failure = exc
        else:
            if not _retryable_status(response):
                return response
        out_of_time = time.monotonic() - started >= policy.max_seconds
        if attempt >= policy.attempts or out_of_time:
            if failure is None:
                return response
            raise UpstreamError(
                f"the {target} service did not answer ({type(failure).__name__}) after "
                f"{attempt} attempts; check that it is running (make up / make status)"
            ) from failure
        RETRIES.labels(target).inc()
        why = repr(failure) if failure is not None else f"HTTP {response.status_code}"
        log.warning(
            "retrying call",
            extra={"fields": {"target": target, "attempt": attempt, "why": why}},
        )
        # Exponential backoff with full jitter, capped.
        ceiling = min(policy.max_wait, policy.initial_wait * 2 ** (attempt - 1))
        await asyncio.sleep(random.uniform(0, ceiling))


class ServiceClient:
    """Base of the typed clients: one per downstream service, all sharing the policy above."""

    target = "service"

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 30.0,
        policy: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url
        self.policy = policy or RetryPolicy()
        self._http = make_http_client(base_url, timeout_s, transport)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send with retries; decode JSON; turn error bodies back into the typed exception."""
        headers = dict(kwargs.pop("headers", None) or {})
        headers[REQUEST_ID_HEADER] = request_id_var.get()

        async def send() -> httpx.Response:
            return await self._http.request(method, path, headers=headers, **kwargs)

        response = await call_with_retries(self.target, self.policy, send)
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if response.status_code >= 400:
            raise from_payload(
                payload,
                fallback=f"the {self.target} service answered HTTP {response.status_code}",
            )
        return payload

    async def ready(self) -> tuple[bool, str]:
        try:
            response = await self._http.get("/readyz", timeout=3.0)
        except httpx.TransportError as exc:
            return False, f"unreachable ({type(exc).__name__})"
        return response.status_code == 200, f"HTTP {response.status_code}"
