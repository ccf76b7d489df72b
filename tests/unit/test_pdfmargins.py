"""Running headers, footers and page numbers left out of a PDF's pages but for the first
time (`services.converter.pdfmargins`)."""

from __future__ import annotations

from services.converter.pdfmargins import without_running_lines

TOPICS = ["grebes", "herons", "coots", "swans", "terns", "rails", "gulls"]


def body(k: int) -> str:
    """Eight lines no other page has (numbers would not tell pages apart: they are one)."""
    return "\n".join(f"On {TOPICS[k]}, note {word}." for word in "abcdefgh")


def page(number: int, roman: bool = False) -> str:
    label = ["i", "ii", "iii", "iv", "v"][number - 1] if roman else str(number)
    return (
        f"ACME SP 800-9 ANNUAL  REPORT\n{label}\nBody text on {TOPICS[number]}.\n{body(number)}\n"
        f"Page {number} of 5"
    )


def test_headers_footers_and_page_numbers_go_but_the_first_header_stays() -> None:
    """The same header in other spacing, roman and arabic page numbers, a footer whose
    number changes."""
    pages = [page(1, roman=True), page(2, roman=True), page(3), page(4), page(5)]
    assert without_running_lines(pages) == [
        f"ACME SP 800-9 ANNUAL  REPORT\nBody text on {TOPICS[1]}.\n{body(1)}\nPage 1 of 5",
        *(f"Body text on {TOPICS[n]}.\n{body(n)}" for n in range(2, 6)),
    ]


def test_a_line_repeated_inside_pages_or_on_few_pages_stays() -> None:
    """Only the lines at a page's edges count, and only when half the pages have them; a
    slide's few lines are not its margins."""
    pages = [
        f"Chapter on {TOPICS[k]}\n{body(k)}\nThe same sentence in the middle.\n{body(k)}"
        for k in range(4)
    ]
    assert without_running_lines(pages) == pages
    notes = [f"Draft\n{body(k)}" if k < 2 else f"Final {TOPICS[k]}\n{body(k)}" for k in range(7)]
    assert without_running_lines(notes)[:2] == notes[:2]  # "Draft" on 2 of 7 pages
    slides = [f"Agenda\nWhy we met\nWhat we chose\nNext steps {k}" for k in range(5)]
    assert without_running_lines(slides) == slides


def test_short_documents_are_left_as_they_are() -> None:
    pages = ["Header\n1\ntext a", "Header\n2\ntext b"]
    assert without_running_lines(pages) == pages
    assert without_running_lines([]) == []
