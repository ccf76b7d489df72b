"""The pods of rendered Kubernetes manifests, run in Docker the way a kubelet runs them.

No Kubernetes API server can be installed where these tests run, so nothing schedules the
manifests. What decides whether they work once applied is mostly the pod specs themselves:
the image and its command, the environment a kubelet builds from ConfigMaps, Secrets and its
own variables, the security context on the image's files, the volumes, the limits, the probes
and the Service names the pods find each other by. `Pods` runs exactly that, from the
manifests as `kubectl kustomize` renders them:

- one container per pod container (`docker run`), replicas as the workload asks (a
  Deployment's `replicas`, raised to its HorizontalPodAutoscaler's `minReplicas`; a
  StatefulSet's pods named `<name>-0`, ...), all started at once as a scheduler would;
- the environment: the `kubernetes` Service's variables a kubelet always sets, every Service's
  link variables unless `enableServiceLinks: false`, `envFrom` (ConfigMaps, Secrets) and then
  `env` (`value`, `configMapKeyRef`, `secretKeyRef`, the pod's name and namespace), `$(VAR)`
  expanded (`podspec`, which also turns the security context into `docker run` options);
- the security context: `runAsUser`/`runAsGroup` (`--user`), `fsGroup` (a supplementary group
  owning the pod's volumes, setgid, as the kubelet sets them), `runAsNonRoot` (refused for a
  root user), `readOnlyRootFilesystem`, `allowPrivilegeEscalation: false`, dropped
  capabilities; Docker's own HEALTHCHECK is off (a kubelet ignores it);
- volumes: `emptyDir` a fresh folder of mode 0777, a StatefulSet's claim a folder of mode 0777
  kept across the pod's restarts (k3s's local-path provisioner), ConfigMap and Secret volumes
  as read-only files;
- `limits.memory` and `limits.cpu` (`--memory`, `--cpus`);
- Services: each pod answers to the names of the Services whose selector it matches
  (`gateway`, `gateway.<ns>`, `gateway.<ns>.svc`, `gateway.<ns>.svc.cluster.local`) on one
  network of its own, and a StatefulSet's pod to `<pod>.<serviceName>` too;
- probes: `httpGet` (named ports resolved) from this machine, through each container port
  published on 127.0.0.1, and `exec` in the container; a pod is started when its startup
  probe passes within `failureThreshold x periodSeconds`, ready when its readiness probe then
  passes; a container that stops is reported with its log (what CrashLoopBackOff shows).

What is not run: scheduling, NetworkPolicies (Docker's network lets every pod reach every
other: tests/deploy/test_k3s_network_policy.py evaluates the policies instead), Ingress, the
HPA's scaling, and a Service port that differs from its target port (refused, since a name
on a Docker network cannot translate ports). A field this runner does not know is refused
by name (`Unsupported`), so that a manifest change it cannot express fails loudly instead of
being skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.deploy.containers.engine import Docker
from tests.deploy.podspec import (
    KNOWN_CONTAINER_KEYS,
    WORKLOADS,
    Manifests,
    Resource,
    Unsupported,
    labels_match,
    quantity,
    security_args,
)
from tests.servers import free_port


@dataclass
class Pod:
    name: str
    workload: Resource
    labels: dict[str, str]
    spec: dict[str, Any]
    aliases: list[str]
    containers: dict[str, str] = field(default_factory=dict)  # container name -> docker name
    host_ports: dict[tuple[str, int], int] = field(default_factory=dict)

    def port(self, container: dict[str, Any], port: int | str) -> int:
        if isinstance(port, int):
            return port
        for declared in container.get("ports", []):
            if declared.get("name") == port:
                return int(declared["containerPort"])
        raise Unsupported(f"{self.name}: no container port named {port!r}")


class Pods:
    """The pods of `resources` (rendered manifests) under the name `name`; `images` maps an
    image as the manifests name it to the local image to run (an overlay's `images:`)."""

    def __init__(
        self,
        docker: Docker,
        resources: list[Resource],
        *,
        name: str,
        workdir: Path,
        images: dict[str, str],
    ) -> None:
        self.docker, self.resources, self.name, self.images = docker, resources, name, images
        self.workdir = workdir
        self.network = f"{name}-pods"
        self.manifests = Manifests(resources)
        self.namespace = self.manifests.namespace
        self.pods: dict[str, Pod] = {}

    # --- running them -----------------------------------------------------------------------

    def start(self) -> None:
        """Every pod of every workload, at once (in the manifests' order)."""
        self.docker("network", "create", "--label", f"mvdb.pods={self.name}", self.network)
        for workload in self.resources:
            if workload["kind"] in WORKLOADS:
                for ordinal in range(self.manifests.replicas(workload)):
                    self._start_pod(self._pod(workload, ordinal))

    def _pod(self, workload: Resource, ordinal: int) -> Pod:
        name = workload["metadata"]["name"]
        if workload["kind"] == "StatefulSet":
            pod_name = f"{name}-{ordinal}"
        else:
            pod_name = f"{name}-{hashlib.sha256(f'{name}{ordinal}'.encode()).hexdigest()[:5]}"
        template = workload["spec"]["template"]
        labels = dict(template["metadata"].get("labels", {}))
        aliases = []
        for service in self.manifests.services_of(labels):
            service_name = service["metadata"]["name"]
            aliases += [service_name, f"{service_name}.{self.namespace}"]
            aliases += [f"{service_name}.{self.namespace}.svc"]
            aliases += [f"{service_name}.{self.namespace}.svc.cluster.local"]
        if workload["kind"] == "StatefulSet":
            governing = workload["spec"]["serviceName"]
            aliases += [f"{pod_name}.{governing}", f"{pod_name}.{governing}.{self.namespace}"]
        return Pod(pod_name, workload, labels, template["spec"], aliases)

    def _start_pod(self, pod: Pod) -> None:
        if pod.spec.get("initContainers"):
            raise Unsupported(f"{pod.name}: initContainers")
        for service in self.manifests.services_of(pod.labels):
            for port in service["spec"]["ports"]:
                target = port.get("targetPort", port["port"])
                container = pod.spec["containers"][0]
                if pod.port(container, target) != port["port"]:
                    raise Unsupported(f"Service {service['metadata']['name']}: port != target")
        self.pods[pod.name] = pod
        volumes = self._volumes(pod)
        for container in pod.spec["containers"]:
            self._run(pod, container, volumes)

    def _volumes(self, pod: Pod) -> dict[str, tuple[Path, bool]]:
        """Each volume of the pod: a host folder, and whether it mounts read-only."""
        group = pod.spec.get("securityContext", {}).get("fsGroup")
        found: dict[str, tuple[Path, bool]] = {}
        for claim in pod.workload["spec"].get("volumeClaimTemplates", []):
            claim_name = claim["metadata"]["name"]
            # Kept across the pod's restarts, as the claim is; local-path makes it 0777.
            found[claim_name] = (self._folder(f"pv/{claim_name}-{pod.name}", group), False)
        for volume in pod.spec.get("volumes", []):
            name = volume["name"]
            if "emptyDir" in volume:
                # A new pod's emptyDir starts empty (a StatefulSet's pod comes back by name).
                shutil.rmtree(self.workdir / "pods" / pod.name / name, ignore_errors=True)
                found[name] = (self._folder(f"pods/{pod.name}/{name}", group), False)
            elif "configMap" in volume or "secret" in volume:
                if "configMap" in volume:
                    kind, ref = "ConfigMap", volume["configMap"]["name"]
                else:
                    kind, ref = "Secret", volume["secret"]["secretName"]
                folder = self._folder(f"pods/{pod.name}/{name}", group)
                for key, value in self.manifests.data(kind, ref).items():
                    (folder / key).write_text(value)
                    (folder / key).chmod(0o644)
                found[name] = (folder, True)
            else:
                raise Unsupported(f"{pod.name}: volume {volume}")
        return found

    def _folder(self, relative: str, group: int | None) -> Path:
        folder = self.workdir / relative
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o777)
        if group is not None:  # the kubelet's fsGroup: the group owns it, setgid
            shutil.chown(folder, group=group)
            folder.chmod(0o2777)
        return folder

    def _run(self, pod: Pod, container: dict[str, Any], volumes: dict[str, Any]) -> None:
        unknown = set(container) - KNOWN_CONTAINER_KEYS
        if unknown:
            raise Unsupported(f"{pod.name}/{container['name']}: {sorted(unknown)}")
        docker_name = f"{self.name}-{pod.name}-{container['name']}"
        args = ["run", "-d", "--name", docker_name, "--hostname", pod.name]
        args += ["--label", f"mvdb.pods={self.name}", "--network", self.network]
        args += [item for alias in pod.aliases for item in ("--network-alias", alias)]
        # restartPolicy Always (a workload's only one): Docker restarts a container that
        # exits, with a growing delay, as the kubelet's CrashLoopBackOff does.
        if pod.spec.get("restartPolicy", "Always") != "Always":
            raise Unsupported(f"{pod.name}: restartPolicy {pod.spec['restartPolicy']}")
        args += ["--no-healthcheck", "--restart", "always"]
        image = self.images.get(container["image"], container["image"])
        image_user = self.docker.inspect(image)["Config"].get("User") or "0"
        args += security_args(pod.name, pod.spec, container, image_user)
        limits = container.get("resources", {}).get("limits", {})
        if "memory" in limits:
            args += ["--memory", str(int(quantity(limits["memory"])))]
        if "cpu" in limits:
            args += ["--cpus", f"{quantity(limits['cpu']):g}"]
        for port in container.get("ports", []):
            # A port of our own choosing stays the container's through its restarts.
            host_port = free_port()
            pod.host_ports[(container["name"], int(port["containerPort"]))] = host_port
            args += ["-p", f"127.0.0.1:{host_port}:{port['containerPort']}"]
        for key, value in self.manifests.env(pod.name, pod.spec, container).items():
            args += ["-e", f"{key}={value}"]
        for mount in container.get("volumeMounts", []):
            folder, read_only = volumes[mount["name"]]
            ro = ",readonly" if read_only or mount.get("readOnly") else ""
            args += ["--mount", f"type=bind,source={folder},target={mount['mountPath']}{ro}"]
        command, rest = container.get("command"), container.get("args")
        if command:
            args += ["--entrypoint", command[0], image, *command[1:], *(rest or [])]
        else:  # `args` alone replace the image's CMD and keep its ENTRYPOINT, as in Docker
            args += [image, *(rest or [])]
        self.docker(*args)
        pod.containers[container["name"]] = docker_name

    # --- probes and state --------------------------------------------------------------------

    def probe(self, pod: Pod, container: dict[str, Any], probe: dict[str, Any]) -> bool:
        timeout = float(probe.get("timeoutSeconds", 1))
        if "httpGet" in probe:
            get = probe["httpGet"]
            if get.get("scheme", "HTTP") != "HTTP":
                raise Unsupported(f"{pod.name}: probe scheme {get['scheme']}")
            port = pod.host_ports[(container["name"], pod.port(container, get["port"]))]
            request = urllib.request.Request(f"http://127.0.0.1:{port}{get.get('path', '/')}")
            for header in get.get("httpHeaders", []):
                request.add_header(header["name"], header["value"])
            try:
                with urllib.request.urlopen(request, timeout=timeout) as answer:
                    return 200 <= answer.status < 400
            except (urllib.error.URLError, OSError, TimeoutError):
                return False
        if "exec" in probe:
            name = pod.containers[container["name"]]
            result = self.docker("exec", name, *probe["exec"]["command"], check=False)
            return result.returncode == 0
        raise Unsupported(f"{pod.name}: probe {probe}")

    def restarts(self, pod: Pod) -> int:
        """How often the pod's containers were started again after exiting."""
        return sum(int(self.docker.inspect(n)["RestartCount"]) for n in pod.containers.values())

    def state(self, pod: Pod) -> dict[str, Any]:
        """Docker's state of the pod's (first) container: `OOMKilled`, `Running`, ..."""
        result: dict[str, Any] = self.docker.inspect(next(iter(pod.containers.values())))["State"]
        return result

    def logs(self, pod: Pod, tail: int = 60) -> str:
        out = []
        for container, name in pod.containers.items():
            result = self.docker("logs", f"--tail={tail}", name, check=False)
            out.append(f"--- {pod.name}/{container}\n{result.stdout}{result.stderr}")
        return "\n".join(out)

    def wait_ready(self, pods: list[Pod] | None = None, ready_within_s: float = 120) -> None:
        """Each pod started (its startup probe within its own budget, restarts included, as
        the kubelet counts it) and then ready; fails with the pod's log when a budget runs
        out."""
        pending = list(pods or self.pods.values())
        since = time.monotonic()
        started: set[tuple[str, str]] = set()
        while pending:
            elapsed = time.monotonic() - since
            for pod in list(pending):
                containers = pod.spec["containers"]
                if not all(self._started(pod, c, elapsed, started) for c in containers):
                    continue
                if all(
                    self.probe(pod, c, c["readinessProbe"])
                    for c in containers
                    if "readinessProbe" in c
                ):
                    pending.remove(pod)
                elif elapsed > ready_within_s:
                    raise AssertionError(f"{pod.name} never ready:\n{self.logs(pod)}")
            time.sleep(0.5)

    def _started(
        self, pod: Pod, container: dict[str, Any], elapsed: float, started: set[tuple[str, str]]
    ) -> bool:
        """Whether the container's startup probe has passed (kept in `started`); fails once
        it has not within `initialDelaySeconds + periodSeconds x failureThreshold`."""
        key, probe = (pod.name, container["name"]), container.get("startupProbe")
        if key in started or probe is None or self.probe(pod, container, probe):
            started.add(key)
            return True
        budget = probe.get("initialDelaySeconds", 0) + probe.get("periodSeconds", 10) * probe.get(
            "failureThreshold", 3
        )
        if elapsed > budget:
            raise AssertionError(
                f"{pod.name}/{container['name']}: startup probe failed for {budget:.0f}s, "
                f"{self.restarts(pod)} restarts:\n{self.logs(pod)}"
            )
        return False

    def of(self, workload: str) -> list[Pod]:
        return [p for p in self.pods.values() if p.workload["metadata"]["name"] == workload]

    def url(self, service: str) -> str:
        """http://127.0.0.1:<port> reaching a pod behind `service` (`kubectl port-forward`)."""
        for resource in self.manifests.of_kind("Service"):
            if resource["metadata"]["name"] == service:
                port = resource["spec"]["ports"][0]
                for pod in self.pods.values():
                    if labels_match(resource["spec"]["selector"], pod.labels):
                        container = pod.spec["containers"][0]
                        target = pod.port(container, port.get("targetPort", port["port"]))
                        return f"http://127.0.0.1:{pod.host_ports[(container['name'], target)]}"
        raise AssertionError(f"no pod behind Service {service}")

    def delete_pod(self, pod: Pod) -> Pod:
        """`kubectl delete pod`: stopped within its grace period, and its controller starts
        it again (a StatefulSet's under the same name, on the same claim)."""
        grace = str(pod.spec.get("terminationGracePeriodSeconds", 30))
        for name in pod.containers.values():
            self.docker("stop", "-t", grace, name, timeout=int(grace) + 60)
            self.docker("rm", name)
        ordinal = int(pod.name.rsplit("-", 1)[1]) if pod.workload["kind"] == "StatefulSet" else 0
        fresh = self._pod(pod.workload, ordinal)
        del self.pods[pod.name]
        self._start_pod(fresh)
        return fresh

    def delete(self) -> None:
        listed = self.docker("ps", "-aq", "--filter", f"label=mvdb.pods={self.name}", check=False)
        if listed.stdout.split():
            self.docker("rm", "-f", *listed.stdout.split(), check=False, timeout=120)
        self.docker("network", "rm", self.network, check=False)


@contextlib.contextmanager
def running(docker: Docker, resources: list[Resource], **kwargs: Any) -> Iterator[Pods]:
    pods = Pods(docker, resources, **kwargs)
    try:
        pods.start()
        yield pods
    finally:
        pods.delete()
