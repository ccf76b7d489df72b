"""OpenDocument files (LibreOffice, OpenOffice, Google Docs' and Microsoft Office's "Save as
ODF") as Markdown: `.odt` text, `.ods` spreadsheets and `.odp` presentations.

An OpenDocument file is a ZIP container (its size bounds checked by `archive` before this
runs) holding `content.xml`, the body, and `meta.xml`, whose `dc:title` is the document's
title. The body is walked in document order:

- text: headings (`text:h`, and paragraphs whose style descends from a heading style or the
  Title style, as a converted .docx or .html writes them) as `#` headings; paragraphs; lists as
  `-` or `1.` items, nested by indentation; tables as Markdown tables whose first row is the
  header; links as `[text](href)`; footnotes as `[^n]` marks with their text at the end;
  text boxes and sections in place. Tables of contents, tracked deletions, hidden text (a
  text style that does not display) and comments are left out: they repeat or are not the
  text;
- spreadsheets: each sheet with text as `## Sheet name` and one table (repeated cells are
  expanded, empty rows and trailing empty columns dropped), the shape markitdown gives .xlsx,
  so that sheets become pages the same way; hidden sheets are left out;
- presentations: each slide after `<!-- Slide number: N -->`, its title shape as `#`, its
  other shapes' text and tables, then `### Notes:` and the speaker notes, as markitdown gives
  .pptx, so that slides become pages the same way.

XML is parsed with defusedxml (no DTDs, no entities). A password-protected file is refused
with what to do instead.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from xml.etree.ElementTree import Element

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import ParseError, fromstring

from libs.errors import ConversionError
from libs.tables import markdown_sheet, markdown_table
from services.converter.archive import is_zip, open_zip

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "style": "urn:oasis:names:tc:opendocument:xmlns:style:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "xlink": "http://www.w3.org/1999/xlink",
    "dc": "http://purl.org/dc/elements/1.1/",
    "manifest": "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0",
}
# More copies of one repeated cell or row than this are not written out (a sheet's "the rest
# of the row is this value" runs to 16,384 columns).
_MAX_REPEAT = 256
_HEADING_STYLE = re.compile(r"^Heading[ _](?:20_)?(\d)$")
_SKIPPED = {
    "text:table-of-content", "text:alphabetical-index", "text:illustration-index",
    "text:tracked-changes", "office:annotation", "office:annotation-end", "text:note-citation",
    "text:sequence-decls", "office:forms", "draw:image",
}  # fmt: skip


def _q(name: str) -> str:
    """`prefix:local` as ElementTree's `{namespace}local`."""
    prefix, local = name.split(":")
    return f"{{{_NS[prefix]}}}{local}"


def _is(element: Element, name: str) -> bool:
    return element.tag == _q(name)


def _attr(element: Element, name: str, default: str = "") -> str:
    return element.get(_q(name), default)


_SKIP_TAGS = frozenset(_q(name) for name in _SKIPPED)
_ROW_GROUPS = frozenset(
    _q(name) for name in ("table:table-header-rows", "table:table-rows", "table:table-row-group")
)


def opendocument_markdown(data: bytes, name: str) -> tuple[str, str]:
    """The Markdown of the OpenDocument file `data` and its title ('' when it has none):
    a package (a ZIP of content.xml, styles.xml, meta.xml) or a flat XML file (`.fodt`,
    `.fods`, `.fodp`: the three in one `office:document`)."""
    content: Element | None
    styles: Element | None
    meta: Element | None
    if not is_zip(data) and data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
        content = styles = meta = _parse(data, "XML", name)
    else:
        with open_zip(data, name) as archive:
            _refuse_encrypted(archive, name)
            content = _xml(archive, "content.xml", name)
            styles = _xml(archive, "styles.xml", name)
            meta = _xml(archive, "meta.xml", name)
    body = None if content is None else content.find(_q("office:body"))
    if content is None or body is None:
        raise ConversionError(
            f"could not convert '{name}': it has no content.xml (or flat XML document) with a "
            "body, so it is not an OpenDocument file; check that it opens in LibreOffice"
        )
    title_element = None if meta is None else meta.find(f".//{_q('dc:title')}")
    title = "" if title_element is None else "".join(title_element.itertext()).strip()
    writer = _Writer(_Styles({id(r): r for r in (content, styles) if r is not None}.values()))
    try:
        for kind in body:
            if _is(kind, "office:spreadsheet"):
                writer.sheets(kind)
            elif _is(kind, "office:presentation") or _is(kind, "office:drawing"):
                writer.slides(kind)
            else:
                writer.blocks(kind)
    except RecursionError:
        raise ConversionError(
            f"could not convert '{name}': its sections, lists or frames are nested hundreds "
            "deep, which no editor writes; the file is damaged or made to break readers"
        ) from None
    return writer.markdown(), title


def _refuse_encrypted(archive: zipfile.ZipFile, name: str) -> None:
    manifest = _xml(archive, "META-INF/manifest.xml", name)
    if manifest is not None and manifest.find(f".//{_q('manifest:encryption-data')}") is not None:
        raise ConversionError(
            f"could not convert '{name}': it is password-protected; open it, save a copy "
            "without a password and ingest that"
        )


def _xml(archive: zipfile.ZipFile, member: str, name: str) -> Element | None:
    """The parsed `member`; None if the file has none."""
    try:
        raw = archive.read(member)
    except KeyError:
        return None
    except (zipfile.BadZipFile, OSError, ValueError, RuntimeError) as exc:
        raise ConversionError(
            f"could not convert '{name}': {member} is unreadable ({exc})"
        ) from exc
    return _parse(raw, member, name)


def _parse(raw: bytes, member: str, name: str) -> Element:
    try:
        parsed: Element = fromstring(raw)
        return parsed
    except (ParseError, DefusedXmlException) as exc:
        raise ConversionError(
            f"could not convert '{name}': its {member} is not well-formed XML ({exc}); the "
            "file is corrupt, check that it opens in LibreOffice"
        ) from exc


class _Styles:
    """Which paragraph styles are headings (and of what level), and which list styles number
    their items, from the automatic styles of content.xml and the styles of styles.xml."""

    def __init__(self, roots: Iterable[Element]) -> None:
        self.parent: dict[str, str] = {}
        self.level: dict[str, int] = {}
        self.numbered: dict[str, set[int]] = {}
        self.hidden: set[str] = set()  # text styles that do not display their text
        self.hidden_tables: set[str] = set()  # sheet styles of hidden sheets
        for root in roots:
            for style in root.iter(_q("style:style")):
                name = _attr(style, "style:name")
                properties = style.find(_q("style:text-properties"))
                if properties is not None and _attr(properties, "text:display") == "none":
                    self.hidden.add(name)
                table = style.find(_q("style:table-properties"))
                if table is not None and _attr(table, "table:display") == "false":
                    self.hidden_tables.add(name)
                self.parent[name] = _attr(style, "style:parent-style-name")
                level = _attr(style, "style:default-outline-level")
                if level.isdigit():
                    self.level[name] = int(level)
            for list_style in root.iter(_q("text:list-style")):
                levels = {
                    int(_attr(s, "text:level", "1"))
                    for s in list_style
                    if _is(s, "text:list-level-style-number") and _attr(s, "style:num-format")
                }
                self.numbered[_attr(list_style, "style:name")] = levels

    def heading_level(self, style: str) -> int:
        """The heading level of paragraph style `style` (0: not a heading)."""
        for _ in range(16):  # a parent chain is short; this bounds a cyclic one
            if not style:
                return 0
            if style in self.level:
                return min(self.level[style], 6)
            if style == "Title":
                return 1
            if match := _HEADING_STYLE.match(style):
                return min(int(match.group(1)), 6) or 1
            style = self.parent.get(style, "")
        return 0


@dataclass
class _Writer:
    styles: _Styles
    blocks_out: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> str:
        parts = [b for b in self.blocks_out if b.strip()]
        if self.notes:
            parts.append("\n".join(f"[^{n}]: {text}" for n, text in enumerate(self.notes, 1)))
        return "\n\n".join(parts)

    # -------------------------------------------------------------------- text documents

    def blocks(self, parent: Element, *, depth: int = 0, list_style: str = "") -> None:
        after_list = False
        for child in parent:
            if child.tag in _SKIP_TAGS:
                continue
            # Lists side by side are one list (a slide writes each item's level as its own).
            joined, after_list = after_list and _is(child, "text:list"), _is(child, "text:list")
            if _is(child, "text:h"):
                level = int(_attr(child, "text:outline-level", "1") or 1)
                self._heading(min(max(level, 1), 6), child)
            elif _is(child, "text:p"):
                level = self.styles.heading_level(_attr(child, "text:style-name"))
                if level:
                    self._heading(level, child)
                else:
                    self.blocks_out.append(self.inline(child))
                    self._frames(child, depth)
            elif _is(child, "text:list"):
                style = _attr(child, "text:style-name") or list_style
                self._list(child, depth, style, joined=joined)
            elif _is(child, "table:table"):
                self.blocks_out.append(markdown_table(self._rows(child)))
            else:  # sections, text boxes, frames, groups: their blocks in place
                self.blocks(child, depth=depth, list_style=list_style)

    def _heading(self, level: int, element: Element) -> None:
        text = self.inline(element)
        if text:
            self.blocks_out.append(f"{'#' * level} {text}")

    def _frames(self, paragraph: Element, depth: int) -> None:
        """Text boxes anchored in a paragraph (a drawing's caption, a sidebar)."""
        for box in paragraph.iter(_q("draw:text-box")):
            self.blocks(box, depth=depth)

    def _list(self, element: Element, depth: int, style: str, *, joined: bool = False) -> None:
        """A list as one block of `-` or `1.` items, nested lists indented under theirs;
        `joined` continues the block of the list just before."""
        lines: list[str] = []
        self._items(element, depth, style, lines)
        if joined and self.blocks_out and lines:
            self.blocks_out[-1] += "\n" + "\n".join(lines)
        else:
            self.blocks_out.append("\n".join(lines))

    def _items(self, element: Element, depth: int, style: str, lines: list[str]) -> None:
        numbered = depth + 1 in self.styles.numbered.get(style, set())
        number = int(_attr(element, "text:start-value", "1") or 1) if numbered else 0
        indent = "   " * depth if numbered else "  " * depth
        for item in element:
            if not (_is(item, "text:list-item") or _is(item, "text:list-header")):
                continue
            marker = f"{number}. " if numbered else "- "
            number += 1
            first = True
            for child in item:
                if _is(child, "text:list"):
                    nested = _attr(child, "text:style-name") or style
                    self._items(child, depth + 1, nested, lines)
                elif (_is(child, "text:p") or _is(child, "text:h")) and (
                    text := self.inline(child)
                ):
                    lead = marker if first else " " * len(marker)
                    lines.append(f"{indent}{lead}{text}")
                    first = False

    def inline(self, element: Element) -> str:
        """The text of a paragraph or heading, with links, spaces, tabs, breaks and
        footnote marks."""
        return re.sub(r"[ \t]+\n|[ \t]{2,}", _collapse, "".join(self._inline(element))).strip()

    def _inline(self, element: Element) -> Iterator[str]:
        if element.text:
            yield element.text
        for child in element:
            if child.tag in _SKIP_TAGS or _is(child, "draw:frame"):
                pass
            elif _is(child, "text:span") and _attr(child, "text:style-name") in self.styles.hidden:
                pass  # hidden text
            elif _is(child, "text:s"):
                yield " " * min(int(_attr(child, "text:c", "1") or 1), 8)
            elif _is(child, "text:tab"):
                yield "\t"
            elif _is(child, "text:line-break"):
                yield "\n"
            elif _is(child, "text:a"):
                text = "".join(self._inline(child)).strip()
                href = _attr(child, "xlink:href")
                yield f"[{text}]({href})" if text and href and not href.startswith("#") else text
            elif _is(child, "text:note"):
                body = child.find(_q("text:note-body"))
                if body is not None:
                    texts = [self.inline(p) for p in body.iter(_q("text:p"))]
                    self.notes.append(" ".join(t for t in texts if t))
                    yield f"[^{len(self.notes)}]"
            else:
                yield from self._inline(child)
            if child.tail:
                yield child.tail

    # -------------------------------------------------------------------------- tables

    def _rows(self, table: Element) -> list[list[str]]:
        """The table's rows of cell texts: repeats expanded (up to `_MAX_REPEAT`), empty
        rows and trailing empty cells dropped."""
        rows: list[list[str]] = []
        for row in _table_rows(table):
            cells: list[str] = []
            for cell in row:
                if not (_is(cell, "table:table-cell") or _is(cell, "table:covered-table-cell")):
                    continue
                texts = [self.inline(p) for p in cell if _is(p, "text:p") or _is(p, "text:h")]
                text = " ".join(t for t in texts if t).replace("\n", " ")
                cells += [text] * _repeat(cell, "table:number-columns-repeated")
            while cells and not cells[-1]:
                cells.pop()
            if cells:
                rows += [cells] * _repeat(row, "table:number-rows-repeated")
        return rows

    def sheets(self, spreadsheet: Element) -> None:
        for sheet in (s for s in spreadsheet if _is(s, "table:table")):
            if _attr(sheet, "table:style-name") in self.styles.hidden_tables:
                continue  # a hidden sheet, as the Excel reader leaves them out
            rows = self._rows(sheet)
            if rows:
                name = _attr(sheet, "table:name") or f"Sheet{len(self.blocks_out) + 1}"
                self.blocks_out.append(markdown_sheet(name, rows))

    # --------------------------------------------------------------------- presentations

    def slides(self, presentation: Element) -> None:
        pages = [p for p in presentation if _is(p, "draw:page")]
        for number, page in enumerate(pages, start=1):
            self.blocks_out.append(f"<!-- Slide number: {number} -->")
            notes: Element | None = None
            for shape in page:
                if _is(shape, "presentation:notes"):
                    notes = shape
                elif _attr(shape, "presentation:class") == "title":
                    lines = [self.inline(p) for p in shape.iter(_q("text:p"))]
                    if title := " ".join(t for t in lines if t):
                        self.blocks_out.append(f"# {title}")
                else:
                    self.blocks(shape)
            if notes is not None:
                before = len(self.blocks_out)
                for frame in notes:
                    if _attr(frame, "presentation:class") == "notes":
                        self.blocks(frame)
                if len(self.blocks_out) > before and any(self.blocks_out[before:]):
                    self.blocks_out.insert(before, "### Notes:")


def _table_rows(table: Element) -> Iterator[Element]:
    for child in table:
        if _is(child, "table:table-row"):
            yield child
        elif child.tag in _ROW_GROUPS:
            yield from _table_rows(child)


def _repeat(element: Element, attribute: str) -> int:
    value = _attr(element, attribute, "1")
    return min(int(value), _MAX_REPEAT) if value.isdigit() and int(value) > 0 else 1


def _collapse(match: re.Match[str]) -> str:
    return "\n" if "\n" in match.group(0) else " "
