"""The one HTTP client factory and the one retry policy for calls between services.

Retries happen on transport errors (connect, read, timeouts) and 5xx answers only, never on
4xx nor on a 5xx whose error the service marks final (`libs.errors.is_retryable`, e.g. a
conversion timeout); they back off exponentially with jitter and stop at whichever comes
first, a number of attempts or a total time. Each retry is counted in
`mvdb_client_retries_total{target}`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from libs.errors import UpstreamError, from_payload, is_retryable
from libs.telemetry import REQUEST_ID_HEADER, RETRIES, request_id_var

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    max_seconds: float = 30.0
    initial_wait: float = 0.2
    max_wait: float = 5.0


class _RetryableStatus(Exception):
    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"HTTP {response.status_code}")
        self.response = response


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, httpx.TransportError | _RetryableStatus)


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
    """Every inter-service client is built here: explicit timeouts, pooled connections."""
    return httpx.AsyncClient(
        base_url=base_url,
        timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)),
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=32),
        transport=transport,
        trust_env=False,
    )


async def call_with_retries(
    target: str,
    policy: RetryPolicy,
    send: Callable[[], Awaitable[httpx.Response]],
) -> httpx.Response:
    """Run `send` under the retry policy; return the final response or raise an MvdbError."""

    def before_sleep(state: RetryCallState) -> None:
        RETRIES.labels(target).inc()
        exc = state.outcome.exception() if state.outcome else None
        log.warning(
            "retrying call",
            extra={"fields": {"target": target, "attempt": state.attempt_number, "why": repr(exc)}},
        )

    retrying = AsyncRetrying(
        retry=retry_if_exception(_retryable),
        stop=stop_after_attempt(policy.attempts) | stop_after_delay(policy.max_seconds),
        wait=wait_random_exponential(multiplier=policy.initial_wait, max=policy.max_wait),
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                response = await send()
                if _retryable_status(response):
                    raise _RetryableStatus(response)
                return response
    except _RetryableStatus as exc:
        return exc.response
    except httpx.TransportError as exc:
        raise UpstreamError(
            f"the {target} service did not answer ({type(exc).__name__}) after "
            f"{policy.attempts} attempts; check that it is running (make up / make status)"
        ) from exc
    raise AssertionError("unreachable")  # pragma: no cover


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
