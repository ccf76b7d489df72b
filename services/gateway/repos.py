"""Cloning a git repository safely and walking its files (`ingest_repo`).

The repository URL passes the same `UrlPolicy` as `ingest_url` (http/https only, non-public
addresses refused unless allow-listed) and git connects to the address that was checked
(`http.curloptResolve`), follows no redirect, and runs with hooks, credential helpers,
prompts, system and user configuration off. One ref, depth 1, no tags, no submodules, into a
temporary folder that is always removed. The clone is watched: past `REPO_MAX_BYTES` on disk
or `REPO_CLONE_TIMEOUT_S` it is killed and refused.

Walking never follows symlinks (a link in a repository could point anywhere on the server)
and keeps regular files matching the include patterns, outside the excluded folders and
files, at most `max_file_bytes` each.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from libs.errors import FetchError, InvalidInputError, MvdbError, NotFoundError, TooLargeError
from libs.formats import ARCHIVES, SCANNED_EXTENSIONS, extension_of
from services.gateway import globs
from services.gateway.fetch import UrlPolicy
from services.gateway.sources import is_unnamed_text

# Documentation formats; not archives, which a repository holds as build inputs and outputs.
DEFAULT_INCLUDE = tuple(sorted({f"*{ext}" for ext in SCANNED_EXTENSIONS - ARCHIVES}))
DEFAULT_EXCLUDE = (
    ".git/",
    "node_modules/",
    "vendor/",
    "third_party/",
    "dist/",
    "build/",
    "target/",
    "__pycache__/",
    ".venv/",
    "venv/",
    ".tox/",
    "site-packages/",
    "_build/",
    ".next/",
    "coverage/",
    "package-lock.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "*.lock",
    "Cargo.lock",
    "poetry.lock",
    "uv.lock",
    "composer.lock",
    "Gemfile.lock",
    "go.sum",
    "*.min.js",
    "*.min.css",
)
_OWNER_REPO = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
_PROXY_VARIABLES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}


def repo_url(raw: str) -> str:
    """The repository URL: `owner/repo` means GitHub; a URL is kept without a trailing
    slash, so the same repository gives the same document sources."""
    text = raw.strip()
    if _OWNER_REPO.match(text):
        return f"https://github.com/{text.removesuffix('.git')}"
    if "://" not in text:
        raise InvalidInputError(
            f"'{raw}' is neither an http(s) repository URL nor owner/repo (a GitHub repository)"
        )
    if "@" in text.split("://", 1)[1].split("/", 1)[0]:
        raise InvalidInputError("repository URLs with credentials are refused; use a public URL")
    if "#" in text or "?" in text:
        raise InvalidInputError(f"the repository URL '{raw}' must not have a query or fragment")
    return text.rstrip("/")


@dataclass(frozen=True)
class CloneLimits:
    max_bytes: int
    timeout_s: float


@dataclass
class Checkout:
    root: Path
    commit: str
    ref: str


def _git_env(home: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": home,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "SSH_ASKPASS": "/bin/false",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_LFS_SKIP_SMUDGE": "1",
        "LC_ALL": "C",
        # An operator's proxy settings are honoured (the proxy then resolves the host).
        **{k: v for k, v in os.environ.items() if k.lower() in _PROXY_VARIABLES},
    }


def _git_config(host: str, port: int, address: str) -> list[str]:
    pinned = f"[{address}]" if ":" in address else address
    options = {
        "core.hooksPath": os.devnull,
        "credential.helper": "",
        "http.followRedirects": "false",
        "http.curloptResolve": f"{host}:{port}:{pinned}",
        "protocol.allow": "never",
        "protocol.http.allow": "always",
        "protocol.https.allow": "always",
        "submodule.recurse": "false",
        "core.symlinks": "false",
        "advice.detachedHead": "false",
    }
    return [arg for key, value in options.items() for arg in ("-c", f"{key}={value}")]


def _size_of(folder: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(folder):
        for name in files:
            with suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


async def _run_git(
    args: list[str], cwd: Path, env: dict[str, str], limits: CloneLimits, watch: Path
) -> str:
    """Run git; its stdout. Killed past the time limit or when `watch` outgrows the size
    limit (checked every 0.2 s while it runs)."""
    try:
        process = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except FileNotFoundError as exc:
        raise MvdbError(
            "the git command line is not installed where the gateway runs; install git "
            "(e.g. apt-get install git) to use ingest_repo"
        ) from exc
    communicate = asyncio.ensure_future(process.communicate())
    deadline = asyncio.get_running_loop().time() + limits.timeout_s
    try:
        while True:
            done, _ = await asyncio.wait({communicate}, timeout=0.2)
            if done:
                break
            if asyncio.get_running_loop().time() > deadline:
                raise FetchError(
                    f"cloning took longer than {limits.timeout_s:g} s (REPO_CLONE_TIMEOUT_S); "
                    "try a smaller repository or raise the limit"
                )
            size = await asyncio.to_thread(_size_of, watch)
            if size > limits.max_bytes:
                raise TooLargeError(
                    f"the repository is larger than {limits.max_bytes} bytes on disk "
                    "(REPO_MAX_BYTES); ingest a smaller repository or raise the limit"
                )
    except BaseException:
        with suppress(ProcessLookupError):
            process.kill()
        with suppress(Exception):
            await communicate
        raise
    out, err = communicate.result()
    if process.returncode != 0:
        raise _git_error(args, err.decode("utf-8", "replace"))
    # A fast transfer can finish between two looks: the limit holds for what it left too.
    if await asyncio.to_thread(_size_of, watch) > limits.max_bytes:
        raise TooLargeError(
            f"the repository is larger than {limits.max_bytes} bytes on disk "
            "(REPO_MAX_BYTES); ingest a smaller repository or raise the limit"
        )
    return out.decode("utf-8", "replace")


def _git_error(args: list[str], stderr: str) -> Exception:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    detail = lines[-1] if lines else "no message"
    lowered = stderr.lower()
    if "couldn't find remote ref" in lowered or "not our ref" in lowered:
        return NotFoundError(
            f"the repository has no ref {args[-1]!r}; pass an existing branch, tag or "
            f"commit as ref (git said: {detail})"
        )
    if "not found" in lowered or ("repository" in lowered and "not" in lowered):
        return NotFoundError(f"no git repository at that URL (git said: {detail})")
    return FetchError(f"git {args[0]} failed: {detail}")


@asynccontextmanager
async def checkout(
    url: str, ref: str | None, policy: UrlPolicy, limits: CloneLimits
) -> AsyncIterator[Checkout]:
    """A shallow checkout of `ref` (default branch when None) in a temporary folder,
    removed when the block ends, whatever happens."""
    target = await policy.check(url)
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    workdir = Path(tempfile.mkdtemp(prefix="mcpvectordb-repo-"))
    try:
        env = _git_env(str(workdir))
        config = _git_config(target.host, port, target.address)
        root = workdir / "checkout"
        root.mkdir()
        await _run_git(["init", "--quiet"], root, env, limits, root)
        await _run_git([*config, "remote", "add", "origin", url], root, env, limits, root)
        wanted = ref or "HEAD"
        branch = ref
        if ref is None:
            listed = await _run_git(
                [*config, "ls-remote", "--symref", "origin", "HEAD"], root, env, limits, root
            )
            found = re.search(r"^ref: refs/heads/(\S+)\s+HEAD$", listed, re.MULTILINE)
            branch = found.group(1) if found else "HEAD"
        fetch = [*config, "fetch", "--quiet", "--depth=1", "--no-tags", "--no-recurse-submodules"]
        await _run_git([*fetch, "origin", wanted], root, env, limits, root)
        await _run_git(
            [*config, "checkout", "--quiet", "--detach", "FETCH_HEAD"], root, env, limits, root
        )
        commit = (await _run_git(["rev-parse", "HEAD"], root, env, limits, root)).strip()
        yield Checkout(root=root, commit=commit, ref=branch or wanted)
    finally:
        await asyncio.to_thread(shutil.rmtree, workdir, True)


@dataclass
class RepoFiles:
    files: list[str] = field(default_factory=list)  # posix paths relative to the root
    ignored: list[str] = field(default_factory=list)


def walk(
    root: Path, include: list[str] | None, exclude: list[str] | None, max_file_bytes: int
) -> RepoFiles:
    """The files to ingest below `root`, sorted; symlinks and oversized files are ignored.
    Without `include`, the documentation formats (`DEFAULT_INCLUDE`) and files without an
    extension whose first bytes are text (README, LICENSE, NEWS; `formats.unnamed_text`)."""
    excludes = (*DEFAULT_EXCLUDE, *(exclude or ()))
    found = RepoFiles()
    for path, full in globs.walk(root, tuple(include) if include else None, excludes):
        info = os.lstat(full)
        regular = stat.S_ISREG(info.st_mode) and info.st_size <= max_file_bytes
        if not include and not globs.matches(path, DEFAULT_INCLUDE):
            if regular and not extension_of(full.name) and is_unnamed_text(full, code=False):
                found.files.append(path)
            continue
        if not regular:
            found.ignored.append(path)
            continue
        found.files.append(path)
    found.files.sort()
    return found
