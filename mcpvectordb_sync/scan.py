"""Walk the synced folder: which files to sync, under which source, and what could not be
read.

Files with an extension the gateway converts are taken, source code only when an
`--include` glob names it (`--include "*.py"`), and files without an extension whose first
bytes are text (README, LICENSE, and compressed: changelog.gz; build files and scripts only
with `--include`); `--include` globs (when given) must match and `--exclude` globs must not,
each matched case-insensitively against the path relative to the folder (`/`-separated) and
against the base name. Office's lock files (`~$report.docx`) are never taken. Symbolic links
and junctions to folders are not followed (a loop cannot run forever; a link out of the
folder is not synced). A subfolder that cannot be listed makes the scan incomplete, and an
incomplete scan never leads to deletions.
"""

from __future__ import annotations

import bz2
import fnmatch
import gzip
import io
import lzma
import os
import stat
from dataclasses import dataclass, field
from pathlib import PurePath

from mcpvectordb_sync.paths import (
    SNIFF_BYTES,
    casefold_duplicates,
    is_code,
    is_supported,
    is_unnamed_text,
    long_path,
    source_of,
    unnamed_inside,
)

WINDOWS = os.name == "nt"


class ScanError(Exception):
    """The folder itself cannot be synced (missing, not a folder, unreadable)."""


@dataclass(frozen=True)
class LocalFile:
    source: str
    path: str  # as this platform opens it (long-path form on Windows)
    size: int
    mtime_ns: int


@dataclass
class Scan:
    files: list[LocalFile] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # subfolders that could not be listed
    ignored: int = 0  # files of a type the gateway does not convert
    duplicates: list[list[str]] = field(default_factory=list)  # sources differing by case only

    @property
    def complete(self) -> bool:
        return not self.unreadable


@dataclass(frozen=True)
class Filters:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def wants(self, relative: str) -> bool:
        name = relative.rsplit("/", 1)[-1]
        if name.startswith("~$"):
            return False
        if self.include and not _matches(relative, name, self.include):
            return False
        return not _matches(relative, name, self.exclude)


def _matches(relative: str, name: str, globs: tuple[str, ...]) -> bool:
    rel, base = relative.casefold(), name.casefold()
    for glob in globs:
        pattern = glob.replace("\\", "/").casefold()
        if fnmatch.fnmatchcase(rel, pattern) or fnmatch.fnmatchcase(base, pattern):
            return True
    return False


def scan(folder: str, prefix: str = "", filters: Filters | None = None) -> Scan:
    """Every file below `folder` to sync, sorted by source."""
    filters = filters or Filters()
    root = os.path.abspath(folder)
    try:
        if not stat.S_ISDIR(os.stat(long_path(root, WINDOWS)).st_mode):
            raise ScanError(f"{folder} is not a folder; pass the folder to keep in sync")
    except FileNotFoundError as exc:
        raise ScanError(
            f"{folder} does not exist; check the path (and that the drive or share is connected)"
        ) from exc
    except OSError as exc:
        raise ScanError(f"cannot read {folder}: {exc.strerror or exc}") from exc
    result = Scan()
    pending: list[tuple[str, tuple[str, ...]]] = [(root, ())]
    while pending:
        directory, parts = pending.pop()
        try:
            with os.scandir(long_path(directory, WINDOWS)) as entries:
                listed = list(entries)
        except OSError as exc:
            if not parts:
                raise ScanError(f"cannot list {folder}: {exc.strerror or exc}") from exc
            result.unreadable.append("/".join(parts))
            continue
        for entry in listed:
            here = (*parts, entry.name)
            path = os.path.join(directory, entry.name)
            try:
                if _is_link_to_folder(entry):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append((path, here))
                    continue
                if not entry.is_file():
                    continue
                relative = "/".join(here)
                if not (
                    is_supported(entry.name)
                    or (filters.include and is_code(entry.name))
                    or _unnamed_text(entry, path, code=bool(filters.include))
                ):
                    result.ignored += 1
                    continue
                if not filters.wants(relative):
                    continue
                info = entry.stat()
            except OSError:
                result.unreadable.append("/".join(here))
                continue
            source = source_of(PurePath(*here), prefix)
            result.files.append(
                LocalFile(source, long_path(path, WINDOWS), info.st_size, info.st_mtime_ns)
            )
    result.files.sort(key=lambda f: f.source)
    result.unreadable.sort()
    result.duplicates = casefold_duplicates([f.source for f in result.files])
    return result


def _unnamed_text(entry: os.DirEntry[str], path: str, *, code: bool) -> bool:
    """A file without an extension whose first bytes are text (`is_unnamed_text`), or a
    compressed one holding such a file (`changelog.gz`, its first bytes decompressed)."""
    inner = unnamed_inside(entry.name)
    if inner is None and (PurePath(entry.name).suffix or entry.name.startswith(".")):
        return False
    try:
        with _opened(long_path(path, WINDOWS), compressed=inner is not None) as file:
            head = file.read(SNIFF_BYTES)
    except (OSError, EOFError, lzma.LZMAError):
        return False
    return is_unnamed_text(inner or entry.name, head, code=code)


def _opened(path: str, *, compressed: bool) -> io.BufferedIOBase:
    """The file at `path`, decompressing by its extension when `compressed`."""
    if not compressed:
        return open(path, "rb")
    if path.lower().endswith(".gz"):
        return gzip.open(path)
    return bz2.open(path) if path.lower().endswith(".bz2") else lzma.open(path)


def _is_link_to_folder(entry: os.DirEntry[str]) -> bool:
    junction = getattr(entry, "is_junction", None)  # Python 3.12+
    if junction is not None and junction():
        return True
    return entry.is_symlink() and entry.is_dir(follow_symlinks=True)
