"""A read whose caller stops waiting does not leave the index stuck (`libs.tasks.to_the_end`).

A search whose query vector fails (the embedder's error, a caller that went away) lets go of
its full-text leg, and an MCP request cancelled in the stdio server lets go of the whole
search. LanceDB drops a call's Rust future when its Python future is cancelled; a full-text
query dropped while Lance loads the table's full-text index (the first full-text search of
a store in a process) left every later search of that process, and the next fold, waiting
forever: on this machine, 6 such searches in 10 cancelled 0.6 to 1.5 ms in (lancedb 0.40,
pylance 13; none once the index was loaded). The store now lets every LanceDB call run to
its end."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest

from libs.contracts import IndexSearchRequest
from libs.vectors import encode
from services.index.store import IndexStore
from tests.index_helpers import settings_for, unit_vectors, upsert_request

pytestmark = pytest.mark.integration

TEXTS = ["Otters hold hands while they sleep", "Beavers build dams of branches and mud"]
VECTORS = unit_vectors(len(TEXTS), seed=5)
# Where the first search of a store loads the full-text index on this machine, and around
# it on a faster or slower one: a cancel at each of these delays after the search starts.
DELAYS_MS = [0.3, 0.5, 0.7, 0.9, 1.1, 1.3, 1.6, 2.0, 2.5, 3.2, 4.0, 6.0]


async def a_search_cancelled_after(store: IndexStore, delay_s: float) -> None:
    """A hybrid search whose query vector fails `delay_s` after it started."""
    vector: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    searching = asyncio.ensure_future(
        store.search(IndexSearchRequest(query="otters", top_k=2), vector)
    )
    await asyncio.sleep(delay_s)
    vector.set_exception(ConnectionError("the caller went away"))
    with pytest.raises(ConnectionError):
        await searching


@pytest.mark.parametrize("delay_ms", DELAYS_MS)
async def test_a_search_let_go_of_on_a_cold_store_leaves_the_next_one_answered(
    tmp_path: Path, delay_ms: float
) -> None:
    store = IndexStore(settings_for(tmp_path))
    await anyio.to_thread.run_sync(
        store.upsert, upsert_request("animals.md", TEXTS, vectors=VECTORS)
    )
    await a_search_cancelled_after(store, delay_ms / 1000)
    again = IndexSearchRequest(query="beavers", top_k=1, vector_b64=encode(VECTORS[1:2]))
    with anyio.fail_after(20):
        result = await store.search(again)
    assert result.results[0].content == TEXTS[1]
    # The fold after it (it loads the same index) ends too.
    with anyio.fail_after(60):
        await anyio.to_thread.run_sync(store.optimize)
