"""The one HTTP client factory and the one retry policy for calls between services.

Requests to an `http://` service go through the hops' own transport on plain asyncio
(`libs.hops`; httpx's own, httpcore, for any other URL): HTTP/1.1, a pool of kept-alive
connections per downstream service, explicit timeouts. Retries are tenacity's, on transport
errors (connect, read, write, timeouts, a connection dropped mid-answer) and 5xx answers only,
never on 4xx nor on a 5xx whose error the service marks final (`libs.errors.is_retryable`,
e.g. a conversion timeout). They back off exponentially with full jitter, capped, and stop at
whichever comes first: a number of attempts, or a total time past which no further attempt
starts. Each retry is counted in `mvdb_client_retries_total{target}` and logged.

What a caller gets back:

    call_with_retries(target, policy, send)
    ├── the response             any answer but a retryable 5xx, or the last 5xx once the
    │                            policy gives up (the caller turns its body into the error)
    ├── UpstreamError            transport errors until the policy gave up
    └── any other exception      raised by `send` as it is, never retried
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    retry_if_result,
    stop_after_attempt,
    wait_random_exponential,
)
from tenacity.stop import stop_base

from libs.errors import UpstreamError, from_payload, is_retryable
from libs.hops import HopTransport
from libs.telemetry import REQUEST_ID_HEADER, RETRIES, request_id_var, tell_caller

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RetryPolicy:
    """How hard a call between services tries: at most `attempts` tries and no new try once
    `max_seconds` have passed since the first; waits drawn from [0, initial_wait * 2^n],
    never over `max_wait`."""

    attempts: int = 4
    max_seconds: float = 30.0
    initial_wait: float = 0.2
    max_wait: float = 5.0


# Connections to one service. The keep-alive expiry is under uvicorn's own (5 s), so the client
# drops an idle connection before the server closes it, instead of racing it with a request.
POOL_LIMITS = httpx.Limits(max_connections=64, max_keepalive_connections=32, keepalive_expiry=4.0)


def _retryable_status(response: httpx.Response) -> bool:
    if response.status_code < 500:
        return False
    try:
        payload = response.json()
    except ValueError:
        return True
    return not isinstance(payload, dict) or is_retryable(payload.get("error_code"))


# On what a call is tried again: the request may not have reached the service, or the service
# failed in a way another try may not.
_RETRY_ON = retry_if_exception_type(httpx.TransportError) | retry_if_result(_retryable_status)


def _hop_transport(base_url: str) -> httpx.AsyncBaseTransport:
    """A service client's transport: the hops' own over plain asyncio (`libs.hops`) for an
    `http://` service, httpx's for any other (an `https://` URL behind a proxy or a mesh).
    The retries are the policy's, not the transport's: one place decides, one counter."""
    if httpx.URL(base_url).scheme == "http":
        return HopTransport(POOL_LIMITS)
    return httpx.AsyncHTTPTransport(limits=POOL_LIMITS, http1=True, http2=False)


def make_http_client(
    base_url: str, timeout_s: float, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """Every inter-service client is built here: explicit timeouts, HTTP/1.1 over pooled
    kept-alive connections. `transport` replaces the hops' own (tests: `httpx.MockTransport`)."""
    if transport is None:
        transport = _hop_transport(base_url)
    return httpx.AsyncClient(
        base_url=base_url,
        timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s)),
        transport=transport,
        # Nothing from the environment (proxies, certificate paths): the service URLs say it all.
        trust_env=False,
    )


async def _count_retry(target: str, state: RetryCallState) -> None:
    RETRIES.labels(target).inc()
    outcome = state.outcome
    assert outcome is not None  # tenacity sleeps only after an attempt
    failure = outcome.exception()
    why = repr(failure) if failure is not None else f"HTTP {outcome.result().status_code}"
    log.warning(
        "retrying call",
        extra={"fields": {"target": target, "attempt": state.attempt_number, "why": why}},
    )
    await tell_caller(
        "warning",
        f"the {target} service failed ({why}); trying again (attempt {state.attempt_number + 1})",
    )


def _give_up(target: str, timeout_s: float | None, state: RetryCallState) -> httpx.Response:
    outcome = state.outcome
    assert outcome is not None
    failure = outcome.exception()
    if failure is None:
        # The last 5xx: its body says what went wrong, better than anything said here.
        response: httpx.Response = outcome.result()
        return response
    tries = f"{state.attempt_number} attempts over {state.seconds_since_start:.0f} s"
    name = type(failure).__name__
    if isinstance(failure, httpx.ConnectError | httpx.ConnectTimeout):
        message = (
            f"could not connect to the {target} service ({name}) in {tries}; check that it is "
            "running (make up / make status)"
        )
    elif isinstance(failure, httpx.TimeoutException):
        within = f" within {timeout_s:.0f} s" if timeout_s else ""
        message = (
            f"the {target} service is up but did not answer{within} ({name}) in {tries}: it "
            "is overloaded or the request is too big for it now; try again later, or raise "
            "HTTP_TIMEOUT_S (and EMBED_TIMEOUT_PER_TEXT_S for the embedder)"
        )
    else:
        message = (
            f"the {target} service dropped the connection ({name}) in {tries}; it may have "
            "restarted: check its logs (make logs) and try again"
        )
    log.error("giving up on a call", extra={"fields": {"target": target, "why": repr(failure)}})
    raise UpstreamError(message) from failure


class _OutOfTime(stop_base):
    """Stop when the next wait would end past `max_seconds` of the call, not counting the
    attempts that ran out of time: those count against the attempts. Otherwise one slow answer
    as long as the budget would end the call with no retry at all."""

    def __init__(self, max_seconds: float) -> None:
        self.max_seconds = max_seconds
        self.excused = 0.0

    def __call__(self, retry_state: RetryCallState) -> bool:
        spent = (retry_state.seconds_since_start or 0.0) - self.excused
        return spent + (retry_state.upcoming_sleep or 0.0) >= self.max_seconds


async def call_with_retries(
    target: str,
    policy: RetryPolicy,
    send: Callable[[], Awaitable[httpx.Response]],
    *,
    timeout_s: float | None = None,
) -> httpx.Response:
    """Run `send` under the retry policy; return the final response or raise an MvdbError.
    `timeout_s`, the time one attempt may take, only words the error when all fail."""
    out_of_time = _OutOfTime(policy.max_seconds)
    retrying = AsyncRetrying(
        retry=_RETRY_ON,
        wait=wait_random_exponential(multiplier=policy.initial_wait, max=policy.max_wait),
        # No wait may start that would end past the total time (stop_before_delay's rule).
        stop=stop_after_attempt(policy.attempts) | out_of_time,
        before_sleep=partial(_count_retry, target),
        retry_error_callback=partial(_give_up, target, timeout_s),
    )

    async def attempt() -> httpx.Response:
        # tenacity awaits only what an `async def` returns: any other callable giving an
        # awaitable (a lambda, a partial) would come back as an un-awaited result.
        started = time.monotonic()
        try:
            return await send()
        except httpx.TimeoutException:
            out_of_time.excused += time.monotonic() - started
            raise

    response: httpx.Response = await retrying(attempt)
    return response


M = TypeVar("M", bound=BaseModel)

# The paths a client keeps its parsed URLs for: its service's routes, with room to spare.
_KNOWN_PATHS = 64


class ServiceClient:
    """Base of the typed clients: one per downstream service, all sharing the policy above.

    A request goes straight to the pooled transport (`libs.hops` for `http://` services),
    not through `AsyncClient.send`:
    the client layer's per-request work (merging and re-parsing the URL, the cookie jar, the
    auth and redirect machinery, event hooks) is for none of what a call between services
    does (a search-sized hop measured alone: 0.78-0.85 -> 0.63-0.70 ms; docs/benchmarks.md,
    issue 19). The
    request is the one `AsyncClient` would send, less its `User-Agent`, `Accept` and
    `Accept-Encoding` defaults (the services compress nothing): same URL, same `Host`,
    body and request id, same timeouts, same retries. `ready()` and tests still use the
    `AsyncClient` over the same transport."""

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
        self.timeout_s = timeout_s
        self._transport = transport or _hop_transport(base_url)
        self._http = make_http_client(base_url, timeout_s, self._transport)
        self._base = httpx.URL(base_url)
        self._timeout = _timeout(timeout_s)
        self._urls: dict[str, httpx.URL] = {}  # by path, parsed once (14 us a time otherwise)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(
        self, method: str, path: str, *, timeout_s: float | None = None, **kwargs: Any
    ) -> Any:
        """Send with retries; decode JSON; turn error bodies back into the typed exception.

        `timeout_s` is the time one attempt may take when this call needs another than the
        client's (an embedding batch: its size decides)."""
        response = await self._send(method, path, timeout_s=timeout_s, **kwargs)
        self._raise_for_error(response)
        return _json_or_none(response)

    async def fetch(
        self,
        model: type[M],
        method: str,
        path: str,
        *,
        body: BaseModel | None = None,
        timeout_s: float | None = None,
        **kwargs: Any,
    ) -> M:
        """`request`, with the answer validated as `model` straight from its JSON bytes and
        `body` (if any) sent as its JSON, both serialised by pydantic in one pass each.
        `stream` (see `_send`) sends a body made as it goes instead."""
        if body is not None:
            kwargs["content"] = body.model_dump_json().encode()
            kwargs["headers"] = {**(kwargs.get("headers") or {}), "Content-Type": _JSON}
        response = await self._send(method, path, timeout_s=timeout_s, **kwargs)
        self._raise_for_error(response)
        return model.model_validate_json(response.content)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        timeout_s: float | None = None,
        stream: Callable[[], AsyncIterator[bytes]] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """`stream` makes the body of each attempt anew (chunked, sent as it is made), so a
        retry sends all of it again."""
        headers = dict(kwargs.pop("headers", None) or {})
        headers[REQUEST_ID_HEADER] = request_id_var.get()
        timeout = self._timeout if timeout_s is None else _timeout(timeout_s)
        url = self._urls.get(path)
        if url is None:
            url = self._base.copy_with(raw_path=self._base.raw_path.rstrip(b"/") + path.encode())
            if len(self._urls) < _KNOWN_PATHS:  # beyond (ids in paths), made each time
                self._urls[path] = url

        async def send() -> httpx.Response:
            if stream is not None:
                kwargs["content"] = stream()
            request = httpx.Request(
                method, url, headers=headers, extensions={"timeout": timeout}, **kwargs
            )
            response = await self._transport.handle_async_request(request)
            response.request = request
            try:
                await response.aread()
            finally:
                await response.aclose()
            return response

        return await call_with_retries(
            self.target, self.policy, send, timeout_s=timeout_s or self.timeout_s
        )

    def _raise_for_error(self, response: httpx.Response) -> None:
        """An error answer turned back into the typed exception its body names."""
        if response.status_code >= 400:
            raise from_payload(
                _json_or_none(response),
                fallback=f"the {self.target} service answered HTTP {response.status_code}",
            )

    async def ready(self) -> tuple[bool, str]:
        try:
            response = await self._http.get("/readyz", timeout=3.0)
        except httpx.TransportError as exc:
            return False, f"unreachable ({type(exc).__name__})"
        return response.status_code == 200, f"HTTP {response.status_code}"


_JSON = "application/json"


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _timeout(seconds: float) -> dict[str, float]:
    """httpcore's per-request timeouts, as `httpx.Timeout(seconds, connect=...)` gives them."""
    return httpx.Timeout(seconds, connect=min(5.0, seconds)).as_dict()  # type: ignore[return-value]
