"""The four real services on loopback, started the way `make up` starts them, with their own
ports, var directory and LanceDB; stopped after the module."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.servers import free_port


@dataclass(frozen=True)
class Cluster:
    gateway: str
    converter: str
    index: str
    env: dict[str, str]
    var_dir: Path


def cluster_env(var_dir: Path, **extra: str) -> dict[str, str]:
    ports = {name: free_port() for name in ("gateway", "converter", "embedder", "index")}
    env = dict(os.environ)
    env.update(
        {
            "VAR_DIR": str(var_dir),
            "LANCEDB_URI": str(var_dir / "lancedb"),
            "HF_HUB_OFFLINE": "1",
            "LOG_LEVEL": "INFO",
            **{f"{name.upper()}_PORT": str(port) for name, port in ports.items()},
            **{
                f"{name.upper()}_URL": f"http://127.0.0.1:{port}"
                for name, port in ports.items()
                if name != "gateway"
            },
        }
    )
    env.update(extra)
    return env


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    var_dir = tmp_path_factory.mktemp("cluster-var")
    env = cluster_env(var_dir, URL_ALLOW_HOSTS="127.0.0.1")
    started = subprocess.run(
        [sys.executable, "-m", "services.cluster", "up", "--wait", "240"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        if started.returncode != 0:
            logs = "\n".join(
                f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                for p in sorted((var_dir / "log").glob("*.log"))
            )
            pytest.fail(f"make up failed:\n{started.stdout}\n{started.stderr}\n{logs}")
        assert "/sse" in started.stdout
        yield Cluster(
            gateway=f"http://127.0.0.1:{env['GATEWAY_PORT']}",
            converter=env["CONVERTER_URL"],
            index=env["INDEX_URL"],
            env=env,
            var_dir=var_dir,
        )
    finally:
        subprocess.run(
            [sys.executable, "-m", "services.cluster", "down"],
            cwd=REPO,
            env=env,
            capture_output=True,
            timeout=120,
        )
