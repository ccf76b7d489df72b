"""Folds that never block writes (`services.index.store.maintenance`): on a real local
LanceDB store, writes complete while a fold is held inside it (ordering, not timing: the
fold waits behind a gate the test opens), nothing written meanwhile is lost or left out of
the next fold, the fold's own commits never look like another writer's, and a real second
writer is still caught during a fold."""

from __future__ import annotations

import asyncio
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa
import pytest
from lancedb.table import Table

from libs.contracts import IndexSearchRequest
from libs.errors import ConcurrentWriterError
from services.index.store import IndexStore, maintenance
from services.index.store.schema import CHUNKS
from services.index.store.writer_guard import WriterGuard, fold_like
from tests.index_helpers import settings_for, upsert_request
from tests.integration.test_index_writer_guard import assert_complete

pytestmark = pytest.mark.integration

WAIT_S = 60  # only a guard against a hang: every wait below is for an event


class Gate:
    """Holds the fold of the chunks table twice: before Lance's optimize runs and after it
    has committed, each time until the test lets it go."""

    def __init__(self) -> None:
        self.arrived = {"before": threading.Event(), "after": threading.Event()}
        self.go = {"before": threading.Event(), "after": threading.Event()}

    def hold(self, point: str) -> None:
        self.arrived[point].set()
        assert self.go[point].wait(WAIT_S), f"the test never let the fold go on ({point})"

    def fold_table(self, real: Callable[[Table, timedelta], None]) -> Callable[..., None]:
        def gated(table: Table, retention: timedelta) -> None:
            if table.name != CHUNKS:
                real(table, retention)
                return
            self.hold("before")
            real(table, retention)
            self.hold("after")

        return gated

    def wait(self, point: str) -> None:
        assert self.arrived[point].wait(WAIT_S), f"the fold never reached {point!r}"


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    held = Gate()
    monkeypatch.setattr(maintenance, "fold_table", held.fold_table(maintenance.fold_table))
    yield held
    for event in held.go.values():
        event.set()


def in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the test, which asserts on it
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    return worker, outcome


def finished(worker: threading.Thread, outcome: dict[str, Any]) -> Any:
    worker.join(WAIT_S)
    assert not worker.is_alive(), "the call did not finish"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _every_kind_of_write(
    store: IndexStore, sources: dict[str, str], *, new: str, gone: str, again: str, seed: int
) -> None:
    """A new source, a delete and a replace, each in a thread of its own that must finish
    (a write that waited for the fold would hang, not pass); `sources` follows them."""
    sources[new] = finished(
        *in_thread(lambda: store.upsert(upsert_request(new, [f"fresh {new} words"], seed=seed)))
    ).doc_id
    doc_id = sources.pop(gone)
    finished(*in_thread(lambda: store.delete(doc_id)))
    sources[again] = finished(
        *in_thread(lambda: store.upsert(upsert_request(again, [f"{again} again"], seed=seed + 1)))
    ).doc_id


def test_writes_complete_while_a_fold_is_held_and_none_is_lost(tmp_path: Path, gate: Gate) -> None:
    store = IndexStore(settings_for(tmp_path))
    sources: dict[str, str] = {}
    for i in range(6):
        texts = [f"seed {i} chunk {k} words" for k in range(4)]
        sources[f"s{i}.md"] = store.upsert(upsert_request(f"s{i}.md", texts, seed=i)).doc_id

    fold, fold_outcome = in_thread(store.optimize)
    gate.wait("before")
    # The fold is inside maintenance, before Lance's optimize of the chunks table: every
    # kind of write completes while it waits (each in a thread: a write that waited for
    # the fold would hang, not pass).
    _every_kind_of_write(store, sources, new="new1.md", gone="s0.md", again="s1.md", seed=11)
    assert fold.is_alive()

    gate.go["before"].set()
    gate.wait("after")
    # Lance's optimize has committed (compaction, indexes) beside those writes; the fold
    # has not yet recorded its commits: the writes now meet them and are not refused.
    _every_kind_of_write(store, sources, new="new2.md", gone="s2.md", again="s3.md", seed=13)
    assert fold.is_alive()
    gate.go["after"].set()
    finished(fold, fold_outcome)

    assert store.state.guard.conflict is None
    assert_complete(store, sources)
    # The writes that landed during the fold are still to fold, and the next fold takes
    # them into the text index.
    assert store.seconds_until_optimize() is not None
    store.optimize()
    assert store.seconds_until_optimize() is None
    assert store.state.chunks is not None
    stats = store.state.chunks.index_stats("content_idx")
    assert stats is not None and stats.num_unindexed_rows == 0
    hits = asyncio.run(store.search(IndexSearchRequest(query="fresh", mode="bm25"))).results
    assert {hit.source for hit in hits} == {"new1.md", "new2.md"}
    store.upsert(upsert_request("late.md", ["late words"], seed=15))
    assert store.state.guard.conflict is None
    store.close()
    reopened = IndexStore(settings_for(tmp_path))
    assert not reopened.reconcile().changed
    assert_complete(reopened, sources)
    reopened.close()


def test_a_second_writer_during_a_fold_is_still_caught(tmp_path: Path, gate: Gate) -> None:
    first = IndexStore(settings_for(tmp_path))
    one = first.upsert(upsert_request("one.md", ["one words", "more one words"], seed=1))
    gate.go["before"].set()
    fold, fold_outcome = in_thread(first.optimize)
    gate.wait("after")  # the fold's commits are in, not yet recorded
    second = IndexStore(settings_for(tmp_path))  # a misconfigured second writer
    two = second.upsert(upsert_request("two.md", ["two words"], seed=2))
    with pytest.raises(ConcurrentWriterError):
        first.upsert(upsert_request("three.md", ["three words"], seed=3))
    gate.go["after"].set()
    with pytest.raises(ConcurrentWriterError):
        finished(fold, fold_outcome)  # the fold's closing look sees the foreign commits too
    assert first.state.guard.conflict is not None
    with pytest.raises(ConcurrentWriterError):
        first.delete(one.doc_id)
    # Nothing stored was lost: both writers' documents are whole.
    second.close()
    first.close()
    reopened = IndexStore(settings_for(tmp_path))
    assert_complete(reopened, {"one.md": one.doc_id, "two.md": two.doc_id})
    reopened.close()


def test_the_guard_takes_fold_commits_only_while_folding(tmp_path: Path) -> None:
    """A fold's commit landing between a write's check and its commit (Lance rebases the
    write over it) is taken as this process's only while a fold runs, and a foreign append
    in the same place is a conflict even then."""
    schema = pa.schema([("k", pa.string())])
    mine = lancedb.connect(tmp_path / "db").create_table("t", schema=schema)
    folder = lancedb.connect(tmp_path / "db").open_table("t")
    row = pa.table({"k": ["x"]}, schema=schema)

    def rebased_over(guard: WriterGuard, other: Callable[[], object]) -> None:
        guard.check([("t", mine)])
        other()
        guard.committed("t", mine, mine.add(row).version)

    for _ in range(3):
        mine.add(row)  # small fragments, for the compaction to rewrite
    folding = WriterGuard("the-store", enabled=True)
    folding.adopt([("t", mine)])
    with folding.folding():
        rebased_over(folding, lambda: folder.optimize())
        folding.check([("t", mine)])
        assert folding.conflict is None
        rebased_over(folding, lambda: folder.add(row))
    assert folding.conflict is not None

    for _ in range(3):
        folder.add(row)
    mine.checkout_latest()
    not_folding = WriterGuard("the-store", enabled=True)
    not_folding.adopt([("t", mine)])
    rebased_over(not_folding, lambda: folder.optimize())
    assert not_folding.conflict is not None


def test_fold_like_commits() -> None:
    base = {"total_rows": "10", "total_data_file_rows": "12"}
    assert fold_like(base, {"total_rows": "10", "total_data_file_rows": "12"})  # index commit
    assert fold_like(base, {"total_rows": "10", "total_data_file_rows": "10"})  # compaction
    assert not fold_like(base, {"total_rows": "11", "total_data_file_rows": "13"})  # append
    assert not fold_like(base, {"total_rows": "9", "total_data_file_rows": "12"})  # delete
    assert not fold_like(base, {"total_rows": "10", "total_data_file_rows": "13"})  # update
    assert not fold_like(base, {}) and not fold_like(None, base)


def test_a_fold_whose_cleanup_removes_the_version_it_started_from_is_not_a_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fold's cleanup removes old versions, the one it started from included when that
    one is older than INDEX_VERSION_RETENTION_S (here: every version but the latest); the
    guard still tells the fold's commits from a foreign writer's."""
    # The fold keeps what was written since it began and 1 s more (120 s in the service):
    # the version it starts from, 1.5 s old, is removed; its own commits are not.
    monkeypatch.setattr(maintenance, "_KEEP_S", 1.0)
    store = IndexStore(settings_for(tmp_path, index_version_retention_s=0))
    kept = {}
    for i in range(4):
        kept[f"d{i}.md"] = store.upsert(upsert_request(f"d{i}.md", [f"doc {i} words"], seed=i))
    store.delete(kept.pop("d0.md").doc_id)  # deleted rows: the compaction rewrites
    time.sleep(1.5)
    store.optimize()
    assert store.state.guard.conflict is None
    assert store.state.documents is not None
    assert min(v["version"] for v in store.state.documents.list_versions()) > 1
    late = store.upsert(upsert_request("late.md", ["late words"], seed=9))
    time.sleep(1.5)
    store.optimize()
    assert store.state.guard.conflict is None
    expected = {source: found.doc_id for source, found in kept.items()}
    assert_complete(store, {**expected, "late.md": late.doc_id})
    store.close()


def test_a_listing_of_versions_that_meets_a_cleanup_is_taken_again(tmp_path: Path) -> None:
    """Seen in ingests (3,200 writes with a short retention; SciFact's 5,183 documents): a
    write's guard check listed the versions while a fold's cleanup removed old ones, and the
    write failed. Here a real cleanup of 400 versions runs while the guard lists them over
    and over: Lance's own listing fails now and then (checked, so that the race is real; on a
    loaded machine a round can miss it, so up to five rounds are played until one meets it),
    the guard's never does."""
    table = lancedb.connect(tmp_path).create_table("t", pa.table({"k": [0]}))
    guard = WriterGuard("the-store", enabled=True)
    failures: list[Exception] = []
    lance_failed = threading.Event()
    for _ in range(5):
        for k in range(400):
            table.add(pa.table({"k": [k]}))
        _race_a_cleanup(tmp_path, table, guard, failures, lance_failed)
        assert failures == []
        assert len(table.list_versions()) < 5
        if lance_failed.is_set():
            break
    assert lance_failed.is_set(), "the cleanup never met a listing in 5 rounds: no race was run"


def _race_a_cleanup(
    path: Path,
    table: lancedb.table.Table,
    guard: WriterGuard,
    failures: list[Exception],
    lance_failed: threading.Event,
) -> None:
    """One cleanup of every version but the latest, with Lance's listing and the guard's
    taken over and over beside it."""
    cleaning = threading.Event()

    def list_while_cleaning() -> None:
        reader = lancedb.connect(path).open_table("t")
        while not cleaning.is_set():
            time.sleep(0.001)
        while cleaning.is_set():
            try:
                reader.list_versions()
            except Exception:
                lance_failed.set()
            try:
                with guard.folding():
                    guard.remember([("t", reader)])
            except Exception as exc:
                failures.append(exc)

    lister = threading.Thread(target=list_while_cleaning)
    lister.start()
    cleaning.set()
    try:
        time.sleep(0.05)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "removes every version except the latest"
            table.optimize(cleanup_older_than=timedelta(0))
    finally:
        cleaning.clear()
        lister.join()


def test_a_fold_commit_landing_just_after_a_write_is_not_a_conflict(tmp_path: Path) -> None:
    """The other side of the race: the write commits first and a fold's commit lands before
    the write's handle is read again, so the latest version is the fold's, not the write's
    (seen in a 60-document ingest: the write's append made version 57, the fold's compaction
    58). The guard knows which version the write made; the other is the fold's. A foreign
    append in the same place is still a conflict."""
    schema = pa.schema([("k", pa.string())])
    mine = lancedb.connect(tmp_path / "db").create_table("t", schema=schema)
    folder = lancedb.connect(tmp_path / "db").open_table("t")
    row = pa.table({"k": ["x"]}, schema=schema)
    for _ in range(3):
        mine.add(row)  # small fragments, for the compaction to rewrite
    guard = WriterGuard("the-store", enabled=True)
    guard.adopt([("t", mine)])
    with guard.folding():
        guard.check([("t", mine)])
        made = mine.add(row).version
        folder.checkout_latest()
        folder.optimize()  # the fold's compaction, after the write's commit
        mine.checkout_latest()
        assert mine.version > made
        guard.committed("t", mine, made)
        assert guard.conflict is None
        guard.check([("t", mine)])
        assert guard.conflict is None

        made = mine.add(row).version
        folder.checkout_latest()
        folder.add(row)  # another writer's append, after the write's commit
        mine.checkout_latest()
        guard.committed("t", mine, made)
    assert guard.conflict is not None and "another process" in guard.conflict
