"""The container tier's compose project: the repository's docker-compose.yml with an env file
of the test's own (free host ports, the images' tag, the host ingest folder, the base image
built from Debian packages) and an override adding `web` (a static file server for
`ingest_url`) and `gitserver` (a git server for `ingest_repo`) on the internal network;
`open_stack` builds the images, starts it and waits until it is ready; `Stack` is what the
tests drive."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, SHARED_FILES
from tests.deploy.containers import engine
from tests.deploy.containers.engine import SERVICES, BaseImages, Compose, Docker
from tests.mcp_client import sse_tools
from tests.servers import free_port

BOOK = SHARED_FILES / "gutenberg" / "1342-0.txt"

OVERRIDE = """\
# The container tests' additions to docker-compose.yml.
services:
  # A static file server for ingest_url, on the internal network only.
  web:
    image: mcpvectordb/gateway:${{MVDB_IMAGE_TAG}}
    command: ["python", "-m", "http.server", "8080", "--bind", "0.0.0.0", "--directory", "/srv/www"]
    read_only: true
    volumes: ["{www}:/srv/www:ro"]
    networks: [backend]
    healthcheck: {{disable: true}}
  # A git server (smart HTTP: `git http-backend` behind tests/git_server.py's CGI bridge) for
  # ingest_repo, on the internal network only; the gateway image has git.
  gitserver:
    image: mcpvectordb/gateway:${{MVDB_IMAGE_TAG}}
    command:
      - python
      - -c
      - >-
        import sys; sys.path.insert(0, '/srv/bridge'); import git_server, http.server, pathlib;
        http.server.ThreadingHTTPServer(('0.0.0.0', 8081),
        git_server._handler(pathlib.Path('/srv/git'))).serve_forever()
    read_only: true
    volumes:
      - "{git_server}:/srv/bridge/git_server.py:ro"
      - "{git}:/srv/git:ro"
    networks: [backend]
    healthcheck: {{disable: true}}
"""


@dataclass(frozen=True)
class Stack:
    docker: Docker
    compose: Compose
    base: BaseImages
    tag: str
    gateway: str
    prometheus: str
    ingest: Path  # host folder, mounted at /srv/ingest in the gateway
    git: Path  # host folder of bare repositories, served at http://gitserver:8081/<name>

    def image(self, service: str) -> str:
        return f"mcpvectordb/{service}:{self.tag}"

    def index_info(self) -> dict[str, Any]:
        """The index's /info, asked from inside the gateway container (the index has no
        published port: it is reachable on the internal network only)."""
        script = (
            "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
            "'http://index:8003/info', timeout=10).read().decode())"
        )
        out = self.docker("exec", self.compose.container("gateway"), "python", "-c", script)
        info: dict[str, Any] = json.loads(out.stdout)
        return info


def readable(path: Path) -> Path:
    """Make a host folder readable by the containers' user (pytest's folders are 0700)."""
    for item in [path, *path.rglob("*")]:
        item.chmod(0o755 if item.is_dir() else 0o644)
    return path


def wait(condition: Callable[[], bool], seconds: float, explain: Callable[[], str]) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(explain())
        time.sleep(0.5)


def open_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The project built and up, then down with its volumes: what the `stack` fixture gives
    (skips where the tier cannot run, saying why)."""
    if not BOOK.is_file():
        pytest.skip(f"shared test files not found at {SHARED_FILES}")
    tier_started = time.monotonic()
    try:
        with engine.engine() as docker:
            base = engine.python_base(docker)
            prometheus_image = engine.prometheus_image(docker, base)
            cli = engine.compose_cli(docker)
            yield from _started(docker, base, prometheus_image, cli, tmp_path_factory)
    except engine.Unavailable as exc:
        pytest.skip(f"the container tier cannot run here: {exc}")
    finally:
        engine.REPORT.append(f"container tier total: {time.monotonic() - tier_started:.0f}s")


def _started(
    docker: Docker,
    base: BaseImages,
    prometheus_image: str,
    cli: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("compose")
    ingest = readable(tmp_path_factory.mktemp("ingest"))
    www = tmp_path_factory.mktemp("www")
    git = readable(tmp_path_factory.mktemp("git"))
    shutil.copy(SHARED_FILES / "markitdown" / "test_blog.html", www / "post.html")
    readable(www)
    # One tag per checkout, so that worktrees sharing the engine do not replace each other's.
    tag = "test-" + hashlib.sha256(str(REPO).encode()).hexdigest()[:8]
    gateway_port, prometheus_port = free_port(), free_port()
    name = f"mvdbtest{os.getpid()}"
    env_file = home / "compose.env"
    env_file.write_text(
        "\n".join(
            [
                f"MVDB_IMAGE_TAG={tag}",
                f"PYTHON_IMAGE={base.python}",
                f"PROMETHEUS_IMAGE={prometheus_image}",
                f"GATEWAY_HOST_PORT={gateway_port}",
                f"PROMETHEUS_HOST_PORT={prometheus_port}",
                f"INGEST_HOST_DIR={ingest}",
                "URL_ALLOW_HOSTS=web:8080,gitserver:8081",
                "RETRY_ATTEMPTS=20",
                "RETRY_MAX_S=120",
                "",
            ]
        )
    )
    override = home / "docker-compose.test.yml"
    override.write_text(
        OVERRIDE.format(www=www, git=git, git_server=REPO / "tests" / "git_server.py")
    )
    compose = Compose(docker, tuple(cli), name, env_file, override)
    stack = Stack(
        docker,
        compose,
        base,
        tag,
        f"http://127.0.0.1:{gateway_port}",
        f"http://127.0.0.1:{prometheus_port}",
        ingest,
        git,
    )
    try:
        before = {s: docker.image_id(stack.image(s)) for s in SERVICES}
        started = time.monotonic()
        built = compose("build", timeout=1800)
        engine.VAR.mkdir(parents=True, exist_ok=True)
        (engine.VAR / "compose-build.log").write_text(built.stdout + built.stderr)
        engine.REPORT.append(
            f"images built by `docker-compose build` in {time.monotonic() - started:.0f}s"
        )
        for service in SERVICES:
            image = docker.image_id(stack.image(service))
            assert image is not None, f"compose built no image for {service}"
            if before[service] not in (None, image):  # superseded by this build
                docker("rmi", before[service] or "", check=False)
            size = int(docker("image", "inspect", "-f", "{{.Size}}", image).stdout)
            engine.REPORT.append(f"  {stack.image(service)}: {size / 1e6:.0f} MB")
        size = int(docker("image", "inspect", "-f", "{{.Size}}", base.python).stdout)
        engine.REPORT.append(f"  (base {base.python}: {size / 1e6:.0f} MB)")

        started = time.monotonic()
        compose("up", "-d", "--no-build")
        ready = compose.wait_ready(300)
        assert ready.returncode == 0, f"{ready.stdout}\n{ready.stderr}\n{compose.logs()}"
        assert f"MCP SSE endpoint:             {stack.gateway}/sse" in ready.stdout
        engine.REPORT.append(f"cluster up and ready in {time.monotonic() - started:.0f}s")
        yield stack
    finally:
        compose("down", "--volumes", "--remove-orphans", profiles=("monitoring",), check=False)


def call(stack: Stack, tool: str, **arguments: Any) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with sse_tools(stack.gateway + "/sse") as tools:
            return await tools.call(tool, **arguments)

    return asyncio.run(go())
