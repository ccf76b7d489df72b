"""Text formats the converter reads itself (tests/data/text, written for these tests, see its
README): meeting transcripts and captions (`.vtt`, `.srt`), LaTeX papers (`.tex`), Org mode
notes (`.org`), and web pages saved as one file (`.mhtml`, built here from a real page in
shared/data/files): the Markdown of each, its title, and its chunks' heading paths."""

from __future__ import annotations

import email.charset
import email.mime.image
import email.mime.multipart
import email.mime.text
from pathlib import Path

import pytest

from libs.errors import ConversionError
from libs.formats import SCANNED_EXTENSIONS
from services.converter.archive import ArchiveLimits
from services.converter.chunk import Chunker
from services.converter.convert import DocumentConverter

TEXT = Path(__file__).resolve().parents[1] / "data" / "text"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "files"

STANDUP = (
    "[00:00:03] **Priya Raman:** Good morning, everyone. Let's start with the billing "
    "migration. We moved the invoice exporter to the new queue on Tuesday.\n\n"
    "[00:00:11] **Tomás Ortega:** The retry storm we saw last week came from the ledger "
    "service & its timeouts. I raised the timeout to thirty seconds and the storm stopped.\n\n"
    "[00:00:45] **Priya Raman:** Thanks. Next item: the quarterly access review is due on the "
    "fifteenth."
)
INTERVIEW = (
    "[00:00:01] Where were you on the night of the storm? I was at the lighthouse, fixing the "
    "lamp.\n\n[00:00:20] The keeper\u2019s log says otherwise."
)
NOTES = """# Garden Journal

# Spring planting
Tomatoes went in on [2026-04-18 Sat]. See [the variety notes](https://example.org/tomatoes).

## TODO Stake the heirloom tomatoes
SCHEDULED: <2026-05-01 Fri>

## Watering schedule
| bed   | days        |
|-------+-------------|
| north | Mon Thu     |
| south | every day   |

# Compost
> Feed the soil, not the plant.

```python
# ratio of browns to greens
* not a heading inside code
ratio = 30 / 1
```"""


@pytest.fixture(scope="module")
def converter() -> DocumentConverter:
    return DocumentConverter(ArchiveLimits(100, 50_000_000, 2))


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    return Chunker.bundled(40, 0)  # small, so that each section is a chunk of its own


def convert(converter: DocumentConverter, name: str):  # type: ignore[no-untyped-def]
    return converter.convert((TEXT / name).read_bytes(), name)


def test_a_meeting_transcript_keeps_who_said_what_and_when(converter: DocumentConverter) -> None:
    """Teams' WebVTT: cue ids, timings and voice spans go; a speaker's consecutive cues make
    one paragraph, a new speaker or a pause starts the next; entities are decoded."""
    document = convert(converter, "standup.vtt")
    assert document.markdown == STANDUP
    assert (document.title, document.file_type) == ("standup", "vtt")


def test_a_zoom_transcript_names_its_speakers_before_their_words(
    converter: DocumentConverter,
) -> None:
    """Zoom writes `Name: words` in each cue: the names become the speakers, and a colon
    later in the words stays."""
    document = convert(converter, "zoom.vtt")
    assert document.markdown == (
        "[00:00:02] **Amara Okafor:** Can everyone see my screen? This is the Q3 roadmap. The "
        "first item is the mobile checkout redesign.\n\n"
        "[00:00:09] **Lee:** Quick question: does that include the Apple Pay work?\n\n"
        "[00:00:14] **Amara Okafor:** Yes, Apple Pay ships with the redesign in October."
    )
    # A colon in fewer than half of the cues names nobody.
    lines = ["Note: the tide turns.", "It was late.", "The bell rang."]
    few = "".join(
        f"{k}\n00:00:0{k},000 --> 00:00:0{k},500\n{line}\n\n" for k, line in enumerate(lines)
    )
    assert converter.convert(few.encode(), "film.srt").markdown.startswith("[00:00:00] Note: the")


def test_rolling_captions_are_written_once(converter: DocumentConverter) -> None:
    """Caption sites repeat each line in the next cue and time every word; the text reads
    once, without the word timings, the positions or the header's Kind and Language."""
    document = convert(converter, "captions.vtt")
    assert document.markdown == (
        "[00:00:00] so today we're looking at sourdough starters and hydration a starter at "
        "hundred percent hydration"
    )


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_subrip_subtitles_in_either_encoding(converter: DocumentConverter, encoding: str) -> None:
    """SubRip with Windows line ends, an italic tag and a pause; as Windows Notepad saves it
    in UTF-16 too."""
    data = (TEXT / "interview.srt").read_bytes().decode("utf-8").encode(encoding)
    assert converter.convert(data, "interview.srt").markdown == INTERVIEW


def test_a_file_without_cues_is_refused_by_what_it_lacks(converter: DocumentConverter) -> None:
    with pytest.raises(ConversionError, match=r"no cues .*WebVTT or SubRip"):
        converter.convert(b"WEBVTT\n\nNOTE only a note\n", "empty.vtt")


def test_a_latex_paper_reads_as_its_words_under_its_headings(
    converter: DocumentConverter, chunker: Chunker
) -> None:
    document = convert(converter, "paper.tex")
    markdown = document.markdown
    assert document.title == "Cold-Start Retrieval with Sparse Priors"
    assert markdown.startswith(
        "# Cold-Start Retrieval with Sparse Priors\n\nAda Kovacs, Jun Watanabe Example "
        "University\n\n## Abstract\n\nWe study retrieval when no relevance labels exist."
    )
    for kept in (
        "improves nDCG@10 by 4.2% on average.",  # an escaped % is text, a comment is not
        "labelled pairs [karpukhin2020dense,izacard2021].",  # citations keep their keys
        "see Section [sec:method].",
        "by its document frequency $\\mathrm{df}(t)$:",
        "$$\nw(t) = \\log \\frac{N}{\\mathrm{df}(t)}\n$$",
        "- Terms in titles count twice.\n- **Stop words** are dropped.",
        "The retrieval pipeline from query to ranked list.",  # a caption
        "We thank the reviewers. (And the coffee machine on floor three.)",  # a footnote
        "Code and data: [the project page](https://example.org/cold-start).",
    ):
        assert kept in markdown
    for gone in ("TODO", "preamble macro", "usepackage", "\\label", "pipeline.pdf", "refs"):
        assert gone not in markdown
    paths = {tuple(chunk.headings) for chunk in chunker.chunk(markdown)}
    assert ("Cold-Start Retrieval with Sparse Priors", "Method", "Sparse prior") in paths
    assert ("Cold-Start Retrieval with Sparse Priors", "Acknowledgements") in paths


MACROS = rb"""\documentclass{article}
\newcommand{\sys}{FooNet}
\newcommand*\eg{e.g.,\xspace}
\def\etal{et al.}
\newcommand{\norm}[1]{\lVert #1 \rVert}
\newcommand{\tuned}[2][base]{#2 (#1 setting)}
\providecommand{\full}{\sys{} with \norm{w}}
\newcommand{\loop}{\loop\loop}
\title{The \sys{} Retriever}
\begin{document}
\maketitle
\section{Why \sys}
We present \sys, a retriever. Prior work (Smith \etal) uses BM25, \eg Lucene.
The weights \norm{x} and \norm y are bounded; \tuned{recall} and \tuned[large]{MRR}.
In short: \full. Then \loop.
\end{document}
"""


def test_a_papers_own_macros_are_expanded(converter: DocumentConverter) -> None:
    document = converter.convert(MACROS, "macros.tex")
    assert document.title == "The FooNet Retriever"
    assert document.markdown == (
        "# The FooNet Retriever\n\n## Why FooNet\n\n"
        "We present FooNet, a retriever. Prior work (Smith et al.) uses BM25, e.g., Lucene.\n"
        "The weights \\lVert x \\rVert and \\lVert y \\rVert are bounded; recall (base "
        "setting) and MRR (large setting).\n"
        "In short: FooNet with \\lVert w \\rVert. Then " + "\\loop" * 16 + "."
    )


def test_an_org_outline_becomes_markdown_headings(
    converter: DocumentConverter, chunker: Chunker
) -> None:
    """Headings without their tags, drawers and keywords gone, a quote, a link, and a code
    block whose `*` line stays code."""
    document = convert(converter, "notes.org")
    assert document.markdown == NOTES
    assert document.title == "Garden Journal"
    paths = {tuple(chunk.headings) for chunk in chunker.chunk(document.markdown)}
    assert ("Spring planting", "Watering schedule") in paths


def saved_page(html: str) -> bytes:
    """A page as Chrome's "Webpage, Single File" writes it: multipart/related, the HTML
    quoted-printable, an image beside it."""
    page = email.mime.multipart.MIMEMultipart("related", type="text/html")
    page["From"] = "<Saved by Blink>"
    page["Snapshot-Content-Location"] = "https://example.org/blog"
    charset = email.charset.Charset("utf-8")
    charset.body_encoding = email.charset.QP
    page.attach(email.mime.text.MIMEText(html, "html", charset))
    page.attach(email.mime.image.MIMEImage(b"\x89PNG\r\n\x1a\n" + bytes(40), "png"))
    return page.as_bytes()


def test_a_saved_web_page_reads_as_the_page(converter: DocumentConverter) -> None:
    html = (SHARED / "markitdown" / "test_blog.html").read_bytes()
    as_html = converter.convert(html, "test_blog.html")
    for name in ("post.mhtml", "post.mht"):
        document = converter.convert(saved_page(html.decode("utf-8")), name)
        assert (document.markdown, document.title) == (as_html.markdown, as_html.title)
        assert document.file_type == name.rsplit(".", 1)[1]
        assert "Skip to main content" not in document.markdown  # the page's furniture


def test_a_saved_page_without_html_is_refused(converter: DocumentConverter) -> None:
    with pytest.raises(ConversionError, match=r"no HTML page .*saved as a single file"):
        converter.convert(b"From: someone\nContent-Type: text/plain\n\nhello\n", "note.mht")


def test_folder_scans_take_the_new_formats() -> None:
    assert {".tex", ".ltx", ".org", ".vtt", ".srt", ".mhtml", ".mht"} <= SCANNED_EXTENSIONS


def test_a_long_talk_without_punctuation_has_a_time_every_so_often(
    converter: DocumentConverter,
) -> None:
    """Automatic captions have no sentence ends: paragraphs still end, so that chunks deep in
    a talk carry times; no word is lost."""

    def stamp(seconds: int) -> str:
        return f"00:{seconds // 60:02d}:{seconds % 60:02d},000"

    cues = [
        f"{k}\n{stamp(2 * k)} --> {stamp(2 * k + 2)}\n"
        f"and then the speaker talks about topic number {k}\n"
        for k in range(90)
    ]
    document = converter.convert("\n".join(cues).encode(), "talk.srt")
    paragraphs = document.markdown.split("\n\n")
    assert len(paragraphs) >= 3
    assert all(len(p) < 1600 for p in paragraphs)
    assert paragraphs[0].startswith("[00:00:00] and then") and paragraphs[1].startswith("[00:")
    assert all(f"topic number {k}" in document.markdown for k in range(90))
