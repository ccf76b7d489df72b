"""The pure parts of `ingest_repo`: repository URL forms, the git options that keep a clone
safe, the include/exclude patterns and the walk (symlinks and oversized files left out), the
conversion names of text formats, and the URL policy's refusal of private, link-local and
metadata addresses for repository URLs (through a resolver that answers without
connecting)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from libs.contracts import IngestRepoInput
from libs.errors import InvalidInputError, PathNotAllowedError
from services.gateway.fetch import UrlPolicy
from services.gateway.globs import matches as _matches
from services.gateway.repos import _git_config, repo_url, walk


def test_owner_repo_means_github_and_urls_are_kept_stable() -> None:
    assert repo_url("microsoft/markitdown") == "https://github.com/microsoft/markitdown"
    assert repo_url(" owner/repo.git ") == "https://github.com/owner/repo"
    assert repo_url("https://git.example.com/a/b.git/") == "https://git.example.com/a/b.git"
    for bad, words in (
        ("just-a-name", "owner/repo"),
        ("https://user:secret@example.com/r.git", "credentials"),
        ("https://example.com/r.git#frag", "fragment"),
    ):
        with pytest.raises(InvalidInputError, match=words):
            repo_url(bad)


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("10.0.0.5", False),
        ("192.168.1.10", False),
        ("172.20.0.1", False),
        ("169.254.169.254", False),  # cloud metadata
        ("fe80::1", False),
        ("fd12::1", False),
        ("127.0.0.1", False),
        ("140.82.112.3", True),
    ],
)
async def test_repository_hosts_resolving_to_non_public_addresses_are_refused(
    address: str, allowed: bool
) -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return [address]

    policy = UrlPolicy([], resolver)
    url = repo_url("owner/repo")
    if allowed:
        assert (await policy.check(url)).address == address
    else:
        with pytest.raises(PathNotAllowedError, match="URL_ALLOW_HOSTS"):
            await policy.check(url)


def test_git_runs_pinned_to_the_checked_address_without_redirects_hooks_or_helpers() -> None:
    config = _git_config("example.com", 443, "2001:db8::1")
    pairs = dict(config[i + 1].split("=", 1) for i in range(0, len(config), 2))
    assert pairs["http.curloptResolve"] == "example.com:443:[2001:db8::1]"
    assert pairs["http.followRedirects"] == "false"
    assert pairs["core.hooksPath"] == os.devnull
    assert pairs["credential.helper"] == ""
    assert pairs["protocol.allow"] == "never"
    assert pairs["protocol.https.allow"] == "always"


def test_patterns() -> None:
    assert _matches("docs/a.md", ["*.md"])
    assert _matches("docs/a.md", ["docs/**"])
    assert not _matches("src/a.py", ["*.md", "docs/**"])
    assert _matches("a/node_modules/x/readme.md", ["node_modules/"])
    assert _matches("node_modules/readme.md", ["node_modules/"])
    assert not _matches("docs/node_modules.md", ["node_modules/"])
    assert _matches("sub/package-lock.json", ["package-lock.json"])


def test_walk_keeps_documentation_and_leaves_out_the_rest(tmp_path: Path) -> None:
    files = {
        "README.md": "# r",
        "docs/guide.rst": "guide",
        "docs/conf.yaml": "a: 1",
        "src/main.py": "print()",
        "node_modules/p/README.md": "# vendored",
        "vendor/lib/notes.txt": "vendored",
        "package-lock.json": "{}",
        "docs/big.txt": "x" * 2000,
        ".git/config": "[core]",
        "NEWS": "Version 2: faster.",  # a text file without an extension
        "Makefile": "all:\n\tcc main.c",  # a build file: code
        "bin/run": "#!/bin/sh\nexec main",  # a script: code
        "docs/~$guide.docx": "\x05alice",  # Office's lock file, committed by mistake
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    outside = tmp_path.parent / "secret.txt"
    outside.write_text("server secret")
    (tmp_path / "docs/link.txt").symlink_to(outside)
    (tmp_path / "bin/tool").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(64))
    (tmp_path / "LINK").symlink_to(outside)  # no extension, but a link: never followed
    found = walk(tmp_path, None, None, max_file_bytes=1000)
    assert found.files == ["NEWS", "README.md", "docs/conf.yaml", "docs/guide.rst"]
    assert sorted(found.ignored) == ["docs/big.txt", "docs/link.txt"]
    only = walk(tmp_path, ["docs/**"], ["*.yaml"], max_file_bytes=10_000)  # no lock file
    assert only.files == ["docs/big.txt", "docs/guide.rst"]


def test_the_input_bounds() -> None:
    assert IngestRepoInput(url="a/b").prune is True
    for bad in (
        {"url": "a/b", "max_files": 0},
        {"url": "a/b", "ref": "--upload-pack=x y"},
        {"url": "a/b", "ref": "-q"},
    ):
        with pytest.raises(ValueError):
            IngestRepoInput.model_validate(bad)
