"""The images' requirement files, exported from uv.lock: `make lock` writes them, the
Dockerfile installs them, tests/deploy/test_lock.py checks that they are current.

    python deploy/docker/lockfiles.py [--check] [--uv PATH]

deploy/docker/images.toml says which of pyproject.toml's requirements (its dependencies, the
`model` group, and for a stage outside the services such as `s3` the `dev` extra) each
Dockerfile stage installs. For every stage this writes deploy/docker/requirements/<stage>.txt: the lines of
`uv export` (pinned, hashed, with environment markers) for the stage's requirements and
everything they depend on according to uv.lock, less what the stages below it already hold.
With `--check` nothing is written; the exit status is 1 when a file differs from what would
be written, or when a requirement of pyproject.toml is in no stage and not listed as outside
the images.

Only the standard library and the uv binary are needed: it runs before any environment is
synced from the lock.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
IMAGES = REPO / "deploy" / "docker" / "images.toml"
OUT = REPO / "deploy" / "docker" / "requirements"
# The runtime and the `dev` extra, whose tools stay out of the service images: a stage takes
# only what its own requirements need (the `s3` image: the dev extra's ministack server).
EXPORT_ARGS = (
    "export",
    "--frozen",
    "--format",
    "requirements-txt",
    "--no-emit-project",
    "--no-dev",
    "--group",
    "model",
    "--extra",
    "dev",
    "--no-header",
    "--no-annotate",
)


class LockError(Exception):
    """images.toml, pyproject.toml and uv.lock do not fit together; the message says how."""


def normalize(name: str) -> str:
    """PEP 503 name normalisation."""
    return re.sub(r"[-_.]+", "-", name).lower()


_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def parse_requirement(spec: str) -> tuple[str, frozenset[str]]:
    """`markitdown[pdf,docx]==0.1.8; marker` -> ("markitdown", {"pdf", "docx"})."""
    match = _REQUIREMENT.match(spec)
    if match is None:
        raise LockError(f"cannot read the requirement {spec!r}")
    extras = frozenset(normalize(e) for e in (match[2] or "").split(",") if e.strip())
    return normalize(match[1]), extras


@dataclass(frozen=True)
class Stage:
    name: str
    parent: str | None
    requires: tuple[str, ...]


def load_stages(path: Path = IMAGES) -> tuple[dict[str, Stage], dict[str, str]]:
    """images.toml -> (stage name -> Stage in file order, requirement -> why it is outside)."""
    data = tomllib.loads(path.read_text())
    stages = {
        name: Stage(name, spec.get("from"), tuple(normalize(r) for r in spec["requires"]))
        for name, spec in data["stages"].items()
    }
    for stage in stages.values():
        if stage.parent is not None and stage.parent not in stages:
            raise LockError(f"stage {stage.name} is built on unknown stage {stage.parent}")
    outside = {normalize(k): v for k, v in data.get("outside", {}).items()}
    return stages, outside


def chain(stages: dict[str, Stage], name: str) -> list[str]:
    """The stage and the stages it is built on, lowest first."""
    out: list[str] = []
    current: str | None = name
    while current is not None:
        out.insert(0, current)
        current = stages[current].parent
    return out


def project_requirements(pyproject: Path) -> dict[str, frozenset[str]]:
    """Runtime requirements of pyproject.toml (dependencies and the `model` group) -> extras."""
    project = tomllib.loads(pyproject.read_text())
    specs = [
        *project["project"]["dependencies"],
        *project.get("dependency-groups", {}).get("model", []),
    ]
    return dict(parse_requirement(spec) for spec in specs)


def dev_requirements(pyproject: Path) -> dict[str, frozenset[str]]:
    """The `dev` extra's requirements -> extras: a stage may install one (no stage must)."""
    project = tomllib.loads(pyproject.read_text())
    specs = project["project"].get("optional-dependencies", {}).get("dev", [])
    return dict(parse_requirement(spec) for spec in specs)


def lock_graph(lock: Path) -> dict[str, list[dict[str, Any]]]:
    """uv.lock -> normalized name -> its [[package]] entries (one per locked version)."""
    graph: dict[str, list[dict[str, Any]]] = {}
    for package in tomllib.loads(lock.read_text())["package"]:
        graph.setdefault(normalize(package["name"]), []).append(package)
    return graph


def closure(graph: dict[str, list[dict[str, Any]]], roots: dict[str, frozenset[str]]) -> set[str]:
    """Names of the roots and of everything they depend on (every locked version, every
    marker: the exported lines carry the markers, and pip skips what does not apply)."""
    seen: set[tuple[str, str | None]] = set()
    todo: list[tuple[str, str | None]] = []
    for name, extras in roots.items():
        todo.append((name, None))
        todo.extend((name, extra) for extra in extras)
    while todo:
        name, extra = todo.pop()
        if (name, extra) in seen:
            continue
        seen.add((name, extra))
        if name not in graph:
            raise LockError(f"{name} is not in uv.lock: run `make lock`")
        for package in graph[name]:
            if extra is None:
                deps = package.get("dependencies", [])
            else:
                deps = package.get("optional-dependencies", {}).get(extra, [])
            for dep in deps:
                dep_name = normalize(dep["name"])
                todo.append((dep_name, None))
                todo.extend((dep_name, normalize(e)) for e in dep.get("extra", []))
    return {name for name, _ in seen}


def export_blocks(uv: str, repo: Path) -> dict[str, list[str]]:
    """`uv export` of the runtime -> normalized name -> its requirement blocks (one per
    version-and-marker line, with its hash lines)."""
    result = subprocess.run(
        [uv, *EXPORT_ARGS],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "UV_OFFLINE": "1"},
    )
    if result.returncode != 0:
        raise LockError(f"uv export failed (is uv.lock current? run `make lock`):\n{result.stderr}")
    blocks: dict[str, list[str]] = {}
    name = ""
    for line in result.stdout.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0].isspace():  # a --hash continuation of the current block
            blocks[name][-1] += "\n" + line
        else:
            name, _ = parse_requirement(line)
            blocks.setdefault(name, []).append(line)
    return blocks


def render(repo: Path, uv: str) -> dict[str, str]:
    """Stage name -> the content of its requirement file."""
    stages, outside = load_stages(repo / "deploy" / "docker" / "images.toml")
    runtime = project_requirements(repo / "pyproject.toml")
    wanted = {**dev_requirements(repo / "pyproject.toml"), **runtime}
    placed = [r for stage in stages.values() for r in stage.requires]
    problems = [
        f"{name} is required by pyproject.toml but installed by no stage of "
        "deploy/docker/images.toml and not listed under [outside]"
        for name in sorted(set(runtime) - set(placed) - set(outside))
    ]
    problems += [
        f"{name} in deploy/docker/images.toml is not a requirement of pyproject.toml"
        for name in sorted((set(placed) | set(outside)) - set(wanted))
    ]
    problems += [
        f"{name} is installed by more than one stage"
        for name in sorted(set(placed))
        if placed.count(name) > 1
    ]
    if problems:
        raise LockError("\n".join(problems))

    graph = lock_graph(repo / "uv.lock")
    blocks = export_blocks(uv, repo)
    held: dict[str, set[str]] = {}
    files: dict[str, str] = {}
    for name, stage in stages.items():
        below = held[stage.parent] if stage.parent else set()
        mine = closure(graph, {r: wanted[r] for r in stage.requires})
        held[name] = below | mine
        new = sorted((mine - below) & set(blocks))
        on = ", ".join(chain(stages, name)[:-1]) or "base"
        header = (
            f"# Stage `{name}` of the Dockerfile (built on: {on}).\n"
            "# Generated by `make lock` (deploy/docker/lockfiles.py) from uv.lock and\n"
            "# deploy/docker/images.toml: do not edit.\n"
        )
        files[name] = header + "".join(block + "\n" for n in new for block in blocks[n])
    return files


def find_uv() -> str:
    beside = Path(sys.executable).parent / "uv"
    found = str(beside) if beside.is_file() else shutil.which("uv")
    if found is None:
        raise LockError("uv not found: run `make install` (it installs uv into .venv)")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python deploy/docker/lockfiles.py")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--uv", help="the uv binary (default: beside this Python, or on PATH)")
    args = parser.parse_args(argv)
    try:
        files = render(REPO, args.uv or find_uv())
    except LockError as exc:
        print(f"lockfiles: {exc}", file=sys.stderr)
        return 1
    existing = {p.stem for p in OUT.glob("*.txt")}
    stale = sorted(
        name
        for name, text in files.items()
        if not (OUT / f"{name}.txt").is_file() or (OUT / f"{name}.txt").read_text() != text
    )
    extra = sorted(existing - set(files))
    if args.check:
        for name in stale:
            print(f"lockfiles: {OUT / name}.txt is not current: run `make lock`", file=sys.stderr)
        for name in extra:
            print(f"lockfiles: {OUT / name}.txt belongs to no stage: remove it", file=sys.stderr)
        return 1 if stale or extra else 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name in extra:
        (OUT / f"{name}.txt").unlink()
    for name, text in files.items():
        (OUT / f"{name}.txt").write_text(text)
    print(f"lockfiles: wrote {', '.join(f'{n}.txt' for n in files)} in {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
