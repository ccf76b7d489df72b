"""The container tier, `s3` profile: docker-compose.yml with deploy/docker/s3.env, as
docs/deploy.md runs it. The store lives in a bucket of the S3-compatible server built from the
Dockerfile's `s3` target (ministack), the index is its writer, two index readers
(`--scale index-reader=2`) serve the gateway's reads.

Checked through the published gateway port and from inside the gateway container (the index,
its readers and the S3 server have no published port): every container becomes healthy; the
writer and the readers report their roles on the same `s3://` store, with the credentials kept
out of what they show; an MCP session that ingests finds the document at once (read-your-writes)
and another session finds it through the readers within the consistency interval; the tables'
objects are in the bucket; a write sent to a reader is refused (405 read_only_replica).

`run` is the container tier's last test (`test_s3_profile`, `make test-containers`): the
images are the ones the tier built, so only the `s3` image is new here. It skips, saying
why, where Docker cannot run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.conftest import REPO
from tests.deploy.containers import engine
from tests.deploy.containers.engine import Compose, Docker
from tests.mcp_client import sse_tools
from tests.servers import free_port

S3_ENV = REPO / "deploy" / "docker" / "s3.env"
CONSISTENCY_S = 3
# docker-compose.yml needs an override file in the tests' Compose; this one adds nothing.
OVERRIDE = "services:\n  s3:\n    labels: {mvdb.test: s3-profile}\n"


@dataclass(frozen=True)
class S3Stack:
    docker: Docker
    compose: Compose
    gateway: str

    def inside(self, method: str, url: str) -> tuple[int, str]:
        """An HTTP request from inside the gateway container (on the internal network)."""
        script = (
            "import sys, urllib.request, urllib.error\n"
            f"request = urllib.request.Request({url!r}, method={method!r})\n"
            "try:\n"
            "    answer = urllib.request.urlopen(request, timeout=20)\n"
            "    status, body = answer.status, answer.read()\n"
            "except urllib.error.HTTPError as exc:\n"
            "    status, body = exc.code, exc.read()\n"
            "sys.stdout.write(str(status) + '\\n' + body.decode())\n"
        )
        out = self.docker("exec", self.compose.container("gateway"), "python", "-c", script)
        status, _, body = out.stdout.partition("\n")
        return int(status), body


def _s3_settings() -> list[str]:
    return [
        line
        for line in S3_ENV.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def run(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Start the `s3` profile, check it (the checks below), stop it."""
    with _s3_stack(tmp_path_factory) as stack:
        _check_the_writer_and_the_readers_share_the_bucket(stack)
        _check_ingest_and_search_through_the_readers(stack)


@contextlib.contextmanager
def _s3_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Stack]:
    try:
        with engine.engine() as docker:
            base = engine.python_base(docker)
            cli = engine.compose_cli(docker)
            home = tmp_path_factory.mktemp("compose-s3")
            ingest = tmp_path_factory.mktemp("ingest-s3")
            ingest.chmod(0o755)
            tag = "test-" + hashlib.sha256(str(REPO).encode()).hexdigest()[:8]
            port = free_port()
            env_file = home / "compose.env"
            env_file.write_text(
                "\n".join(
                    [
                        *_s3_settings(),
                        f"MVDB_IMAGE_TAG={tag}",
                        f"PYTHON_IMAGE={base.python}",
                        f"GATEWAY_HOST_PORT={port}",
                        f"INGEST_HOST_DIR={ingest}",
                        f"INDEX_READ_CONSISTENCY_S={CONSISTENCY_S}",
                        "",
                    ]
                )
            )
            override = home / "docker-compose.test.yml"
            override.write_text(OVERRIDE)
            compose = Compose(docker, tuple(cli), f"mvdbs3{os.getpid()}", env_file, override)
            try:
                started = time.monotonic()
                compose("build", profiles=("s3",), timeout=1800)
                compose("up", "-d", "--no-build", "--scale", "index-reader=2", profiles=("s3",))
                ready = compose.wait_ready(300, "s3")
                assert ready.returncode == 0, f"{ready.stdout}\n{ready.stderr}\n{compose.logs()}"
                engine.REPORT.append(
                    f"s3 profile built, up and ready in {time.monotonic() - started:.0f}s"
                )
                yield S3Stack(docker, compose, f"http://127.0.0.1:{port}")
            finally:
                compose("down", "--volumes", "--remove-orphans", profiles=("s3",), check=False)
    except engine.Unavailable as exc:
        pytest.skip(f"the container tier cannot run here: {exc}")


def _check_the_writer_and_the_readers_share_the_bucket(s3_stack: S3Stack) -> None:
    readers = s3_stack.compose("ps", "-q", "index-reader").stdout.split()
    assert len(readers) == 2
    status, body = s3_stack.inside("GET", "http://index:8003/info")
    assert status == 200, body
    writer = json.loads(body)
    assert writer["role"] == "writer" and writer["uri"] == "s3://mcpvectordb/lancedb"
    for _ in range(4):  # the service name answers with every replica
        status, body = s3_stack.inside("GET", "http://index-reader:8003/info")
        assert status == 200, body
        reader = json.loads(body)
        assert reader["role"] == "reader" and reader["uri"] == writer["uri"]
    logs = s3_stack.compose("logs", "--no-color", "index", "index-reader", "gateway", timeout=120)
    assert "mcpvectordb-local" not in logs.stdout + logs.stderr, "a storage secret was logged"


def _check_ingest_and_search_through_the_readers(s3_stack: S3Stack) -> None:
    word = f"w{uuid.uuid4().hex[:10]}"
    source = f"s3-{word}.md"

    async def go() -> tuple[dict[str, Any], float]:
        async with sse_tools(s3_stack.gateway + "/sse") as mine:
            written = await mine.call(
                "ingest_content",
                content=f"The {word} ledger lists the {word} shipments of the year.",
                source=source,
            )
            assert written["status"] == "indexed", written
            found = await mine.call("search", query=word, top_k=3)
            assert source in {hit["source"] for hit in found["results"]}, found
        started = time.monotonic()
        async with sse_tools(s3_stack.gateway + "/sse") as other:
            while time.monotonic() - started < CONSISTENCY_S + 30:
                found = await other.call("search", query=word, top_k=3)
                if source in {hit["source"] for hit in found["results"]}:
                    return written, time.monotonic() - started
                await asyncio.sleep(0.5)
        raise AssertionError("the readers never showed the document")

    written, _ = asyncio.run(go())
    metrics = httpx.get(s3_stack.gateway + "/metrics", timeout=10).text
    served = [
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith('mvdb_index_reads_total{target="reader1"}')
    ]
    assert served and served[0] >= 1, "no read went to the readers"
    status, listing = s3_stack.inside(
        "GET", "http://s3:4566/mcpvectordb?list-type=2&prefix=lancedb/&max-keys=1000"
    )
    assert status == 200, listing
    assert "lancedb/chunks.lance/" in listing and "lancedb/documents.lance/" in listing
    status, body = s3_stack.inside(
        "DELETE", f"http://index-reader:8003/documents/{written['doc_id']}"
    )
    assert status == 405 and json.loads(body)["error_code"] == "read_only_replica", body
