"""Converter-specific errors, each a subclass of the shared tree in `libs.errors` so it keeps
the shared `error_code` and HTTP status across hops.

    ConversionError (422 conversion_failed)
    └── WorkerCrashedError        the worker process died while converting
    UpstreamError (503 service_unavailable)
    └── WorkersUnavailableError   no worker process became ready in time
"""

from __future__ import annotations

from libs.errors import ConversionError, UpstreamError


class WorkerCrashedError(ConversionError):
    """The parser crashed the worker process (the file is likely corrupt or hostile)."""


class WorkersUnavailableError(UpstreamError):
    """No conversion worker process could be started or became free in time."""
