"""A background job survives its gateway: the four real services, a folder job started over
MCP, the gateway killed with SIGKILL in the middle and started again the way `make up` does;
the job resumes by itself and ends `succeeded` with every file accounted for, and the library
holds each file once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from services.entrypoints.cluster import LocalCluster, running
from tests.conftest import REPO
from tests.e2e.conftest import cluster_env, restart
from tests.mcp_client import sse_tools

pytestmark = pytest.mark.e2e

FILES = 40


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("jobs-root")
    notes = root / "notes"
    notes.mkdir()
    for i in range(FILES):
        body = "\n\n".join(
            f"Entry {i}.{p}: the keeper of lighthouse {i} notes wind {p}, swell and visibility."
            for p in range(12)
        )
        (notes / f"log-{i:03d}.md").write_text(f"# Lighthouse log {i}\n\n{body}\n")
    return root


@pytest.fixture(scope="module")
def job_cluster(tmp_path_factory: pytest.TempPathFactory, folder: Path) -> Iterator[LocalCluster]:
    env = cluster_env(tmp_path_factory.mktemp("jobs-var"), INGEST_ROOTS=str(folder))
    with running(env) as started:
        yield started


def _job(cluster: LocalCluster, job_id: str) -> dict[str, Any]:
    response = httpx.get(f"{cluster.gateway}/jobs/{job_id}", timeout=10)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_job_resumes_after_its_gateway_is_killed(job_cluster: LocalCluster) -> None:
    async def start() -> dict[str, Any]:
        async with sse_tools(job_cluster.gateway + "/sse") as tools:
            return await tools.call(
                "ingest_folder",
                folder="notes",
                library="lighthouse",
                background=True,
                max_concurrency=1,
            )

    accepted = asyncio.run(start())
    job_id = accepted["job_id"]
    deadline = time.monotonic() + 120
    while _job(job_cluster, job_id)["processed"] < 3:
        assert time.monotonic() < deadline, "the job did not get going"
        time.sleep(0.2)
    before = _job(job_cluster, job_id)
    assert before["status"] == "running" and before["processed"] < FILES, before

    pid = job_cluster.pid("gateway")
    assert pid is not None
    os.killpg(pid, signal.SIGKILL)
    time.sleep(1.0)
    restart(job_cluster)

    deadline = time.monotonic() + 300
    while (job := _job(job_cluster, job_id))["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.5)
    assert job["status"] == "succeeded", job
    assert job["total_files"] == FILES
    assert job["indexed"] + job["replaced"] + job["skipped"] + job["failed"] == FILES, job
    assert job["failed"] == 0 and job["skipped"] >= before["processed"] - 1, job
    listed = httpx.get(
        f"{job_cluster.gateway}/jobs", params={"status": "succeeded"}, timeout=10
    ).json()
    assert job_id in {j["job_id"] for j in listed["jobs"]}

    async def documents() -> dict[str, Any]:
        async with sse_tools(job_cluster.gateway + "/sse") as tools:
            return await tools.call("list_documents", library="lighthouse", limit=1000)

    listing = asyncio.run(documents())
    assert listing["total"] == FILES
    assert len({d["source"] for d in listing["documents"]}) == FILES


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _follow_with_cli(cluster: LocalCluster, library: str, *extra: str) -> tuple[str, str]:
    """Run `mcpvectordb-ingest --url` on the notes, interrupt it with Ctrl-C (SIGINT) once its
    job is under way; the job's id and what the command printed."""
    command = [sys.executable, "-m", "services.entrypoints.ingest", "notes"]
    process = subprocess.Popen(
        [
            *command,
            "--library",
            library,
            "--max-concurrency",
            "1",
            "--url",
            cluster.gateway,
            *extra,
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As in a terminal: a test run started in the background (a shell's `&`) ignores
        # SIGINT, its children inherit that, and Python then never raises KeyboardInterrupt.
        preexec_fn=_default_sigint,
    )
    deadline = time.monotonic() + 120
    while True:
        jobs = httpx.get(f"{cluster.gateway}/jobs", params={"status": "running"}, timeout=10)
        running = [j for j in jobs.json()["jobs"] if j["library"] == library]
        if running and running[0]["processed"] >= 1:
            break
        assert time.monotonic() < deadline and process.poll() is None, process.stderr
        time.sleep(0.2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1, stderr
    return running[0]["job_id"], stderr


def test_ctrl_c_leaves_the_job_running_and_cancel_stops_it(job_cluster: LocalCluster) -> None:
    job_id, said = _follow_with_cli(job_cluster, "followed")
    assert f"job {job_id} goes on" in said
    assert _job(job_cluster, job_id)["status"] in ("running", "succeeded")

    job_id, said = _follow_with_cli(job_cluster, "abandoned", "--cancel")
    assert f"cancelled job {job_id}" in said
    deadline = time.monotonic() + 120
    while (job := _job(job_cluster, job_id))["status"] == "running":
        assert time.monotonic() < deadline, job
        time.sleep(0.3)
    assert job["status"] == "cancelled" and job["processed"] < FILES, job
