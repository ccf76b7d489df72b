"""The server's own files as sources: reading them below the allowed roots, and scanning
folders (URLs are fetched by `fetch`).

Path policy: with `INGEST_ROOTS` set, a path must resolve (symlinks followed) to a location
inside one of the roots; `..` tricks and symlinks leaving a root are refused because the
check is made on the resolved path.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from libs.errors import (
    FileAccessError,
    InvalidInputError,
    PathNotAllowedError,
    TooLargeError,
)
from libs.formats import (
    DECOMPRESSION_ERRORS,
    SNIFF_BYTES,
    decompressing,
    extension_of,
    is_convertible,
    is_known,
    is_scanned,
    unnamed_inside,
    unnamed_text,
)
from services.gateway.globs import walk

# Linux's limits; a longer path can only fail, and `stat` would fail with an OSError.
_PATH_MAX = 4096
_NAME_MAX = 255


@dataclass(frozen=True)
class PathPolicy:
    roots: tuple[Path, ...]

    @classmethod
    def from_roots(cls, roots: list[Path]) -> PathPolicy:
        return cls(tuple(Path(os.path.realpath(r)) for r in roots))

    def resolve(self, raw: str) -> Path:
        """Absolute, symlink-free path of `raw`, refused if it leaves every allowed root."""
        if not raw or not raw.strip():
            raise InvalidInputError("path is empty; pass the path of a file on the server")
        if "\x00" in raw:
            raise InvalidInputError("path contains a NUL character")
        try:
            encoded = os.fsencode(raw)
        except UnicodeEncodeError as exc:
            raise InvalidInputError("path is not valid text for this file system") from exc
        if len(encoded) > _PATH_MAX or any(len(part) > _NAME_MAX for part in encoded.split(b"/")):
            raise InvalidInputError(
                f"path is too long (at most {_PATH_MAX} bytes, {_NAME_MAX} per name)"
            )
        try:
            candidate = Path(raw).expanduser()
        except RuntimeError as exc:  # "~name" for a user this host does not have
            raise InvalidInputError(
                f"'{raw}' starts with a home folder this server cannot find ({exc}); "
                "give the path without '~'"
            ) from exc
        if not candidate.is_absolute() and self.roots:
            candidate = self.roots[0] / candidate
        resolved = Path(os.path.realpath(candidate))
        if self.roots and not any(resolved.is_relative_to(root) for root in self.roots):
            allowed = ", ".join(str(r) for r in self.roots)
            raise PathNotAllowedError(
                f"'{raw}' is outside the folders this server may read ({allowed}); "
                "copy the file there, or upload it with POST /upload or ingest_content"
            )
        return resolved


@dataclass(frozen=True)
class FileRead:
    data: bytes
    last_modified: str  # the file's mtime, ISO 8601 UTC


def read_file(path: Path, max_bytes: int) -> FileRead:
    """The file's bytes and modification time, from one `stat` (blocking: call it in a
    worker thread)."""
    try:
        info = path.stat()
    except FileNotFoundError as exc:
        raise FileAccessError(
            f"file not found on the server: {path}; check the path with "
            "server_info(check_path=...) or upload the file with POST /upload"
        ) from exc
    except OSError as exc:
        raise FileAccessError(f"cannot look at {path}: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(info.st_mode):
        raise FileAccessError(f"{path} is a folder; use ingest_folder for folders")
    if not stat.S_ISREG(info.st_mode):
        raise FileAccessError(f"{path} is not a regular file")
    if info.st_size > max_bytes:
        raise TooLargeError(f"{path} is {info.st_size} bytes, over the {max_bytes}-byte limit")
    try:
        data = path.read_bytes()
    except PermissionError as exc:
        raise FileAccessError(f"the server has no permission to read {path}") from exc
    except OSError as exc:
        raise FileAccessError(f"could not read {path}: {exc.strerror or exc}") from exc
    modified = datetime.fromtimestamp(info.st_mtime, UTC).isoformat(timespec="seconds")
    return FileRead(data, modified)


@dataclass(frozen=True)
class FolderScan:
    files: list[Path]
    ignored: list[Path]
    # Subfolders that could not be read: the scan is incomplete, so nothing may be pruned.
    unreadable: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.unreadable


def scan_folder_root(folder: Path) -> None:
    """Refuse a folder that does not exist, is a file, or cannot be read."""
    try:
        if not folder.exists():
            raise FileAccessError(f"folder not found on the server: {folder}")
        if not folder.is_dir():
            raise FileAccessError(f"{folder} is a file, not a folder; use ingest_file for one file")
        if not os.access(folder, os.R_OK | os.X_OK):
            raise FileAccessError(f"the server has no permission to read the folder {folder}")
    except OSError as exc:
        raise FileAccessError(f"cannot look at {folder}: {exc.strerror or exc}") from exc


def is_unnamed_text(path: Path, *, code: bool) -> bool:
    """Whether a scan takes the file at `path` by its first bytes: one without an extension
    (`libs.formats.unnamed_text`), or a compressed one that holds such a file
    (`changelog.gz`: its first bytes decompressed; `libs.formats.unnamed_inside`). Not when
    it cannot be read or decompressed (it is left out as a file of an unknown type is)."""
    inner = unnamed_inside(path.name)
    if inner is None and extension_of(path.name):
        return False
    try:
        with path.open("rb") as raw:
            head = (decompressing(raw, path.name) if inner else raw).read(SNIFF_BYTES)
    except DECOMPRESSION_ERRORS:
        return False
    return unnamed_text(inner or path.name, head, code=code)


def scan_folder(
    folder: Path,
    recursive: bool,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
) -> FolderScan:
    """The convertible files below `folder` (hidden names skipped), the known formats this
    build cannot convert, and the subfolders that could not be read (blocking: run it in a
    worker thread). Without `include`, every convertible format but source code is taken,
    and files without an extension whose first bytes are text, compressed or not
    (`is_unnamed_text`); with it, the convertible files it matches, code included (`globs`).
    `exclude` leaves files and folders out."""
    scan_folder_root(folder)
    files: list[Path] = []
    ignored: list[Path] = []
    unreadable: list[str] = []

    def failed(error: OSError) -> None:
        unreadable.append(f"{error.filename}: {error.strerror or error}")

    found = walk(
        folder,
        include or None,
        tuple(exclude or ()),
        recursive=recursive,
        hidden=False,
        onerror=failed,
    )
    for _, entry in found:
        if not entry.is_file():
            continue
        named = is_convertible(entry.name) if include else is_scanned(entry.name)
        if named or is_unnamed_text(entry, code=bool(include)):
            files.append(entry)
        elif is_known(entry.name):
            ignored.append(entry)
    files.sort()
    ignored.sort()
    return FolderScan(files, ignored, unreadable)
