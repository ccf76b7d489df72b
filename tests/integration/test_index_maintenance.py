"""When maintenance folds new rows into the indexes: once writes pause
(`INDEX_OPTIMIZE_QUIET_S`), not only after N writes or T seconds, so the searches after an
ingest read compacted, indexed rows."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from libs.contracts import IndexSearchRequest
from services.index.core import IndexCore
from services.index.store import IndexStore, maintenance
from tests.index_helpers import settings_for, upsert_request

pytestmark = pytest.mark.integration


def slow_folds(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Each table's fold at least `seconds` long, as the full-text merge of a large table."""
    real_fold = maintenance.fold_table

    def slow_fold(table: Any, retention: Any) -> None:
        time.sleep(seconds)
        real_fold(table, retention)

    monkeypatch.setattr(maintenance, "fold_table", slow_fold)


def documents_only(path: Path, monkeypatch: pytest.MonkeyPatch, every: int) -> IndexStore:
    """A store whose documents table is due a fold every `every` writes, while the whole
    store's fold is never due: neither by writes, time nor a pause."""
    monkeypatch.setattr(maintenance, "DOCUMENTS_EVERY", every)
    return IndexStore(
        settings_for(
            path,
            index_optimize_every_writes=1000,
            index_optimize_interval_s=3600,
            index_optimize_quiet_s=0,
        )
    )


def write(store: IndexStore, numbers: range) -> None:
    for i in numbers:
        store.upsert(upsert_request(f"d{i}.md", [f"text number {i}"], seed=i))


def test_due_when_writes_pause_or_the_interval_ends(tmp_path: Path) -> None:
    # No maintenance task here: the store alone says when an optimize is due.
    quiet = IndexStore(settings_for(tmp_path / "a", index_optimize_interval_s=3600))
    assert quiet.seconds_until_optimize() is None  # nothing written yet
    quiet.upsert(upsert_request("a.md", ["alpha words"]))
    wait = quiet.seconds_until_optimize()
    assert wait is not None and 0 < wait <= quiet.settings.index_optimize_quiet_s
    quiet.close()

    never_quiet = IndexStore(
        settings_for(tmp_path / "b", index_optimize_interval_s=3600, index_optimize_quiet_s=0)
    )
    never_quiet.upsert(upsert_request("a.md", ["alpha words"]))
    wait = never_quiet.seconds_until_optimize()
    assert wait is not None and wait > 3000 and not never_quiet.optimize_due()
    never_quiet.optimize()
    assert never_quiet.seconds_until_optimize() is None
    never_quiet.close()


async def test_an_ingest_that_pauses_is_folded_in_without_waiting_the_interval(
    tmp_path: Path,
) -> None:
    settings = settings_for(
        tmp_path,
        index_optimize_every_writes=1000,
        index_optimize_interval_s=3600,
        index_optimize_quiet_s=0.2,
    )
    async with IndexCore(settings) as core:
        await core.upsert(upsert_request("a.md", ["alpha words"]))
        await core.upsert(upsert_request("b.md", ["beta words"], seed=1))
        store = core.store
        assert store is not None
        for _ in range(400):
            if store.seconds_until_optimize() is None:
                break
            await asyncio.sleep(0.05)
        assert store.seconds_until_optimize() is None, "maintenance never ran"
        assert store.state.chunks is not None
        stats = store.state.chunks.index_stats("content_idx")
        assert stats is not None and stats.num_unindexed_rows == 0
        hits = (await core.search(IndexSearchRequest(query="words", mode="bm25"))).results
        assert len(hits) == 2


def test_after_a_long_fold_the_next_waits_four_times_as_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow_folds(monkeypatch, 0.5)
    store = IndexStore(
        settings_for(tmp_path, index_optimize_every_writes=1, index_optimize_quiet_s=0.1)
    )
    store.upsert(upsert_request("a.md", ["alpha words"]))
    assert store.optimize_due()  # every write is due at once
    store.optimize()  # two tables, each fold at least 0.5 s
    store.upsert(upsert_request("b.md", ["beta words"], seed=1))
    wait = store.seconds_until_optimize()
    # Due by its write count, but resting for about 4 x 1 s from the fold's end.
    assert wait is not None and wait > 3.0 and not store.optimize_due()
    store.close()


def test_every_fold_hands_its_freed_pages_back_once_it_is_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = documents_only(tmp_path, monkeypatch, every=2)
    folding: list[bool] = []
    # Whether a fold was still running (its lock held) each time pages were handed back.
    monkeypatch.setattr(
        maintenance, "release_free_memory", lambda: folding.append(store.state.fold_lock.locked())
    )
    write(store, range(2))
    store.fold_documents()
    assert folding == [False]
    store.optimize()
    assert folding == [False, False]
    store.close()


def test_the_documents_table_is_folded_on_its_own_between_folds_of_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = documents_only(tmp_path, monkeypatch, every=8)
    write(store, range(7))
    assert not store.documents_due()
    write(store, range(7, 8))
    assert store.documents_due() and not store.optimize_due()  # the documents table's turn
    documents, chunks = store.state.documents, store.state.chunks
    assert documents is not None and chunks is not None
    fragments = documents.stats()["fragment_stats"]["num_fragments"]
    chunk_fragments = chunks.stats()["fragment_stats"]["num_fragments"]
    assert fragments >= 8

    store.fold_documents()

    assert documents.stats()["fragment_stats"]["num_fragments"] == 1
    # The chunks table and the store's fold are left for the store's own turn.
    assert chunks.stats()["fragment_stats"]["num_fragments"] == chunk_fragments
    assert store.state.writes_since_optimize == 8 and not store.optimize_due()
    assert not store.documents_due()
    assert store.state.guard.conflict is None
    # Writes go on after it (the guard took its commits as this process's), all listed.
    store.upsert(upsert_request("d0.md", ["text number 0, again"], seed=20))
    listed = asyncio.run(store.list_documents(None, 100, 0))
    assert listed.total == 8
    assert {d.source for d in listed.documents} == {f"d{i}.md" for i in range(8)}
    store.close()


def test_after_a_long_documents_fold_the_next_rests_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Lance rewrites the whole documents table (Markdown included) at each of its folds.
    slow_folds(monkeypatch, 1.0)
    store = documents_only(tmp_path, monkeypatch, every=4)
    write(store, range(4))
    assert store.documents_due()
    store.fold_documents()  # the documents table alone, at least 1 s
    write(store, range(4, 8))
    # Due by its write count, but resting for about 4 x 1 s from the fold's end.
    assert store.state.documents_writes >= 4 and not store.documents_due()
    time.sleep(max(0.0, store.state.documents_rest_until - time.monotonic()) + 0.05)
    assert store.documents_due()
    store.close()


async def test_the_maintenance_task_folds_the_documents_table_on_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(maintenance, "DOCUMENTS_EVERY", 4)
    settings = settings_for(
        tmp_path,
        index_optimize_every_writes=1000,
        index_optimize_interval_s=3600,
        index_optimize_quiet_s=0,
    )
    # `mvdb_index_optimize_seconds` counts the store's folds, not the documents table's.
    folds_before = REGISTRY.get_sample_value("mvdb_index_optimize_seconds_count") or 0.0
    async with IndexCore(settings) as core:
        for i in range(4):
            await core.upsert(upsert_request(f"d{i}.md", [f"text number {i}"], seed=i))
        store = core.store
        assert store is not None and store.state.documents is not None
        for _ in range(400):
            if store.state.documents_writes == 0:
                break
            await asyncio.sleep(0.05)
        assert store.state.documents_writes == 0, "the documents table was never folded"
        assert store.state.documents.stats()["fragment_stats"]["num_fragments"] == 1
        assert store.state.writes_since_optimize == 4  # the store's fold is not due
    assert (REGISTRY.get_sample_value("mvdb_index_optimize_seconds_count") or 0.0) == folds_before
