"""Docker for the container tier (this package): the engine, a Python base
image made from Debian packages, and a compose project of the repository's
docker-compose.yml on free loopback ports.

- `engine()` uses the running Docker engine, or starts `dockerd` (root only) and stops it
  again afterwards unless other containers run on it by then.
- `python_base()` stands in for `python:3.11-slim`, which cannot be pulled here (no image
  registry is reachable): Debian bookworm's python3.11 from `mmdebstrap --variant=minbase`,
  `docker import`ed, with a virtual environment on PATH so that `python` and `pip` exist as
  in the official image. The machine's CA bundle (the one its pip uses) is copied into this
  test base only, so that pip inside the product's build reaches the package registry
  through this machine's TLS proxy; the product's Dockerfile knows nothing of it. Images and
  the tar are named by a hash of everything that goes into them, so a re-run reuses them.
- `Compose` runs Debian's docker-compose (1.29.2) with the project's name, an env file of
  the test's own (a developer's .env or shell variables never leak in) and an override file.

`Unavailable` says why the tier cannot run here; the tests skip with that reason.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import REPO

SERVICES = ("converter", "embedder", "index", "gateway")
VAR = REPO / "var" / "containers"
WAIT_READY = REPO / "deploy" / "docker" / "wait_ready.py"
INSTALL_HINT = "`make container-tools` installs it from Debian (needs root)"

# Lines for the terminal summary: timings and image sizes of this run.
REPORT: list[str] = []


class Unavailable(Exception):
    """The container tier cannot run on this machine; the message says why."""


def _report(line: str) -> None:
    REPORT.append(line)


@dataclass(frozen=True)
class Docker:
    cli: str
    env: dict[str, str] = field(default_factory=dict)

    def __call__(
        self, *args: str, timeout: float = 300, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.cli, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, **self.env},
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"docker {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout[-3000:]}{result.stderr[-3000:]}"
            )
        return result

    def inspect(self, ref: str) -> dict[str, Any]:
        data: list[dict[str, Any]] = json.loads(self("inspect", ref).stdout)
        return data[0]

    def image_id(self, ref: str) -> str | None:
        result = self("image", "inspect", "--format", "{{.Id}}", ref, check=False)
        return result.stdout.strip() if result.returncode == 0 else None


def _docker_ready(docker: Docker) -> bool:
    try:
        return docker("info", timeout=30, check=False).returncode == 0
    except subprocess.TimeoutExpired:
        return False


@contextlib.contextmanager
def engine() -> Iterator[Docker]:
    cli = os.environ.get("MVDB_DOCKER") or shutil.which("docker")
    if cli is None or not os.access(cli, os.X_OK):
        raise Unavailable(f"no docker command: Debian's docker.io is not installed; {INSTALL_HINT}")
    # The classic builder: what Debian's docker.io has without the buildx plugin.
    docker = Docker(cli, {"DOCKER_BUILDKIT": "0", "COMPOSE_DOCKER_CLI_BUILD": "0"})
    if _docker_ready(docker):
        yield docker
        return
    dockerd = shutil.which("dockerd") or (
        "/usr/sbin/dockerd" if Path("/usr/sbin/dockerd").is_file() else None
    )
    if dockerd is None:
        raise Unavailable(
            f"the Docker engine is not running and dockerd is missing; {INSTALL_HINT}"
        )
    if os.geteuid() != 0:
        raise Unavailable("the Docker engine is not running, and starting dockerd needs root")
    VAR.mkdir(parents=True, exist_ok=True)
    log = VAR / "dockerd.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [dockerd],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 90
        while not _docker_ready(docker):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                raise Unavailable(f"dockerd did not start (see {log}):\n{tail}")
            time.sleep(0.5)
        _report(f"started dockerd (pid {process.pid}); it is stopped after the tier")
        yield docker
    finally:
        others = docker("ps", "-q", check=False).stdout.split() if process.poll() is None else []
        if others:
            _report(f"dockerd left running: {len(others)} other container(s) run on it")
        else:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


# --- the Python base image --------------------------------------------------------------------

MMDEBSTRAP = (
    "mmdebstrap",
    "--variant=minbase",
    "--include=python3.11,python3.11-venv,ca-certificates",
    # Like the slim images: no documentation, manual pages or translations.
    "--dpkgopt=path-exclude=/usr/share/doc/*",
    "--dpkgopt=path-exclude=/usr/share/man/*",
    "--dpkgopt=path-exclude=/usr/share/info/*",
    "--dpkgopt=path-exclude=/usr/share/locale/*",
    "bookworm",
)
BASE_DOCKERFILE = """\
FROM {debian}
# This machine reaches the package registry through a TLS proxy: pip trusts its CA bundle.
COPY ca.crt /usr/local/share/mvdb-test/ca.crt
# `python` and `pip` on PATH, as in python:3.11-slim.
RUN python3.11 -m venv /usr/local/python
ENV PATH=/usr/local/python/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    PIP_CERT=/usr/local/share/mvdb-test/ca.crt \\
    LANG=C.UTF-8
CMD ["python3"]
"""
PROMETHEUS_DOCKERFILE = """\
FROM {debian}
# Debian's prometheus stands in for prom/prometheus: /bin/prometheus (merged /usr) and /bin/sh,
# running as nobody, who owns /prometheus (the compose volume is initialised from it).
RUN apt-get update -q \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus \\
    && rm -rf /var/lib/apt/lists/* \\
    && mkdir -p /prometheus && chown nobody:nogroup /prometheus
USER nobody
WORKDIR /prometheus
"""


def ca_bundle() -> Path:
    """The CA bundle this machine's pip uses (`pip config list` names it)."""
    candidates = [os.environ.get("PIP_CERT", "")]
    result = subprocess.run(
        [sys.executable, "-m", "pip", "config", "get", "global.cert"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    candidates += [result.stdout.strip(), "/etc/ssl/certs/ca-certificates.crt"]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise Unavailable("no CA bundle for pip found (PIP_CERT, pip config global.cert)")


def _key(*parts: bytes | str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:12]


@dataclass(frozen=True)
class BaseImages:
    debian: str  # Debian bookworm minbase with python3.11 (docker import)
    python: str  # the stand-in for python:3.11-slim


def _build_context(docker: Docker, tag: str, dockerfile: str, files: dict[str, Path]) -> None:
    context = VAR / f"context-{tag.replace('/', '_').replace(':', '_')}"
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir(parents=True)
    (context / "Dockerfile").write_text(dockerfile)
    for name, source in files.items():
        shutil.copyfile(source, context / name)
    try:
        docker("build", "-t", tag, str(context), timeout=900)
    finally:
        shutil.rmtree(context, ignore_errors=True)


def python_base(docker: Docker) -> BaseImages:
    if explicit := os.environ.get("MVDB_TEST_PYTHON_IMAGE"):
        if docker.image_id(explicit) is None:
            raise Unavailable(f"MVDB_TEST_PYTHON_IMAGE={explicit} is not a local image")
        _report(f"base image: {explicit} (MVDB_TEST_PYTHON_IMAGE)")
        return BaseImages(explicit, explicit)
    ca = ca_bundle()
    debian_key = _key(*MMDEBSTRAP)
    debian = f"mcpvectordb-test/debian:bookworm-{debian_key}"
    python = f"mcpvectordb-test/python:3.11-{_key(debian, BASE_DOCKERFILE, ca.read_bytes())}"
    if docker.image_id(python) is not None:
        _report(f"base image: {python} (cached)")
        return BaseImages(debian, python)
    started = time.monotonic()
    if docker.image_id(debian) is None:
        tar = VAR / f"debian-bookworm-python-{debian_key}.tar"
        if not tar.is_file():
            if shutil.which("mmdebstrap") is None:
                raise Unavailable(
                    f"no image registry, and mmdebstrap (to build a Python base image from "
                    f"Debian packages) is missing; {INSTALL_HINT}, or set "
                    "MVDB_TEST_PYTHON_IMAGE to a local python:3.11-slim"
                )
            if os.geteuid() != 0:
                raise Unavailable("mmdebstrap needs root to build the Python base image here")
            VAR.mkdir(parents=True, exist_ok=True)
            # mmdebstrap picks the output format by the extension: keep `.tar`.
            partial = tar.with_name(f"{tar.stem}.partial.tar")
            result = subprocess.run(
                [*MMDEBSTRAP, str(partial)],
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            if result.returncode != 0:
                partial.unlink(missing_ok=True)
                raise AssertionError(f"mmdebstrap failed:\n{result.stderr[-3000:]}")
            partial.rename(tar)
        docker("import", str(tar), debian, timeout=600)
    _build_context(docker, python, BASE_DOCKERFILE.format(debian=debian), {"ca.crt": ca})
    _report(f"base image: {python} built in {time.monotonic() - started:.0f}s")
    return BaseImages(debian, python)


def prometheus_image(docker: Docker, base: BaseImages) -> str:
    """prom/prometheus where it exists locally, else Debian's prometheus in an image."""
    if explicit := os.environ.get("MVDB_TEST_PROMETHEUS_IMAGE"):
        return explicit
    tag = f"mcpvectordb-test/prometheus:debian-{_key(base.debian, PROMETHEUS_DOCKERFILE)}"
    if docker.image_id(tag) is None:
        started = time.monotonic()
        _build_context(docker, tag, PROMETHEUS_DOCKERFILE.format(debian=base.debian), {})
        _report(f"Prometheus stand-in {tag} built in {time.monotonic() - started:.0f}s")
    return tag


# --- compose ------------------------------------------------------------------------------------


def compose_cli(docker: Docker) -> list[str]:
    if explicit := os.environ.get("MVDB_COMPOSE"):
        return explicit.split()
    if Path("/usr/bin/docker-compose").is_file():
        return ["/usr/bin/docker-compose"]
    raise Unavailable(f"Debian's docker-compose is not installed; {INSTALL_HINT}")


@dataclass(frozen=True)
class Compose:
    """One compose project: the repository's docker-compose.yml plus an override, with the
    variables of `env_file` only."""

    docker: Docker
    cli: tuple[str, ...]
    name: str
    env_file: Path
    override: Path

    @property
    def command(self) -> list[str]:
        return [
            *self.cli,
            "--project-name",
            self.name,
            "--project-directory",
            str(REPO),
            "--env-file",
            str(self.env_file),
            "--file",
            str(REPO / "docker-compose.yml"),
            "--file",
            str(self.override),
        ]

    def _env(self) -> dict[str, str]:
        # Compose substitutes shell variables before the env file's: pass none of them.
        keep = ("PATH", "HOME", "DOCKER_HOST", "DOCKER_CONFIG")
        return {k: v for k, v in os.environ.items() if k in keep} | self.docker.env

    def __call__(
        self, *args: str, profiles: tuple[str, ...] = (), timeout: float = 600, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        command = [*self.command, *(f"--profile={p}" for p in profiles), *args]
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, check=False, env=self._env()
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{' '.join(command)} failed ({result.returncode}):\n"
                f"{result.stdout[-4000:]}{result.stderr[-4000:]}"
            )
        return result

    def container(self, service: str) -> str:
        ids = self("ps", "-q", service).stdout.split()
        assert len(ids) == 1, f"{service}: {ids}"
        return ids[0]

    def wait_ready(
        self, timeout_s: float = 300, *profiles: str
    ) -> subprocess.CompletedProcess[str]:
        """What `make compose-up` does after `up -d`: deploy/docker/wait_ready.py."""
        profile_args = [f"--profile={p}" for p in profiles]
        return subprocess.run(
            [
                sys.executable,
                str(WAIT_READY),
                "--timeout",
                str(timeout_s),
                "--",
                *self.command,
                *profile_args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s + 60,
            check=False,
            env={**self._env(), "DOCKER": self.docker.cli},
        )

    def logs(self, tail: int = 40) -> str:
        result = self("logs", "--no-color", f"--tail={tail}", check=False, timeout=120)
        return result.stdout[-8000:] + result.stderr[-2000:]
