"""When maintenance folds new rows into the indexes: once writes pause
(`INDEX_OPTIMIZE_QUIET_S`), not only after N writes or T seconds, so the searches after an
ingest read compacted, indexed rows."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from libs.contracts import IndexSearchRequest
from services.index.core import IndexCore
from services.index.settings import IndexSettings
from services.index.store import IndexStore
from tests.index_helpers import upsert_request

pytestmark = pytest.mark.integration


def settings_for(path: Path, **overrides: Any) -> IndexSettings:
    return IndexSettings(lancedb_uri=str(path / "lancedb"), **overrides)


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
