"""One sync pass: scan the folder, read the manifest, hash each file (or take its digest from
the last pass when its size and time are the same: `hashes`), upload what changed, delete
what is gone (when asked), and count it all.

A file that cannot be read (locked by another program, permissions) or that the gateway
refuses (no text, too large) is counted as failed and named in `errors`; the pass goes on and
the next pass tries it again. The pass stops (`SyncError`) when the folder or the gateway
cannot be used at all: unreachable after retries, a refused token. Deletions come last, only
after a complete scan and only of documents whose files are gone; local files are only ever
read.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from mcpvectordb_sync.hashes import Hashes
from mcpvectordb_sync.plan import Entry, changed, deletions, manifest
from mcpvectordb_sync.scan import Filters, LocalFile, ScanError, scan
from mcpvectordb_sync.transport import Gateway, GatewayError, SyncError

Progress = Callable[[int, int, str], None]
Opener = Callable[[str], BinaryIO]
BLOCK = 1 << 20
FATAL_STATUSES = frozenset({401, 403})


@dataclass(frozen=True)
class Options:
    folder: str
    library: str = "default"
    prefix: str = ""
    delete: bool = False
    filters: Filters = field(default_factory=Filters)
    dry_run: bool = False
    concurrency: int = 2
    cache_dir: str | None = None  # where the hash cache file goes (`hashes`); None: memory
    checksum: bool = False  # hash every file, whatever the cache knows


@dataclass
class Summary:
    """What a pass did (with `dry_run`, what it would have done)."""

    uploaded: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    files: int = 0
    ignored: int = 0
    dry_run: bool = False
    bytes_sent: int = 0
    bytes_received: int = 0
    retries: int = 0
    seconds: float = 0.0
    hashed: int = 0  # files read to compute their SHA-256 (the rest were known unchanged)
    # Of `uploaded`, the unchanged files sent again because an older converter made their
    # documents (the manifest's `stale`): converted and embedded anew.
    reconverted: int = 0

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def open_file(path: str) -> BinaryIO:
    return open(path, "rb")


def sha256_of(path: str, opener: Opener = open_file) -> str:
    digest = hashlib.sha256()
    with opener(path) as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


def read_bytes(path: str, opener: Opener = open_file) -> bytes:
    with opener(path) as handle:
        return handle.read()


def hashes_for(options: Options) -> Hashes:
    """The digests known for `options.folder` (`hashes`), for one pass or many."""
    cache = Path(options.cache_dir) if options.cache_dir else None
    return Hashes(options.folder, cache, verify=options.checksum)


class Pass:
    """One pass over `options.folder` against `gateway`; `run` once. `opener` opens files
    for reading (tests stand in one that finds a file locked, as Windows does); `hashes`
    carries the files' digests over from earlier passes (`--watch`)."""

    def __init__(
        self,
        gateway: Gateway,
        options: Options,
        progress: Progress | None = None,
        opener: Opener = open_file,
        hashes: Hashes | None = None,
    ) -> None:
        self.gateway = gateway
        self.opener = opener
        self.hashes = hashes if hashes is not None else hashes_for(options)
        self.options = options
        self.progress = progress
        self.summary = Summary(dry_run=options.dry_run)
        self._lock = threading.Lock()
        self._done = 0
        self._fatal: SyncError | None = None

    def run(self) -> Summary:
        started = time.monotonic()
        gateway = self.gateway
        sent_before, received_before = gateway.bytes_sent, gateway.bytes_received
        retries_before = gateway.retries
        self.hashes.begin()
        complete = False
        try:
            self._run()
            complete = True
        finally:
            self.hashes.commit(complete=complete)
            self.summary.hashed = self.hashes.read
            self.summary.warnings += self.hashes.take_warnings()
            self.summary.bytes_sent = gateway.bytes_sent - sent_before
            self.summary.bytes_received = gateway.bytes_received - received_before
            self.summary.retries = self.gateway.retries - retries_before
            self.summary.seconds = round(time.monotonic() - started, 3)
        return self.summary

    def _run(self) -> None:
        options, summary = self.options, self.summary
        try:
            found = scan(options.folder, options.prefix, options.filters)
        except ScanError as exc:
            raise SyncError(str(exc)) from exc
        summary.files, summary.ignored = len(found.files), found.ignored
        for group in found.duplicates:
            summary.warnings.append(
                "names that differ only by letter case (one file on Windows): " + ", ".join(group)
            )
        for path in found.unreadable:
            summary.warnings.append(f"could not read {path}; it is tried again on the next pass")
        remote = manifest(self.gateway, options.library, options.prefix)
        self._report(0, "manifest read")
        with ThreadPoolExecutor(max_workers=max(1, options.concurrency)) as pool:
            list(pool.map(lambda f: self._file(f, remote), found.files))
        if self._fatal is not None:
            raise self._fatal
        if not options.delete:
            return
        gone, withheld = deletions(found, remote)
        if withheld:
            summary.warnings.append(withheld)
        for entry in gone:
            self._delete(entry)

    def _file(self, file: LocalFile, remote: dict[str, Entry]) -> None:
        if self._fatal is not None:
            return
        try:
            digest = self.hashes.digest(file, lambda: sha256_of(file.path, self.opener))
            if not changed(file, digest, remote):
                self._count("unchanged", file.source)
                return
            entry = remote.get(file.source)
            again = entry is not None and entry.content_sha256 == digest  # stale: convert anew
            if self.options.dry_run:
                self._count("uploaded", file.source, again=again)
                return
            data = read_bytes(file.path, self.opener)
            name = file.source.rsplit("/", 1)[-1]
            answer = self.gateway.upload(data, name, file.source, self.options.library)
            if answer.get("status") == "skipped":
                self._count("unchanged", file.source)
            else:
                self._count("uploaded", file.source, again=again)
        except OSError as exc:
            why = exc.strerror or str(exc)
            self._fail(
                file.source,
                f"cannot read the file ({why}); locked by another program? "
                "it is tried again on the next pass",
            )
        except GatewayError as exc:
            if exc.status in FATAL_STATUSES:
                self._fatal = exc
            self._fail(file.source, exc.message)
        except SyncError as exc:  # the gateway is unreachable: no point trying the others
            self._fatal = exc
            self._fail(file.source, exc.message)

    def _delete(self, entry: Entry) -> None:
        if self.options.dry_run:
            self._count("deleted", entry.source)
            return
        try:
            self.gateway.delete_source(self.options.library, entry.source)
        except GatewayError as exc:
            if exc.status == 404:
                return  # deleted meanwhile: gone either way
            if exc.status in FATAL_STATUSES:
                raise
            self._fail(entry.source, f"could not delete the document: {exc.message}", file=False)
            return
        self._count("deleted", entry.source)

    def _count(self, what: str, source: str, *, again: bool = False) -> None:
        with self._lock:
            setattr(self.summary, what, getattr(self.summary, what) + 1)
            self.summary.reconverted += again
            self._done += what != "deleted"
            done = self._done
        self._report(done, f"{source}: {what}")

    def _fail(self, source: str, message: str, *, file: bool = True) -> None:
        with self._lock:
            self.summary.failed += 1
            self.summary.errors.append({"source": source, "error": message})
            self._done += file
            done = self._done
        self._report(done, f"{source}: failed")

    def _report(self, done: int, message: str) -> None:
        if self.progress is not None:
            self.progress(done, self.summary.files, message)


def sync_once(
    gateway: Gateway,
    options: Options,
    progress: Progress | None = None,
    opener: Opener = open_file,
    hashes: Hashes | None = None,
) -> Summary:
    """One pass (see the module docstring); `opener` opens a file for reading, `hashes`
    holds the digests of earlier passes (a new one from `options` when None)."""
    return Pass(gateway, options, progress, opener, hashes).run()
