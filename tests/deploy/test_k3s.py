"""deploy/k3s: schema-valid, renderable with kustomize, and holding the rules the deployment
depends on (single index writer, single gateway, probes, limits, who may talk to whom).

kubernetes-validate --strict checks every built-in kind against the Kubernetes OpenAPI schema
(custom resources such as ServiceMonitor pass with a warning). `kubectl kustomize` renders
offline. No cluster is available, so nothing is applied: the NetworkPolicies are checked with
a small evaluator of the policy semantics (matchLabels peers, ports, ipBlocks) instead.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from libs.errors import MvdbError
from services.converter.settings import ConverterSettings
from services.embedder.settings import EmbedderSettings
from services.gateway.app import check_exposure
from services.gateway.settings import GatewaySettings
from services.index.settings import IndexSettings
from tests.conftest import REPO
from tests.deploy.conftest import (
    K3S,
    compose_config,
    compose_project,
    dockerfile_stages,
    image_env,
    k3s_kustomization,
    k3s_resources,
    load_all,
    one_resource,
    run,
)
from tests.deploy.podspec import Manifests

Resource = dict[str, Any]
SERVICES = {"converter": 8001, "embedder": 8002, "index": 8003, "gateway": 8000}
NAMESPACE = "mcpvectordb"
# Kinds kubernetes-validate has no schema for; anything else unknown is a typo.
CUSTOM_KINDS = {"Kustomization", "ServiceMonitor", "HelmChartConfig"}
# Oldest Kubernetes these manifests are meant for, and the validator's newest.
K8S_VERSIONS = ("1.28.0", None)
# ConfigMap keys that are not service settings but still read in the pods.
NON_SETTING_KEYS = {"HF_HUB_OFFLINE", "FORWARDED_ALLOW_IPS"}


def _workloads(docs: list[Resource]) -> Iterator[Resource]:
    yield from (d for d in docs if d["kind"] in ("Deployment", "StatefulSet"))


# --- schema and rendering -----------------------------------------------------------------------


@pytest.mark.parametrize("version", K8S_VERSIONS, ids=lambda v: v or "latest")
def test_manifests_pass_kubernetes_validate_strict(
    kubernetes_validate: list[str], version: str | None
) -> None:
    files = sorted(str(p) for p in K3S.rglob("*.yaml"))
    args = [*kubernetes_validate, "--strict", *(["-k", version] if version else []), *files]
    result = run(args)
    assert result.returncode == 0, result.stdout + result.stderr
    unknown = set(re.findall(r"Couldn't find schema for kind (\w+)", result.stdout + result.stderr))
    assert unknown <= CUSTOM_KINDS, f"kinds without a schema (typo?): {unknown - CUSTOM_KINDS}"


def test_kustomization_lists_every_manifest_and_each_parses() -> None:
    listed = k3s_kustomization()["resources"]
    assert len(listed) == len(set(listed))
    on_disk = {p.name for p in K3S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(listed) == on_disk, "every manifest in deploy/k3s belongs in kustomization.yaml"
    for name in listed:
        docs = load_all(K3S / name)
        assert docs, name
        for doc in docs:
            assert {"apiVersion", "kind", "metadata"} <= set(doc), name


def test_kubectl_kustomize_renders_the_same_resources(
    kubectl: str, kubernetes_validate: list[str], tmp_path: Path
) -> None:
    result = run([kubectl, "kustomize", str(K3S)])
    assert result.returncode == 0, result.stderr
    rendered = [d for d in yaml.safe_load_all(result.stdout) if d]
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    assert sorted(map(key, rendered)) == sorted(map(key, k3s_resources()))
    for doc in rendered:
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == NAMESPACE, key(doc)
    out = tmp_path / "rendered.yaml"
    out.write_text(result.stdout)
    validated = run([*kubernetes_validate, "--strict", "--quiet", str(out)])
    assert validated.returncode == 0, validated.stdout + validated.stderr


def _kustomize_minor(kubectl: str) -> int:
    result = run([kubectl, "version", "--client", "-o", "json"])
    if result.returncode != 0:
        return 0
    return int(re.sub(r"\D", "", json.loads(result.stdout)["clientVersion"]["minor"]) or 0)


def _docs_overlay(target: Path) -> None:
    """Write the overlay that docs/deploy.md shows (its `# my-overlay/<file>` code blocks)."""
    text = (REPO / "docs" / "deploy.md").read_text()
    blocks = re.findall(r"```yaml\n# my-overlay/([\w.]+)[^\n]*\n(.*?)```", text, re.DOTALL)
    assert {name for name, _ in blocks} == {"kustomization.yaml", "host.yaml"}
    for name, body in blocks:
        body = body.replace("../deploy/k3s", os.path.relpath(K3S, target))
        (target / name).write_text(body)
    (target / "auth.env").write_text("AUTH_TOKEN=full-secret\nREAD_ONLY_TOKEN=ro-secret\n")


def test_the_overlay_in_the_docs_sets_tokens_and_host(kubectl: str, tmp_path: Path) -> None:
    if _kustomize_minor(kubectl) < 21:
        pytest.skip("this kubectl's kustomize (v2) predates directory resources in overlays")
    _docs_overlay(tmp_path)
    result = run([kubectl, "kustomize", str(tmp_path)])
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    secrets = [d for d in docs if d["kind"] == "Secret"]
    assert len(secrets) == 1
    assert secrets[0]["data"]["AUTH_TOKEN"] == "ZnVsbC1zZWNyZXQ="  # base64 of full-secret
    gateway = one_resource(docs, "Deployment", "gateway")
    env = gateway["spec"]["template"]["spec"]["containers"][0]["env"]
    refs = {e["valueFrom"]["secretKeyRef"]["name"] for e in env if "valueFrom" in e}
    assert refs == {secrets[0]["metadata"]["name"]}
    config = one_resource(docs, "ConfigMap", "mcpvectordb-config")["data"]
    ingress = one_resource(docs, "Ingress", "gateway")["spec"]
    assert config["ALLOWED_HOSTS"] == ingress["rules"][0]["host"] == "mcp.mydomain.org"
    assert ingress["tls"][0]["hosts"] == ["mcp.mydomain.org"]
    assert config["EMBED_BATCH_SIZE"]  # the patch merged into the ConfigMap, not replaced it


# --- workloads ----------------------------------------------------------------------------------


def test_every_pod_is_hardened_probed_sized_and_annotated() -> None:
    docs = k3s_resources()
    names = set()
    for workload in _workloads(docs):
        name = workload["metadata"]["name"]
        names.add(name)
        pod = workload["spec"]["template"]
        spec = pod["spec"]
        # Service links would inject CONVERTER_PORT=tcp://... over the services' int settings.
        assert spec["enableServiceLinks"] is False, name
        assert spec["automountServiceAccountToken"] is False, name
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["runAsUser"] == 10001, "the Dockerfile's USER"
        port = SERVICES[name]
        annotations = pod["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/port"] == str(port)
        assert annotations["prometheus.io/path"] == "/metrics"
        (container,) = spec["containers"]
        assert container["ports"] == [{"name": "http", "containerPort": port}]
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        for bound in ("requests", "limits"):
            assert set(container["resources"][bound]) == {"cpu", "memory"}, (name, bound)
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert {"/tmp", "/app/var"} <= mounts, "writable scratch on a read-only root"
    assert names == set(SERVICES)


def test_the_index_is_a_single_writer_statefulset_on_a_claim() -> None:
    docs = k3s_resources()
    index = one_resource(docs, "StatefulSet", "index")
    assert index["spec"]["replicas"] == 1
    (claim,) = index["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    mounts = index["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    data = next(m for m in mounts if m["name"] == claim["metadata"]["name"])
    config = one_resource(docs, "ConfigMap", "mcpvectordb-config")["data"]
    assert config["LANCEDB_URI"].startswith(data["mountPath"] + "/")
    headless = one_resource(docs, "Service", index["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    scaled = {h["spec"]["scaleTargetRef"]["name"] for h in docs if h["kind"].endswith("Autoscaler")}
    assert scaled == {"converter", "embedder"}, "only the stateless workers autoscale"


def test_the_gateway_runs_one_replica_replaced_not_rolled() -> None:
    gateway = one_resource(k3s_resources(), "Deployment", "gateway")
    assert gateway["spec"]["replicas"] == 1, "MCP sessions live in one process's memory"
    assert gateway["spec"]["strategy"] == {"type": "Recreate"}


def test_autoscaled_deployments_leave_the_replica_count_to_the_hpa() -> None:
    docs = k3s_resources()
    for name in ("converter", "embedder"):
        assert "replicas" not in one_resource(docs, "Deployment", name)["spec"], name
        hpa = one_resource(docs, "HorizontalPodAutoscaler", name)
        assert hpa["spec"]["minReplicas"] >= 1 < hpa["spec"]["maxReplicas"]


def test_services_select_their_pods_by_a_named_port() -> None:
    docs = k3s_resources()
    pods = {
        w["metadata"]["name"]: w["spec"]["template"]["metadata"]["labels"] for w in _workloads(docs)
    }
    for service in (d for d in docs if d["kind"] == "Service"):
        selector = service["spec"]["selector"]
        matching = [n for n, labels in pods.items() if selector.items() <= labels.items()]
        assert len(matching) == 1, service["metadata"]["name"]
        (port,) = service["spec"]["ports"]
        assert port == {"name": "http", "port": SERVICES[matching[0]], "targetPort": "http"}


# --- configuration ------------------------------------------------------------------------------


def _settings_env(docs: list[Resource], tokens: dict[str, str]) -> dict[str, str]:
    config: dict[str, str] = one_resource(docs, "ConfigMap", "mcpvectordb-config")["data"]
    return {**config, **tokens}


def test_configmap_holds_only_known_settings_that_every_service_accepts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = k3s_resources()
    env = _settings_env(docs, {"AUTH_TOKEN": "t"})
    known = {
        name.upper()
        for cls in (ConverterSettings, EmbedderSettings, IndexSettings, GatewaySettings)
        for name in cls.model_fields
    }
    unknown = set(env) - known - NON_SETTING_KEYS
    assert not unknown, f"ConfigMap keys no service reads (typo?): {sorted(unknown)}"
    for key in list(os.environ):
        if key.upper() in known:
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    for cls in (ConverterSettings, EmbedderSettings, IndexSettings, GatewaySettings):
        cls()  # raises if a value does not parse
    assert EmbedderSettings().embed_batch_size <= 16, "the 1Gi limit was sized for batch <= 16"


def test_shipped_secret_makes_the_gateway_refuse_to_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Empty tokens on purpose: the gateway must not serve the library unauthenticated."""
    docs = k3s_resources()
    secret = one_resource(docs, "Secret", "mcpvectordb-auth")["stringData"]
    gateway = one_resource(docs, "Deployment", "gateway")["spec"]["template"]["spec"]["containers"][
        0
    ]
    keys = {e["valueFrom"]["secretKeyRef"]["key"] for e in gateway["env"] if "valueFrom" in e}
    assert keys == set(secret) == {"AUTH_TOKEN", "READ_ONLY_TOKEN"}
    for key, value in _settings_env(docs, secret).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("ALLOW_UNAUTHENTICATED_REMOTE", raising=False)
    settings = GatewaySettings()
    with pytest.raises(MvdbError):
        check_exposure(settings, settings.bind_host)
    check_exposure(settings.model_copy(update={"auth_token": ["set"]}), settings.bind_host)


def test_ingress_hosts_are_allowed_hosts_and_sse_is_unbuffered() -> None:
    docs = k3s_resources()
    ingress = one_resource(docs, "Ingress", "gateway")
    allowed = one_resource(docs, "ConfigMap", "mcpvectordb-config")["data"]["ALLOWED_HOSTS"].split(
        ","
    )
    for rule in ingress["spec"]["rules"]:
        assert rule["host"] in allowed, "the gateway would answer 421 to its own host name"
        (path,) = rule["http"]["paths"]
        assert path["backend"]["service"] == {"name": "gateway", "port": {"name": "http"}}
    annotations = ingress["metadata"]["annotations"]
    assert annotations["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    assert int(annotations["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600


def test_servicemonitors_select_all_four_services() -> None:
    docs = k3s_resources()
    services = [d for d in docs if d["kind"] == "Service"]
    scraped: set[str] = set()
    for monitor in (d for d in docs if d["kind"] == "ServiceMonitor"):
        selector = monitor["spec"]["selector"]["matchLabels"]
        chosen = [
            s["metadata"]["name"]
            for s in services
            if selector.items() <= s["metadata"].get("labels", {}).items()
        ]
        assert chosen, monitor["metadata"]["name"]
        scraped.update(chosen)
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["port"] == "http" and endpoint["path"] == "/metrics"
        if "gateway" in chosen:
            credentials = endpoint["authorization"]["credentials"]
            secret = one_resource(docs, "Secret", credentials["name"])
            assert credentials["key"] in secret["stringData"]
    assert scraped == set(SERVICES), "each service scraped once (not via index-headless too)"


# --- the same images and settings as compose -----------------------------------------------

SETTINGS_CLASSES = {
    "converter": ConverterSettings,
    "embedder": EmbedderSettings,
    "index": IndexSettings,
    "gateway": GatewaySettings,
}
# Where the two deployments differ on purpose: (service, setting) -> why.
INTENDED_DIFFERENCES = {
    ("gateway", "allowed_hosts"): "k3s serves the Ingress host name; compose only loopback",
    ("gateway", "allow_unauthenticated_remote"): (
        "compose publishes on 127.0.0.1 only; k3s requires the tokens of the Secret"
    ),
    ("embedder", "embed_threads"): "k3s pins ONNX Runtime threads to the pod's CPU limit",
    ("index", "index_staged_max_bytes"): (
        "k3s holds fewer parts of large documents, well under the index pod's memory limit"
    ),
}


def _image_target(image: str) -> tuple[str, str]:
    match = re.fullmatch(r"mcpvectordb/([a-z]+):([\w.-]+)", image)
    assert match, f"{image}: not an image built from this repository's Dockerfile"
    return match[1], match[2]


def test_manifests_run_the_dockerfile_targets_that_compose_builds(
    docker_compose: str, tmp_path: Path
) -> None:
    """Each workload runs the image of its own Dockerfile target, the one compose builds
    and the container tier tests; a manifest naming a target the Dockerfile lacks fails."""
    targets = set(dockerfile_stages())
    compose = compose_config(docker_compose, compose_project(tmp_path))["services"]
    for workload in _workloads(k3s_resources()):
        name = workload["metadata"]["name"]
        (container,) = workload["spec"]["template"]["spec"]["containers"]
        target, tag = _image_target(container["image"])
        assert target in targets, f"{name} runs {container['image']}: no such Dockerfile target"
        assert target == name, f"{name} runs the {target} image"
        assert compose[name]["build"]["target"] == target
        assert compose[name]["image"] == f"mcpvectordb/{target}:{tag}", "the same name and tag"
        assert container["imagePullPolicy"] == "IfNotPresent", "locally imported images"


def _effective(
    service: str, deployment_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """The service's settings in a container: image ENV, then the deployment's variables."""
    cls = SETTINGS_CLASSES[service]
    known = {name.upper() for c in SETTINGS_CLASSES.values() for name in c.model_fields}
    with monkeypatch.context() as patch:
        for key in list(os.environ):
            if key.upper() in known:
                patch.delenv(key)
        for key, value in {**image_env(service), **deployment_env}.items():
            patch.setenv(key, value)
        return cls().model_dump()


def test_settings_agree_between_compose_and_the_configmap(
    docker_compose: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every setting every service reads has the same value under compose (image ENV plus
    docker-compose.yml, whose defaults are .env.example's: test_compose.py) and under k3s
    (image ENV plus the ConfigMap, Secret and env), but for the differences intended above."""
    docs = k3s_resources()
    compose = compose_config(docker_compose, compose_project(tmp_path))["services"]
    drift: list[str] = []
    for service in SETTINGS_CLASSES:
        in_compose = _effective(service, compose[service]["environment"], monkeypatch)
        in_k3s = _effective(service, Manifests(docs).workload_env(service), monkeypatch)
        for name, value in in_compose.items():
            intended = (service, name) in INTENDED_DIFFERENCES
            if (value != in_k3s[name]) != intended:
                drift.append(f"{service}.{name}: compose {value!r}, k3s {in_k3s[name]!r}")
    assert not drift, "settings drifted (or an intended difference is gone):\n" + "\n".join(drift)
    config = one_resource(docs, "ConfigMap", "mcpvectordb-config")["data"]
    for key in NON_SETTING_KEYS:
        assert config[key] == str(
            compose["gateway"]["environment"].get(key, image_env("gateway").get(key))
        ), key


def test_env_example_shows_the_defaults_outside_containers(monkeypatch: pytest.MonkeyPatch) -> None:
    """`# NAME=value` lines of .env.example (fixed in containers) show the value the services
    use outside them: the settings' own default."""
    lines = (REPO / ".env.example").read_text().splitlines()
    active = {line.split("=")[0] for line in lines if re.match(r"^[A-Z][A-Z0-9_]*=", line)}
    commented = {
        match[1]: match[2]
        for line in lines
        if (match := re.match(r"^#\s*([A-Z][A-Z0-9_]*)=(\S+)", line)) and match[1] not in active
    }
    checked = 0
    for service, cls in SETTINGS_CLASSES.items():
        defaults = _effective_outside(cls, {}, monkeypatch)
        for key, value in commented.items():
            if key.lower() in cls.model_fields:
                shown = _effective_outside(cls, {key: value}, monkeypatch)
                assert shown[key.lower()] == defaults[key.lower()], (service, key, value)
                checked += 1
    assert checked >= 10


def _effective_outside(
    cls: type[Any], env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    known = {name.upper() for c in SETTINGS_CLASSES.values() for name in c.model_fields}
    with monkeypatch.context() as patch:
        for key in list(os.environ):
            if key.upper() in known:
                patch.delenv(key)
        for key, value in env.items():
            patch.setenv(key, value)
        settings: dict[str, Any] = cls().model_dump()
        return settings
