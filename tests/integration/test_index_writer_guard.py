"""The one-writer rule, enforced (`services.index.store.writer_guard`), on a real local
LanceDB store: a writer that meets commits it did not make refuses to write on with 409
`concurrent_writer`, nothing stored is lost, and a single writer (restarted after SIGKILL,
or optimizing and building its vector index) is never refused. Two writers over s3 are in
`test_index_s3.py`."""

from __future__ import annotations

import asyncio
import threading
from contextlib import aclosing
from pathlib import Path
from typing import Any

import httpx
import lancedb
import pyarrow as pa
import pytest

from libs.clients import IndexClient
from libs.errors import ConcurrentWriterError
from libs.http import RetryPolicy
from services.index.store import IndexStore, StoreState, Writes
from services.index.store.writer_guard import WriterGuard
from tests.index_helpers import settings_for, upsert_request
from tests.object_store import IndexProcess, index_process

pytestmark = pytest.mark.integration


def client(index: IndexProcess) -> IndexClient:
    return IndexClient(index.url, policy=RetryPolicy(attempts=1), timeout_s=60)


def assert_complete(store: IndexStore, sources: dict[str, str]) -> None:
    """Each source is live as the given doc_id with all its chunks, and the store holds
    no document without chunks and no chunk without a document."""
    for source, doc_id in sources.items():
        found = store.lookup("default", source).document
        assert found is not None and found.doc_id == doc_id, (source, found)
        got = store.get(doc_id, chunk_index=0, context=10)
        assert len(got.chunks or []) == found.chunk_count > 0
    info = store.info()
    libraries = store.list_libraries().libraries
    assert info.documents == sum(lib.document_count for lib in libraries)
    assert info.chunks == sum(lib.chunk_count for lib in libraries), "orphan or missing chunks"


def test_a_second_writer_is_refused_and_nothing_is_lost(tmp_path: Path) -> None:
    first = IndexStore(settings_for(tmp_path))
    one = first.upsert(upsert_request("one.md", ["one words", "more one words"], seed=1))
    second = IndexStore(settings_for(tmp_path))  # a misconfigured second writer
    two = first.upsert(upsert_request("two.md", ["two words"], seed=2))

    with pytest.raises(ConcurrentWriterError) as refused:
        second.upsert(upsert_request("three.md", ["three words"], seed=3))
    error = refused.value
    assert (error.error_code, error.http_status) == ("concurrent_writer", 409)
    assert str(tmp_path / "lancedb") in error.message and "INDEX_ROLE=reader" in error.message
    # Refused from then on, every kind of write; reads go on.
    for write in (
        lambda: second.upsert(upsert_request("four.md", ["four words"], seed=4)),
        lambda: second.delete(one.doc_id),
        second.optimize,
        second.reconcile,
    ):
        with pytest.raises(ConcurrentWriterError):
            write()
    assert not second.optimize_due()
    assert "WRITES REFUSED" in second.ping() and "WRITES REFUSED" not in first.ping()
    assert second.get(two.doc_id).chunk_count == 1
    assert second.lookup("default", "three.md").document is None

    # The first writer never saw a foreign commit: it goes on, maintenance included.
    five = first.upsert(upsert_request("five.md", ["five words"], seed=5))
    first.optimize()
    first.delete(two.doc_id)
    expected = {"one.md": one.doc_id, "five.md": five.doc_id}
    assert_complete(first, expected)
    first.close()
    second.close()
    reopened = IndexStore(settings_for(tmp_path))
    assert not reopened.reconcile().changed
    assert_complete(reopened, expected)
    assert reopened.info().documents == 2


class PausingWrites(Writes):
    """Pauses a replace between its chunks commit (step 2) and its publish (step 3): the
    moment at which another writer's whole replace of the same source used to lose it."""

    def __init__(self, state: StoreState) -> None:
        super().__init__(state)
        self.swapped = threading.Event()
        self.resume = threading.Event()

    def swap_chunks(self, library: str, source: str, rows: pa.Table, **kw: bool) -> None:
        super().swap_chunks(library, source, rows, **kw)
        self.swapped.set()
        assert self.resume.wait(60)


def test_two_writers_replacing_one_source_at_once_do_not_lose_it(tmp_path: Path) -> None:
    first = IndexStore(settings_for(tmp_path), writes=PausingWrites)
    writes = first.writes
    assert isinstance(writes, PausingWrites)
    writes.resume.set()
    old = first.upsert(upsert_request("same.md", ["old words"], seed=1))
    writes.resume.clear()
    writes.swapped.clear()
    second = IndexStore(settings_for(tmp_path))
    outcome: dict[str, Any] = {}

    def replace() -> None:
        request = upsert_request("same.md", ["first words", "more first words"], seed=2)
        outcome["first"] = first.upsert(request)

    worker = threading.Thread(target=replace)
    worker.start()
    try:
        assert writes.swapped.wait(60)
        # The other writer's whole replace lands between the first one's steps 2 and 3.
        with pytest.raises(ConcurrentWriterError):
            second.upsert(upsert_request("same.md", ["second words"], seed=3))
    finally:
        writes.resume.set()
        worker.join(60)
    replaced = outcome["first"]
    assert replaced.status == "replaced" and replaced.doc_id != old.doc_id
    assert_complete(first, {"same.md": replaced.doc_id})
    first.close()
    second.close()
    reopened = IndexStore(settings_for(tmp_path))
    assert_complete(reopened, {"same.md": replaced.doc_id})


def test_a_commit_rebased_over_a_foreign_one_stops_the_writer(tmp_path: Path) -> None:
    """The race the check before a commit cannot close: another commit lands between the
    check and the commit. The write is stored (rebased); the jump in versions shows it and
    every later write is refused."""
    schema = pa.schema([("k", pa.string())])
    mine = lancedb.connect(tmp_path / "db").create_table("t", schema=schema)
    theirs = lancedb.connect(tmp_path / "db").open_table("t")
    guard = WriterGuard("the-store", enabled=True)
    guard.adopt([("t", mine)])
    guard.check([("t", mine)])
    theirs.add(pa.table({"k": ["theirs"]}, schema=schema))
    made = mine.add(pa.table({"k": ["mine"]}, schema=schema)).version
    guard.committed("t", mine, made)
    assert guard.conflict is not None and "another process" in guard.conflict
    assert mine.count_rows() == 2
    with pytest.raises(ConcurrentWriterError):
        guard.check([("t", mine)])
    # Without the foreign commit the same sequence is fine.
    alone = WriterGuard("the-store", enabled=True)
    alone.adopt([("t", mine)])
    for _ in range(3):
        alone.check([("t", mine)])
        made = mine.add(pa.table({"k": ["mine"]}, schema=schema)).version
        alone.committed("t", mine, made)
    assert alone.conflict is None


async def test_one_writer_restarted_after_sigkill_is_not_refused(tmp_path: Path) -> None:
    env = {"LANCEDB_URI": str(tmp_path / "lancedb"), "INDEX_ROLE": "writer"}
    with index_process(env, tmp_path, "writer") as writer:
        async with aclosing(client(writer)) as index:
            first = await index.upsert(upsert_request("a.md", ["alpha words"], seed=1))
            # Killed in the middle of writes it never finished acknowledging.
            pending = [
                asyncio.create_task(index.upsert(upsert_request(f"k{i}.md", [f"k {i}"], seed=i)))
                for i in range(4)
            ]
            await asyncio.sleep(0.05)
            writer.kill()
            await asyncio.gather(*pending, return_exceptions=True)
    with index_process(env, tmp_path, "writer-again") as writer:
        async with aclosing(client(writer)) as index:
            again = await index.upsert(upsert_request("b.md", ["beta words"], seed=9))
            await index.delete(first.doc_id)
            assert (await index.lookup("default", "b.md")).document.doc_id == again.doc_id  # type: ignore[union-attr]
        ready = httpx.get(writer.url + "/readyz", timeout=10).json()
        assert ready["status"] == "ready" and "WRITES REFUSED" not in str(ready)


def test_a_single_writer_building_its_vector_index_is_never_refused(tmp_path: Path) -> None:
    store = IndexStore(settings_for(tmp_path, index_vector_index_min_rows=256))
    for i in range(10):
        texts = [f"doc {i} chunk {k} words" for k in range(30)]
        store.upsert(upsert_request(f"d{i}.md", texts, seed=i))
        if i % 3 == 2:
            store.optimize()
    store.optimize()
    assert store.state.ivf_partitions > 0, "the vector index was not built"
    store.upsert(upsert_request("d0.md", ["replaced words"], seed=42))
    assert store.state.guard.conflict is None
    assert store.info().documents == 10


@pytest.mark.parametrize("role", ["all", "writer"])
def test_a_writers_handles_move_only_when_it_moves_them(tmp_path: Path, role: str) -> None:
    """LanceDB reports the version a write made from the handle after the commit; a handle
    that refreshed itself in between (any read consistency interval) reports the commit that
    landed meanwhile, a fold's, and the guard took the write's own commit for another
    writer's (a million-chunk load was refused that way). So a writer's handles never
    refresh on their own, even at `INDEX_READ_CONSISTENCY_S=0`: a commit made elsewhere is
    seen when the writer moves them, at its periodic look (`follow`, under the write lock)
    or the guard's before the next commit."""
    store = IndexStore(settings_for(tmp_path, index_role=role, index_read_consistency_s=0))
    store.upsert(upsert_request("one.md", ["one words"], seed=1))
    handle = store.state.documents
    assert handle is not None
    own = handle.version
    # A commit by another handle (what a fold does on its own handles, or another writer).
    lancedb.connect(tmp_path / "lancedb").open_table("documents").delete("false")
    assert handle.version == own, "the writer's handle refreshed itself"
    assert handle.count_rows() == 1 and handle.version == own
    store.follow()
    assert handle.version == own + 1
    with pytest.raises(ConcurrentWriterError):
        store.upsert(upsert_request("two.md", ["two words"], seed=2))  # seen by the guard


def test_a_readers_handles_follow_the_writer(tmp_path: Path) -> None:
    writer = IndexStore(settings_for(tmp_path))
    writer.upsert(upsert_request("one.md", ["one words"], seed=1))
    reader = IndexStore(settings_for(tmp_path, index_role="reader", index_read_consistency_s=0))
    handle = reader.state.documents
    assert handle is not None
    before = handle.version
    writer.upsert(upsert_request("two.md", ["two words"], seed=2))
    assert handle.version > before
