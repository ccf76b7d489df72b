"""The one exception tree of mcpvectordb, shared by every service.

    MvdbError                      500 internal_error
    ├── InvalidInputError          400 invalid_input
    ├── PathNotAllowedError        403 path_not_allowed
    ├── FileAccessError            400 file_not_readable
    ├── NotFoundError              404 not_found
    ├── TooLargeError              413 too_large
    ├── UnsupportedFormatError     422 unsupported_format
    ├── ConversionError            422 conversion_failed
    ├── NoTextError                422 no_text_extracted
    ├── ConversionTimeoutError     504 conversion_timeout
    ├── FetchError                 502 fetch_failed
    ├── ModelMismatchError         409 model_mismatch
    ├── StoreError                 500 store_error
    └── UpstreamError              503 service_unavailable

Each class carries a stable `error_code` and an HTTP status. Services send errors as the MCP
error shape (`status`, `error`, `error_code`) with that status; `from_payload` turns such a
body back into the same exception class on the calling side, so an error keeps its meaning
across hops. Messages say what went wrong and what to do next.
"""

from __future__ import annotations

from typing import Any, ClassVar


class MvdbError(Exception):
    error_code: ClassVar[str] = "internal_error"
    http_status: ClassVar[int] = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_payload(self) -> dict[str, Any]:
        return {"status": "error", "error": self.message, "error_code": self.error_code}


class InvalidInputError(MvdbError):
    error_code = "invalid_input"
    http_status = 400


class PathNotAllowedError(MvdbError):
    error_code = "path_not_allowed"
    http_status = 403


class FileAccessError(MvdbError):
    error_code = "file_not_readable"
    http_status = 400


class NotFoundError(MvdbError):
    error_code = "not_found"
    http_status = 404


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


class FetchError(MvdbError):
    error_code = "fetch_failed"
    http_status = 502


class ModelMismatchError(MvdbError):
    error_code = "model_mismatch"
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
        PathNotAllowedError,
        FileAccessError,
        NotFoundError,
        TooLargeError,
        UnsupportedFormatError,
        ConversionError,
        NoTextError,
        ConversionTimeoutError,
        FetchError,
        ModelMismatchError,
        StoreError,
        UpstreamError,
    )
}


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
