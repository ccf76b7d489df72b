"""`POST /search/stream` (services.index.search_stream): a search's parameters, then its query
vector, as the two NDJSON lines of one chunked body, against the real index app (its lifespan,
a real LanceDB in tmp_path) on a real loopback socket, driven by the typed client and by raw
sockets where a caller misbehaves."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import REGISTRY

from libs.clients import IndexClient
from libs.contracts import IndexSearchRequest, SearchMode
from libs.errors import InvalidInputError, ModelMismatchError
from libs.http import RetryPolicy
from libs.vectors import encode
from services.index import search_stream
from services.index.app import create_app
from services.index.settings import IndexSettings
from services.index.store import ranking
from tests.index_helpers import unit_vectors, upsert_request
from tests.servers import serve

pytestmark = pytest.mark.integration

TEXTS = [
    "Otters hold hands while they sleep in the river",
    "Beavers build dams of branches and mud",
    "The river otter eats fish and crayfish",
    "Herons stand still in shallow water",
    "Kingfishers dive for small fish",
]
VECTORS = unit_vectors(len(TEXTS), seed=11)
LIMIT = 64 * 1024


@pytest.fixture
def settings(tmp_path: Path) -> IndexSettings:
    return IndexSettings(
        _env_file=None,  # type: ignore[call-arg]
        lancedb_uri=str(tmp_path / "lancedb"),
        index_max_body_bytes=LIMIT,
    )


@pytest.fixture
def url(settings: IndexSettings) -> Iterator[str]:
    with serve(create_app(settings)) as served:
        yield served


@pytest.fixture
async def client(url: str) -> AsyncIterator[IndexClient]:
    index = IndexClient(url, policy=RetryPolicy(attempts=1))
    try:
        await index.upsert(upsert_request("animals.md", TEXTS, vectors=VECTORS))
        yield index
    finally:
        await index.aclose()


def query_vector(i: int = 0) -> str:
    """A query near the i-th chunk's vector."""
    noisy = VECTORS[i : i + 1] + 0.05 * unit_vectors(1, seed=50 + i)
    return encode(noisy / float((noisy**2).sum() ** 0.5))


def later(value: str, after_s: float = 0.0) -> asyncio.Future[str]:
    """The query vector as the gateway hands it over: a future set once it is 'embedded'."""
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(after_s, future.set_result, value)
    return future


@pytest.mark.parametrize(
    ("mode", "extra"),
    [
        ("hybrid", {}),
        ("vector", {}),
        ("bm25", {"min_score": 0.0}),
        ("hybrid", {"min_score": 0.2, "max_per_document": 2, "filter": {"file_type": "md"}}),
    ],
    ids=["hybrid", "vector", "bm25-with-floor", "hybrid-floor-cap-filter"],
)
async def test_a_streamed_search_answers_as_the_whole_request_does(
    client: IndexClient, mode: SearchMode, extra: dict[str, Any]
) -> None:
    vector = query_vector(2)
    whole = IndexSearchRequest(query="otter river fish", top_k=4, mode=mode, **extra)
    direct = await client.search(whole.model_copy(update={"vector_b64": vector}))
    streamed = await client.search(whole, later(vector, after_s=0.05))
    assert direct.results, "the search should find something"
    assert streamed == direct
    assert all(hit.similarity is not None for hit in streamed.results)


async def test_the_full_text_leg_runs_before_the_vector_comes(
    client: IndexClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    legs: list[str] = []
    words_leg, vector_leg = ranking.fts_leg, ranking.vector_leg

    def fts(*args: Any, **kwargs: Any) -> Any:
        legs.append("full-text")
        return words_leg(*args, **kwargs)

    def vec(*args: Any, **kwargs: Any) -> Any:
        legs.append("vector")
        return vector_leg(*args, **kwargs)

    monkeypatch.setattr(ranking, "fts_leg", fts)
    monkeypatch.setattr(ranking, "vector_leg", vec)
    vector: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    searching = asyncio.ensure_future(
        client.search(IndexSearchRequest(query="otter river", top_k=3), vector)
    )
    deadline = time.monotonic() + 20
    while not legs and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert legs == ["full-text"], "the full-text leg should start on the parameters alone"
    assert not searching.done()
    vector.set_result(query_vector(0))
    result = await searching
    assert legs == ["full-text", "vector"]
    assert result.results and result.results[0].content == TEXTS[0]


async def _post_lines(url: str, *lines: bytes) -> httpx.Response:
    async def body() -> AsyncIterator[bytes]:
        for line in lines:
            yield line

    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        return await http.post(
            "/search/stream",
            content=body(),
            headers={"Content-Type": "application/x-ndjson"},
        )


PARAMETERS = b'{"query": "otter", "top_k": 3}\n'


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        ((b"not json\n", b'{"vector_b64": "AAAA"}\n'), "the first line"),
        ((b'{"top_k": 3}\n', b'{"vector_b64": "AAAA"}\n'), "query"),
        ((b'{"query": "otter", "vector_b64": "AAAA"}\n', b'{"vector_b64": "AAAA"}\n'), "second"),
        ((PARAMETERS,), "the body ended before the query vector"),
        ((PARAMETERS, b'{"vector": "AAAA"}\n'), "the query vector (the body's second line)"),
        ((PARAMETERS, b'{"vector_b64": "AAAA"}\n', b"{}\n"), "more than two lines"),
        ((PARAMETERS, b'{"vector_b64": "%%%"}\n'), "vector_b64 is not base64"),
    ],
    ids=[
        "not-json",
        "no-query",
        "vector-first",
        "no-vector",
        "not-a-vector",
        "three-lines",
        "not-base64",
    ],
)
async def test_a_body_that_is_not_the_two_lines_is_invalid_input(
    client: IndexClient, url: str, lines: tuple[bytes, ...], words: str
) -> None:
    answer = await _post_lines(url, *lines)
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["status"] == "error" and body["error_code"] == "invalid_input"
    assert words in body["error"]


async def test_a_vector_of_another_width_is_a_model_mismatch(client: IndexClient) -> None:
    narrow = encode(unit_vectors(1, seed=3)[:, :128].copy())
    with pytest.raises(ModelMismatchError, match="384"):
        await client.search(IndexSearchRequest(query="otter", top_k=3), later(narrow))


async def test_a_streamed_body_past_the_limit_is_413(settings: IndexSettings) -> None:
    """Counted as it arrives, as a chunked body has no length to check up front (in process:
    over a socket the server may close before the client has written all of it)."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        index = IndexClient("http://index", transport=transport, policy=RetryPolicy(attempts=1))
        await index.upsert(upsert_request("animals.md", TEXTS, vectors=VECTORS))

        async def body() -> AsyncIterator[bytes]:
            yield PARAMETERS
            yield b'{"vector_b64": "' + b"A" * LIMIT + b'"}\n'

        async with httpx.AsyncClient(transport=transport, base_url="http://index") as http:
            answer = await http.post("/search/stream", content=body())
        await index.aclose()
    assert answer.status_code == 413
    assert answer.json()["error_code"] == "too_large"
    assert "INDEX_MAX_BODY_BYTES" in answer.json()["error"]


def _send_parameters_only(url: str) -> socket.socket:
    """A raw connection that sends a streamed search's headers and first line, then stops."""
    host, port = url.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)), timeout=30)
    chunk = b"%x\r\n%s\r\n" % (len(PARAMETERS), PARAMETERS)
    conn.sendall(
        b"POST /search/stream HTTP/1.1\r\nHost: index\r\n"
        b"Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk
    )
    return conn


async def test_a_vector_that_never_comes_is_invalid_input_after_the_wait(
    client: IndexClient, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_stream, "VECTOR_WAIT_S", 0.5)
    conn = _send_parameters_only(url)
    try:
        answer = await asyncio.to_thread(conn.recv, 65536)
    finally:
        conn.close()
    assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
    assert b"did not follow the search's parameters within" in answer


async def test_a_caller_that_goes_away_before_the_vector_is_dropped_quietly(
    client: IndexClient, url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    started = threading.Event()
    words_leg = ranking.fts_leg

    def fts(*args: Any, **kwargs: Any) -> Any:
        started.set()
        return words_leg(*args, **kwargs)

    monkeypatch.setattr(ranking, "fts_leg", fts)
    with caplog.at_level(logging.INFO):
        conn = _send_parameters_only(url)
        assert await asyncio.to_thread(started.wait, 20)
        conn.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not any(
            "went away" in r.getMessage() for r in caplog.records
        ):
            await asyncio.sleep(0.02)
    assert any("went away before its query vector came" in r.getMessage() for r in caplog.records)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # The index goes on answering.
    result = await client.search(
        IndexSearchRequest(query="beavers", top_k=1), later(query_vector(1))
    )
    assert result.results[0].content == TEXTS[1]


async def test_search_time_is_counted_from_the_vector(client: IndexClient) -> None:
    def observed() -> tuple[float, float]:
        labels = {"mode": "hybrid"}
        count = REGISTRY.get_sample_value("mvdb_index_search_seconds_count", labels) or 0.0
        total = REGISTRY.get_sample_value("mvdb_index_search_seconds_sum", labels) or 0.0
        return count, total

    count, total = observed()
    await client.search(IndexSearchRequest(query="herons", top_k=2), later(query_vector(3), 0.6))
    after_count, after_total = observed()
    assert after_count == count + 1
    assert after_total - total < 0.5, "the wait for the vector is the embedder's, not the index's"


async def test_json_framing_is_the_contract(client: IndexClient, url: str) -> None:
    """The two lines as a client in another language would write them by hand."""
    vector = query_vector(4)
    answer = await _post_lines(
        url,
        json.dumps({"query": "kingfishers dive", "top_k": 1, "mode": "hybrid"}).encode() + b"\n",
        json.dumps({"vector_b64": vector}).encode() + b"\n",
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["results"][0]["content"] == TEXTS[4]


async def test_a_search_whose_vector_is_invalid_reports_the_vector(client: IndexClient) -> None:
    with pytest.raises(InvalidInputError, match="NaN"):
        nan = encode(unit_vectors(1, seed=1) * float("nan"))
        await client.search(IndexSearchRequest(query="otter", top_k=1), later(nan))
