"""What `pip install` brings: the project's wheel, built from this tree, installed into a
clean virtual environment with no package index. `mcpvectordb[client]` must install with
nothing else (the folder-sync client is the standard library alone), and the server's
commands must say which extra they need instead of failing on an import."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# What setuptools packages (pyproject.toml [tool.setuptools.packages.find]) and reads.
SOURCES = ("pyproject.toml", "README.md", "libs", "services", "mcpvectordb_sync")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("tree")
    for name in SOURCES:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, tree / name)
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-q", "-w", str(out), str(tree)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    [found] = out.glob("mcpvectordb-*.whl")
    return found


@pytest.fixture
def clean(tmp_path: Path) -> Path:
    venv = tmp_path / "clean"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    return venv / "bin"


def _pip(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_client_extra_installs_nothing_of_the_server(wheel: Path, clean: Path) -> None:
    before = {p["name"] for p in json.loads(_pip(clean, "list", "--format", "json").stdout)}
    done = _pip(clean, "install", "--no-index", "--no-cache-dir", f"{wheel}[client]")
    assert done.returncode == 0, done.stderr
    after = {p["name"] for p in json.loads(_pip(clean, "list", "--format", "json").stdout)}
    assert after - before == {"mcpvectordb"}

    synced = subprocess.run(
        [str(clean / "mcpvectordb-sync"), "--help"], capture_output=True, text=True, timeout=60
    )
    assert synced.returncode == 0, synced.stderr
    assert "--watch" in synced.stdout

    server = subprocess.run(
        [str(clean / "mcpvectordb"), "--help"], capture_output=True, text=True, timeout=60
    )
    assert server.returncode == 2
    assert 'pip install "mcpvectordb[server]"' in server.stderr
    assert "Traceback" not in server.stderr


def test_the_server_extra_carries_the_server_stack(wheel: Path, clean: Path) -> None:
    # No index: the install can only fail, and it must fail for want of the server's packages.
    done = _pip(clean, "install", "--no-index", "--no-cache-dir", f"{wheel}[server]")
    assert done.returncode != 0
    assert "No matching distribution" in done.stderr
    metadata = subprocess.run(
        [sys.executable, "-c",
         "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); "
         "print(next(z.read(n).decode() for n in z.namelist() if n.endswith('/METADATA')))",
         str(wheel)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    requires = [line for line in metadata.stdout.splitlines() if line.startswith("Requires-Dist:")]
    assert requires, "the wheel declares no requirements at all"
    assert all('extra == "' in line for line in requires), requires
    for package in ("mcp", "lancedb", "fastembed", "markitdown", "fastapi"):
        assert any(
            line.startswith(f"Requires-Dist: {package}") and 'extra == "server"' in line
            for line in requires
        ), package
