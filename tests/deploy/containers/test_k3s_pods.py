"""deploy/k3s and deploy/k3s-object-storage as `kubectl kustomize` renders them, their pods run
by `pods.Pods` (what a kubelet does with a pod spec, in Docker; no API server is installable
here) on the images this tier built, with the changes docs/deploy.md tells a user to make:
the tokens in the Secret and, on object storage, the bucket's endpoint and credentials.

- The shipped Secret (no tokens) keeps the gateway from serving: its pod crash-loops and its
  log says why.
- deploy/k3s: every pod starts within its startup probe's budget and becomes ready by its own
  readiness probe, under its limits, its UID, a read-only root and no capabilities; the
  gateway, reached as `kubectl port-forward svc/gateway` would, serves MCP with the token
  (ingest, search, a read-only token's search); every pod's `prometheus.io` annotation names a
  port and path that serve its metrics; `kubectl delete pod index-0` brings the StatefulSet's
  pod back on its claim with the library intact.
- deploy/k3s-object-storage: the index writer and the readers (as many as the HPA's minimum)
  on one bucket of an S3-compatible server run as a pod beside them (the `s3` image); the
  gateway's writes reach the writer, another session finds them through the readers, a write
  sent to a reader is refused, the tables are in the bucket, and no credential is logged.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.conftest import REPO
from tests.deploy.conftest import DEPLOY, run
from tests.deploy.containers import engine
from tests.deploy.containers.engine import SERVICES
from tests.deploy.containers.pods import Pods, running
from tests.deploy.containers.stack import Stack
from tests.deploy.podspec import WORKLOADS, Resource
from tests.mcp_client import sse_tools

pytestmark = pytest.mark.timeout(1500)

TOKEN = "k3s-pods-" + uuid.uuid4().hex
READ_ONLY_TOKEN = "k3s-pods-ro-" + uuid.uuid4().hex
STORAGE_KEY = "mcpvectordb"
STORAGE_SECRET = "mcpvectordb-local-" + uuid.uuid4().hex[:8]


def rendered(kubectl: str, folder: Path) -> list[Resource]:
    result = run([kubectl, "kustomize", str(folder)])
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def images(stack: Stack) -> dict[str, str]:
    """The overlay's `images:`: the manifests' `mcpvectordb/<service>:local` are this tier's."""
    return {f"mcpvectordb/{s}:local": stack.image(s) for s in (*SERVICES, "s3")}


def run_pods(
    stack: Stack, resources: list[Resource], workdir: Path, prefix: str
) -> AbstractContextManager[Pods]:
    """`resources`' pods on the tier's images, under a name of their own."""
    name = f"{prefix}{uuid.uuid4().hex[:6]}"
    return running(stack.docker, resources, name=name, workdir=workdir, images=images(stack))


def set_data(resources: list[Resource], kind: str, name: str, **values: str) -> None:
    """What an overlay's patch of a ConfigMap or Secret does."""
    for resource in resources:
        if resource["kind"] == kind and resource["metadata"]["name"] == name:
            resource.setdefault("stringData" if kind == "Secret" else "data", {}).update(values)
            return
    raise AssertionError(f"{kind} {name} is not in the manifests")


def with_tokens(resources: list[Resource]) -> list[Resource]:
    set_data(
        resources, "Secret", "mcpvectordb-auth", AUTH_TOKEN=TOKEN, READ_ONLY_TOKEN=READ_ONLY_TOKEN
    )
    return resources


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_shipped_secret_stops_the_gateway_with_a_reason(
    stack: Stack, kubectl: str, tmp_path: Path
) -> None:
    resources = [
        r
        for r in rendered(kubectl, DEPLOY / "k3s")
        if r["kind"] not in WORKLOADS or r["metadata"]["name"] == "gateway"
    ]
    with run_pods(stack, resources, tmp_path, "k3sgw") as pods:
        (gateway,) = pods.of("gateway")
        deadline = time.monotonic() + 120
        while pods.restarts(gateway) < 1:
            assert time.monotonic() < deadline, f"the gateway kept running:\n{pods.logs(gateway)}"
            time.sleep(0.5)
        container = gateway.spec["containers"][0]
        assert not pods.probe(gateway, container, container["livenessProbe"]), "it serves"
        assert "refusing to listen on 0.0.0.0 without AUTH_TOKEN" in pods.logs(gateway)


def test_the_k3s_manifests_run_the_product(stack: Stack, kubectl: str, tmp_path: Path) -> None:
    resources = with_tokens(rendered(kubectl, DEPLOY / "k3s"))
    started = time.monotonic()
    with run_pods(stack, resources, tmp_path, "k3s") as pods:
        assert {p.workload["metadata"]["name"] for p in pods.pods.values()} == set(SERVICES)
        pods.wait_ready()
        engine.REPORT.append(f"k3s pods ready in {time.monotonic() - started:.0f}s")
        gateway = pods.url("gateway")
        word = f"k{uuid.uuid4().hex[:10]}"
        written = _ingest_and_find(gateway, word)
        assert written["status"] == "indexed", written
        found = _search(gateway, word, READ_ONLY_TOKEN)
        assert f"k3s-{word}.md" in {hit["source"] for hit in found["results"]}, found
        _check_metrics_annotations(pods)

        (index,) = pods.of("index")
        claim = tmp_path / "pv" / f"data-{index.name}"
        assert any(claim.rglob("*.lance")), "the index wrote nowhere but its claim"
        index = pods.delete_pod(index)
        pods.wait_ready([index])
        found = _search(gateway, word, TOKEN)
        assert f"k3s-{word}.md" in {hit["source"] for hit in found["results"]}, found
        for pod in pods.pods.values():
            assert pods.restarts(pod) == 0, pods.logs(pod)
            assert not pods.state(pod)["OOMKilled"], pod.name


def _check_metrics_annotations(pods: Pods) -> None:
    """Prometheus's pod discovery (prometheus.yml's kubernetes-pods job) scrapes the port and
    path the annotations name; the gateway's metrics take the read-only token."""
    for pod in pods.pods.values():
        notes = pod.workload["spec"]["template"]["metadata"].get("annotations", {})
        assert notes.get("prometheus.io/scrape") == "true", pod.name
        container = pod.spec["containers"][0]
        port = pod.host_ports[(container["name"], int(notes["prometheus.io/port"]))]
        answer = httpx.get(
            f"http://127.0.0.1:{port}{notes['prometheus.io/path']}",
            headers=_bearer(READ_ONLY_TOKEN),
            timeout=10,
        )
        assert answer.status_code == 200 and "mvdb_" in answer.text, (pod.name, answer.text[:300])


def _ingest_and_find(gateway: str, word: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with sse_tools(gateway + "/sse", headers=_bearer(TOKEN)) as tools:
            written = await tools.call(
                "ingest_content",
                content=f"The {word} ledger lists the {word} shipments of the year.",
                source=f"k3s-{word}.md",
            )
            found = await tools.call("search", query=word, top_k=3)
            assert written["source"] in {hit["source"] for hit in found["results"]}, found
            return written

    return asyncio.run(go())


def _search(gateway: str, word: str, token: str) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with sse_tools(gateway + "/sse", headers=_bearer(token)) as tools:
            return await tools.call("search", query=word, top_k=3)

    return asyncio.run(go())


def _s3_image(stack: Stack) -> str:
    """The `s3` target (ministack), as the compose `s3` profile builds it."""
    tag = stack.image("s3")
    stack.docker(
        "build",
        "--target",
        "s3",
        "--build-arg",
        f"PYTHON_IMAGE={stack.base.python}",
        "-t",
        tag,
        str(REPO),
        timeout=1800,
    )
    return tag


def _s3_server(tag: str) -> list[Resource]:
    """The bucket's server as a Deployment and Service of the same namespace (in a cluster it
    is outside; the manifests only name its endpoint)."""
    labels = {"app.kubernetes.io/name": "s3"}
    check = {"exec": {"command": ["python", "/usr/local/bin/mvdb-s3server", "check"]}}
    container = {
        "name": "s3",
        "image": tag,
        "ports": [{"name": "http", "containerPort": 4566}],
        "env": [{"name": "S3_BUCKETS", "value": "mcpvectordb"}],
        "startupProbe": {**check, "periodSeconds": 2, "failureThreshold": 60},
        "readinessProbe": check,
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }
    template = {
        "metadata": {"labels": labels},
        "spec": {
            # Else the gateway Service's link variable GATEWAY_PORT=tcp://... would be
            # ministack's port setting, as it would be in a cluster.
            "enableServiceLinks": False,
            "containers": [container],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
    }
    return [
        {"kind": "Deployment", "metadata": {"name": "s3"}, "spec": {"template": template}},
        {
            "kind": "Service",
            "metadata": {"name": "s3"},
            "spec": {"selector": labels, "ports": [{"port": 4566, "targetPort": "http"}]},
        },
    ]


def test_the_object_storage_manifests_run_a_writer_and_readers(
    stack: Stack, kubectl: str, tmp_path: Path
) -> None:
    resources = with_tokens(rendered(kubectl, DEPLOY / "k3s-object-storage"))
    options = {"endpoint": "http://s3:4566", "allow_http": "true", "region": "us-east-1"}
    set_data(
        resources,
        "ConfigMap",
        "mcpvectordb-config",
        LANCEDB_STORAGE_OPTIONS=json.dumps(options),
        INDEX_READ_CONSISTENCY_S="3",
    )
    set_data(
        resources,
        "Secret",
        "mcpvectordb-storage",
        AWS_ACCESS_KEY_ID=STORAGE_KEY,
        AWS_SECRET_ACCESS_KEY=STORAGE_SECRET,
    )
    resources += _s3_server(_s3_image(stack))
    started = time.monotonic()
    with run_pods(stack, resources, tmp_path, "k3ss3") as pods:
        readers = pods.of("index-reader")
        assert len(readers) == 2, "the HPA's minimum"
        pods.wait_ready()
        engine.REPORT.append(f"k3s object-storage pods ready in {time.monotonic() - started:.0f}s")
        assert len(pods.of("index")) == 1, "one writer"
        info = httpx.get(pods.url("index") + "/info", timeout=10).json()
        assert info["role"] == "writer" and info["uri"] == "s3://mcpvectordb/lancedb", info
        reader_urls = [f"http://127.0.0.1:{p.host_ports[('index-reader', 8003)]}" for p in readers]
        for url in reader_urls:
            reader = httpx.get(url + "/info", timeout=10).json()
            assert reader["role"] == "reader" and reader["uri"] == info["uri"], reader

        gateway = pods.url("gateway")
        word = f"s{uuid.uuid4().hex[:10]}"
        written = _ingest_and_find(gateway, word)  # read-your-writes: the same session
        deadline = time.monotonic() + 40
        while f"k3s-{word}.md" not in {
            h["source"] for h in _search(gateway, word, TOKEN)["results"]
        }:
            assert time.monotonic() < deadline, "the readers never showed the document"
            time.sleep(0.5)
        metrics = httpx.get(gateway + "/metrics", headers=_bearer(TOKEN), timeout=10).text
        assert 'mvdb_index_reads_total{target="reader1"}' in metrics, "no read went to a reader"
        refused = httpx.delete(f"{reader_urls[0]}/documents/{written['doc_id']}", timeout=10)
        assert refused.status_code == 405, refused.text
        assert refused.json()["error_code"] == "read_only_replica"
        listing = httpx.get(
            pods.url("s3") + "/mcpvectordb?list-type=2&prefix=lancedb/&max-keys=1000", timeout=10
        ).text
        assert "lancedb/chunks.lance/" in listing and "lancedb/documents.lance/" in listing
        for pod in pods.pods.values():
            assert STORAGE_SECRET not in pods.logs(pod, tail=100000), f"{pod.name} logged it"
            assert not pods.state(pod)["OOMKilled"], pod.name
