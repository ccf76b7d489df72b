"""`tests.deploy.podspec.py`, what the container tier's kubelet stand-in makes of a
pod spec, checked on deploy/k3s without Docker: the environment (service links only where a
pod leaves them on, `envFrom` before `env`, Secrets' keys), replicas with an HPA, quantities
and the security options."""

from __future__ import annotations

import base64

import pytest

from tests.deploy.conftest import k3s_resources, one_resource
from tests.deploy.podspec import Manifests, Unsupported, quantity, security_args


def test_quantities() -> None:
    assert quantity("512Mi") == 512 * 2**20 and quantity("2Gi") == 2 * 2**30
    assert quantity("500m") == 0.5 and quantity("1") == 1 and quantity(2) == 2
    with pytest.raises(Unsupported, match="quantity"):
        quantity("lots")


def test_the_gateway_environment_as_a_kubelet_builds_it() -> None:
    resources = k3s_resources()
    secret = one_resource(resources, "Secret", "mcpvectordb-auth")
    secret["stringData"] = {"READ_ONLY_TOKEN": "ro"}
    secret["data"] = {"AUTH_TOKEN": base64.b64encode(b"rw").decode()}
    manifests = Manifests(resources)
    gateway = one_resource(resources, "Deployment", "gateway")["spec"]["template"]["spec"]
    env = manifests.env("gateway-abc", gateway, gateway["containers"][0])
    assert env["AUTH_TOKEN"] == "rw" and env["READ_ONLY_TOKEN"] == "ro"
    assert env["INDEX_URL"] == "http://index:8003" and env["BIND_HOST"] == "0.0.0.0"
    assert env["KUBERNETES_SERVICE_HOST"] and "INDEX_PORT" not in env  # links are off

    gateway["enableServiceLinks"] = True  # what the manifests must not do
    linked = manifests.env("gateway-abc", gateway, gateway["containers"][0])
    assert linked["INDEX_PORT"].startswith("tcp://") and linked["GATEWAY_PORT"].startswith("tcp")
    assert "INDEX_HEADLESS_PORT" not in linked  # a headless Service has no address


def test_replicas_follow_the_hpa_minimum() -> None:
    resources = k3s_resources()
    manifests = Manifests(resources)
    converter = one_resource(resources, "Deployment", "converter")
    hpa = one_resource(resources, "HorizontalPodAutoscaler", "converter")
    hpa["spec"]["minReplicas"] = 3
    assert manifests.replicas(converter) == 3
    assert manifests.replicas(one_resource(resources, "StatefulSet", "index")) == 1


def test_security_options() -> None:
    index = one_resource(k3s_resources(), "StatefulSet", "index")["spec"]["template"]["spec"]
    args = security_args("index-0", index, index["containers"][0], "10001:10001")
    assert args[:2] == ["--user", "10001:10001"] and "--read-only" in args
    assert "--cap-drop=ALL" in args and args[2:4] == ["--group-add", "10001"]
    root = {"securityContext": {"runAsNonRoot": True}, "containers": []}
    with pytest.raises(AssertionError, match="refuses to start"):
        security_args("p", root, {"name": "c"}, "0")
