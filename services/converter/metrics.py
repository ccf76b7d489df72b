"""The converter's Prometheus metrics, module-level and low-cardinality (file types, outcomes
and reasons from fixed sets; never file names)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

CONVERSIONS = Counter(
    "mvdb_converter_jobs_total",
    "Conversion and chunking jobs, by file type and outcome (error code or ok)",
    ["file_type", "outcome"],
)
JOB_SECONDS = Histogram(
    "mvdb_converter_job_seconds",
    "Time to convert or chunk one input, worker time included",
    ["operation"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
WORKER_RESTARTS = Counter(
    "mvdb_converter_worker_restarts_total",
    "Converter worker processes replaced, by reason",
    ["reason"],
)
