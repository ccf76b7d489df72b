"""INDEX_ROLE on a local store: a reader beside a writer on one LanceDB directory (the real
index apps over HTTP, real LanceDB). The reader answers empty until the writer creates the
tables, then sees the writer's documents within INDEX_READ_CONSISTENCY_S, follows a vector
index the writer builds, refuses every write with 405 `read_only_replica`, and writes no byte
to the store, even when it opens one an interrupted write left unreconciled."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from libs.clients import IndexClient
from libs.contracts import IndexSearchRequest, Job, JobRecord, UpsertPart
from libs.errors import NotFoundError, ReadOnlyReplicaError
from libs.http import RetryPolicy
from libs.vectors import encode
from services.index.app import create_app
from services.index.core import IndexCore
from services.index.settings import IndexSettings
from services.index.store import tables
from tests.index_helpers import unit_vectors, until, upsert_request, write_old_store


def part_body() -> str:
    """A well-formed part of a document sent in parts (`POST /documents/parts`)."""
    fields = upsert_request("c.md", ["x"]).model_dump(
        include={"chunks", "model", "dim", "vectors_b64"}
    )
    return UpsertPart(upload_id="upload-c", start=0, **fields).model_dump_json()


pytestmark = pytest.mark.integration

CONSISTENCY_S = 0.3
# Job ids are UUIDs (the gateway makes them).
J1, J2 = "00000000-0000-4000-8000-0000000000a1", "00000000-0000-4000-8000-0000000000b2"


@asynccontextmanager
async def service(settings: IndexSettings) -> AsyncIterator[tuple[httpx.AsyncClient, IndexClient]]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        index = IndexClient("http://index", transport=transport, policy=RetryPolicy(attempts=1))
        async with httpx.AsyncClient(transport=transport, base_url="http://index") as http:
            try:
                yield http, index
            finally:
                await index.aclose()


def settings_for(uri: Path, role: str, **extra: object) -> IndexSettings:
    return IndexSettings(
        lancedb_uri=str(uri),
        index_role=role,  # type: ignore[arg-type]
        index_read_consistency_s=CONSISTENCY_S,
        **extra,  # type: ignore[arg-type]
    )


def files_of(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def job_record(job_id: str) -> JobRecord:
    job = Job(
        job_id=job_id,
        status="queued",
        library="lib",
        folder="/srv/docs",
        created_at="2026-01-01T00:00:00",
    )
    return JobRecord(job=job, request={"folder": "/srv/docs", "library": "lib"})


async def test_a_reader_follows_the_writer_and_refuses_writes(tmp_path: Path) -> None:
    uri = tmp_path / "lancedb"
    async with (
        service(settings_for(uri, "reader")) as (reader_http, reader),
        service(settings_for(uri, "writer")) as (_, writer),
    ):
        # Nothing written yet: the reader answers empty and keeps looking.
        assert (await reader.list_documents(None, 10, 0)).documents == []
        assert (await reader.list_libraries()).libraries == []
        assert await reader.list_jobs(None, 10) == []
        ready = (await reader_http.get("/readyz")).json()
        assert ready["status"] == "ready" and "role reader" in ready["checks"]["lancedb"]
        info = await reader.info()
        assert (info.role, info.documents) == ("reader", 0)
        assert (await writer.info()).role == "writer"

        done = await writer.upsert(upsert_request("a.md", ["alpha text", "beta text"], seed=1))
        await writer.save_job(job_record(J1))

        async def sees_it() -> bool:
            listed = await reader.list_documents(None, 10, 0)
            return [d.doc_id for d in listed.documents] == [done.doc_id]

        await until(sees_it)
        got = await reader.get(done.doc_id, chunk_index=0, context=1)
        assert [c.content for c in got.chunks or []] == ["alpha text", "beta text"]
        query = IndexSearchRequest(query="alpha", vector_b64=encode(unit_vectors(1, 1)), top_k=3)
        hits = (await reader.search(query)).results
        assert hits and hits[0].doc_id == done.doc_id
        assert (await reader.lookup("default", "a.md")).document is not None
        assert [r.job.job_id for r in await reader.list_jobs(None, 10)] == [J1]
        assert (await reader.get_job(J1)).job.job_id == J1

        # A write to the writer shows on the reader within the consistency window.
        second = await writer.upsert(upsert_request("b.md", ["gamma"], seed=2))
        started = time.monotonic()

        async def sees_second() -> bool:
            return (await reader.lookup("default", "b.md")).document is not None

        await until(sees_second)
        assert time.monotonic() - started < CONSISTENCY_S + 2.0

        # Every write to the reader is refused, and nothing changes.
        refused = [
            reader_http.post(
                "/documents", json=upsert_request("c.md", ["x"]).model_dump(mode="json")
            ),
            reader_http.post(
                "/documents/parts",
                content=part_body(),
                headers={"content-type": "application/json"},
            ),
            reader_http.delete(f"/documents/{second.doc_id}"),
            reader_http.put(f"/jobs/{J2}", json=job_record(J2).model_dump(mode="json")),
            reader_http.delete("/jobs", params={"finished_before": "2030-01-01T00:00:00"}),
            reader_http.post("/optimize"),
        ]
        for call in refused:
            answer = await call
            assert answer.status_code == 405, answer.text
            body = answer.json()
            assert body["error_code"] == "read_only_replica"
            assert "INDEX_URL" in body["error"] and "INDEX_ROLE=reader" in body["error"]
        with pytest.raises(ReadOnlyReplicaError):
            await reader.delete(second.doc_id)
        assert (await writer.info()).documents == 2
        assert (await reader.get(second.doc_id)).doc_id == second.doc_id
        with pytest.raises(NotFoundError):
            await reader.get_job(J2)


async def test_a_reader_writes_nothing_even_to_an_unreconciled_store(tmp_path: Path) -> None:
    uri = tmp_path / "lancedb"
    writer = IndexCore(settings_for(uri, "all"))
    store = await writer.start()
    await writer.upsert(upsert_request("a.md", ["one", "two"], seed=1))
    await writer.save_job(job_record(J1))
    # A write interrupted after its pending row (step 1): the writer's recovery removes it,
    # a reader must leave it alone.
    pending = upsert_request("b.md", ["three"], seed=2)
    from services.index.store.rows import document_row, dump_metadata

    store.writes.stage(document_row(pending, "pending-doc", dump_metadata({})))
    await writer.aclose()
    before = files_of(uri)

    reader = IndexCore(settings_for(uri, "reader"))
    try:
        rstore = await reader.start()
        assert rstore.read_only
        assert (await reader.list_documents(None, 10, 0)).total == 1
        assert (await reader.info()).chunks == 2
        await reader.list_jobs(None, 10)
        await asyncio.to_thread(rstore.follow)
        for write in (
            reader.upsert(pending),
            reader.delete("pending-doc"),
            reader.save_job(job_record(J2)),
            reader.delete_jobs("2030-01-01"),
            reader.optimize(),
        ):
            with pytest.raises(ReadOnlyReplicaError):
                await write
        with pytest.raises(ReadOnlyReplicaError):
            rstore.reconcile()
    finally:
        await reader.aclose()
    assert files_of(uri) == before, "the reader wrote to the store"

    # The writer, opened again, finishes the recovery the reader left alone.
    again = IndexCore(settings_for(uri, "writer"))
    try:
        assert (await again.info()).documents == 1
    finally:
        await again.aclose()
    assert files_of(uri) != before


async def test_a_reader_probes_the_vector_index_the_writer_builds(tmp_path: Path) -> None:
    uri = tmp_path / "lancedb"
    small = {"index_vector_index_min_rows": 256}
    writer = IndexCore(settings_for(uri, "writer", **small))
    reader = IndexCore(settings_for(uri, "reader", **small))
    try:
        texts = [f"chunk number {i}" for i in range(300)]
        await writer.upsert(upsert_request("big.md", texts, seed=3))
        rstore = await reader.start()
        assert rstore.state.ivf_partitions == 0
        await writer.optimize()
        wstore = await writer.start()
        assert wstore.state.ivf_partitions > 0
        await asyncio.sleep(CONSISTENCY_S)
        await asyncio.to_thread(rstore.follow)
        assert rstore.state.ivf_partitions == wstore.state.ivf_partitions
        assert rstore.state.held_partitions == wstore.state.held_partitions > 0
        query = IndexSearchRequest(query="number", vector_b64=encode(unit_vectors(1, 3)), top_k=5)
        assert len((await reader.search(query)).results) > 0
    finally:
        await reader.aclose()
        await writer.aclose()


async def test_a_reader_hands_free_pages_back_once_per_writer_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = tmp_path / "lancedb"
    # No fold within the test: the writer's only commits are its two upserts (a fold two
    # seconds after the first, the quiet rule's, was a third commit on a slow run).
    writer = IndexCore(settings_for(uri, "writer", index_optimize_quiet_s=0))
    reader = IndexCore(settings_for(uri, "reader"))
    versions: list[int | None] = []  # the chunks version each release happened at
    try:
        await writer.upsert(upsert_request("a.md", ["alpha words"]))
        rstore = await reader.start()
        monkeypatch.setattr(
            tables, "release_free_memory", lambda: versions.append(rstore.state.followed_version)
        )
        wstore = await writer.start()

        async def released_at_writers_version() -> bool:
            chunks = wstore.state.chunks
            return chunks is not None and versions[-1:] == [chunks.version]

        # The reader's own follow task, every consistency interval.
        await until(released_at_writers_version)
        await asyncio.sleep(5 * CONSISTENCY_S)  # looks with no commit between: none
        assert len(versions) == 1
        await writer.upsert(upsert_request("b.md", ["beta words"], seed=1))
        await until(released_at_writers_version)
        assert len(versions) == 2 and versions[0] != versions[1]
    finally:
        await reader.aclose()
        await writer.aclose()


async def test_a_reader_waits_for_the_writer_to_upgrade_an_older_store(tmp_path: Path) -> None:
    """A store from an older release lacks this release's columns: a reader serves nothing
    from it, and writes nothing to it, until the writer has added them."""
    uri = tmp_path / "lancedb"
    write_old_store(str(uri))
    before = files_of(uri)
    async with service(settings_for(uri, "reader")) as (_, reader):
        assert (await reader.lookup("default", "old.md")).document is None
        assert (await reader.list_sources("default")).sources == []
        assert files_of(uri) == before
        async with service(settings_for(uri, "writer")) as (_, writer):
            assert (await writer.lookup("default", "old.md")).conversion == 0

            async def sees_it() -> bool:
                return (await reader.lookup("default", "old.md")).document is not None

            await until(sees_it)
            [entry] = (await reader.list_sources("default")).sources
            assert (entry.source, entry.stale) == ("old.md", True)
