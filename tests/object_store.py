"""A real S3-compatible server for tests (`ministack`, on 127.0.0.1 and a free port, its data
in memory), and index service processes pointed at a bucket of it.

`s3_server()` starts the server and stops it; `S3Server.bucket()` makes a fresh bucket by a
plain `PUT /bucket` and returns the environment an index process needs to keep its store
there (`LANCEDB_URI=s3://bucket/prefix`, `LANCEDB_STORAGE_OPTIONS`). `index_process()` runs
`python -m services.entrypoints.serve index` with such an environment, as `make up` would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.conftest import REPO
from tests.servers import free_port

# ministack does not check credentials; these only have to look like real ones, long enough
# for the redaction to treat them as secrets.
ACCESS_KEY_ID = "AKIAMINISTACKTEST01"
SECRET_ACCESS_KEY = "ministack-test-secret-access-key-0123456789"


@dataclass(frozen=True)
class S3Server:
    endpoint: str

    def options(self) -> dict[str, str]:
        return {
            "endpoint": self.endpoint,
            "region": "us-east-1",
            "allow_http": "true",
            "aws_access_key_id": ACCESS_KEY_ID,
            "aws_secret_access_key": SECRET_ACCESS_KEY,
        }

    def bucket(self, prefix: str = "store") -> dict[str, str]:
        """A new empty bucket; the index environment of a store under `prefix` in it."""
        name = f"t-{uuid.uuid4().hex[:12]}"
        answer = httpx.put(f"{self.endpoint}/{name}", timeout=10)
        answer.raise_for_status()
        return {
            "LANCEDB_URI": f"s3://{name}/{prefix}",
            "LANCEDB_STORAGE_OPTIONS": json.dumps(self.options()),
        }


@contextmanager
def s3_server(log_dir: Path, port: int | None = None) -> Iterator[S3Server]:
    port = port or free_port()
    env = dict(os.environ)
    env.update(
        {
            "BIND_HOST": "127.0.0.1",
            "GATEWAY_PORT": str(port),
            "SERVICES": "s3",
            # Only its HTTP port, on loopback: no MQTT or SFTP listeners.
            "IOT_MTLS_ENABLED": "0",
            "SFTP_ENABLED": "0",
            "LOG_LEVEL": "WARNING",
            "TMPDIR": str(log_dir),  # its pid file
        }
    )
    executable = Path(sys.executable).with_name("ministack")
    with (log_dir / f"ministack-{port}.log").open("wb") as log:
        process = subprocess.Popen(
            [str(executable)], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=log_dir
        )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        _wait_for(endpoint + "/", process, "ministack")
        yield S3Server(endpoint=endpoint)
    finally:
        _stop(process)


@dataclass(frozen=True)
class IndexProcess:
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)


@contextmanager
def index_process(
    env: dict[str, str], log_dir: Path, name: str, *, wait_for: str = "/readyz"
) -> Iterator[IndexProcess]:
    """One index service (`serve index`) with `env` on top of this process's environment,
    once `wait_for` answers below 500."""
    port = free_port()
    full = dict(os.environ)
    full.update({"BIND_HOST": "127.0.0.1", "INDEX_PORT": str(port), "LOG_LEVEL": "INFO", **env})
    log = log_dir / f"{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "services.entrypoints.serve", "index"],
            env=full,
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(url + wait_for, process, name, log)
        yield IndexProcess(url=url, process=process, log=log)
    finally:
        _stop(process)


def _wait_for(
    url: str, process: subprocess.Popen[bytes], name: str, log: Path | None = None
) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            said = log.read_text(errors="replace")[-3000:] if log else ""
            raise RuntimeError(f"{name} exited with {process.returncode} before answering\n{said}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not answer at {url} within 60 s")
        time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
