"""A real Prometheus scraping the four real services.

The services are started the way `make up` starts them
(`python -m services.entrypoints.cluster up`) on
free loopback ports with their own var directory and LanceDB. Prometheus (Debian's package,
run in the foreground on 127.0.0.1, never as the system service) gets
deploy/prometheus/prometheus.yml with only the targets, the token file path and the intervals
changed, so the shipped scrape configuration is what is exercised. Then:

- all four targets are `up` (the /metrics endpoints are scrapeable; the gateway runs with
  AUTH_TOKEN and READ_ONLY_TOKEN set and is scraped with the token file, as in compose);
- ingesting a real document through POST /upload makes the ingest counters rise in Prometheus;
- every query of the Grafana dashboard is valid PromQL and answers.

Scrapes every second keep the whole module well under a minute once the services are up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import REPO
from tests.deploy.conftest import DEPLOY, run
from tests.servers import free_port

SERVICES = ("converter", "embedder", "index", "gateway")
SCRAPE_INTERVAL = "1s"
FULL_TOKEN = "deploy-e2e-full-token"
READ_TOKEN = "deploy-e2e-read-token"
DASHBOARD = DEPLOY / "grafana" / "dashboard.json"


@dataclass(frozen=True)
class Cluster:
    ports: dict[str, int]
    var_dir: Path

    @property
    def gateway(self) -> str:
        return f"http://127.0.0.1:{self.ports['gateway']}"


@dataclass(frozen=True)
class Prometheus:
    url: str
    log: Path

    def query(self, expr: str) -> list[dict[str, Any]]:
        response = httpx.get(
            f"{self.url}/api/v1/query", params={"query": expr}, timeout=5, trust_env=False
        )
        body = response.json()
        assert response.status_code == 200 and body["status"] == "success", (expr, body)
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def value(self, expr: str) -> float:
        """A scalar-valued query; no series (a labelled counter never incremented) is 0."""
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else 0.0


def _logs(var_dir: Path) -> str:
    return "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
        for p in sorted((var_dir / "log").glob("*.log"))
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    var_dir = tmp_path_factory.mktemp("deploy-cluster")
    ports = {name: free_port() for name in SERVICES}
    env = {
        **os.environ,
        "VAR_DIR": str(var_dir),
        "LANCEDB_URI": str(var_dir / "lancedb"),
        "HF_HUB_OFFLINE": "1",
        **{f"{name.upper()}_PORT": str(port) for name, port in ports.items()},
        **{
            f"{name.upper()}_URL": f"http://127.0.0.1:{port}"
            for name, port in ports.items()
            if name != "gateway"
        },
    }
    env.pop("BIND_HOST", None)
    # Tokens on, as any exposed deployment has them: Prometheus must scrape the gateway with
    # the read-only token, and the upload must carry the full one.
    env.update(AUTH_TOKEN=FULL_TOKEN, READ_ONLY_TOKEN=f"{READ_TOKEN},another-read-token")
    cli = [sys.executable, "-m", "services.entrypoints.cluster"]
    started = subprocess.run(
        [*cli, "up", "--wait", "240"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        if started.returncode != 0:
            pytest.fail(f"cluster up failed:\n{started.stdout}\n{started.stderr}\n{_logs(var_dir)}")
        yield Cluster(ports, var_dir)
    finally:
        subprocess.run([*cli, "down"], cwd=REPO, env=env, capture_output=True, timeout=120)


def _scrape_config(cluster: Cluster, token_file: Path) -> dict[str, Any]:
    """deploy/prometheus/prometheus.yml aimed at the local cluster; nothing else changed."""
    config: dict[str, Any] = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    config["global"].update(
        scrape_interval=SCRAPE_INTERVAL, scrape_timeout=SCRAPE_INTERVAL, evaluation_interval="1s"
    )
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert set(jobs) == set(SERVICES), "one job per service, named after it"
    for name, job in jobs.items():
        (static,) = job["static_configs"]
        (target,) = static["targets"]
        assert target.split(":")[0] == name, "compose service names as targets"
        static["targets"] = [f"127.0.0.1:{cluster.ports[name]}"]
        if "authorization" in job:
            job["authorization"]["credentials_file"] = str(token_file)
    return config


@pytest.fixture(scope="module")
def prometheus(
    prometheus_binary: str, cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    home = tmp_path_factory.mktemp("prometheus")
    token_file = home / "gateway-token"
    # What docker-compose.yml's Prometheus entrypoint writes: the first READ_ONLY_TOKEN.
    token_file.write_text(READ_TOKEN)
    config_file = home / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(_scrape_config(cluster, token_file)))
    port = free_port()
    log = home / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                prometheus_binary,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={home / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait(lambda: _ready(url), 30, lambda: f"Prometheus not ready:\n{log.read_text()}")
        yield Prometheus(url, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=2, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return False


def _wait(condition: Callable[[], bool], seconds: float, explain: Callable[[], str]) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(explain())
        time.sleep(0.25)


def _targets(prom: Prometheus) -> dict[str, str]:
    body = httpx.get(f"{prom.url}/api/v1/targets", timeout=5, trust_env=False).json()
    return {t["labels"]["job"]: t["health"] for t in body["data"]["activeTargets"]}


def test_prometheus_scrapes_all_four_services(prometheus: Prometheus) -> None:
    _wait(
        lambda: _targets(prometheus) == dict.fromkeys(SERVICES, "up"),
        30,
        lambda: f"targets not all up: {_targets(prometheus)}\n{prometheus.log.read_text()}",
    )
    up = {r["metric"]["job"]: r["value"][1] for r in prometheus.query("up")}
    assert up == dict.fromkeys(SERVICES, "1")


def test_the_gateway_metrics_need_the_token_prometheus_sends(cluster: Cluster) -> None:
    """So `up` above proves the bearer-token scrape configuration works."""
    url = f"{cluster.gateway}/metrics"
    assert httpx.get(url, timeout=5, trust_env=False).status_code == 401
    headers = {"Authorization": f"Bearer {READ_TOKEN}"}
    assert httpx.get(url, headers=headers, timeout=5, trust_env=False).status_code == 200


def test_an_upload_raises_the_ingest_counters(
    prometheus: Prometheus, cluster: Cluster, shared_files: Path
) -> None:
    documents = 'sum(mvdb_documents_ingested_total{job="gateway"})'
    chunks = 'sum(mvdb_chunks_ingested_total{job="gateway"})'
    # Wait for a first scrape of the gateway so that "before" is a real reading.
    _wait(lambda: bool(prometheus.query(chunks)), 30, lambda: "gateway never scraped")
    docs_before, chunks_before = prometheus.value(documents), prometheus.value(chunks)

    sample = shared_files / "markitdown" / "test.docx"
    with sample.open("rb") as fh:
        response = httpx.post(
            f"{cluster.gateway}/upload",
            files={"file": (sample.name, fh)},
            data={"library": "deploy-e2e"},
            headers={"Authorization": f"Bearer {FULL_TOKEN}"},
            timeout=120,
            trust_env=False,
        )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] in ("indexed", "replaced"), result
    assert result["chunk_count"] > 0

    def counted() -> bool:
        return (
            prometheus.value(documents) >= docs_before + 1
            and prometheus.value(chunks) >= chunks_before + result["chunk_count"]
        )

    _wait(
        counted,
        20,
        lambda: (
            f"counters did not rise: documents {prometheus.value(documents)} "
            f"(was {docs_before}), chunks {prometheus.value(chunks)} (was {chunks_before}, "
            f"+{result['chunk_count']} expected)"
        ),
    )
    by_status = prometheus.query("sum by (status) (mvdb_documents_ingested_total)")
    assert result["status"] in {r["metric"]["status"] for r in by_status}


def test_every_dashboard_query_runs(prometheus: Prometheus) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    # Grafana's variables, as Grafana would expand them for "All services".
    variables = {
        "$job": "converter|embedder|index|gateway",
        "$__rate_interval": "1m",
        "$__range": "1h",
    }
    queries = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    assert queries
    for expr in queries:
        for name, value in sorted(variables.items(), key=lambda kv: -len(kv[0])):
            expr = expr.replace(name, value)
        assert "$" not in expr, expr
        prometheus.query(expr)  # asserts HTTP 200 and status "success"
    # The service-level panels have data once the targets are scraped.
    assert prometheus.query('sum by (job) (process_resident_memory_bytes{job=~".+"})')


@pytest.mark.parametrize("service", SERVICES)
def test_container_healthcheck_script_passes_against_the_real_service(
    cluster: Cluster, service: str
) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "MVDB_SERVICE": service,
        f"{service.upper()}_PORT": str(cluster.ports[service]),
    }
    result = run([sys.executable, str(DEPLOY / "docker" / "healthcheck.py")], env=env)
    assert result.returncode == 0, result.stdout
