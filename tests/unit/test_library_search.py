"""The gateway's search (`Library.search`): the index is asked at once and the query's vector
follows when the embedder has made it; a failed embedding cancels the search and is the error
reported; a keyword search embeds nothing. Over the in-memory fakes of `tests.fakes`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path

import pytest

from libs.contracts import EmbedKind, IndexSearchRequest, SearchInput, SearchResult
from libs.errors import InvalidInputError, UpstreamError
from libs.vectors import Matrix, decode
from services.gateway.library import Library
from services.gateway.ports import Ports
from services.gateway.settings import GatewaySettings
from tests.fakes import FakeConverter, FakeEmbedder, FakeIndex


class HeldEmbedder(FakeEmbedder):
    """Query embeddings wait until `release` is set, then succeed or raise `failure`."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.failure: Exception | None = None
        self.queries = 0

    async def embed(self, texts: list[str], kind: EmbedKind) -> Matrix:
        if kind == "query":
            self.queries += 1
            await self.release.wait()
            if self.failure is not None:
                raise self.failure
        return await super().embed(texts, kind)


class WatchedIndex(FakeIndex):
    """Notes when a search arrives, what it was given, and how it ended."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived = asyncio.Event()
        self.given_later: list[bool] = []
        self.endings: list[str] = []
        self.failure: Exception | None = None

    async def search(
        self, request: IndexSearchRequest, later: Awaitable[str] | None = None
    ) -> SearchResult:
        self.given_later.append(later is not None)
        self.arrived.set()
        try:
            if self.failure is not None:
                raise self.failure
            result = await super().search(request, later)
        except asyncio.CancelledError:
            self.endings.append("cancelled")
            raise
        except Exception as exc:
            self.endings.append(type(exc).__name__)
            raise
        self.endings.append("answered")
        return result


@pytest.fixture
def parts() -> tuple[HeldEmbedder, WatchedIndex]:
    return HeldEmbedder(), WatchedIndex()


@pytest.fixture
def library(tmp_path: Path, parts: tuple[HeldEmbedder, WatchedIndex]) -> Library:
    embedder, index = parts
    settings = GatewaySettings(_env_file=None, var_dir=tmp_path)  # type: ignore[call-arg]
    return Library(settings, Ports(FakeConverter(), embedder, index))


async def test_the_index_is_asked_before_the_query_is_embedded(
    library: Library, parts: tuple[HeldEmbedder, WatchedIndex]
) -> None:
    embedder, index = parts
    searching = asyncio.ensure_future(library.search(SearchInput(query="otters")))
    await asyncio.wait_for(index.arrived.wait(), 5)
    assert embedder.queries == 1 and not searching.done()
    embedder.release.set()
    result = await asyncio.wait_for(searching, 5)
    assert result.results == []
    (asked,) = index.searches
    assert asked.vector_b64 is not None
    expected = await FakeEmbedder().embed(["otters"], "query")
    assert (decode(asked.vector_b64, FakeEmbedder.dim) == expected).all()
    assert index.given_later == [True] and index.endings == ["answered"]


EMBEDDER_DOWN = UpstreamError("the embedder service is down")
BAD_FILTER = InvalidInputError("unknown filter field 'colour'")


@pytest.mark.parametrize(
    ("embedding", "index_answer", "raised", "endings"),
    [
        # A failed embedding cancels the search, which never gets its vector.
        (EMBEDDER_DOWN, None, UpstreamError, ["cancelled"]),
        # An index that refuses at once is the error once the embedding ends.
        (None, BAD_FILTER, InvalidInputError, ["InvalidInputError"]),
        # Both failing: the embedding's is reported.
        (EMBEDDER_DOWN, BAD_FILTER, UpstreamError, ["InvalidInputError"]),
    ],
    ids=["embedding-fails", "index-refuses", "both-fail"],
)
async def test_the_error_reported_when_a_part_of_the_search_fails(
    library: Library,
    parts: tuple[HeldEmbedder, WatchedIndex],
    embedding: Exception | None,
    index_answer: Exception | None,
    raised: type[Exception],
    endings: list[str],
) -> None:
    embedder, index = parts
    embedder.failure, index.failure = embedding, index_answer
    searching = asyncio.ensure_future(library.search(SearchInput(query="otters")))
    await asyncio.wait_for(index.arrived.wait(), 5)
    embedder.release.set()
    with pytest.raises(raised):
        await asyncio.wait_for(searching, 5)
    assert index.endings == endings and index.searches == []


async def test_a_keyword_search_embeds_nothing_and_gives_no_vector(
    library: Library, parts: tuple[HeldEmbedder, WatchedIndex]
) -> None:
    embedder, index = parts
    await asyncio.wait_for(library.search(SearchInput(query="otters"), mode="bm25"), 5)
    assert embedder.queries == 0 and index.given_later == [False]
    assert index.searches[0].vector_b64 is None


async def test_a_keyword_search_with_a_floor_gets_its_vector(
    library: Library, parts: tuple[HeldEmbedder, WatchedIndex]
) -> None:
    embedder, index = parts
    embedder.release.set()
    request = SearchInput(query="otters", min_score=0.1)
    await asyncio.wait_for(library.search(request, mode="bm25"), 5)
    assert embedder.queries == 1 and index.given_later == [True]
    assert index.searches[0].vector_b64 is not None
