"""Glob patterns over paths relative to a scanned root (`ingest_folder`, `ingest_repo`).

A pattern matches a `/`-separated relative path with `fnmatch` rules (`docs/**` below
`docs/`), or, when it holds no `/`, the file's base name in any folder (`*.md`). A pattern
ending in `/` is a folder at any depth (`node_modules/`). Matching is case-sensitive, as on
the servers these run on.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import PurePosixPath


def matches(path: str, patterns: Sequence[str]) -> bool:
    """Whether the relative `path` matches any of `patterns`."""
    name = PurePosixPath(path).name
    for pattern in patterns:
        if pattern.endswith("/"):
            folder = pattern.rstrip("/")
            parts = PurePosixPath(path).parts[:-1]
            if any(fnmatchcase(part, folder) for part in parts) or fnmatchcase(path, folder + "/*"):
                return True
        elif fnmatchcase(path, pattern) or ("/" not in pattern and fnmatchcase(name, pattern)):
            return True
    return False


def folder_matches(relative_dir: str, patterns: Sequence[str]) -> bool:
    """Whether everything below the folder `relative_dir` is left out by `patterns`."""
    return matches(relative_dir + "/x", patterns)
