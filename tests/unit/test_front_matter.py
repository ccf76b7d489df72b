"""A note's title from its front matter (`services.converter.headings.front_matter_title`),
as Obsidian, Jekyll, Hugo and Docusaurus write it; before the first heading, after a title the
format itself carries."""

from __future__ import annotations

import pytest

from services.converter.archive import ArchiveLimits
from services.converter.convert import DocumentConverter
from services.converter.headings import front_matter_title

NOTE = "---\ntitle: Sourdough, week 3\ntags: [baking]\ndate: 2024-01-02\n---\n\n# Log\n\nFed it.\n"


@pytest.mark.parametrize(
    ("markdown", "title"),
    [
        (NOTE, "Sourdough, week 3"),
        ('---\ntitle: "Quoted: with a colon"\n---\nbody\n', "Quoted: with a colon"),
        ("---\nTitle: 'single quotes'\n...\nbody\n", "single quotes"),
        ('+++\ntitle = "From TOML"\ndraft = false\n+++\n\nbody\n', "From TOML"),
        ("---\ntitle: A *bold* [link](x.md)\n---\n", "A bold link"),
        ("---\ntags: [x]\n---\n# Only a heading\n", ""),
        ("---\ntitle: >-\n  folded text\n---\n", ""),  # a block scalar: not read
        ("---\nauthor:\n  title: nested key\n---\n", ""),
        ("text first\n---\ntitle: not front matter\n---\n", ""),
        ("---\ntitle: never closed\n\nbody\n", ""),
        ("+++\ntitle = mixed fences\n---\n", ""),
    ],
)
def test_the_title_of_the_front_matter(markdown: str, title: str) -> None:
    assert front_matter_title(markdown) == title


def test_a_notes_title_comes_before_its_first_heading() -> None:
    converter = DocumentConverter(ArchiveLimits(20, 1_000_000, 2))
    assert converter.convert(NOTE.encode(), "2024-01-02.md").title == "Sourdough, week 3"
    plain = "---\ntags: [x]\n---\n# Only a heading\n"
    assert converter.convert(plain.encode(), "x.md").title == "Only a heading"
