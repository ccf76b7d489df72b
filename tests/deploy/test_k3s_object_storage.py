"""deploy/k3s-object-storage: the overlay that runs the index on object storage as one writer
and autoscaled readers. Rendered with `kubectl kustomize` (offline) and validated with
kubernetes-validate --strict, then checked for what the design depends on: no volume, one
writer that is never two, readers that scale, the gateway reading from them, the storage
credentials from a Secret, and index pods that may connect to the storage endpoint (and DNS)
and nowhere else."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from services.converter.settings import ConverterSettings
from services.embedder.settings import EmbedderSettings
from services.gateway.settings import GatewaySettings
from services.index.settings import IndexSettings
from tests.deploy.conftest import DEPLOY, one_resource, run
from tests.deploy.netpol import (
    KUBE_DNS,
    NAMESPACE,
    PROMETHEUS,
    STRANGER,
    TRAEFIK,
    Pod,
    Resource,
    connects,
    pod,
)
from tests.deploy.podspec import Manifests

OVERLAY = DEPLOY / "k3s-object-storage"
CUSTOM_KINDS = {"Kustomization", "ServiceMonitor"}


def _kustomize_minor(kubectl: str) -> int:
    result = run([kubectl, "version", "--client", "-o", "json"])
    if result.returncode != 0:
        return 0
    found = re.search(r'"minor":\s*"(\d+)', result.stdout)
    return int(found[1]) if found else 0


@pytest.fixture(scope="module")
def rendered(kubectl: str) -> list[Resource]:
    if _kustomize_minor(kubectl) < 21:
        pytest.skip("this kubectl's kustomize (v2) predates directory resources in overlays")
    result = run([kubectl, "kustomize", str(OVERLAY)])
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def _container(docs: list[Resource], name: str) -> dict[str, Any]:
    (container,) = one_resource(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_the_overlay_and_its_rendering_pass_kubernetes_validate_strict(
    kubernetes_validate: list[str], kubectl: str, tmp_path: Path, rendered: list[Resource]
) -> None:
    files = sorted(str(p) for p in OVERLAY.glob("*.yaml"))
    result = run([*kubernetes_validate, "--strict", *files])
    assert result.returncode == 0, result.stdout + result.stderr
    unknown = set(re.findall(r"Couldn't find schema for kind (\w+)", result.stdout + result.stderr))
    assert unknown <= CUSTOM_KINDS, unknown - CUSTOM_KINDS
    out = tmp_path / "rendered.yaml"
    out.write_text(yaml.safe_dump_all(rendered))
    validated = run([*kubernetes_validate, "--strict", "--quiet", str(out)])
    assert validated.returncode == 0, validated.stdout + validated.stderr
    for doc in rendered:
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == NAMESPACE


def test_no_volume_and_one_writer_that_is_never_two(rendered: list[Resource]) -> None:
    assert not [d for d in rendered if d["kind"] in ("StatefulSet", "PersistentVolumeClaim")]
    assert not [d for d in rendered if d["metadata"]["name"] == "index-headless"]
    for workload in (d for d in rendered if d["kind"] == "Deployment"):
        for volume in workload["spec"]["template"]["spec"].get("volumes", []):
            assert set(volume) == {"name", "emptyDir"}, (workload["metadata"]["name"], volume)
    writer = one_resource(rendered, "Deployment", "index")
    assert writer["spec"]["replicas"] == 1
    assert writer["spec"]["strategy"] == {"type": "Recreate"}, "a rollout must not overlap"
    scaled = {
        h["spec"]["scaleTargetRef"]["name"]
        for h in rendered
        if h["kind"] == "HorizontalPodAutoscaler"
    }
    assert "index" not in scaled
    assert Manifests(rendered).workload_env("index")["INDEX_ROLE"] == "writer"


def test_readers_are_an_autoscaled_deployment_behind_their_own_service(
    rendered: list[Resource],
) -> None:
    readers = one_resource(rendered, "Deployment", "index-reader")
    assert "replicas" not in readers["spec"], "the HPA owns the count"
    hpa = one_resource(rendered, "HorizontalPodAutoscaler", "index-reader")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "index-reader",
    }
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    assert Manifests(rendered).workload_env("index-reader")["INDEX_ROLE"] == "reader"
    labels = {
        d["metadata"]["name"]: d["spec"]["template"]["metadata"]["labels"]
        for d in rendered
        if d["kind"] == "Deployment"
    }
    for service, workload in (("index", "index"), ("index-reader", "index-reader")):
        selector = one_resource(rendered, "Service", service)["spec"]["selector"]
        chosen = [
            name for name, pod_labels in labels.items() if selector.items() <= pod_labels.items()
        ]
        assert chosen == [workload], (service, chosen)
    for name in ("index", "index-reader"):
        container = _container(rendered, name)
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert container["image"] == "mcpvectordb/index:local"
    scraped = one_resource(rendered, "Service", "index-reader")["metadata"]["labels"]
    assert scraped["mcpvectordb.io/metrics"] == "internal", "the ServiceMonitor scrapes readers"


def test_settings_point_the_gateway_at_the_readers_and_the_index_at_the_bucket(
    rendered: list[Resource], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = one_resource(rendered, "ConfigMap", "mcpvectordb-config")["data"]
    known = {name.upper() for cls in (IndexSettings, GatewaySettings) for name in cls.model_fields}
    for key in list(os.environ):
        if key.upper() in known:
            monkeypatch.delenv(key)
    for key, value in Manifests(rendered).workload_env("index-reader").items():
        monkeypatch.setenv(key, value)
    index = IndexSettings()
    assert index.index_role == "reader"
    assert index.lancedb_uri.startswith("s3://")
    monkeypatch.setenv("AUTH_TOKEN", "t")
    gateway = GatewaySettings()
    service = one_resource(rendered, "Service", "index-reader")
    (port,) = service["spec"]["ports"]
    assert gateway.index_read_urls == [f"http://index-reader:{port['port']}"]
    assert gateway.index_url == f"http://index:{port['port']}"
    assert gateway.index_read_consistency_s == index.index_read_consistency_s
    assert index.lancedb_storage_options["region"]
    every = {
        name.upper()
        for cls in (ConverterSettings, EmbedderSettings, IndexSettings, GatewaySettings)
        for name in cls.model_fields
    }
    unknown = set(config) - every - {"HF_HUB_OFFLINE", "FORWARDED_ALLOW_IPS"}
    assert not unknown, f"ConfigMap keys no service reads (typo?): {sorted(unknown)}"


def test_storage_credentials_come_from_a_secret_only_the_index_pods_read(
    rendered: list[Resource],
) -> None:
    secret = one_resource(rendered, "Secret", "mcpvectordb-storage")
    assert set(secret["stringData"]) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
    assert set(secret["stringData"].values()) == {""}, "no credentials in the repository"
    config = one_resource(rendered, "ConfigMap", "mcpvectordb-config")["data"]
    assert not any("SECRET" in key or "ACCESS_KEY" in key for key in config)
    for workload in (d for d in rendered if d["kind"] == "Deployment"):
        name = workload["metadata"]["name"]
        refs = [
            source["secretRef"]["name"]
            for source in _container(rendered, name).get("envFrom", [])
            if "secretRef" in source
        ]
        wanted = ["mcpvectordb-storage"] if name in ("index", "index-reader") else []
        assert refs == wanted, name


def _storage_peer(policies: list[Resource]) -> tuple[str, int]:
    policy = one_resource(policies, "NetworkPolicy", "index-storage-egress")
    rule = next(r for r in policy["spec"]["egress"] if "ipBlock" in r["to"][0])
    address = rule["to"][0]["ipBlock"]["cidr"].split("/")[0]
    return address, int(rule["ports"][0]["port"])


def test_index_pods_reach_the_storage_endpoint_and_dns_only(rendered: list[Resource]) -> None:
    policies = [d for d in rendered if d["kind"] == "NetworkPolicy"]
    storage, port = _storage_peer(policies)
    pods = {
        d["metadata"]["name"]: Pod(NAMESPACE, d["spec"]["template"]["metadata"]["labels"])
        for d in rendered
        if d["kind"] == "Deployment"
    }
    for name in ("index", "index-reader"):
        index = pods[name]
        assert connects(policies, index, storage, port), name
        assert connects(policies, index, KUBE_DNS, 53, "UDP"), name
        assert not connects(policies, index, storage, port + 1), "other ports stay shut"
        for elsewhere in ("93.184.216.34", "10.43.0.1", "169.254.169.254", "192.168.1.1"):
            assert not connects(policies, index, elsewhere, port), (name, elsewhere)
        for other in ("gateway", "converter", "embedder"):
            assert not connects(policies, index, pods[other], 8000), (name, other)
    for name in ("converter", "embedder"):
        assert not connects(policies, pods[name], storage, port), name


def test_only_the_gateway_and_prometheus_reach_the_readers(rendered: list[Resource]) -> None:
    policies = [d for d in rendered if d["kind"] == "NetworkPolicy"]
    readers = Pod(
        NAMESPACE,
        one_resource(rendered, "Deployment", "index-reader")["spec"]["template"]["metadata"][
            "labels"
        ],
    )
    assert connects(policies, pod("gateway"), readers, 8003)
    assert connects(policies, PROMETHEUS, readers, 8003)
    assert not connects(policies, pod("gateway"), readers, 8004)
    for source in (pod("converter"), pod("embedder"), STRANGER, TRAEFIK):
        assert not connects(policies, source, readers, 8003), source
