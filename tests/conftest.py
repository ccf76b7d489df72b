"""Test-wide guards: no network beyond loopback, no model downloads.

Every test tier runs under these: a test that silently reached the internet or a model hub
would pass here and fail on a user's offline machine.
"""

from __future__ import annotations

import atexit
import io
import ipaddress
import os
import shutil
import socket
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_FILES = REPO.parent / "shared" / "data" / "files"
SCIFACT = REPO.parent / "shared" / "data" / "retrieval" / "scifact"


def shown_defaults(classes: Iterable[type[Any]]) -> dict[str, str]:
    """Every setting of `classes` with a plain default, as its environment variable would
    spell it (`true`, `60` for 60.0): what README, .env.example and compose must show."""
    shown: dict[str, str] = {}
    for cls in classes:
        for name, field in cls.model_fields.items():
            value = field.default
            if isinstance(value, bool):
                shown[name.upper()] = "true" if value else "false"
            elif isinstance(value, float) and value.is_integer():
                shown[name.upper()] = str(int(value))
            elif isinstance(value, int | float | str):
                shown[name.upper()] = str(value)
    return shown


def zip_bytes(entries: dict[str, bytes]) -> bytes:
    """A ZIP archive (deflated) holding `entries`, built in memory."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()


os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# mcpvectordb-sync's hash cache (mcpvectordb_sync.hashes), for the runs of every test and of
# the commands they start, away from the user's own cache folder.
os.environ["MCPVECTORDB_SYNC_CACHE"] = tempfile.mkdtemp(prefix="mvdb-test-sync-cache-")
atexit.register(shutil.rmtree, os.environ["MCPVECTORDB_SYNC_CACHE"], True)

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_loopback(address: Any) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX paths
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may only connect to loopback, not {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address):
        raise ConnectionRefusedError(f"tests may only connect to loopback, not {address!r}")
    return _real_connect_ex(self, address)


@pytest.fixture(autouse=True, scope="session")
def _loopback_only() -> Iterator[None]:
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]
    yield
    socket.socket.connect = _real_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _real_connect_ex  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def shared_files() -> Path:
    if not SHARED_FILES.is_dir():
        pytest.skip(f"shared test files not found at {SHARED_FILES}")
    return SHARED_FILES
