"""The one-writer rule, enforced: a writer that sees a commit it did not make stops writing.

Lance keeps each table consistent under concurrent commits by rebasing the loser on the
winner, so two index writers on one store (a misconfiguration: two processes with
INDEX_ROLE=writer or all on one LANCEDB_URI) both succeed at first. But a document replace is
three commits (`writes`), and two writers replacing the same source can interleave them and
leave the source's live row without its chunks. So every writer watches the versions of the
tables it writes:

- at start (`adopt`) it takes the versions it finds as its own (a restart after a crash is
  not a conflict); a table absent then must not appear with commits it did not make;
- before each commit (`check`) it brings the handles to the latest version and compares
  each with the version it last committed or adopted: a version it did not make means
  another writer, and the commit is refused with `ConcurrentWriter` (409
  `concurrent_writer`);
- after each commit (`committed`) it records the version the commit made (Lance reports
  it); any other version since the last one it knew was another process's commit, rebased
  over or landed just after, which is a conflict too.

Maintenance (`maintenance.optimize`: compaction, folding new rows into the indexes, vector
index builds) runs without the write lock, on table handles of its own, so its commits land
between this process's writes like another writer's would. While a fold runs (`folding`), a
version a write did not expect is accepted when every commit in between is a fold's: one that
leaves the table's rows as they were (Lance's per-version summary: the same live row count,
no row added to the data files). Compaction and index commits are such; every append,
delete, update or merge a writer makes changes one of the two, so a foreign writer is still
caught, during a fold as at any other time. When the fold ends, `check` under the write lock
takes its last commits as this process's.

The version a commit made is LanceDB's report of its handle's version after the commit, so a
writer's handles never refresh on their own (`location.connect`): one that did could move
between the commit and the report to a fold's commit that landed meanwhile, and the write's
own commit would look like another writer's (a single writer was refused that way, once, in
a million-chunk load). They move only under the write lock: in `check`, and at the writer's
periodic look (`tables.catch_up`).

Checking, before each step of a replace, the table that step writes makes the losing
interleaving impossible when both processes run this guard. The loss needs another writer's
chunk swap between this one's swap and its publish; that other replace staged its documents
row before its swap, so after this writer's last own `documents` commit or before it. After
it, the check before this publish sees that row's version; before it, the check before
that own commit saw it, or the commit was rebased over it and `committed` saw the jump. So
the second process to commit a step stops (a stopped replace leaves what a crash leaves,
which recovery finishes). A delete writes chunks, then documents, and is checked the same
way. Once a conflict is seen every write is refused until a restart, so the operator fixes
the deployment; reads go on. A reader writes nothing and is not guarded. Costs one look at
the latest version of the written table per commit (a directory listing on disk, a request
on object storage): checking both tables before each step cost twice that, a third of a
replace on a local S3 server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from lancedb.table import Table

from services.index.errors import ConcurrentWriter

log = logging.getLogger(__name__)

Named = tuple[str, Table | None]

# How long a listing of a table's versions is taken again while a cleanup removes old ones
# (`_versions`).
_LISTING_PATIENCE_S = 10.0


class WriterGuard:
    """The versions this process made, per table name; see the module docstring. Its
    methods run under the store's write lock (the lock here only keeps `conflict` whole)."""

    def __init__(self, uri: str, *, enabled: bool) -> None:
        self.uri = uri
        self.enabled = enabled
        self.conflict: str | None = None
        self._versions: dict[str, int] = {}
        self._lock = threading.Lock()
        # Folds running in this process (`folding`); their commits are not a conflict.
        self._folds = 0
        # Per table, version summaries seen while folding (`remember`, `_folds_only`): the
        # fold's cleanup may remove the versions it compares against.
        self._summaries: dict[str, dict[int, Mapping[str, Any]]] = {}

    def adopt(self, tables: Iterable[Named]) -> None:
        """Take the tables' current versions as this process's (0 for a table absent)."""
        for name, table in tables:
            self._versions[name] = 0 if table is None else table.version

    def refuse_if_conflicted(self) -> None:
        if self.enabled and self.conflict is not None:
            raise ConcurrentWriter(self.uri, self.conflict)

    def check(self, tables: Iterable[Named]) -> None:
        """Before a commit: refuse it if any of `tables` has a version this process did
        not make (see the module docstring)."""
        if not self.enabled:
            return
        self.refuse_if_conflicted()
        for name, table in tables:
            if table is None:
                continue
            table.checkout_latest()  # type: ignore[no-untyped-call]
            found, mine = table.version, self._versions.get(name)
            if mine is None or (mine == 0 and found == 1):
                # First met (a table this process opened lazily, or an empty one just
                # created): nothing in it was written by another process yet.
                self._versions[name] = found
            elif found != mine and not self._folds_only(name, table, range(mine + 1, found + 1)):
                self._found(f"table {name!r} is at version {found}, this process wrote {mine}")
            else:
                self._versions[name] = found
        self.refuse_if_conflicted()

    def committed(self, name: str, table: Table, made: int | None) -> None:
        """After a commit of this process, which made version `made` of `table` (None: the
        table was just created here): record it. Every other version since the one this
        process last saw must be a fold's, landed just before this commit or just after
        it; one that is not is another writer's: the write itself is stored, and every
        later one is refused."""
        if not self.enabled:
            return
        latest, mine = max(table.version, made or 0), self._versions.get(name)
        if made is not None and mine:
            others = [v for v in range(mine + 1, latest + 1) if v != made]
            if others and not self._folds_only(name, table, others):
                self._found(
                    f"a commit to table {name!r} made version {made}, and version(s) "
                    f"{', '.join(map(str, others))} beside it are not this process's: "
                    "another process committed in between"
                )
        self._versions[name] = latest

    @contextmanager
    def folding(self) -> Iterator[None]:
        """While a fold of this process runs: its commits are taken as this process's."""
        with self._lock:
            self._folds += 1
        try:
            yield
        finally:
            with self._lock:
                self._folds -= 1
                if not self._folds:
                    self._summaries.clear()

    def remember(self, tables: Iterable[Named]) -> None:
        """At the start of a fold, under the write lock and after `check`: keep the
        summaries of the versions the fold starts from, which its own cleanup may remove
        (a version older than `INDEX_VERSION_RETENTION_S` that is no longer the latest)."""
        for name, table in tables:
            if self.enabled and table is not None:
                self._summaries_of(name, table)

    def _summaries_of(self, name: str, table: Table) -> dict[int, Mapping[str, Any]]:
        known = self._summaries.setdefault(name, {})
        known.update({v["version"]: v.get("metadata") or {} for v in _versions(table)})
        return known

    def _folds_only(self, name: str, table: Table, versions: Iterable[int]) -> bool:
        """Whether a fold of this process is running and each of `versions` of `table`
        left its rows as the version before it had them (see the module docstring)."""
        if not self._folds:
            return False
        summaries = self._summaries_of(name, table)
        return all(
            fold_like(summaries.get(version - 1), summaries.get(version)) for version in versions
        )

    def _found(self, detail: str) -> None:
        with self._lock:
            first = self.conflict is None
            if first:
                self.conflict = detail
        if first:
            log.error(
                "another process writes this store; refusing every write until restarted",
                extra={"fields": {"lancedb_uri": self.uri, "detail": detail}},
            )


def _versions(table: Table) -> list[dict[str, Any]]:
    """Every version of `table` with its summary. Lance lists the version files, then reads
    each: a fold's cleanup that removes old ones in between fails the read ("Not found").
    A cleanup of hundreds of versions takes a good part of a second (longer on a busy
    machine), and listings taken back to back can all meet it, so the listing is taken
    again with a growing pause until it succeeds or `_LISTING_PATIENCE_S` has passed."""
    deadline = time.monotonic() + _LISTING_PATIENCE_S
    pause = 0.01
    while True:
        try:
            return table.list_versions()
        except Exception as exc:
            if "Not found" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.25)


def fold_like(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> bool:
    """Whether the commit from summary `before` to `after` left the rows as they were: the
    same live rows and no row added to the data files (compaction removes deleted rows from
    them; an index commit changes neither). False when a summary is missing."""
    if before is None or after is None:
        return False
    try:
        same_rows = int(after["total_rows"]) == int(before["total_rows"])
        added = int(after["total_data_file_rows"]) > int(before["total_data_file_rows"])
    except (KeyError, TypeError, ValueError):
        return False
    return same_rows and not added
