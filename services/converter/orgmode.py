"""Org mode notes (`.org`, Emacs) as Markdown: `* Heading` lines become `# Heading`, so a
chunk carries its outline path as a Markdown note's does.

What changes: headings (their trailing `:tags:` dropped, task states and priorities kept as
words), source and example blocks as fenced code, quote blocks as `>` quotes, links as
Markdown links, and `#+TITLE:` as the title. What goes: other `#+KEYWORD:` lines, comment
lines, and property and log drawers. Everything else (lists, tables, emphasis, timestamps)
reads the same in both.
"""

from __future__ import annotations

import re

_HEADING = re.compile(r"^(\*+)\s+(.*?)(?:\s+:[\w@#%:]+:)?\s*$")
_KEYWORD = re.compile(r"^\s*#\+(\w+):\s*(.*)$")
_BLOCK = re.compile(r"^\s*#\+(begin|end)_(\w+)\s*(\S*)", re.IGNORECASE)
_COMMENT = re.compile(r"^\s*#(?:\s|$)")
_DRAWER = re.compile(r"^\s*:(?!END:)[A-Z]+:\s*$")
_DRAWER_END = re.compile(r"^\s*:END:\s*$", re.IGNORECASE)
_LINK = re.compile(r"\[\[([^\[\]]+)\](?:\[([^\[\]]+)\])?\]")


def org_markdown(text: str, name: str) -> tuple[str, str]:
    """The Markdown of the Org document `text`, and its `#+TITLE:` ('' when it has none)."""
    title = ""
    lines: list[str] = []
    block = ""  # the block being read: "src", "example", "quote", another name, or none
    drawer = False
    for line in text.splitlines():
        edge = _BLOCK.match(line)
        if edge:
            block = _block_edge(edge, block, lines)
            continue
        if block in ("src", "example"):
            lines.append(line)
            continue
        if drawer:
            drawer = not _DRAWER_END.match(line)
            continue
        if _DRAWER.match(line):
            drawer = True
            continue
        keyword = _KEYWORD.match(line)
        if keyword:
            if keyword.group(1).lower() == "title" and not title:
                title = keyword.group(2).strip()
            continue
        if _COMMENT.match(line):
            continue
        line = _LINK.sub(_link, line)
        heading = _HEADING.match(line)
        if heading:
            line = f"{'#' * min(len(heading.group(1)), 6)} {heading.group(2)}"
        lines.append(f"> {line}" if block == "quote" else line)
    body = "\n".join(lines).strip()
    return (f"# {title}\n\n{body}" if title else body), title


def _block_edge(edge: re.Match[str], block: str, lines: list[str]) -> str:
    """Writes a fence for a code block's edge; the block being read after it."""
    begins, kind = edge.group(1).lower() == "begin", edge.group(2).lower()
    if kind in ("src", "example"):
        lines.append(f"```{edge.group(3) if begins and kind == 'src' else ''}")
    return kind if begins else ""


def _link(found: re.Match[str]) -> str:
    target, label = found.group(1), found.group(2)
    return f"[{label}]({target})" if label else f"<{target}>"
