"""The index replica router: reads take turns over the readers, a failing reader is skipped
for the cooldown and tried again after it, the writer answers when no reader can, writes and
the write path's reads go to the writer only, and a caller that wrote reads from the writer
until the readers' consistency window has passed. Against hand-written fakes of the index port
with a fake clock, and against real `IndexClient`s over `httpx.MockTransport`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client import REGISTRY
from pydantic import ValidationError

from libs.clients import IndexClient
from libs.contracts import (
    Chunk,
    FolderIngestResult,
    IndexSearchRequest,
    IngestFolderInput,
    ListLibrariesResult,
    NewDocument,
    SearchResult,
    UpsertRequest,
)
from libs.errors import InvalidInputError, MvdbError, NotFoundError, StoreError, UpstreamError
from libs.http import RetryPolicy
from libs.vectors import encode
from services.gateway.consistency import RecentWrites, reading_as, reading_from_writer
from services.gateway.folders import FolderHooks
from services.gateway.jobs import Jobs
from services.gateway.replicas import ReplicaRouter
from services.gateway.settings import GatewaySettings
from tests.fakes import FakeIndex


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Replica(FakeIndex):
    """A fake index that records the reads it answered and fails on demand."""

    def __init__(self, name: str, log: list[str]) -> None:
        super().__init__()
        self.name = name
        self.log = log
        self.failure: Exception | None = None

    def _answer(self) -> None:
        if self.failure is not None:
            raise self.failure
        self.log.append(self.name)

    async def search(
        self, request: IndexSearchRequest, later: Awaitable[str] | None = None
    ) -> SearchResult:
        self._answer()
        return await super().search(request, later)

    async def list_libraries(self) -> ListLibrariesResult:
        self._answer()
        return await super().list_libraries()

    async def ready(self) -> tuple[bool, str]:
        return (self.failure is None), ("HTTP 200" if self.failure is None else "unreachable")


SEARCH = IndexSearchRequest(query="anything", top_k=3)
WINDOW = 6.0
COOLDOWN = 10.0


def _cluster(readers: int = 3) -> tuple[ReplicaRouter, Replica, list[Replica], list[str], Clock]:
    log: list[str] = []
    clock = Clock()
    writer = Replica("writer", log)
    replicas = [Replica(f"reader{i}", log) for i in range(1, readers + 1)]
    router = ReplicaRouter(writer, replicas, window_s=WINDOW, cooldown_s=COOLDOWN, clock=clock)
    return router, writer, replicas, log, clock


def _upsert(source: str = "a.md") -> UpsertRequest:
    document = NewDocument(
        source=source,
        library="default",
        title="A",
        file_type="md",
        content_hash="0" * 64,
        last_modified="",
        markdown="alpha",
    )
    return UpsertRequest(
        document=document,
        chunks=[Chunk(chunk_index=0, text="alpha", token_count=1)],
        model="fake",
        dim=4,
        vectors_b64=encode(np.ones((1, 4), dtype=np.float32)),
    )


def _sample(name: str, target: str) -> float:
    return REGISTRY.get_sample_value(name, {"target": target}) or 0.0


async def test_reads_take_turns_over_the_readers() -> None:
    router, _, _, log, _ = _cluster()
    for _ in range(6):
        await router.search(SEARCH)
    assert log == ["reader1", "reader2", "reader3"] * 2


async def test_a_failing_reader_is_skipped_then_tried_again_after_the_cooldown() -> None:
    router, _, replicas, log, clock = _cluster()
    replicas[1].failure = UpstreamError("could not connect to the index service")
    before = _sample("mvdb_index_read_failovers_total", "reader2")
    for _ in range(6):
        await router.search(SEARCH)
    # reader2's turn went to reader3; after that the other two take turns without it.
    assert log == ["reader1", "reader3", "reader1", "reader3", "reader1", "reader3"]
    assert _sample("mvdb_index_read_failovers_total", "reader2") == before + 1

    replicas[1].failure = None
    clock.now += COOLDOWN - 0.1
    log.clear()
    for _ in range(3):
        await router.search(SEARCH)
    assert "reader2" not in log  # still cooling down
    clock.now += 0.2
    log.clear()
    for _ in range(3):
        await router.search(SEARCH)
    assert sorted(log) == ["reader1", "reader2", "reader3"]


@pytest.mark.parametrize(
    "failure",
    [
        UpstreamError("timed out"),
        StoreError("the store failed"),
        MvdbError("the index tables do not exist yet"),
        ValueError("an answer outside the contract"),
    ],
)
async def test_the_writer_answers_when_no_reader_can(failure: Exception) -> None:
    router, _, replicas, log, _ = _cluster(readers=2)
    for replica in replicas:
        replica.failure = failure
    before = _sample("mvdb_index_reads_total", "writer")
    await router.search(SEARCH)
    assert log == ["writer"]
    assert _sample("mvdb_index_reads_total", "writer") == before + 1
    log.clear()
    await router.list_libraries()  # both readers cool down: straight to the writer
    assert log == ["writer"]


async def test_a_reader_error_that_is_the_callers_mistake_is_the_answer() -> None:
    router, _, replicas, log, _ = _cluster(readers=2)
    replicas[0].failure = InvalidInputError("unknown filter field 'x'")
    with pytest.raises(InvalidInputError):
        await router.search(SEARCH)
    assert log == []
    replicas[0].failure = None
    await router.search(SEARCH)
    await router.search(SEARCH)
    assert log == ["reader2", "reader1"]  # reader1 was not put aside


async def test_writes_and_the_write_paths_reads_go_to_the_writer_only() -> None:
    router, writer, replicas, _, _ = _cluster(readers=2)
    written = await router.upsert(_upsert())
    assert written.doc_id in writer.docs
    assert all(not replica.docs for replica in replicas)
    assert (await router.lookup("default", "a.md")).document is not None  # the writer's
    await router.delete(written.doc_id)
    assert writer.docs == {}


async def test_get_of_an_unknown_document_asks_the_writer() -> None:
    router, _, _, _, _ = _cluster(readers=2)
    with reading_as("someone"):
        written = await router.upsert(_upsert())
    # Another caller, whose reads go to the readers, which do not have the document yet.
    with reading_as("another"):
        found = await router.get(written.doc_id)
        assert found.doc_id == written.doc_id
        with pytest.raises(NotFoundError):
            await router.get("no-such-document")


async def test_a_caller_that_wrote_reads_from_the_writer_for_the_window() -> None:
    router, _, _, log, clock = _cluster(readers=2)
    before = REGISTRY.get_sample_value("mvdb_index_pinned_reads_total") or 0.0
    with reading_as("mcp:session-a"):
        await router.upsert(_upsert())
        await router.search(SEARCH)
    with reading_as("mcp:session-b"):
        await router.search(SEARCH)
    assert log == ["writer", "reader1"]
    assert REGISTRY.get_sample_value("mvdb_index_pinned_reads_total") == before + 1

    clock.now += WINDOW - 0.01
    log.clear()
    with reading_as("mcp:session-a"):
        await router.search(SEARCH)
    assert log == ["writer"]
    clock.now += 0.02
    log.clear()
    with reading_as("mcp:session-a"):
        await router.search(SEARCH)
    assert log == ["reader2"]


async def test_a_failed_write_pins_too() -> None:
    """The answer of a write may be lost after it committed: the caller reads from the writer."""
    router, writer, _, log, _ = _cluster(readers=1)

    async def broken(doc_id: str) -> None:
        raise UpstreamError("the index service dropped the connection")

    writer.delete = broken  # type: ignore[assignment,method-assign]
    with reading_as("http-client:127.0.0.1"):
        with pytest.raises(UpstreamError):
            await router.delete("x")
        await router.search(SEARCH)
    assert log == ["writer"]


async def test_listings_that_decide_deletes_come_from_the_writer() -> None:
    router, _, _, log, _ = _cluster(readers=2)
    with reading_from_writer():
        await router.search(SEARCH)
    await router.search(SEARCH)
    assert log == ["writer", "reader1"]


async def test_ready_follows_the_writer_and_reports_the_readers() -> None:
    router, writer, replicas, _, _ = _cluster(readers=2)
    assert await router.ready() == (True, "writer HTTP 200; readers 2/2 ready")
    writer.failure = UpstreamError("down")
    ok, detail = await router.ready()
    assert ok and "reads only" in detail
    for replica in replicas:
        replica.failure = UpstreamError("down")
    assert await router.ready() == (False, "writer unreachable; readers 0/2 ready")


def test_recent_writes_forget_callers_once_their_window_passed() -> None:
    clock = Clock()
    recent = RecentWrites(5.0, clock)
    recent.wrote("a")
    clock.now += 3
    recent.wrote("b")
    assert recent.pinned("a") and recent.pinned("b") and not recent.pinned("c")
    clock.now += 2.5
    assert not recent.pinned("a") and recent.pinned("b")
    assert len(recent) == 1
    recent.wrote("a")  # a new write moves a caller behind the others
    clock.now += 3
    assert recent.pinned("a") and not recent.pinned("b")


def _answering(answer: Callable[[httpx.Request], httpx.Response]) -> IndexClient:
    return IndexClient(
        "http://reader",
        policy=RetryPolicy(attempts=1, max_seconds=5),
        transport=httpx.MockTransport(answer),
    )


def _refused(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def _timed_out(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("timed out", request=request)


def _busy(request: httpx.Request) -> httpx.Response:
    body = {"status": "error", "error": "store failed", "error_code": "store_error"}
    return httpx.Response(500, json=body)


def _garbled(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"not": "a library list"})


@pytest.mark.parametrize("answer", [_refused, _timed_out, _busy, _garbled])
async def test_real_clients_fail_over_on_transport_errors_5xx_and_bad_answers(
    answer: Callable[[httpx.Request], httpx.Response],
) -> None:
    def good(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"libraries": [{"library": "default", "document_count": 1, "chunk_count": 2}]}
        )

    readers = [_answering(answer), _answering(good)]
    writer = _answering(_refused)
    router = ReplicaRouter(writer, readers, window_s=WINDOW, cooldown_s=COOLDOWN)
    try:
        first = await router.list_libraries()
        assert [info.library for info in first.libraries] == ["default"]
        assert router.replicas[0].skipped_until > 0
    finally:
        for client in (*readers, writer):
            await client.aclose()


def test_index_read_urls_are_checked() -> None:
    settings = GatewaySettings(index_read_urls="http://127.0.0.1:8004/, http://127.0.0.1:8005")
    assert settings.index_read_urls == ["http://127.0.0.1:8004", "http://127.0.0.1:8005"]
    assert GatewaySettings().index_read_urls == []
    with pytest.raises(ValidationError, match="base URLs of index readers"):
        GatewaySettings(index_read_urls="127.0.0.1:8004")
    with pytest.raises(ValidationError, match="more than once"):
        GatewaySettings(index_read_urls="http://r:8003,http://r:8003/")


async def test_a_background_jobs_writes_pin_the_caller_that_submitted_it(tmp_path: Path) -> None:
    router, _, _, log, _ = _cluster(readers=1)

    async def run_folder(request: IngestFolderInput, hooks: FolderHooks) -> FolderIngestResult:
        await router.upsert(_upsert())  # as the job's ingest does, long after the call ended
        return FolderIngestResult(
            folder=request.folder,
            library=request.library,
            total_files=1,
            indexed=1,
            replaced=0,
            skipped=0,
            failed=0,
            results=[],
            errors=[],
        )

    jobs = Jobs(router, run_folder, concurrency=1, retention_days=1)
    await jobs.start()
    try:
        with reading_as("mcp:submitter"):
            accepted = await jobs.submit(IngestFolderInput(folder=str(tmp_path)), tmp_path)
        for _ in range(200):
            if (await jobs.get(accepted.job_id)).status == "succeeded":
                break
            await asyncio.sleep(0.01)
        assert (await jobs.get(accepted.job_id)).status == "succeeded"
    finally:
        await jobs.aclose()
    with reading_as("mcp:submitter"):
        await router.search(SEARCH)
    with reading_as("mcp:someone-else"):
        await router.search(SEARCH)
    assert log == ["writer", "reader1"]


async def test_a_search_whose_vector_follows_goes_to_the_next_reader_whole() -> None:
    router, _, replicas, log, _ = _cluster()
    replicas[0].failure = UpstreamError("the index reader dropped the connection")
    vector: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    vector.set_result(encode(np.ones((1, 4), dtype=np.float32)))
    await router.search(SEARCH, vector)
    assert log == ["reader2"]
    (answered,) = replicas[1].searches
    assert answered.vector_b64 == vector.result() and answered.query == SEARCH.query
