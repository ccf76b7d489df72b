"""A converter worker hands the pages a document left free back to the system once it has
replied, so an idle worker does not keep a large document's memory (`libs.malloc`)."""

from __future__ import annotations

import multiprocessing
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.perf_measure import rss_mb
from services.converter.core import worker_options
from services.converter.settings import ConverterSettings
from services.converter.worker import ConvertJob, _Worker

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc; glibc's malloc_trim"
)

# A 630 KB JSON file: a fresh worker converting it is left about 95 MB above where it was
# ready when it keeps the pages (4 MB when it hands them back).
LARGE = "mledoze-countries/countries-unescaped.json"


@pytest.fixture
def worker() -> Iterator[_Worker]:
    settings = ConverterSettings(_env_file=None)  # type: ignore[call-arg]
    started = _Worker(multiprocessing.get_context("spawn"), worker_options(settings))
    try:
        started.wait_ready(180)
        yield started
    finally:
        started.stop(5)


def test_an_idle_worker_gives_back_what_a_large_document_took(
    worker: _Worker, shared_files: Path
) -> None:
    large = shared_files / LARGE
    pid = worker.process.pid
    assert pid is not None
    ready = rss_mb(pid)
    kind, result = worker.run(ConvertJob(large.read_bytes(), large.name), 120, threading.Event())
    assert kind == "ok", result
    assert result.chunks
    # The pages go back after the reply: wait for them, briefly.
    deadline = time.monotonic() + 10
    while (idle := rss_mb(pid)) > ready + 50 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert idle <= ready + 50, f"ready at {ready:.0f} MB, idle after the job at {idle:.0f} MB"
