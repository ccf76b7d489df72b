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
- after each commit (`committed`) it records the new version; a single commit that landed
  more than one version further was rebased over a foreign one, which is a conflict too.
  Maintenance (optimize, index builds) makes several versions and is only recorded.

Checking both `documents` and `chunks` before every step of a replace makes the losing
interleaving impossible when both processes run this guard: of two replaces of one source,
the second to commit a step sees the other's earlier step and stops (a stopped replace leaves
what a crash leaves, which recovery finishes). Once a conflict is seen every write is refused
until a restart, so the operator fixes the deployment; reads go on. A reader writes nothing
and is not guarded. Costs one look at the latest version per table per commit (a directory
listing on disk, one request on object storage).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from lancedb.table import Table

from services.index.errors import ConcurrentWriter

log = logging.getLogger(__name__)

Named = tuple[str, Table | None]


class WriterGuard:
    """The versions this process made, per table name; see the module docstring. Its
    methods run under the store's write lock (the lock here only keeps `conflict` whole)."""

    def __init__(self, uri: str, *, enabled: bool) -> None:
        self.uri = uri
        self.enabled = enabled
        self.conflict: str | None = None
        self._versions: dict[str, int] = {}
        self._lock = threading.Lock()

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
            elif found != mine:
                self._found(f"table {name!r} is at version {found}, this process wrote {mine}")
        self.refuse_if_conflicted()

    def committed(self, name: str, table: Table, *, commits: int | None = 1) -> None:
        """After a commit of this process: record the version it made. With `commits`
        given, a version further on than that is a rebase over a foreign commit: the
        write itself is stored, and every later one is refused."""
        if not self.enabled:
            return
        found, mine = table.version, self._versions.get(name)
        if commits is not None and mine and found > mine + commits:
            self._found(
                f"a commit to table {name!r} landed at version {found}, not {mine + commits}: "
                "another process committed in between"
            )
        self._versions[name] = found

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
