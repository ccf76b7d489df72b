"""The four real services on loopback, started the way `make up` starts them, with their own
ports, var directory and LanceDB; stopped after the package."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.entrypoints.cluster import LocalCluster, local_env, running
from tests.conftest import REPO, SHARED_FILES
from tests.mcp_client import sse_tools

Cluster = LocalCluster


def cluster_env(var_dir: Path, **extra: str) -> dict[str, str]:
    return local_env(var_dir, LOG_LEVEL="INFO", **extra)


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    var_dir = tmp_path_factory.mktemp("cluster-var")
    try:
        # REPO_MAX_BYTES small enough for test_repos.py to build a repository over it.
        env = cluster_env(var_dir, URL_ALLOW_HOSTS="127.0.0.1", REPO_MAX_BYTES="3000000")
        with running(env) as started:
            yield started
    except RuntimeError as exc:
        pytest.fail(str(exc))


def ingest_shared(
    cluster: LocalCluster, files: dict[str, tuple[str, dict[str, Any]]], library: str
) -> dict[str, dict[str, Any]]:
    """Ingest files of shared/data/files (key -> (relative path, metadata)) through one MCP SSE
    session; each key's tool result. Skips the module when shared/ is missing."""
    if not SHARED_FILES.is_dir():
        pytest.skip(f"shared files missing at {SHARED_FILES}")

    async def go() -> dict[str, dict[str, Any]]:
        out = {}
        async with sse_tools(cluster.gateway + "/sse") as tools:
            for key, (rel, metadata) in files.items():
                out[key] = await tools.call(
                    "ingest_file", path=str(SHARED_FILES / rel), library=library, metadata=metadata
                )
        return out

    return asyncio.run(go())


def restart(cluster: LocalCluster) -> str:
    """Start whatever of the cluster is not running, the way `make up` does; its output."""
    started = subprocess.run(
        [sys.executable, "-m", "services.entrypoints.cluster", "up", "--wait", "240"],
        cwd=REPO,
        env=cluster.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert started.returncode == 0, started.stdout + started.stderr
    return started.stdout
