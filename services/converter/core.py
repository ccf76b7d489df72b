"""The converter service core: `Converter` implements `libs.ports.ConverterPort` in-process.

The HTTP app (`app`) is a thin adapter over it, and the stdio server and the CLI use it
directly when no cluster is configured. Cheap checks (file type, size) happen here, in the
caller's process; the conversion and chunking themselves run in the worker pool under the
`convert_timeout_s` limit.
"""

from __future__ import annotations

import logging
import time

from libs.contracts import ChunkRequest, ConvertResult
from libs.errors import MvdbError, TooLargeError
from libs.lifecycle import AsyncLifecycle
from services.converter.archive import ArchiveLimits
from services.converter.formats import ROUTES, base_name, route_for, type_of
from services.converter.metrics import CONVERSIONS, JOB_SECONDS
from services.converter.settings import ConverterSettings
from services.converter.worker import ChunkJob, ConvertJob, WorkerOptions, WorkerPool

log = logging.getLogger(__name__)


def too_large(limit: int) -> TooLargeError:
    return TooLargeError(
        f"the input is larger than the converter's limit of {limit} bytes "
        "(MAX_CONVERT_BYTES); split it into smaller files or raise the limit"
    )


def worker_options(settings: ConverterSettings) -> WorkerOptions:
    """What each worker process builds its engine from."""
    return WorkerOptions(
        max_tokens=settings.chunk_max_tokens,
        overlap_tokens=settings.chunk_overlap_tokens,
        archive=ArchiveLimits(
            max_entries=settings.archive_max_entries,
            max_uncompressed_bytes=settings.archive_max_uncompressed_bytes,
            max_depth=settings.archive_max_depth,
        ),
        legacy_encoding=settings.text_legacy_encoding,
    )


class Converter(AsyncLifecycle):
    """Bytes plus a file name in, `ConvertResult` (Markdown, title, type, pages, chunks) out.

    Worker processes start on `start()` or on first use and live until `aclose()`; use it as
    an async context manager to get both.
    """

    def __init__(self, settings: ConverterSettings) -> None:
        self.settings = settings
        self._pool = WorkerPool(
            worker_options(settings),
            size=settings.converter_workers,
            start_timeout_s=settings.converter_worker_start_timeout_s,
            max_jobs=settings.converter_max_tasks_per_worker,
        )

    async def start(self) -> None:
        """Launch the worker processes now rather than on the first request."""
        self._pool.start()

    async def aclose(self) -> None:
        await self._pool.aclose()

    async def ready(self) -> tuple[bool, str]:
        self._pool.start()
        return self._pool.status()

    async def convert(self, data: bytes, filename: str) -> ConvertResult:
        name = base_name(filename)
        ext = type_of(name)
        file_type = ext.lstrip(".") if ext in ROUTES else "unsupported"
        started = time.perf_counter()
        try:
            route_for(name)
            if len(data) > self.settings.max_convert_bytes:
                raise too_large(self.settings.max_convert_bytes)
            result = await self._pool.run(
                ConvertJob(data=data, filename=name),
                self.settings.convert_timeout_s,
                f"converting '{name}'",
            )
        except MvdbError as exc:
            CONVERSIONS.labels(file_type, exc.error_code).inc()
            raise
        CONVERSIONS.labels(file_type, "ok").inc()
        JOB_SECONDS.labels("convert").observe(time.perf_counter() - started)
        log.info(
            "converted",
            extra={
                "fields": {
                    "file_type": result.file_type,
                    "bytes": len(data),
                    "pages": result.page_count,
                    "chunks": len(result.chunks),
                    "seconds": round(time.perf_counter() - started, 3),
                }
            },
        )
        return result

    async def chunk(self, request: ChunkRequest) -> ConvertResult:
        started = time.perf_counter()
        try:
            size = len(request.markdown.encode("utf-8", errors="replace"))
            if size > self.settings.max_convert_bytes:
                raise too_large(self.settings.max_convert_bytes)
            result = await self._pool.run(
                ChunkJob(request=request), self.settings.convert_timeout_s, "chunking the text"
            )
        except MvdbError as exc:
            CONVERSIONS.labels("markdown", exc.error_code).inc()
            raise
        CONVERSIONS.labels("markdown", "ok").inc()
        JOB_SECONDS.labels("chunk").observe(time.perf_counter() - started)
        return result
