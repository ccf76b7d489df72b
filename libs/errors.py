"""The one exception tree of mcpvectordb, shared by every service.

    MvdbError                      500 internal_error
    ├── InvalidInputError          400 invalid_input
    ├── UnauthorizedError          401 unauthorized
    ├── ForbiddenError             403 forbidden
    ├── InvalidOriginError         403 invalid_origin
    ├── InvalidHostError           421 invalid_host
    ├── PathNotAllowedError        403 path_not_allowed
    ├── FileAccessError            400 file_not_readable
    ├── NotFoundError              404 not_found
    ├── ReadOnlyReplicaError       405 read_only_replica
    ├── TooLargeError              413 too_large
    ├── UnsupportedFormatError     422 unsupported_format
    ├── ConversionError            422 conversion_failed
    ├── NoTextError                422 no_text_extracted
    ├── ConversionTimeoutError     504 conversion_timeout
    ├── FetchError                 502 fetch_failed
    ├── ModelMismatchError         409 model_mismatch
    ├── ConcurrentWriterError      409 concurrent_writer
    ├── StoreError                 500 store_error
    └── UpstreamError              503 service_unavailable

Each class carries a stable `error_code` and an HTTP status. `to_payload` is the one place the
MCP error shape (`status`, `error`, `error_code`) is built: services send it with that status,
tools return it as their error result, and `from_exception` turns anything else (a pydantic
`ValidationError`, an unexpected crash) into one of these classes first; `from_payload` turns such a
body back into the same exception class on the calling side, so an error keeps its meaning
across hops. Messages say what went wrong and what to do next. A 5xx is retried by the
callers' retry policy unless its class says `retryable = False`: a conversion that ran out of
time would only run out of time again (`is_retryable`).
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ValidationError

from libs.redaction import scrub


class MvdbError(Exception):
    error_code: ClassVar[str] = "internal_error"
    http_status: ClassVar[int] = 500
    retryable: ClassVar[bool] = True

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_payload(self) -> dict[str, Any]:
        """The error shape every caller sees, over HTTP and MCP alike; credentials masked
        (`libs.redaction`: an object store's error may quote a signed URL or a secret)."""
        return {"status": "error", "error": scrub(self.message), "error_code": self.error_code}


class InvalidInputError(MvdbError):
    error_code = "invalid_input"
    http_status = 400


class UnauthorizedError(MvdbError):
    error_code = "unauthorized"
    http_status = 401


class ForbiddenError(MvdbError):
    error_code = "forbidden"
    http_status = 403


class InvalidOriginError(MvdbError):
    error_code = "invalid_origin"
    http_status = 403


class InvalidHostError(MvdbError):
    error_code = "invalid_host"
    http_status = 421


class PathNotAllowedError(MvdbError):
    error_code = "path_not_allowed"
    http_status = 403


class FileAccessError(MvdbError):
    error_code = "file_not_readable"
    http_status = 400


class NotFoundError(MvdbError):
    error_code = "not_found"
    http_status = 404


class ReadOnlyReplicaError(MvdbError):
    """A write sent to an index reader (`INDEX_ROLE=reader`); only the writer writes."""

    error_code = "read_only_replica"
    http_status = 405


class TooLargeError(MvdbError):
    error_code = "too_large"
    http_status = 413


class UnsupportedFormatError(MvdbError):
    error_code = "unsupported_format"
    http_status = 422


class ConversionError(MvdbError):
    error_code = "conversion_failed"
    http_status = 422


class NoTextError(MvdbError):
    error_code = "no_text_extracted"
    http_status = 422


class ConversionTimeoutError(MvdbError):
    error_code = "conversion_timeout"
    http_status = 504
    retryable = False


class FetchError(MvdbError):
    error_code = "fetch_failed"
    http_status = 502


class ModelMismatchError(MvdbError):
    error_code = "model_mismatch"
    http_status = 409


class ConcurrentWriterError(MvdbError):
    """Another process commits to the store this index writes: only one writer per store."""

    error_code = "concurrent_writer"
    http_status = 409


class PartsMissingError(MvdbError):
    """A write named parts (`UpsertPart`) the index no longer holds: they expired, or the
    index restarted. The caller sends them again."""

    error_code = "parts_missing"
    http_status = 409


class StoreError(MvdbError):
    error_code = "store_error"
    http_status = 500


class UpstreamError(MvdbError):
    error_code = "service_unavailable"
    http_status = 503


_BY_CODE: dict[str, type[MvdbError]] = {
    cls.error_code: cls
    for cls in (
        MvdbError,
        InvalidInputError,
        UnauthorizedError,
        ForbiddenError,
        InvalidOriginError,
        InvalidHostError,
        PathNotAllowedError,
        FileAccessError,
        NotFoundError,
        ReadOnlyReplicaError,
        TooLargeError,
        UnsupportedFormatError,
        ConversionError,
        NoTextError,
        ConversionTimeoutError,
        FetchError,
        ModelMismatchError,
        ConcurrentWriterError,
        PartsMissingError,
        StoreError,
        UpstreamError,
    )
}


def describe_validation(exc: Exception) -> str:
    """A validation failure (pydantic's, or FastAPI's for a request) in words: each bad field
    by its name and what is wrong (at most five), without echoing the rejected values."""
    errors: list[Any] = list(getattr(exc, "errors", lambda: [])())
    parts = []
    for err in errors[:5]:
        loc = list(err.get("loc", ()))
        if len(loc) > 1 and loc[0] in ("body", "query", "path", "header"):
            loc = loc[1:]  # FastAPI says where in the request; the field is what matters
        where = ".".join(str(p) for p in loc)
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        parts.append(f"{where or 'input'}: {msg}")
    return "; ".join(parts) or str(exc)


def invalid_input(exc: Exception, what: str) -> InvalidInputError:
    """A validation failure as the caller's mistake; `what` names the input (arguments...)."""
    return InvalidInputError(f"invalid {what}: {describe_validation(exc)}")


M = TypeVar("M", bound=BaseModel)


def parse_as(model: type[M], data: bytes, what: str) -> M:
    """`data` (JSON) as `model`, or `invalid_input` naming `what` and each bad field."""
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise invalid_input(exc, what) from exc


def from_exception(exc: BaseException, *, what: str = "arguments") -> MvdbError:
    """Any exception as one of this tree's classes: itself, an `InvalidInputError` for a
    pydantic validation failure, or an internal error naming the exception (the log keeps
    the traceback)."""
    if isinstance(exc, MvdbError):
        return exc
    if isinstance(exc, ValidationError):
        return invalid_input(exc, what)
    return MvdbError(f"unexpected error: {type(exc).__name__}: {exc}")


def from_payload(payload: Any, *, fallback: str) -> MvdbError:
    """Rebuild the exception a service reported, or a generic one from `fallback` text."""
    if isinstance(payload, dict):
        message = payload.get("error")
        code = payload.get("error_code")
        if isinstance(message, str) and isinstance(code, str):
            return _BY_CODE.get(code, MvdbError)(message)
        detail = payload.get("detail")
        if detail is not None:
            return InvalidInputError(f"{fallback}: {detail}")
    return MvdbError(fallback)


def is_retryable(error_code: object) -> bool:
    """Whether a 5xx answer carrying this `error_code` may be retried (unknown codes may)."""
    cls = _BY_CODE.get(error_code) if isinstance(error_code, str) else None
    return cls is None or cls.retryable
