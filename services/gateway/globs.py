"""Glob patterns over paths relative to a scanned root, and the walk of a root through them
(`ingest_folder`'s scan, `ingest_repo`'s checkout).

A pattern matches a `/`-separated relative path with `fnmatch` rules (`docs/**` below
`docs/`), or, when it holds no `/`, the file's base name in any folder (`*.md`). A pattern
ending in `/` is a folder at any depth (`node_modules/`). Matching is case-sensitive, as on
the servers these run on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from libs.formats import is_office_lock


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


def walk(
    root: Path,
    include: Sequence[str] | None,
    exclude: Sequence[str],
    *,
    recursive: bool = True,
    hidden: bool = True,
    onerror: Callable[[OSError], None] | None = None,
) -> Iterator[tuple[str, Path]]:
    """(relative path, full path) of every entry below `root` that `include` matches (all
    when None) and `exclude` does not, folders in sorted order and names sorted in each;
    excluded folders are not entered. Without `hidden`, names starting with a dot are left
    out, folders too; Office's lock files (`formats.is_office_lock`) always are. Blocking:
    for worker threads. What an entry is (a file, a link) is for the caller to look at."""
    for top, dirs, names in os.walk(root, onerror=onerror):
        here = Path(top).relative_to(root).as_posix()
        prefix = "" if here == "." else here + "/"
        kept = (
            d
            for d in dirs
            if (hidden or not d.startswith(".")) and not folder_matches(prefix + d, exclude)
        )
        dirs[:] = sorted(kept) if recursive else []
        for name in sorted(names):
            relative = prefix + name
            if (not hidden and name.startswith(".")) or is_office_lock(name):
                continue
            if matches(relative, exclude) or (
                include is not None and not matches(relative, include)
            ):
                continue
            yield relative, Path(top) / name
