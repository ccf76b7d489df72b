"""Documents larger than one index request: the gateway's plan of parts, the index's staging
of them (`services.index.store.staging`), and the pipeline writing such a document whole."""

from __future__ import annotations

import numpy as np
import pytest

from libs.contracts import Chunk, NewDocument, StagedChunks, UpsertPart, UpsertRequest
from libs.errors import InvalidInputError, PartsMissingError, TooLargeError
from libs.vectors import encode
from services.gateway.parts import plan
from services.gateway.pipeline import Pipeline
from services.gateway.settings import GatewaySettings
from services.index.store.staging import Staging
from tests.fakes import FakeConverter, FakeEmbedder, FakeIndex

DIM = 4


def chunks(start: int, n: int) -> list[Chunk]:
    return [Chunk(chunk_index=i, text=f"chunk {i}") for i in range(start, start + n)]


def vectors(start: int, n: int) -> np.ndarray:
    return np.arange(start * DIM, (start + n) * DIM, dtype=np.float32).reshape(n, DIM) + 1


def part(upload: str, start: int, n: int, model: str = "m") -> UpsertPart:
    return UpsertPart(
        upload_id=upload,
        start=start,
        chunks=chunks(start, n),
        model=model,
        dim=DIM,
        vectors_b64=encode(vectors(start, n)),
    )


def last(upload: str, staged: int, n: int) -> UpsertRequest:
    document = NewDocument(
        source="big.csv",
        library="lib",
        title="big",
        file_type="csv",
        content_hash="h",
        last_modified="2026-11-24T00:00:00+00:00",
        markdown="text",
    )
    return UpsertRequest(
        document=document,
        chunks=chunks(staged, n),
        model="m",
        dim=DIM,
        vectors_b64=encode(vectors(staged, n)),
        staged=StagedChunks(upload_id=upload, chunk_count=staged),
    )


# ----------------------------------------------------------------- the gateway's plan


@pytest.mark.parametrize("sizes", [[10] * 50, [1, 30, 7, 22, 40, 3, 9] * 9, [60, 60, 60]])
def test_the_plan_keeps_every_request_within_the_limit_and_the_chunks_in_order(
    sizes: list[int],
) -> None:
    overhead = 4 * 1024
    limit, head = overhead + 100, 70
    parts, start = plan(sizes, head, limit)
    assert 0 <= start < len(sizes)
    assert head + sum(sizes[start:]) <= limit  # the last request, with the document
    covered = [i for a, b in parts for i in range(a, b)]
    assert covered == list(range(start))  # every earlier chunk once, in order
    for a, b in parts:
        assert b > a and overhead + sum(sizes[a:b]) <= limit


def test_a_document_whose_own_bytes_leave_no_room_for_a_chunk_is_refused() -> None:
    with pytest.raises(TooLargeError, match="INDEX_MAX_BODY_BYTES"):
        plan([50, 50], head=990, limit=1000)


# ------------------------------------------------------------------ the index's staging


def test_parts_and_the_last_request_make_the_whole_document_in_chunk_order() -> None:
    staging = Staging(max_bytes=10**6, ttl_s=60)
    staging.add(part("upload-1", 5, 5))  # parts may come in any order
    received = staging.add(part("upload-1", 0, 5))
    assert received.chunks == 10 and received.held_bytes == staging.held > 0
    whole, matrix = staging.whole(last("upload-1", 10, 3))
    assert [c.chunk_index for c in whole.chunks] == list(range(13))
    assert whole.staged is None
    np.testing.assert_array_equal(matrix, vectors(0, 13))
    staging.drop("upload-1")
    assert staging.held == 0


def test_a_part_sent_again_replaces_the_first_copy() -> None:
    staging = Staging(max_bytes=10**6, ttl_s=60)
    staging.add(part("upload-1", 0, 4))
    held = staging.held
    assert staging.add(part("upload-1", 0, 4)).chunks == 4
    assert staging.held == held
    assert len(staging.whole(last("upload-1", 4, 1))[0].chunks) == 5


def test_missing_or_expired_parts_are_parts_missing_and_change_nothing() -> None:
    staging = Staging(max_bytes=10**6, ttl_s=60)
    staging.add(part("upload-1", 0, 4))
    staging.add(part("upload-1", 8, 4))  # chunks 4-7 never came
    with pytest.raises(PartsMissingError, match=r"names 12 chunks.*holds 4 of them"):
        staging.whole(last("upload-1", 12, 1))
    with pytest.raises(PartsMissingError, match="send the parts again"):
        staging.whole(last("never-sent", 3, 1))
    expiring = Staging(max_bytes=10**6, ttl_s=0.000_001)
    expiring.add(part("upload-2", 0, 2))
    with pytest.raises(PartsMissingError):
        expiring.whole(last("upload-2", 2, 1))
    assert expiring.held == 0


def test_parts_beyond_what_the_write_names_are_refused() -> None:
    staging = Staging(max_bytes=10**6, ttl_s=60)
    staging.add(part("upload-1", 0, 4))
    staging.add(part("upload-1", 4, 4))
    with pytest.raises(InvalidInputError, match=r"names 4 chunks.*holds 8"):
        staging.whole(last("upload-1", 4, 1))


def test_parts_past_the_budget_are_too_large_and_the_held_ones_stay() -> None:
    one = part("upload-1", 0, 4)
    staging = Staging(max_bytes=2 * 4 * (64 + 7 + 4 * DIM), ttl_s=60)
    staging.add(one)
    with pytest.raises(TooLargeError, match="INDEX_STAGED_MAX_BYTES"):
        staging.add(part("upload-2", 0, 5))
    assert len(staging.whole(last("upload-1", 4, 1))[0].chunks) == 5


def test_a_part_from_another_model_is_refused() -> None:
    staging = Staging(max_bytes=10**6, ttl_s=60)
    staging.add(part("upload-1", 0, 2))
    with pytest.raises(InvalidInputError, match="send the whole document with one model"):
        staging.add(part("upload-1", 2, 2, model="other"))


# --------------------------------------------------------- the pipeline, against fakes


@pytest.fixture
def index() -> FakeIndex:
    index = FakeIndex()
    # The Markdown (110 KB) leaves room for a fifth of the chunks in the last request; the
    # others go in parts first.
    index.max_body_bytes = 140_000
    index.staging.max_bytes = 10**8
    return index


@pytest.fixture
def embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def pipeline(index: FakeIndex, embedder: FakeEmbedder) -> Pipeline:
    return Pipeline(GatewaySettings(_env_file=None), FakeConverter(), embedder, index)


BIG = "\n\n".join(f"paragraph {i} " + "word " * 50 for i in range(400))  # ~110 KB


async def test_a_document_larger_than_one_request_is_written_whole_in_parts(
    pipeline: Pipeline, index: FakeIndex, embedder: FakeEmbedder
) -> None:
    result = await pipeline.ingest_content(BIG, "big", "default", None)
    assert (result.status, result.chunk_count) == ("indexed", 400)
    assert index.parts_sent >= 1 and index.staging.held == 0
    _, markdown, stored = index.docs[result.doc_id]
    assert markdown == BIG
    assert [c.text for c in stored] == BIG.split("\n\n")
    _, _, stored_vectors = index.vectors[result.doc_id]
    expected = await FakeEmbedder().embed([c.text for c in stored], "document")
    np.testing.assert_array_equal(stored_vectors, expected)
    assert embedder.texts == 400


async def test_parts_the_index_lost_are_sent_again_without_embedding_again(
    pipeline: Pipeline, index: FakeIndex, embedder: FakeEmbedder
) -> None:
    upsert = index.upsert
    lost = []

    async def restarted_first(request: UpsertRequest):  # type: ignore[no-untyped-def]
        if request.staged is not None and not lost:
            lost.append(request.staged.upload_id)
            index.staging.drop(request.staged.upload_id)  # as a restart of the index would
        return await upsert(request)

    await pipeline.ingest_content(BIG, "once", "default", None)
    once, texts = index.parts_sent, embedder.texts
    index.upsert = restarted_first  # type: ignore[method-assign]
    result = await pipeline.ingest_content(BIG, "big", "default", None)
    assert (result.status, result.chunk_count) == ("indexed", 400) and lost
    assert index.parts_sent - once == 2 * once  # every part sent twice
    assert embedder.texts == texts  # the same texts: taken from the embedder's cache, if any
    assert [c.text for c in index.docs[result.doc_id][2]] == BIG.split("\n\n")


async def test_a_document_the_index_cannot_hold_is_refused_before_embedding(
    pipeline: Pipeline, index: FakeIndex, embedder: FakeEmbedder
) -> None:
    index.staging.max_bytes = 50_000
    with pytest.raises(TooLargeError, match=r"400 chunks.*INDEX_STAGED_MAX_BYTES, 49 KiB"):
        await pipeline.ingest_content(BIG, "big", "default", None)
    index.staging.max_bytes = 10**8
    index.max_body_bytes = 111_300  # the Markdown and the framing leave no room for a chunk
    later = Pipeline(GatewaySettings(_env_file=None), FakeConverter(), embedder, index)
    with pytest.raises(TooLargeError, match="the document alone, without its chunks"):
        await later.ingest_content(BIG, "big", "default", None)
    assert embedder.texts == 0 and not index.docs
