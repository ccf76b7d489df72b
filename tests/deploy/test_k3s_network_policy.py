"""deploy/k3s's NetworkPolicies, evaluated by a small model of their semantics (matchLabels
peers, ports, ipBlocks; `tests.deploy.netpol`) since no cluster is available to apply them:
default deny both ways, only the gateway reaches the internal services, Prometheus scrapes
them all, the ingress controller reaches the gateway, the gateway alone reaches the internet
(never private ranges), and DNS only where it is needed."""

from __future__ import annotations

from typing import Any

import pytest

from tests.deploy.conftest import k3s_resources
from tests.deploy.netpol import KUBE_DNS, PROMETHEUS, STRANGER, TRAEFIK, connects, pod

Resource = dict[str, Any]
SERVICES = {"converter": 8001, "embedder": 8002, "index": 8003, "gateway": 8000}


@pytest.fixture(scope="module")
def policies() -> list[Resource]:
    return [d for d in k3s_resources() if d["kind"] == "NetworkPolicy"]


def test_default_deny_covers_every_pod_both_ways(policies: list[Resource]) -> None:
    deny = [p for p in policies if p["spec"]["podSelector"] == {}]
    assert len(deny) == 1
    assert set(deny[0]["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny[0]["spec"] and "egress" not in deny[0]["spec"]


def test_only_the_gateway_reaches_the_internal_services(policies: list[Resource]) -> None:
    gateway = pod("gateway")
    for name in ("converter", "embedder", "index"):
        port = SERVICES[name]
        assert connects(policies, gateway, pod(name), port), name
        assert not connects(policies, gateway, pod(name), port + 100), "other ports stay shut"
        for other in set(SERVICES) - {name, "gateway"}:
            assert not connects(policies, pod(other), pod(name), port), (other, name)
        assert not connects(policies, STRANGER, pod(name), port)
        assert not connects(policies, TRAEFIK, pod(name), port)


def test_prometheus_scrapes_every_service(policies: list[Resource]) -> None:
    for name, port in SERVICES.items():
        assert connects(policies, PROMETHEUS, pod(name), port), name


def test_the_ingress_controller_reaches_the_gateway(policies: list[Resource]) -> None:
    assert connects(policies, TRAEFIK, pod("gateway"), 8000)
    assert not connects(policies, STRANGER, pod("gateway"), 8000)


def test_egress_internet_for_the_gateway_only_and_never_private(policies: list[Resource]) -> None:
    public, private = (
        ("93.184.216.34", "2606:4700::1111"),
        (
            "10.43.0.1",  # k3s service network
            "10.42.0.7",  # k3s pod network
            "169.254.169.254",  # cloud metadata
            "192.168.1.1",
            "172.17.0.1",
            "127.0.0.1",
            "100.64.0.1",
            "fd00::1",
        ),
    )
    for address in public:
        assert connects(policies, pod("gateway"), address, 443), address
    for address in private:
        assert not connects(policies, pod("gateway"), address, 443), address
    for name in ("converter", "embedder", "index"):
        for address in (*public, *private):
            assert not connects(policies, pod(name), address, 443), (name, address)


def test_dns_only_where_needed(policies: list[Resource]) -> None:
    assert connects(policies, pod("gateway"), KUBE_DNS, 53, "UDP")
    assert connects(policies, pod("gateway"), KUBE_DNS, 53, "TCP")
    for name in ("converter", "embedder", "index"):
        assert not connects(policies, pod(name), KUBE_DNS, 53, "UDP"), name
