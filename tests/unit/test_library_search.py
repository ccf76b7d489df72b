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


async def test_a_failed_embedding_cancels_the_search_and_is_the_error(
    library: Library, parts: tuple[HeldEmbedder, WatchedIndex]
) -> None:
    embedder, index = parts
    embedder.failure = UpstreamError("the embedder service is down")
    searching = asyncio.ensure_future(library.search(SearchInput(query="otters")))
    await asyncio.wait_for(index.arrived.wait(), 5)
    embedder.release.set()
    with pytest.raises(UpstreamError, match="embedder service is down"):
        await asyncio.wait_for(searching, 5)
    assert index.endings == ["cancelled"] and index.searches == []


async def test_an_index_that_refuses_at_once_is_the_error_once_the_embedding_ends(
    library: Library, parts: tuple[HeldEmbedder, WatchedIndex]
) -> None:
    embedder, index = parts
    index.failure = InvalidInputError("unknown filter field 'colour'")
    searching = asyncio.ensure_future(library.search(SearchInput(query="otters")))
    await asyncio.wait_for(index.arrived.wait(), 5)
    embedder.release.set()
    with pytest.raises(InvalidInputError, match="colour"):
        await asyncio.wait_for(searching, 5)
    assert index.endings == ["InvalidInputError"]


async def test_both_failing_reports_the_embedding(
    library: Library, parts: tuple[HeldEmbedder, WatchedIndex]
) -> None:
    embedder, index = parts
    index.failure = InvalidInputError("unknown filter field 'colour'")
    embedder.failure = UpstreamError("the embedder service is down")
    searching = asyncio.ensure_future(library.search(SearchInput(query="otters")))
    await asyncio.wait_for(index.arrived.wait(), 5)
    embedder.release.set()
    with pytest.raises(UpstreamError):
        await asyncio.wait_for(searching, 5)


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
