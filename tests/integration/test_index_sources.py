"""A library's manifest from the index (`GET /sources`), through `IndexClient` against the real
app and a real LanceDB: ordered by source, filtered by prefix, paged by cursor without repeats
or gaps while documents come and go."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from libs.clients import IndexClient
from libs.errors import InvalidInputError
from services.index.settings import IndexSettings
from tests.index_helpers import index_app, upsert_request

pytestmark = pytest.mark.integration


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[IndexClient]:
    async with index_app(IndexSettings(lancedb_uri=str(tmp_path / "lancedb"))) as index:
        yield index


async def _all(client: IndexClient, library: str, prefix: str = "", limit: int = 2) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        page = await client.list_sources(library, prefix, cursor, limit)
        seen += [entry.source for entry in page.sources]
        cursor = page.next_cursor
        if cursor is None:
            return seen


async def test_sources_are_listed_by_source_with_their_hash(client: IndexClient) -> None:
    names = ["Q4/report.pdf", "Q3/report.pdf", "notes.md", "Q3/Ünïcode l'été.md", "Q3/a.md"]
    written = {}
    for seed, name in enumerate(names):
        written[name] = await client.upsert(upsert_request(name, [f"text {seed}"], seed=seed))
    await client.upsert(upsert_request("Q3/other-library.md", ["x"], library="other", seed=9))

    first = await client.list_sources("default", limit=10)
    assert [e.source for e in first.sources] == sorted(names)
    assert first.next_cursor is None
    entry = next(e for e in first.sources if e.source == "Q3/report.pdf")
    assert entry.doc_id == written["Q3/report.pdf"].doc_id
    assert entry.content_sha256 == "hash-1"
    assert (entry.chunk_count, entry.file_type) == (1, "md")
    assert entry.last_modified == "2025-06-01T09:00:00+00:00"

    assert await _all(client, "default") == sorted(names)
    assert await _all(client, "default", "Q3/", limit=1) == sorted(
        n for n in names if n.startswith("Q3/")
    )
    assert await _all(client, "default", "Q3/'") == []
    assert await _all(client, "other") == ["Q3/other-library.md"]
    assert await _all(client, "nobody") == []


async def test_pages_hold_when_documents_come_and_go(client: IndexClient) -> None:
    for seed, name in enumerate(["a.md", "b.md", "c.md", "d.md"]):
        await client.upsert(upsert_request(name, ["t"], seed=seed))
    page = await client.list_sources("default", limit=2)
    assert [e.source for e in page.sources] == ["a.md", "b.md"]
    # A source before the cursor arrives and one after it goes: the next page neither
    # repeats nor skips the others.
    await client.upsert(upsert_request("aa.md", ["t"], seed=7))
    gone = (await client.lookup("default", "c.md")).document
    assert gone is not None
    await client.delete(gone.doc_id)
    rest = await client.list_sources("default", cursor=page.next_cursor, limit=2)
    assert [e.source for e in rest.sources] == ["d.md"]
    assert rest.next_cursor is None


async def test_a_bad_cursor_is_the_callers_mistake(client: IndexClient) -> None:
    with pytest.raises(InvalidInputError, match="cursor"):
        await client.list_sources("default", cursor="not-a-cursor!")
