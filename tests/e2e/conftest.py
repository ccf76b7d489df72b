"""The four real services on loopback, started the way `make up` starts them, with their own
ports, var directory and LanceDB; stopped after the package."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.cluster import LocalCluster, local_env, running

Cluster = LocalCluster


def cluster_env(var_dir: Path, **extra: str) -> dict[str, str]:
    return local_env(var_dir, LOG_LEVEL="INFO", **extra)


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    var_dir = tmp_path_factory.mktemp("cluster-var")
    try:
        with running(cluster_env(var_dir, URL_ALLOW_HOSTS="127.0.0.1")) as started:
            yield started
    except RuntimeError as exc:
        pytest.fail(str(exc))
