"""Long Markdown tables in chunks (`libs.tables`, `Chunker`): each chunk after
the first repeats the header, starts at a row, and stays within the token limit; a header too
long to repeat is not; `libs.tables.header_length` finds a repeated header."""

from __future__ import annotations

import pytest
from tokenizers import Tokenizer

from libs.modelfiles import bundled_tokenizer_json
from libs.tables import header_length, tables_in
from services.converter.chunk import Chunker

HEADER = "| id | product | price |\n| --- | --- | --- |\n"
BODY = "\n".join(f"| {i} | Product {i} | {i}.50 |" for i in range(1, 400))


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    tokenizer = Tokenizer.from_file(str(bundled_tokenizer_json()))
    return Chunker(tokenizer, max_tokens=128, overlap_tokens=16)


def test_each_chunk_of_a_long_table_repeats_the_header(chunker: Chunker) -> None:
    markdown = "# Stock\n\nCounted on Monday.\n\n" + HEADER + BODY + "\n\nAll counted."
    chunks = chunker.chunk(markdown)
    inside = [c for c in chunks if "| Product" in c.text]
    assert len(inside) > 5
    for chunk in inside:
        assert chunk.text.count(HEADER) == 1, chunk.chunk_index
        assert chunk.token_count == chunker.count_tokens(chunk.text) <= 128
        rows = chunk.text.split(HEADER, 1)[1].split("\n\n")[0].split("\n")
        assert all(r.startswith("| ") and r.endswith(" |") for r in rows), chunk.text
        assert chunk.headings == ["Stock"]
    assert chunks[-1].text.endswith("All counted.")


def test_a_header_too_long_to_repeat_is_not(chunker: Chunker) -> None:
    wide = "| " + " | ".join(f"column number {i} of the wide table" for i in range(12)) + " |"
    rule = "|" + " --- |" * 12
    rows = "\n".join("| " + " | ".join(str(i) for _ in range(12)) + " |" for i in range(200))
    chunks = chunker.chunk(f"{wide}\n{rule}\n{rows}")
    assert sum(c.text.startswith(wide) for c in chunks) <= 2  # its own first chunk(s) only
    assert all(chunker.count_tokens(c.text) <= 128 for c in chunks)


def test_tables_are_found_with_their_header_and_rows() -> None:
    text = "intro\n\n" + HEADER + "| 1 | a | 2 |\n| 2 | b | 3 |\n\nafter | not a row"
    (table,) = tables_in(text)
    assert table.header == HEADER
    assert text[table.body_start : table.end] == "| 1 | a | 2 |\n| 2 | b | 3 |"
    assert table.header_for(table.body_start) == HEADER and table.header_for(0) == ""
    assert tables_in("| a |\nno rule\n| b |") == []


def test_a_repeated_header_is_measured() -> None:
    assert header_length(HEADER + "| 1 | a | 2 |") == len(HEADER)
    assert header_length("| 1 | a | 2 |\n| 2 | b | 3 |\n| 3 | c | 4 |") == 0
    assert header_length(HEADER.rstrip("\n")) == 0  # a header with nothing after it
