"""A document larger than one index request, through the gateway's `IndexWrites` to the real
index app (its HTTP routes, a real LanceDB in tmp_path) with a 256 KiB request limit: it is
sent in parts and written whole, in one replace; parts the index does not hold fail the
write without touching the stored version."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from libs.clients import IndexClient
from libs.contracts import Chunk, IndexSearchRequest, NewDocument, StagedChunks
from libs.errors import PartsMissingError
from libs.vectors import encode, text_digest
from services.gateway.parts import IndexWrites
from services.index.settings import IndexSettings
from tests.index_helpers import DIM, MODEL, index_app, unit_vectors, upsert_request

pytestmark = pytest.mark.integration

LIMIT = 256 * 1024
WORDS = ["otter", "heron", "salmon", "beaver", "kingfisher", "dipper", "newt", "mink"]


def index_at(uri: Path) -> AbstractAsyncContextManager[IndexClient]:
    """A fresh index app (its own state, no parts held) on the store at `uri`."""
    return index_app(IndexSettings(lancedb_uri=str(uri), index_max_body_bytes=LIMIT))


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[IndexClient]:
    async with index_at(tmp_path / "lancedb") as index:
        yield index


def big_document(source: str, n: int) -> tuple[NewDocument, list[Chunk]]:
    texts = [
        f"Section {i}: the {WORDS[i % len(WORDS)]} survey of river reach {i} " + "data " * 30
        for i in range(n)
    ]
    chunks = [Chunk(chunk_index=i, text=t, headings=[f"Reach {i}"]) for i, t in enumerate(texts)]
    markdown = "\n\n".join(texts)
    document = NewDocument(
        source=source,
        library="rivers",
        title="River survey",
        file_type="md",
        content_hash=f"hash-{n}",
        last_modified="2026-11-24T00:00:00+00:00",
        markdown=markdown,
    )
    return document, chunks


async def test_a_document_over_the_request_limit_is_written_whole(client: IndexClient) -> None:
    document, chunks = big_document("survey.md", 600)
    vectors = unit_vectors(len(chunks), seed=11)
    # ~2.3 KB a chunk with its vector: 1.4 MB, more than five requests' worth.
    written = await IndexWrites(client).write(document, chunks, MODEL, DIM, vectors)
    assert (written.status, written.chunk_count) == ("indexed", 600)

    stored = await client.get(written.doc_id)
    assert stored.chunk_count == 600 and stored.content == document.markdown
    for i in (0, 7, 299, 599):  # from the first part, the middle, the last request
        window = (await client.get(written.doc_id, chunk_index=i)).chunks or []
        assert [(c.chunk_index, c.content) for c in window] == [(i, chunks[i].text)]
    # Every chunk is stored with its own vector.
    kept = (await client.stored_vectors(written.doc_id)).by_digest()
    assert len(kept) == 600
    for chunk, vector in zip(chunks, vectors, strict=True):
        np.testing.assert_array_equal(kept[text_digest(chunk.text)], vector)
    # Chunk 7 went in the first part: found by its words and by its vector.
    by_words = await client.search(
        IndexSearchRequest(query="river reach 7 dipper", mode="bm25", top_k=1)
    )
    assert by_words.results[0].chunk_index == 7
    by_vector = IndexSearchRequest(
        query="", mode="vector", top_k=1, vector_b64=encode(vectors[7:8])
    )
    assert (await client.search(by_vector)).results[0].chunk_index == 7
    info = await client.info()
    assert (info.documents, info.chunks) == (1, 600)


async def test_parts_the_index_does_not_hold_leave_the_stored_version(
    client: IndexClient,
) -> None:
    before = await client.upsert(upsert_request("survey.md", ["the old survey"], library="rivers"))
    document, chunks = big_document("survey.md", 3)
    late = upsert_request("survey.md", [c.text for c in chunks[2:]], library="rivers")
    request = late.model_copy(
        update={"document": document, "staged": StagedChunks(upload_id="never-sent", chunk_count=2)}
    )
    with pytest.raises(PartsMissingError, match="send the parts again"):
        await client.upsert(request)
    found = await client.lookup("rivers", "survey.md")
    assert found.document is not None and found.document.doc_id == before.doc_id
    assert (await client.get(before.doc_id)).content == "the old survey"
    assert (await client.info()).chunks == 1


class RestartedBeforeTheLastRequest:
    """The index port of `IndexWrites`: parts go to the first index app; the last request
    finds the index restarted (a new app on the same store, holding no parts)."""

    def __init__(self, first: IndexClient, restart: Any) -> None:
        self.current, self.restart = first, restart
        self.parts = 0
        self.restarted = False

    async def info(self) -> Any:
        return await self.current.info()

    async def stage(self, part: Any) -> Any:
        self.parts += 1
        return await self.current.stage(part)

    async def upsert(self, request: Any) -> Any:
        if not self.restarted:
            self.restarted = True
            self.current = await self.restart()
        return await self.current.upsert(request)


async def test_parts_a_restarted_index_lost_are_sent_again(tmp_path: Path) -> None:
    uri = tmp_path / "lancedb"
    document, chunks = big_document("survey.md", 300)
    vectors = unit_vectors(len(chunks), seed=12)
    async with AsyncExitStack() as stack:
        running = index_at(uri)
        first = await running.__aenter__()
        await first.info()  # the store is open before the parts come

        async def restart() -> IndexClient:
            await running.__aexit__(None, None, None)  # stopped: the parts it held are gone
            return await stack.enter_async_context(index_at(uri))

        port = RestartedBeforeTheLastRequest(first, restart)
        written = await IndexWrites(port).write(document, chunks, MODEL, DIM, vectors)  # type: ignore[arg-type]
        assert port.restarted and port.parts >= 4 and port.parts % 2 == 0  # each part twice
        assert (written.status, written.chunk_count) == ("indexed", 300)
        stored = await port.current.stored_vectors(written.doc_id)
        assert len(stored.hashes) == 300
