"""What a kubelet makes of a pod spec before it starts a container, for `pods.Pods`: the
environment (the `kubernetes` Service's variables it always sets, every Service's link
variables unless `enableServiceLinks: false`, `envFrom` ConfigMaps and Secrets and then `env`:
`value` with `$(VAR)` expanded, `configMapKeyRef`, `secretKeyRef`, the pod's name and
namespace), how many pods a workload has (its HPA's minimum counts), which Services select a
pod, quantities, and the security context as `docker run` options. A field it does not know
is refused by name (`Unsupported`).
"""

from __future__ import annotations

import base64
import re
from typing import Any

Resource = dict[str, Any]
WORKLOADS = ("Deployment", "StatefulSet")
# The `kubernetes` Service's address in a k3s cluster (its default service CIDR).
KUBERNETES_SERVICE = "10.43.0.1"
_QUANTITY = re.compile(r"^([0-9.]+)(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")
_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9}
KNOWN_CONTAINER_KEYS = {
    "name", "image", "imagePullPolicy", "command", "args", "ports", "env", "envFrom",
    "resources", "startupProbe", "readinessProbe", "livenessProbe", "securityContext",
    "volumeMounts",
}  # fmt: skip


class Unsupported(Exception):
    """A field of the manifests that this runner cannot carry out; the message names it."""


def quantity(text: str | int | float) -> float:
    """A Kubernetes quantity ("512Mi", "2Gi", "500m", "1") as a number (bytes or cores)."""
    found = _QUANTITY.match(str(text))
    if found is None:
        raise Unsupported(f"quantity {text!r}")
    number, unit = float(found.group(1)), found.group(2)
    if unit == "m":
        return number / 1000
    return number * _UNITS.get(unit or "", 1)


def labels_match(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def link_name(service: str) -> str:
    return service.upper().replace("-", "_")


class Manifests:
    """Rendered manifests (`kubectl kustomize`'s documents), looked up as a kubelet would."""

    def __init__(self, resources: list[Resource]) -> None:
        self.resources = resources
        self.namespace = next(
            (r["metadata"]["name"] for r in resources if r["kind"] == "Namespace"), "default"
        )

    def of_kind(self, kind: str) -> list[Resource]:
        return [r for r in self.resources if r["kind"] == kind]

    def data(self, kind: str, name: str) -> dict[str, str]:
        for resource in self.of_kind(kind):
            if resource["metadata"]["name"] == name:
                data = dict(resource.get("stringData") or {})
                for key, value in (resource.get("data") or {}).items():
                    data[key] = base64.b64decode(value).decode() if kind == "Secret" else value
                return {key: str(value) for key, value in data.items()}
        raise AssertionError(f"{kind} {name} is not in the manifests (the pod cannot start)")

    def replicas(self, workload: Resource) -> int:
        replicas = int(workload["spec"].get("replicas", 1))
        for hpa in self.of_kind("HorizontalPodAutoscaler"):
            target = hpa["spec"]["scaleTargetRef"]
            if (target["kind"], target["name"]) == (workload["kind"], workload["metadata"]["name"]):
                replicas = max(replicas, int(hpa["spec"].get("minReplicas", 1)))
        return replicas

    def services_of(self, labels: dict[str, str]) -> list[Resource]:
        return [
            s
            for s in self.of_kind("Service")
            if s["spec"].get("selector") and labels_match(s["spec"]["selector"], labels)
        ]

    def workload_env(self, name: str) -> dict[str, str]:
        """The environment of the one container of the workload `name` (its pods' names
        aside, which only `fieldRef` would read)."""
        (workload,) = [
            r for r in self.resources if r["kind"] in WORKLOADS and r["metadata"]["name"] == name
        ]
        spec = workload["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        return self.env(name, spec, container)

    def env(self, pod_name: str, spec: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
        """The container's environment as a kubelet builds it (see the module docstring)."""
        env = {
            "KUBERNETES_SERVICE_HOST": KUBERNETES_SERVICE,
            "KUBERNETES_SERVICE_PORT": "443",
            "KUBERNETES_SERVICE_PORT_HTTPS": "443",
            "KUBERNETES_PORT": f"tcp://{KUBERNETES_SERVICE}:443",
            "KUBERNETES_PORT_443_TCP": f"tcp://{KUBERNETES_SERVICE}:443",
            "KUBERNETES_PORT_443_TCP_PROTO": "tcp",
            "KUBERNETES_PORT_443_TCP_PORT": "443",
            "KUBERNETES_PORT_443_TCP_ADDR": KUBERNETES_SERVICE,
        }
        if spec.get("enableServiceLinks", True):
            for number, service in enumerate(self.of_kind("Service"), start=2):
                if service["spec"].get("clusterIP") == "None":
                    continue
                address, prefix = f"10.43.0.{number}", link_name(service["metadata"]["name"])
                ports = service["spec"]["ports"]
                env[f"{prefix}_SERVICE_HOST"] = address
                env[f"{prefix}_SERVICE_PORT"] = str(ports[0]["port"])
                env[f"{prefix}_PORT"] = f"tcp://{address}:{ports[0]['port']}"
                for port in ports:
                    link = f"{prefix}_PORT_{port['port']}_TCP"
                    env[link] = f"tcp://{address}:{port['port']}"
                    env |= {f"{link}_PROTO": "tcp", f"{link}_PORT": str(port["port"])}
                    env[f"{link}_ADDR"] = address
        for source in container.get("envFrom", []):
            prefix = source.get("prefix", "")
            if "configMapRef" in source:
                found = self.data("ConfigMap", source["configMapRef"]["name"])
            elif "secretRef" in source:
                found = self.data("Secret", source["secretRef"]["name"])
            else:
                raise Unsupported(f"envFrom {source}")
            env |= {prefix + key: value for key, value in found.items()}
        for variable in container.get("env", []):
            env[variable["name"]] = self._env_value(pod_name, variable, env)
        return env

    def _env_value(self, pod_name: str, variable: dict[str, Any], env: dict[str, str]) -> str:
        if "value" in variable:
            return re.sub(r"\$\((\w+)\)", lambda m: env.get(m[1], m[0]), str(variable["value"]))
        ref = variable.get("valueFrom", {})
        if "secretKeyRef" in ref:
            key_ref = ref["secretKeyRef"]
            return self.data("Secret", key_ref["name"])[key_ref["key"]]
        if "configMapKeyRef" in ref:
            key_ref = ref["configMapKeyRef"]
            return self.data("ConfigMap", key_ref["name"])[key_ref["key"]]
        path = ref.get("fieldRef", {}).get("fieldPath")
        if path in ("metadata.name", "metadata.namespace"):
            return pod_name if path == "metadata.name" else self.namespace
        raise Unsupported(f"env {variable['name']}: {variable}")


def security_args(
    pod_name: str, spec: dict[str, Any], container: dict[str, Any], image_user: str
) -> list[str]:
    """`docker run` options for the pod's and the container's security contexts (the
    container's fields win); `image_user` is the image's USER."""
    pod_context = spec.get("securityContext", {})
    context = {**pod_context, **container.get("securityContext", {})}
    args: list[str] = []
    user = context.get("runAsUser", image_user.split(":")[0])
    if context.get("runAsNonRoot") and (not str(user).isdigit() or int(user) == 0):
        raise AssertionError(
            f"{pod_name}: runAsNonRoot with user {user!r}: the kubelet refuses to start it"
        )
    group = context.get("runAsGroup")
    args += ["--user", f"{user}:{group}" if group is not None else str(user)]
    if "fsGroup" in pod_context:
        args += ["--group-add", str(pod_context["fsGroup"])]
    if context.get("readOnlyRootFilesystem"):
        args.append("--read-only")
    if context.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    capabilities = context.get("capabilities", {})
    args += [f"--cap-drop={c}" for c in capabilities.get("drop", [])]
    args += [f"--cap-add={c}" for c in capabilities.get("add", [])]
    if context.get("privileged"):
        raise Unsupported(f"{pod_name}: privileged")
    return args
