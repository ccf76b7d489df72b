"""A long table's chunks each repeat its header (`libs.tables`), through the
gateway's `Library` over the real cores in this process: every chunk of a 600-row CSV says
what its columns are and stays within the model's window, its lines are its rows, a search
hit in the middle of the table carries the header, and a `get_document` window is still the
exact span of the Markdown, each row once."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from libs.contracts import GetDocumentInput, IngestFileInput, SearchInput
from services.gateway.library import Library
from services.gateway.settings import GatewaySettings

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

HEADER = "| id | product | price | warehouse |\n| --- | --- | --- | --- |\n"
ROWS = 600


def row(i: int) -> str:
    return f"| {i} | Product {i} | {i * 3 % 97}.50 | warehouse-{i % 7} |"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def library(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Library]:
    from services.entrypoints.inprocess import inprocess_ports

    var_dir = tmp_path_factory.mktemp("tables-var")
    root = var_dir / "files"
    root.mkdir()
    lines = [f"{i},Product {i},{i * 3 % 97}.50,warehouse-{i % 7}" for i in range(1, ROWS + 1)]
    (root / "inventory.csv").write_text("id,product,price,warehouse\n" + "\n".join(lines) + "\n")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("VAR_DIR", str(var_dir))
        env.setenv("LANCEDB_URI", str(var_dir / "lancedb"))
        env.setenv("CONVERTER_WORKERS", "1")
        settings = GatewaySettings(_env_file=None, var_dir=var_dir, ingest_roots=[root])  # type: ignore[call-arg]
        async with inprocess_ports(settings) as ports:
            opened = Library(settings, ports)
            await opened.start()
            try:
                result = await opened.ingest_file(
                    IngestFileInput(path=str(root / "inventory.csv"), library="tables")
                )
                assert result.status == "indexed" and result.chunk_count > 10, result
                yield opened
            finally:
                await opened.aclose()


async def test_every_chunk_of_a_long_table_repeats_its_header(library: Library) -> None:
    doc = (await library.search(SearchInput(query="Product", library="tables"))).results[0]
    whole = await library.get_document(GetDocumentInput(doc_id=doc.doc_id))
    markdown_lines = whole.content.split("\n")
    assert whole.content.startswith(HEADER)
    seen_rows: set[int] = set()
    for index in range(whole.chunk_count):
        window = await library.get_document(GetDocumentInput(doc_id=doc.doc_id, chunk_index=index))
        assert window.chunks is not None
        chunk = window.chunks[0]
        assert chunk.content.startswith(HEADER), index
        # The first chunk holds the header itself; the others repeat it before their rows.
        own = chunk.content if index == 0 else chunk.content[len(HEADER) :]
        # Whole rows, which are the chunk's own lines.
        assert own.split("\n") == markdown_lines[chunk.start_line - 1 : chunk.end_line], index
        seen_rows.update(
            int(line.split("|")[1]) for line in own.split("\n")[2 if not index else 0 :]
        )
        assert window.content == own  # the exact span of the Markdown, header not repeated
    assert seen_rows == set(range(1, ROWS + 1))


async def test_a_window_over_several_chunks_holds_each_row_once(library: Library) -> None:
    doc = (await library.search(SearchInput(query="Product", library="tables"))).results[0]
    window = await library.get_document(
        GetDocumentInput(doc_id=doc.doc_id, chunk_index=5, context=2)
    )
    assert window.chunks is not None and len(window.chunks) == 5
    first, last = window.chunks[0], window.chunks[-1]
    numbers = [int(line.split("|")[1]) for line in window.content.split("\n")]
    assert numbers == list(range(numbers[0], numbers[-1] + 1))  # each row once, in order
    assert window.content.split("\n")[0] == first.content.split("\n")[2]
    assert window.content.split("\n")[-1] == last.content.split("\n")[-1]


async def test_a_hit_in_the_middle_of_the_table_says_what_its_columns_are(
    library: Library,
) -> None:
    hits = (
        await library.search(SearchInput(query="Product 345 warehouse", library="tables"))
    ).results
    hit = next(h for h in hits if row(345) in h.content)
    assert hit.content.startswith(HEADER) and hit.chunk_index > 0
