"""The index on object storage: a real S3-compatible server (ministack on 127.0.0.1) and real
index service processes (`serve index`) over HTTP, their store at `s3://bucket/prefix`.

- the server refuses a second create of one key (`If-None-Match: *`, 412): Lance's commits
  rely on it, so a server without it would let two commits overwrite each other;
- the whole path (store, search, get, list, replace, delete) on s3, with no credential in
  what the service says;
- one writer and two readers: readers see a new document within INDEX_READ_CONSISTENCY_S and
  refuse writes with 405 `read_only_replica`;
- two writers on one store (a misconfiguration): the one that meets the other's commits
  refuses every write with 409 `concurrent_writer`, the other goes on, nothing is lost;
- the vector index's delta segments are merged there too (Lance's own API, not LanceDB's).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path

import httpx
import pytest

from libs.clients import IndexClient
from libs.contracts import IndexSearchRequest, UpsertResponse
from libs.errors import ConcurrentWriterError, MvdbError, NotFoundError, ReadOnlyReplicaError
from libs.http import RetryPolicy
from libs.vectors import encode
from tests.index_helpers import unit_vectors, until, upsert_request
from tests.object_store import (
    ACCESS_KEY_ID,
    SECRET_ACCESS_KEY,
    IndexProcess,
    S3Server,
    index_process,
    s3_server,
)

pytestmark = pytest.mark.integration

CONSISTENCY_S = 0.5


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with s3_server(tmp_path_factory.mktemp("ministack")) as server:
        yield server


def client(index: IndexProcess) -> IndexClient:
    return IndexClient(index.url, policy=RetryPolicy(attempts=1), timeout_s=60)


def search_for(seed: int, library: str | None = None, top_k: int = 5) -> IndexSearchRequest:
    return IndexSearchRequest(
        query="alpha", vector_b64=encode(unit_vectors(1, seed)), library=library, top_k=top_k
    )


def test_the_server_refuses_a_second_create_of_one_key(s3: S3Server) -> None:
    bucket = s3.bucket()["LANCEDB_URI"].removeprefix("s3://").split("/")[0]
    key = f"{s3.endpoint}/{bucket}/_versions/1.manifest"
    first = httpx.put(key, content=b"one", headers={"If-None-Match": "*"}, timeout=10)
    assert first.status_code == 200, first.text
    second = httpx.put(key, content=b"two", headers={"If-None-Match": "*"}, timeout=10)
    assert second.status_code == 412, (
        "the S3 server overwrote an existing key despite If-None-Match: *; Lance's commits "
        "need conditional writes, so this server cannot hold a store safely"
    )
    assert httpx.get(key, timeout=10).content == b"one"
    # Without the condition a PUT replaces it: the 412 above came from the condition.
    assert httpx.put(key, content=b"three", timeout=10).status_code == 200
    assert httpx.get(key, timeout=10).content == b"three"


async def test_store_search_get_replace_delete_on_s3(s3: S3Server, tmp_path: Path) -> None:
    env = s3.bucket() | {"INDEX_ROLE": "all"}
    with index_process(env, tmp_path, "index") as index:
        async with aclosing(client(index)) as store:
            info = await store.info()
            assert (info.uri, info.documents, info.role) == (env["LANCEDB_URI"], 0, "all")
            first = await store.upsert(
                upsert_request("a.md", ["alpha one", "alpha two", "alpha three"], seed=1)
            )
            other = await store.upsert(upsert_request("b.md", ["beta"], seed=2, library="lib2"))
            assert (first.status, first.chunk_count) == ("indexed", 3)

            hits = (await store.search(search_for(1, "default"))).results
            assert {h.doc_id for h in hits} == {first.doc_id} and len(hits) == 3
            got = await store.get(first.doc_id, chunk_index=1, context=1)
            assert [c.content for c in got.chunks or []] == [
                "alpha one",
                "alpha two",
                "alpha three",
            ]
            listed = await store.list_libraries()
            assert {(lib.library, lib.chunk_count) for lib in listed.libraries} == {
                ("default", 3),
                ("lib2", 1),
            }

            again = await store.upsert(upsert_request("a.md", ["alpha again"], seed=3))
            assert again.status == "replaced"
            with pytest.raises(NotFoundError):
                await store.get(first.doc_id)
            assert (await store.lookup("default", "a.md")).document.doc_id == again.doc_id  # type: ignore[union-attr]

            deleted = await store.delete(other.doc_id)
            assert deleted.deleted_chunks == 1
            with pytest.raises(NotFoundError):
                await store.delete(other.doc_id)
            info = await store.info()
            assert (info.documents, info.chunks) == (1, 1)

        # A restart finds everything where it was.
    with index_process(env, tmp_path, "index-again") as index:
        async with aclosing(client(index)) as store:
            assert [d.doc_id for d in (await store.list_documents(None, 10, 0)).documents] == [
                again.doc_id
            ]
        ready = httpx.get(index.url + "/readyz", timeout=10).json()
        assert ready["status"] == "ready"
    said = (tmp_path / "index.log").read_text() + (tmp_path / "index-again.log").read_text()
    assert SECRET_ACCESS_KEY not in said and ACCESS_KEY_ID not in said


async def test_the_vector_index_delta_segments_are_merged_on_s3(
    s3: S3Server, tmp_path: Path
) -> None:
    # The merge goes through Lance's own API (`ann.merge_deltas`), with the connection's
    # storage options: it must reach the store as LanceDB does.
    env = s3.bucket() | {"INDEX_VECTOR_INDEX_MIN_ROWS": "256", "INDEX_VECTOR_DELTAS": "1"}
    with index_process(env, tmp_path, "index") as index:
        async with aclosing(client(index)) as store:
            texts = [f"alpha {i}" for i in range(300)]
            await store.upsert(upsert_request("base.md", texts, seed=10))
            written = []
            for d in range(4):
                assert httpx.post(index.url + "/optimize", timeout=60).status_code == 200
                written.append(
                    await store.upsert(upsert_request(f"d{d}.md", ["beta"], seed=20 + d))
                )
            assert httpx.post(index.url + "/optimize", timeout=60).status_code == 200
            for d, document in enumerate(written):
                query = IndexSearchRequest(
                    query="", vector_b64=encode(unit_vectors(1, 20 + d)), top_k=1, mode="vector"
                )
                assert [h.doc_id for h in (await store.search(query)).results] == [document.doc_id]
    said = (tmp_path / "index.log").read_text()
    assert "merged the vector index's delta segments" in said, said[-3000:]
    assert SECRET_ACCESS_KEY not in said and ACCESS_KEY_ID not in said


async def test_a_store_that_cannot_be_reached_says_so_without_credentials(
    s3: S3Server, tmp_path: Path
) -> None:
    env = s3.bucket() | {"LANCEDB_URI": "s3://no-such-bucket-here/store"}
    with index_process(env, tmp_path, "index", wait_for="/healthz") as index:
        ready = httpx.get(index.url + "/readyz", timeout=30)
        assert ready.status_code == 503
        detail = ready.json()["checks"]["lancedb"]
        assert "no-such-bucket-here" in detail and "LANCEDB_STORAGE_OPTIONS" in detail
        answer = httpx.get(index.url + "/info", timeout=30)
        assert answer.status_code == 500 and answer.json()["error_code"] == "store_error"
        for said in (detail, answer.text, index.log.read_text()):
            assert SECRET_ACCESS_KEY not in said and ACCESS_KEY_ID not in said


async def test_one_writer_two_readers(s3: S3Server, tmp_path: Path) -> None:
    env = s3.bucket() | {"INDEX_READ_CONSISTENCY_S": str(CONSISTENCY_S)}
    with (
        index_process(env | {"INDEX_ROLE": "reader"}, tmp_path, "reader-1") as r1,
        index_process(env | {"INDEX_ROLE": "writer"}, tmp_path, "writer") as w,
        index_process(env | {"INDEX_ROLE": "reader"}, tmp_path, "reader-2") as r2,
    ):
        async with (
            aclosing(client(w)) as writer,
            aclosing(client(r1)) as reader1,
            aclosing(client(r2)) as reader2,
        ):
            readers = (reader1, reader2)
            for reader in readers:  # no tables yet: empty, and still looking
                assert (await reader.list_documents(None, 10, 0)).total == 0
                assert (await reader.info()).role == "reader"

            for round_no in range(3):
                done = await writer.upsert(
                    upsert_request(f"doc-{round_no}.md", ["alpha text", "more"], seed=round_no)
                )
                acknowledged = time.monotonic()
                for reader in readers:
                    # Each table follows on its own clock: the listing and the search may
                    # see the write at different moments, both within the window.
                    while not await _sees(reader, done.doc_id, f"doc-{round_no}.md", round_no):
                        waited = time.monotonic() - acknowledged
                        # The window, plus the look for tables that appeared (first round).
                        assert waited < CONSISTENCY_S + 5.0, f"reader behind by {waited:.1f} s"
                        await asyncio.sleep(0.05)
                    assert (await reader.get(done.doc_id)).chunk_count == 2

            for reader, process in ((reader1, r1), (reader2, r2)):
                with pytest.raises(ReadOnlyReplicaError):
                    await reader.upsert(upsert_request("nope.md", ["x"]))
                with pytest.raises(ReadOnlyReplicaError):
                    await reader.delete(done.doc_id)
                answer = httpx.post(process.url + "/optimize", timeout=30)
                assert answer.status_code == 405
                assert answer.json()["error_code"] == "read_only_replica"
                assert "INDEX_URL" in answer.json()["error"]
            assert (await writer.info()).documents == 3
            assert (await writer.lookup("default", "nope.md")).document is None


async def _sees(reader: IndexClient, doc_id: str, source: str, seed: int) -> bool:
    if (await reader.lookup("default", source)).document is None:
        return False
    hits = (await reader.search(search_for(seed, top_k=10))).results
    return doc_id in {h.doc_id for h in hits}


async def test_a_second_writer_on_one_store_fails_cleanly(s3: S3Server, tmp_path: Path) -> None:
    """A misconfiguration: two processes with INDEX_ROLE=writer on one store. The one that
    meets commits it did not make (here `b`: the tables appeared, written by `a`, after it
    started) refuses every write with 409 `concurrent_writer` and keeps serving reads; `a`
    never sees a foreign commit and goes on. Nothing stored is lost: every document listed
    is complete and searchable, before and after a restart of the one writer."""
    env = s3.bucket() | {"INDEX_READ_CONSISTENCY_S": "0"}
    with (
        index_process(env | {"INDEX_ROLE": "writer"}, tmp_path, "writer-a") as a,
        index_process(env | {"INDEX_ROLE": "writer"}, tmp_path, "writer-b") as b,
    ):
        async with aclosing(client(a)) as first, aclosing(client(b)) as second:
            await first.upsert(upsert_request("seed.md", ["seed text"], seed=99))
            outcomes: dict[str, UpsertResponse | MvdbError] = {}

            async def write(store: IndexClient, name: str, i: int) -> None:
                source = f"{name}-{i}.md"
                request = upsert_request(
                    source, [f"{name} chunk {i}.{k}" for k in range(3)], seed=i, library=name
                )
                try:
                    outcomes[source] = await store.upsert(request)
                except MvdbError as exc:
                    outcomes[source] = exc

            await asyncio.gather(
                *(write(first, "a", i) for i in range(8)),
                *(write(second, "b", i) for i in range(8)),
                *(write(first if i % 2 else second, "c", i) for i in range(8)),
            )
            for source, outcome in outcomes.items():
                through_b = source.startswith("b-") or (
                    source.startswith("c-") and int(source[2]) % 2 == 0
                )
                if through_b:
                    assert isinstance(outcome, ConcurrentWriterError), (source, outcome)
                    assert "INDEX_ROLE=reader" in outcome.message
                    assert env["LANCEDB_URI"] in outcome.message
                    assert SECRET_ACCESS_KEY not in outcome.message
                else:
                    assert isinstance(outcome, UpsertResponse), (source, outcome)
            with pytest.raises(ConcurrentWriterError):
                await second.delete((await first.lookup("a", "a-0.md")).document.doc_id)  # type: ignore[union-attr]
            ready = httpx.get(b.url + "/readyz", timeout=10).json()
            assert ready["status"] == "ready" and "WRITES REFUSED" in str(ready)

            # `b` keeps serving reads and sees `a`'s writes at its next look at the latest
            # versions (every INDEX_READ_CONSISTENCY_S, at least every second).
            async def caught_up() -> bool:
                return (await second.info()).documents == 13

            await until(caught_up, timeout=30)
            for store in (first, second):
                await _assert_consistent(store)
            succeeded = {s: o.doc_id for s, o in outcomes.items() if isinstance(o, UpsertResponse)}
            assert len(succeeded) == 12
            for source, doc_id in succeeded.items():
                found = await second.lookup(source.split("-")[0], source)
                assert found.document is not None and found.document.doc_id == doc_id

    # The one writer, restarted, recovers nothing and finds everything.
    with index_process(env | {"INDEX_ROLE": "writer"}, tmp_path, "writer-again") as again:
        async with aclosing(client(again)) as store:
            await _assert_consistent(store)
            assert (await store.info()).documents == 13
            await store.upsert(upsert_request("after.md", ["after restart"], seed=7))


async def _assert_consistent(store: IndexClient) -> None:
    libraries = (await store.list_libraries()).libraries
    info = await store.info()
    assert info.documents == sum(lib.document_count for lib in libraries)
    assert info.chunks == sum(lib.chunk_count for lib in libraries), "orphan or missing chunks"
    for lib in libraries:
        docs = (await store.list_documents(lib.library, 100, 0)).documents
        assert len(docs) == lib.document_count
        assert len({d.source for d in docs}) == len(docs), f"two live versions in {lib.library}"
        assert sum(d.chunk_count for d in docs) == lib.chunk_count
        for doc in docs:
            got = await store.get(doc.doc_id, chunk_index=0, context=10)
            assert len(got.chunks or []) == doc.chunk_count
            request = IndexSearchRequest(
                query=(got.chunks or [])[0].content,
                mode="bm25",
                filter={"doc_id": doc.doc_id},
                top_k=20,
            )
            hits = (await store.search(request)).results
            assert 0 in {h.chunk_index for h in hits} and {h.doc_id for h in hits} == {doc.doc_id}
            assert [c.chunk_index for c in got.chunks or []] == list(range(doc.chunk_count))
