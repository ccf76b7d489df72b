"""A PDF's bookmarks as headings (`services.converter.pdfoutline`): where a title is on its
page it becomes a heading at its outline depth; where it is not, nothing is guessed."""

from __future__ import annotations

from services.converter.pdfoutline import Bookmark, with_headings, without_contents

RUNNING = "ACME ANNUAL REPORT 2026\n3"


def test_titles_on_their_pages_become_headings_at_their_depth() -> None:
    pages = [
        f"{RUNNING}\nContents\n1 Overview ..... 2\n1.1 Scope ..... 2",
        f"{RUNNING}\n1  OVERVIEW\nWe grew.\n1.1 Scope:\nAll units.",
        f"{RUNNING}\nfigures",
    ]
    marks = [Bookmark(0, "1 Overview", 1), Bookmark(1, "1.1 Scope", 1)]
    assert with_headings(pages, marks) == [
        pages[0],  # the table of contents lists the titles on another page
        f"{RUNNING}\n# 1  OVERVIEW\nWe grew.\n## 1.1 Scope:\nAll units.",
        pages[2],
    ]


def test_a_wrapped_title_becomes_one_heading_line() -> None:
    pages = ["Intro text\nEmerging Standards that Address\nOverreliance on Proprietary APIs\nBody"]
    marks = [
        Bookmark(2, "B.3.4 Emerging Standards that Address Overreliance on Proprietary APIs", 0)
    ]
    assert with_headings(pages, marks) == pages  # the number is on the page or not at all
    marks = [Bookmark(2, "Emerging Standards that Address Overreliance on Proprietary APIs", 0)]
    assert with_headings(pages, marks) == [
        "Intro text\n### Emerging Standards that Address Overreliance on Proprietary APIs\nBody"
    ]


def test_a_section_number_the_bookmark_leaves_out() -> None:
    """LaTeX's bookmarks name the section without its number; the page writes it."""
    pages = ["Text before.\n2 Sattelpunkte und Wert eines Spiels\nDefinition 2.1."]
    marks = [Bookmark(0, "Sattelpunkte und Wert eines Spiels", 0)]
    assert with_headings(pages, marks) == [
        "Text before.\n# 2 Sattelpunkte und Wert eines Spiels\nDefinition 2.1."
    ]


def test_a_label_the_page_draws_apart_and_a_bookmark_one_page_early() -> None:
    pages = ["end of chapter 1", "Acronyms\nAPI Application programming interface"]
    marks = [Bookmark(0, "Appendix B— Acronyms", 0)]  # points at the page before
    assert with_headings(pages, marks)[1] == "# Acronyms\nAPI Application programming interface"


def test_each_bookmark_is_looked_for_below_the_one_before() -> None:
    """The second "Results" heading is the one under "Method B", not the first again."""
    page = "Method A\nResults\nfast\nMethod B\nResults\nslow"
    marks = [
        Bookmark(0, "Method A", 0),
        Bookmark(1, "Results", 0),
        Bookmark(0, "Method B", 0),
        Bookmark(1, "Results", 0),
    ]
    assert with_headings([page], marks) == [
        "# Method A\n## Results\nfast\n# Method B\n## Results\nslow"
    ]


def test_titles_not_on_the_page_are_passed_over() -> None:
    pages = ["A slide\nSection one Section two Section three\nbody", "last"]
    marks = [
        Bookmark(0, "Section two", 0),  # inside a navigation bar, not a line of its own
        Bookmark(0, "Nowhere", 1),
        Bookmark(0, "   ", 0),
        Bookmark(9, "body", 0),  # deeper than Markdown goes: level 6
    ]
    assert with_headings(pages, marks) == [
        "A slide\nSection one Section two Section three\n###### body",
        "last",
    ]
    assert with_headings([], []) == []


CONTENTS = """REPORT 2026
Table of Contents
Executive Summary ............................ iv
1 Introduction ............................... 1
1.1 Scope of the Review and the Questions It
Answers ....................................... 2
2 Findings . . . . . . . . . . . . . . . . . . . 5
List of Figures
Figure 1: Sites .............................. 3
Figure 2: Counts ............................. 6
Figure 3: Trends ............................. 7
3.1 A section continued on the next page of the"""


def test_a_printed_table_of_contents_is_left_out() -> None:
    """Dot leaders (dotted with spaces too), roman and arabic page numbers, an entry wrapped
    over two lines, a list of figures starting the count again, an entry cut by the page."""
    pages = [CONTENTS, *["text"] * 9]
    assert without_contents(pages)[0] == "REPORT 2026"  # "List of Figures" between entries too
    assert without_contents(pages)[1:] == pages[1:]


def test_dot_leaders_that_are_not_page_numbers_stay() -> None:
    menu = "Espresso ........ 3\nTea ........ 2\nCake ........ 4\nJuice ........ 3"
    form = "Name ........ 12\nStreet ........ 40\nTown ........ 75"  # past the last page
    one = "See the annex ........ 4\nand more text"
    pages = [menu, form, one, *["text"] * 7]
    assert without_contents(pages) == pages


def test_a_damaged_outline_gives_the_bookmarks_read_before_it() -> None:
    """pdfium raises on an outline entry it cannot read: the text is still converted, with
    the headings found so far (a PDF-shaped object here: no tool at hand writes a broken
    outline)."""
    import pypdfium2 as pdfium

    from services.converter.pdfoutline import outline

    class Entry:
        level = 0

        def get_dest(self) -> Entry:
            return self

        def get_index(self) -> int:
            return 1

        def get_title(self) -> str:
            return " Results  of the survey "

    class Damaged:
        def __len__(self) -> int:
            return 3

        def get_toc(self, max_depth: int):  # type: ignore[no-untyped-def]
            yield Entry()
            raise pdfium.PdfiumError("bad bookmark")

    assert outline(Damaged()) == [Bookmark(0, "Results of the survey", 1)]  # type: ignore[arg-type]
