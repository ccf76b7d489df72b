"""The SHA-256 of each local file, kept from one pass to the next, so that a file whose size
and modification time have not changed is not read again: the quick check rsync makes. A
folder of thousands of documents is then a walk of its directory entries, not gigabytes read
every pass (docs/benchmarks.md, "Folder sync").

The digests live in memory across the passes of `--watch` and in a cache file per synced
folder (`--cache-dir`, by default the platform's cache folder: `%LOCALAPPDATA%` on Windows,
`~/Library/Caches` on macOS, `$XDG_CACHE_HOME` or `~/.cache` elsewhere), so that scheduled
one-shot runs gain too. The synced folder itself is never written. `--checksum` reads every
file again (for a program that rewrites a file without changing its size or time). A file
modified in the last seconds before it was hashed is not trusted on the next pass (its time
could still be the same after one more write in the same tick), and a cache file that cannot
be read or written costs only the time to hash: the pass warns and goes on.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from mcpvectordb_sync.scan import LocalFile

CACHE_ENV = "MCPVECTORDB_SYNC_CACHE"
_FORMAT = 1
# A file modified this recently when it was hashed is hashed again next time.
_SETTLE_NS = 3_000_000_000

Known = dict[str, tuple[int, int, str]]  # path -> (size, mtime_ns, sha256)


def default_cache_dir() -> Path:
    """Where cache files go unless `--cache-dir` says: $MCPVECTORDB_SYNC_CACHE, else the
    platform's cache folder."""
    if configured := os.environ.get(CACHE_ENV):
        return Path(configured)
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = str(Path.home() / "Library" / "Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcpvectordb-sync"


class Hashes:
    """The digests of one synced folder: `digest` during a pass (from any thread), `commit`
    after it."""

    def __init__(self, folder: str, cache_dir: Path | None, *, verify: bool = False) -> None:
        self.verify = verify
        self.warnings: list[str] = []
        self.read = 0  # files read to hash them in this pass
        self.path: Path | None = None
        if cache_dir is not None:
            key = hashlib.sha256(os.path.abspath(folder).encode("utf-8")).hexdigest()[:24]
            self.path = cache_dir / f"{key}.json"
        self._known: Known = self._load()
        self._seen: Known = {}
        self._lock = threading.Lock()

    def digest(self, file: LocalFile, compute: Callable[[], str]) -> str:
        """The file's SHA-256: the one known for its size and time, else `compute()`d."""
        known = self._known.get(file.path)
        if not self.verify and known is not None and known[:2] == (file.size, file.mtime_ns):
            digest = known[2]
        else:
            digest = compute()
            with self._lock:
                self.read += 1
        if time.time_ns() - file.mtime_ns >= _SETTLE_NS:
            with self._lock:
                self._seen[file.path] = (file.size, file.mtime_ns, digest)
        return digest

    def commit(self, *, complete: bool) -> None:
        """After a pass: keep the digests of the files it saw, in memory and in the cache
        file; after a `complete` one, only those (the others are gone)."""
        with self._lock:
            self._known = self._seen if complete else {**self._known, **self._seen}
            self._seen = {}
        if self.path is not None:
            self._save(self.path)

    def begin(self) -> None:
        """Before a pass: count reads from zero."""
        with self._lock:
            self.read = 0

    def take_warnings(self) -> list[str]:
        with self._lock:
            warnings, self.warnings = self.warnings, []
        return warnings

    def _load(self) -> Known:
        if self.path is None or not self.path.exists():
            return {}
        try:
            stored = json.loads(self.path.read_text(encoding="utf-8"))
            if stored.get("format") != _FORMAT:
                return {}
            return {
                str(path): (int(size), int(mtime), str(digest))
                for path, (size, mtime, digest) in stored["files"].items()
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self.warnings.append(
                f"could not read the hash cache {self.path} ({exc}); every file is hashed"
            )
            return {}

    def _save(self, path: Path) -> None:
        document = {"format": _FORMAT, "files": {p: list(v) for p, v in self._known.items()}}
        temporary = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=".hashes-", dir=path.parent)
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(document, out, ensure_ascii=False)
            os.replace(temporary, path)  # whole or not at all: a crash keeps the old file
        except OSError as exc:
            if temporary is not None:
                Path(temporary).unlink(missing_ok=True)
            self.warnings.append(
                f"could not write the hash cache {path} ({exc}); the next pass hashes every "
                "file again (--cache-dir picks another place)"
            )
