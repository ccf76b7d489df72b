"""Markdown headings: ATX (`#`..`######`) and setext underlines, outside fenced code.

The chunker cuts sections at them and remembers each chunk's heading path; the converter
takes a document's title from the first one, or before it from the `title` of the front
matter that notes and static-site pages open with (YAML between `---` lines, TOML between
`+++` lines: Obsidian, Jekyll, Hugo, Docusaurus).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT_H1 = re.compile(r"^ {0,3}={2,}[ \t]*$")
_SETEXT_H2 = re.compile(r"^ {0,3}-{3,}[ \t]*$")
_NOT_SETEXT_TEXT = re.compile(r"^\s*([-*+>|]|\d+[.)]\s|<!--)")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_HEADING_NOISE = re.compile(r"[*_`\u200b-\u200d\u2060\ufeff]")
_FRONT_MATTER = re.compile(r"\A(---|\+\+\+)[ \t]*\n(.*?)\n(?:\1|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
# A top-level `title: ...` (YAML) or `title = ...` (TOML), quoted or not.
_FRONT_TITLE = re.compile(r"""^title[ \t]*[:=][ \t]*(["']?)(.*?)\1[ \t]*$""", re.M | re.I)


def clean_heading(raw: str) -> str:
    """Heading text without link targets, emphasis markers and zero-width characters."""
    text = _LINK.sub(r"\1", raw)
    text = _HEADING_NOISE.sub("", text)
    return " ".join(text.split())


def _is_setext_text(lines: list[str], k: int) -> bool:
    line = lines[k]
    if not line.strip() or _NOT_SETEXT_TEXT.match(line) or _FENCE.match(line):
        return False
    return k == 0 or not lines[k - 1].strip()


def _heading_at(lines: list[str], k: int) -> tuple[int, str] | None:
    match = _ATX.match(lines[k])
    if match:
        return len(match.group(1)), clean_heading(match.group(2))
    if k + 1 < len(lines) and _is_setext_text(lines, k):
        if _SETEXT_H1.match(lines[k + 1]):
            return 1, clean_heading(lines[k])
        if _SETEXT_H2.match(lines[k + 1]):
            return 2, clean_heading(lines[k])
    return None


class HeadingScanner:
    """Walks lines, tracking fenced code so `# comment` inside code is not a heading."""

    def __init__(self) -> None:
        self._fence: str | None = None

    def heading(self, lines: list[str], k: int) -> tuple[int, str] | None:
        line = lines[k]
        if self._fence is not None:
            stripped = line.strip()
            if stripped.startswith(self._fence) and not stripped.strip(self._fence[0]):
                self._fence = None
            return None
        fence = _FENCE.match(line)
        if fence:
            self._fence = fence.group(1)
            return None
        found = _heading_at(lines, k)
        return found if found is not None and found[1] else None


def iter_headings(markdown: str) -> Iterator[tuple[int, str]]:
    """(level, text) of every heading outside fenced code, in order."""
    lines = markdown.split("\n")
    scanner = HeadingScanner()
    for k in range(len(lines)):
        found = scanner.heading(lines, k)
        if found is not None:
            yield found


def demoted(markdown: str, by: int) -> str:
    """`markdown` with every heading outside fenced code `by` levels lower (at most level
    6), setext headings written as ATX ones (their underline left as an empty line, so the
    line count stays): what a document becomes under a heading of its own."""
    lines = markdown.split("\n")
    scanner = HeadingScanner()
    for k in range(len(lines)):
        found = scanner.heading(lines, k)
        if found is None:
            continue
        level = min(6, found[0] + by)
        atx = _ATX.match(lines[k])
        if atx is not None:
            lines[k] = "#" * level + lines[k][atx.end(1) :]
        else:  # a setext heading: the text line, then its underline
            lines[k], lines[k + 1] = "#" * level + " " + lines[k].strip(), ""
    return "\n".join(lines)


def first_heading(markdown: str, max_level: int = 1) -> str:
    for level, text in iter_headings(markdown):
        if level <= max_level:
            return text
    return ""


def front_matter_title(markdown: str) -> str:
    """The `title` of the front matter `markdown` opens with; "" if none (or a YAML block
    scalar, `|` or `>`, which this does not read)."""
    block = _FRONT_MATTER.match(markdown)
    found = _FRONT_TITLE.search(block.group(2)) if block else None
    title = clean_heading(found.group(2)) if found else ""
    return "" if title[:1] in ("|", ">") else title
