"""deploy/grafana/dashboard.json: importable, and every metric it charts is one the services
define (libs/telemetry.py, services/*/metrics.py) or one Prometheus / prometheus_client adds.

tests/deploy/test_prometheus_e2e.py also runs every panel query against a real Prometheus.
"""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

from prometheus_client import REGISTRY

from tests.conftest import REPO

DASHBOARD = REPO / "deploy" / "grafana" / "dashboard.json"
# libs/telemetry.py and every service's metrics module, including ones added later.
METRIC_MODULES = (
    "libs.telemetry",
    *sorted(f"services.{p.parent.name}.metrics" for p in REPO.glob("services/*/metrics.py")),
)
# `up` comes from Prometheus itself, process_* from prometheus_client's process collector.
BUILTIN = {"up", "process_resident_memory_bytes", "process_cpu_seconds_total"}
PROMQL_WORDS = {
    "sum",
    "by",
    "rate",
    "increase",
    "histogram_quantile",
    "le",
    "job",
    "label_values",
}


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def panel_queries() -> list[str]:
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers followed by `{`, `[` or `)`, minus
    functions, keywords and label names (which are followed by `=`, `,` or `)` in `by (...)`)."""
    without_labels = re.sub(r"\{[^}]*\}", "{}", expr)
    without_by = re.sub(r"\bby \([^)]*\)", "", without_labels)
    names = set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*(?=[{\[)])", without_by))
    return names - PROMQL_WORDS


def defined_metrics() -> set[str]:
    for module in METRIC_MODULES:
        importlib.import_module(module)
    names: set[str] = set()
    for family in REGISTRY.collect():
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names.update(family.name + s for s in ("_bucket", "_sum", "_count"))
        else:
            names.add(family.name)
    return names | BUILTIN


def test_dashboard_is_importable_json() -> None:
    data = dashboard()
    assert data["uid"] == "mcpvectordb"
    ids = [p["id"] for p in data["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert data["__inputs"][0]["name"] == "DS_PROMETHEUS"
    variables = {v["name"] for v in data["templating"]["list"]}
    assert {"DS_PROMETHEUS", "job"} <= variables
    for panel in data["panels"]:
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24


def test_every_charted_metric_is_defined() -> None:
    queries = panel_queries()
    assert len(queries) >= 15
    defined = defined_metrics()
    used = set().union(*(metric_names(q) for q in queries))
    assert used, "the name extraction found nothing"
    assert not used - defined, f"charted but not defined anywhere: {sorted(used - defined)}"


def test_the_ingest_counters_are_charted() -> None:
    used = set().union(*(metric_names(q) for q in panel_queries()))
    assert {"mvdb_documents_ingested_total", "mvdb_chunks_ingested_total"} <= used
    assert {"mvdb_http_requests_total", "mvdb_http_request_duration_seconds_bucket"} <= used
    assert {"mvdb_client_retries_total", "mvdb_errors_total", "up"} <= used
