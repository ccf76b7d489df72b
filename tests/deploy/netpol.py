"""A small evaluator of Kubernetes NetworkPolicy semantics (matchLabels peers, ports,
ipBlocks), for the manifests of deploy/k3s and its overlays: no cluster is available, so the
policies are checked by asking whether one pod (or an outside address) may connect to another.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

Resource = dict[str, Any]
NAMESPACE = "mcpvectordb"


@dataclass(frozen=True)
class Pod:
    namespace: str
    labels: dict[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.namespace, tuple(sorted(self.labels.items()))))


NAMESPACE_LABELS = {
    ns: {"kubernetes.io/metadata.name": ns}
    for ns in (NAMESPACE, "kube-system", "monitoring", "ingress-nginx", "other")
}
Target = Pod | str  # a pod, or an IP address outside the cluster


def pod(name: str) -> Pod:
    return Pod(NAMESPACE, {"app.kubernetes.io/name": name})


TRAEFIK = Pod("kube-system", {"app.kubernetes.io/name": "traefik"})
KUBE_DNS = Pod("kube-system", {"k8s-app": "kube-dns"})
PROMETHEUS = Pod("monitoring", {"app.kubernetes.io/name": "prometheus"})
STRANGER = Pod("other", {"app": "anything"})


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "the evaluator knows matchLabels only"
    return bool(selector.get("matchLabels", {}).items() <= labels.items())


def _peer_matches(peer: dict[str, Any], target: Target, own_namespace: str) -> bool:
    if "ipBlock" in peer:
        if isinstance(target, Pod):
            return False
        address = ipaddress.ip_address(target)
        block = peer["ipBlock"]
        if address not in ipaddress.ip_network(block["cidr"]):
            return False
        return not any(address in ipaddress.ip_network(e) for e in block.get("except", []))
    if not isinstance(target, Pod):
        return False
    if "namespaceSelector" in peer:
        if not _selects(peer["namespaceSelector"], NAMESPACE_LABELS[target.namespace]):
            return False
    elif target.namespace != own_namespace:
        return False
    return _selects(peer.get("podSelector", {}), target.labels)


def _allowed(
    policies: list[Resource], direction: str, subject: Pod, peer: Target, port: int, proto: str
) -> bool:
    """Does the policy set let `subject` receive from (Ingress) / send to (Egress) `peer`?"""
    if subject.namespace != NAMESPACE:
        return True  # only our namespace has policies
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    selecting = [
        p
        for p in policies
        if direction in p["spec"]["policyTypes"]
        and _selects(p["spec"]["podSelector"], subject.labels)
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get(key, []):
            peers = rule.get(peers_key)
            ports = rule.get("ports")
            peer_ok = peers is None or any(_peer_matches(p, peer, NAMESPACE) for p in peers)
            port_ok = ports is None or any(
                p["port"] == port and p.get("protocol", "TCP") == proto for p in ports
            )
            if peer_ok and port_ok:
                return True
    return False


def connects(
    policies: list[Resource], source: Target, dest: Target, port: int, proto: str = "TCP"
) -> bool:
    out_ok = not isinstance(source, Pod) or _allowed(policies, "Egress", source, dest, port, proto)
    in_ok = not isinstance(dest, Pod) or _allowed(policies, "Ingress", dest, source, port, proto)
    return out_ok and in_ok
