"""`min_score`, `similarity` and chunk line numbers through the gateway's `Library` over the
real cores in this process (converter workers, the bundled model, LanceDB in tmp_path): the
similarity a hit reports is the cosine of the query's and the chunk's vectors, the floor drops
what is below it in every mode (a keyword-only search embeds the query for it), and every
chunk of a Markdown or text file reports the file's own lines, in search hits and in
`get_document` windows."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
import pytest_asyncio

from libs.contracts import (
    GetDocumentInput,
    IndexSearchRequest,
    IngestFileInput,
    ListDocumentsInput,
    SearchInput,
    SearchMode,
)
from libs.errors import InvalidInputError
from services.gateway.library import Library
from services.gateway.settings import GatewaySettings
from tests.conftest import SHARED_FILES

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

README = SHARED_FILES / "markitdown/markitdown-project-README.md"
NOVEL = SHARED_FILES / "gutenberg/1342-0.txt"
MODES: list[SearchMode] = ["hybrid", "vector", "bm25"]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def library(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Library]:
    from services.entrypoints.inprocess import inprocess_ports

    if not README.is_file() or not NOVEL.is_file():
        pytest.skip(f"shared files missing at {SHARED_FILES}")
    var_dir = tmp_path_factory.mktemp("similarity-var")
    root = var_dir / "files"
    root.mkdir()
    # A slice of the novel: real prose, small enough to embed in a few seconds.
    (root / "novel.txt").write_text(
        "\n".join(NOVEL.read_text(encoding="utf-8").split("\n")[100:400]) + "\n"
    )
    (root / "README.md").write_bytes(README.read_bytes())
    with pytest.MonkeyPatch.context() as env:
        env.setenv("VAR_DIR", str(var_dir))
        env.setenv("LANCEDB_URI", str(var_dir / "lancedb"))
        env.setenv("CONVERTER_WORKERS", "1")
        settings = GatewaySettings(
            _env_file=None,  # type: ignore[call-arg]
            var_dir=var_dir,
            ingest_roots=[root],
        )
        async with inprocess_ports(settings) as ports:
            opened = Library(settings, ports)
            await opened.start()
            try:
                for name in ("novel.txt", "README.md"):
                    result = await opened.ingest_file(
                        IngestFileInput(path=str(root / name), library="sim")
                    )
                    assert result.status == "indexed", result
                yield opened
            finally:
                await opened.aclose()


def search(query: str, **kwargs: object) -> SearchInput:
    return SearchInput.model_validate({"query": query, "library": "sim", "top_k": 10, **kwargs})


@pytest.mark.parametrize("mode", MODES)
async def test_every_hit_reports_its_cosine_similarity(library: Library, mode: SearchMode) -> None:
    query = "convert PDF and Word files to Markdown"
    found = await library.search(search(query, min_score=0.0), mode=mode)
    assert found.results
    qv = np.asarray(await library.ports.embedder.embed([query], "query"))[0]
    for hit in found.results:
        assert hit.similarity is not None
        chunk_vector = np.asarray(await library.ports.embedder.embed([hit.content], "document"))
        assert hit.similarity == pytest.approx(float(chunk_vector[0] @ qv), abs=0.02)


@pytest.mark.parametrize("mode", MODES)
async def test_min_score_drops_what_is_below_it_in_every_mode(
    library: Library, mode: SearchMode
) -> None:
    query = "markitdown converts PDF Word and Excel documents to Markdown"
    everything = (await library.search(search(query, top_k=50), mode=mode)).results
    if mode == "bm25":  # without a floor a keyword search does not embed the query
        assert all(hit.similarity is None for hit in everything)
        everything = (
            await library.search(search(query, top_k=50, min_score=0.0), mode=mode)
        ).results
    similarities = sorted(hit.similarity or 0.0 for hit in everything)
    # Real content spans a range: README chunks are related, the novel's are not.
    assert similarities[0] < 0.2 < 0.4 < similarities[-1]
    floor = 0.4
    kept = (await library.search(search(query, top_k=50, min_score=floor), mode=mode)).results
    assert kept
    assert all(hit.similarity is not None and hit.similarity >= floor for hit in kept)
    assert {hit.chunk_index for hit in kept if hit.source.endswith("README.md")} == {
        hit.chunk_index
        for hit in everything
        if hit.source.endswith("README.md") and (hit.similarity or 0.0) >= floor
    }
    assert all(hit.source.endswith("README.md") for hit in kept)
    # Nothing is that close to the query: an empty result, not an error.
    none = await library.search(search(query, min_score=0.99), mode=mode)
    assert none.results == []


async def test_min_score_fills_top_k_from_deeper_candidates(library: Library) -> None:
    """The floor applies before top_k: a small top_k still gets hits above the floor even
    when better-fused candidates fall below it."""
    query = "Elizabeth Bennet and Mr. Darcy at the ball"
    kept = (await library.search(search(query, top_k=3, min_score=0.3))).results
    assert len(kept) == 3
    assert all((hit.similarity or 0.0) >= 0.3 for hit in kept)


async def test_min_score_outside_zero_to_one_is_refused() -> None:
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="min_score"):
            search("x", min_score=bad)


async def test_the_index_refuses_a_floor_without_a_query_vector(library: Library) -> None:
    with pytest.raises(InvalidInputError, match="min_score needs vector_b64"):
        await library.ports.index.search(
            IndexSearchRequest(query="walrus", mode="bm25", min_score=0.5)
        )


@pytest.mark.parametrize("name", ["README.md", "novel.txt"])
async def test_chunks_report_the_files_own_lines(library: Library, name: str) -> None:
    listed = await library.list_documents(ListDocumentsInput(library="sim"))
    doc = next(d for d in listed.documents if d.source.endswith(name))
    path = Path(doc.source)
    # The converter drops trailing spaces at line ends; the lines themselves stay put.
    lines = [line.rstrip() for line in path.read_text(encoding="utf-8").split("\n")]
    for index in range(doc.chunk_count):
        window = await library.get_document(GetDocumentInput(doc_id=doc.doc_id, chunk_index=index))
        assert window.chunks is not None
        chunk = window.chunks[0]
        assert 1 <= chunk.start_line <= chunk.end_line <= len(lines)
        text = "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        assert chunk.content in text, (index, chunk.start_line, chunk.end_line)
        assert text.find(chunk.content) <= len(lines[chunk.start_line - 1])
    hits = (await library.search(search("the", top_k=20))).results
    for hit in hits:
        if hit.source == doc.source:
            text = "\n".join(lines[hit.start_line - 1 : hit.end_line])
            assert hit.content in text
