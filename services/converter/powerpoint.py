"""PowerPoint 97-2003 presentations (`.ppt`, [MS-PPT]) as Markdown, in markitdown's `.pptx`
shape: each slide after `<!-- Slide number: N -->`, so that slides become pages.

A `.ppt` file is an OLE compound file whose `PowerPoint Document` stream is a tree of records
(an 8-byte header: version and instance, type, length; version 0xF marks a container). The
`Current User` stream points at the last edit; each edit's persist directory says where each
object lies, newer edits overriding older ones. The document's slide list gives the slides in
their order. In each slide, read in drawing order:

- the title (the slide's title shape) as `#`, other text as paragraphs; bullet paragraphs,
  and the paragraphs of body text shapes unless they turn their bullet off, as `- ` items nested
  by their indent level (the paragraph runs of the text's style record);
- a table (a group shape marked as one) as a Markdown table, its cells placed by their
  anchors;
- text PowerPoint 97-2003 kept in the slide list (a shape's outline text reference);
- the speaker notes, under `### Notes:`.

Masters, layouts, pictures and charts are left out. A password-protected file is refused
with what to do instead.
"""

from __future__ import annotations

import io
import re
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import olefile

from libs.errors import ConversionError
from libs.tables import markdown_table
from services.converter.ole import summary_title

_DOCUMENT, _SLIDE, _SLIDE_ATOM, _NOTES, _PERSIST = 0x03E8, 0x03EE, 0x03EF, 0x03F0, 0x03F3
_SLIDE_LIST, _USER_EDIT, _DIRECTORY = 0x0FF0, 0x0FF5, 0x1772
_HEADER, _CHARS, _BYTES, _STYLE, _OUTLINE_REF = 0x0F9F, 0x0FA0, 0x0FA8, 0x0FA1, 0x0F9E
_GROUP, _SHAPE, _TEXTBOX, _CHILD_ANCHOR, _ANCHOR = 0xF003, 0xF004, 0xF00D, 0xF00F, 0xF010
_PROPERTIES, _MORE_PROPERTIES, _IS_TABLE = 0xF00B, 0xF122, 0x039F
_TITLES, _BODIES, _NOTES_TEXT = frozenset({0, 6}), frozenset({1, 7, 8}), 2
_ENCRYPTED_TOKEN = 0xF3D1C4DF
_MAX_DEPTH = 32
_BLANKS = re.compile(r"\s+")


@dataclass
class _Text:
    kind: int  # TextHeaderAtom's type: 0 title, 1 body, 2 notes, 4 other, 5 subtitle, ...
    text: str = ""
    levels: list[tuple[int, bool | None]] = field(default_factory=list)  # per paragraph


Outline = Sequence[_Text]  # the slide list's text of one slide


@dataclass(frozen=True)
class _Stream:
    data: bytes

    def records(self, start: int, end: int) -> Iterator[tuple[int, int, int, int, bool]]:
        """(type, instance, data offset, data length, container) of each record in a range."""
        end = min(end, len(self.data))
        while start + 8 <= end:
            head, kind, length = struct.unpack_from("<HHI", self.data, start)
            yield kind, head >> 4, start + 8, min(length, end - start - 8), head & 0xF == 0xF
            start += 8 + length

    def record(self, offset: int) -> tuple[int, int, int]:
        _, kind, length = struct.unpack_from("<HHI", self.data, offset)
        return kind, offset + 8, length


def ppt_markdown(data: bytes, name: str) -> tuple[str, str]:
    """The Markdown of the PowerPoint 97-2003 presentation `data` and its title."""
    try:
        with olefile.OleFileIO(io.BytesIO(data)) as ole:
            if ole.exists("EncryptedSummary"):
                raise _password(name)
            if not ole.exists("PowerPoint Document") or not ole.exists("Current User"):
                raise ConversionError(
                    f"could not convert '{name}': the compound file has no PowerPoint "
                    "Document stream, so it is not a PowerPoint presentation (a Word or Excel "
                    "file renamed?)"
                )
            current = ole.openstream("Current User").read()
            stream = _Stream(ole.openstream("PowerPoint Document").read())
            title = summary_title(ole)
    except OSError as exc:
        raise ConversionError(
            f"could not convert '{name}': it is not a PowerPoint 97-2003 presentation ({exc}); "
            "check that it opens in PowerPoint, or ingest it under its real extension"
        ) from None
    try:
        token, edit = struct.unpack_from("<II", current, 12)
        if token == _ENCRYPTED_TOKEN:
            raise _password(name)
        return _markdown(stream, edit), title
    except (struct.error, IndexError, ValueError, KeyError, RecursionError) as exc:
        raise ConversionError(
            f"could not convert '{name}': the PowerPoint file is damaged ({exc}); open it in "
            "PowerPoint or LibreOffice, save it again (as .pptx) and ingest that"
        ) from None


def _password(name: str) -> ConversionError:
    return ConversionError(
        f"could not convert '{name}': the presentation is password-protected; remove the "
        "password in PowerPoint (File > Info > Protect Presentation) and ingest it again"
    )


def _markdown(stream: _Stream, edit: int) -> str:
    offsets, document = _persist_directory(stream, edit)
    kind, start, length = stream.record(offsets[document])
    if kind != _DOCUMENT:
        raise ValueError("the last edit does not point at the document")
    slides: list[tuple[int, list[_Text]]] = []
    notes: dict[int, int] = {}  # notes id -> persist id
    for kind, instance, at, size, _ in stream.records(start, start + length):
        if kind == _SLIDE_LIST and instance in (0, 2):
            for persist, identifier, texts in _slide_list(stream, at, at + size):
                if instance == 0:
                    slides.append((persist, texts))
                else:
                    notes[identifier] = persist
    pages = []
    for number, (persist, outline) in enumerate(slides, start=1):
        blocks, notes_id = _slide(stream, offsets.get(persist, -1), _SLIDE, outline)
        if notes_id in notes:
            said = _slide(stream, offsets.get(notes[notes_id], -1), _NOTES, [], _NOTES_TEXT)[0]
            if said:
                blocks += ["### Notes:", *said]
        pages.append("\n\n".join([f"<!-- Slide number: {number} -->", *blocks]))
    return "\n\n".join(pages)


def _persist_directory(stream: _Stream, edit: int) -> tuple[dict[int, int], int]:
    """Each object's offset by persist id (the newest edit's wins), and the document's id."""
    offsets: dict[int, int] = {}
    document, seen = -1, set[int]()
    while edit and edit not in seen and len(seen) < 10_000:
        seen.add(edit)
        kind, at, _ = stream.record(edit)
        if kind != _USER_EDIT:
            raise ValueError("an edit record is missing")
        previous, directory, document_id = struct.unpack_from("<III", stream.data, at + 8)
        document = document if document >= 0 else document_id
        kind, at, length = stream.record(directory)
        position = at
        while position + 4 <= at + length:
            (entry,) = struct.unpack_from("<I", stream.data, position)
            first, count = entry & 0xFFFFF, entry >> 20
            found = struct.unpack_from(f"<{count}I", stream.data, position + 4)
            for n, offset in enumerate(found):
                offsets.setdefault(first + n, offset)
            position += 4 + 4 * count
        edit = previous
    return offsets, document


def _slide_list(stream: _Stream, start: int, end: int) -> Iterator[tuple[int, int, list[_Text]]]:
    """(persist id, slide or notes id, outline texts) of each entry of a slide list."""
    entry: tuple[int, int] | None = None
    texts: list[_Text] = []
    for kind, _, at, size, _ in stream.records(start, end):
        if kind == _PERSIST:
            if entry:
                yield (*entry, texts)
            persist, _, _, identifier = struct.unpack_from("<IIiI", stream.data, at)
            entry, texts = (persist, identifier), []
        else:
            _text_record(stream, kind, at, size, texts)
    if entry:
        yield (*entry, texts)


def _text_record(
    stream: _Stream, kind: int, at: int, size: int, texts: list[_Text], outline: Outline = ()
) -> None:
    """Add what text record `kind` says to `texts`; `outline` is the slide list's text of the
    slide, which a shape's outline text reference points into."""
    data = stream.data
    if kind == _HEADER:
        texts.append(_Text(struct.unpack_from("<I", data, at)[0]))
    elif kind == _CHARS and texts:
        texts[-1].text = data[at : at + size - size % 2].decode("utf-16-le", "replace")
    elif kind == _BYTES and texts:
        texts[-1].text = data[at : at + size].decode("latin-1")
    elif kind == _STYLE and texts:
        texts[-1].levels = _paragraph_levels(data[at : at + size], texts[-1].text)
    elif kind == _OUTLINE_REF:
        (index,) = struct.unpack_from("<I", data, at)
        if index < len(outline):
            texts.append(outline[index])


def _paragraph_levels(style: bytes, text: str) -> list[tuple[int, bool | None]]:
    """Each paragraph's indent level and bullet (None: as its shape's kind has it), from the
    paragraph runs at the start of a StyleTextPropAtom."""
    levels: list[tuple[int, bool | None]] = []
    covered, at = 0, 0
    while covered <= len(text) and at + 10 <= len(style):
        count, level, masks = struct.unpack_from("<IHI", style, at)
        at += 10
        bullet = None
        if masks & 0x0F:
            bullet = bool(struct.unpack_from("<H", style, at)[0] & 1) if masks & 1 else None
            at += 2
        at += sum(2 for bit in (0x80, 0x10, 0x40) if masks & bit) + (4 if masks & 0x20 else 0)
        at += sum(2 for bit in (0x800, 0x1000, 0x2000, 0x4000, 0x100, 0x400, 0x8000) if masks & bit)
        if masks & 0x100000:
            at += 2 + 4 * struct.unpack_from("<H", style, at)[0]
        at += sum(2 for bits in (0x10000, 0xE0000, 0x200000) if masks & bits)
        paragraphs = max(
            text[covered : covered + count].count("\r") + (covered + count > len(text)), 1
        )
        levels += [(min(level, 8), bullet)] * paragraphs
        covered += count
    return levels


def _slide(
    stream: _Stream, offset: int, expected: int, outline: Outline, only: int | None = None
) -> tuple[list[str], int]:
    """The blocks of the slide (or notes) at `offset`, and the id of its notes."""
    if offset < 0:
        return [], 0
    kind, start, length = stream.record(offset)
    if kind != expected:
        return [], 0
    notes = 0
    blocks: list[str] = []
    for kind, _, at, size, container in stream.records(start, start + length):
        if kind == _SLIDE_ATOM and size >= 20:
            (notes,) = struct.unpack_from("<I", stream.data, at + 16)
        elif container:
            _shapes(stream, at, at + size, outline, blocks, only, 0)
    return blocks, notes


def _shapes(
    stream: _Stream,
    start: int,
    end: int,
    outline: Outline,
    blocks: list[str],
    only: int | None,
    depth: int,
) -> None:
    if depth > _MAX_DEPTH:
        raise ValueError("shapes nested too deep")
    for kind, _, at, size, container in stream.records(start, end):
        if kind == _GROUP and _is_table(stream, at, at + size):
            if table := _table(stream, at, at + size, outline):
                blocks.append(table)
        elif kind == _SHAPE:
            for text in _shape_texts(stream, at, at + size, outline):
                if only is None or text.kind == only:
                    blocks += _text_blocks(text)
        elif container:
            _shapes(stream, at, at + size, outline, blocks, only, depth + 1)


def _shape_texts(stream: _Stream, start: int, end: int, outline: Outline) -> list[_Text]:
    texts: list[_Text] = []
    for kind, _, at, size, _ in stream.records(start, end):
        if kind == _TEXTBOX:
            for inner, _, data_at, data_size, _ in stream.records(at, at + size):
                _text_record(stream, inner, data_at, data_size, texts, outline)
    return texts


def _text_blocks(text: _Text) -> list[str]:
    """A shape's text: a title as `#`, bullets as one list, other paragraphs as they are."""
    blocks: list[str] = []
    items: list[str] = []
    for index, line in enumerate(text.text.split("\r")):
        paragraph = _BLANKS.sub(" ", line).strip()  # a line break (\x0b) too
        if not paragraph or paragraph == "*":  # "*": a slide number or date field
            continue
        level, bullet = text.levels[index] if index < len(text.levels) else (0, None)
        if bullet or (bullet is None and text.kind in _BODIES):
            items.append(f"{'  ' * level}- {paragraph}")
            continue
        if items:
            blocks.append("\n".join(items))
            items = []
        blocks.append(f"# {paragraph}" if text.kind in _TITLES else paragraph)
    return blocks + (["\n".join(items)] if items else [])


def _is_table(stream: _Stream, start: int, end: int) -> bool:
    """A group whose own shape (its first) has the table property set."""
    for kind, _, at, size, _ in stream.records(start, end):
        if kind != _SHAPE:
            continue
        for inner, count, data_at, _, _ in stream.records(at, at + size):
            if inner in (_PROPERTIES, _MORE_PROPERTIES):
                for n in range(count):
                    pid, value = struct.unpack_from("<HI", stream.data, data_at + 6 * n)
                    if pid & 0x3FFF == _IS_TABLE and value & 1:
                        return True
        return False
    return False


def _table(stream: _Stream, start: int, end: int, outline: Outline) -> str:
    cells: dict[tuple[int, int], str] = {}
    for kind, _, at, size, _ in stream.records(start, end):
        if kind != _SHAPE:
            continue
        anchor = None
        for inner, _, data_at, _, _ in stream.records(at, at + size):
            if inner == _CHILD_ANCHOR:
                left, top = struct.unpack_from("<ii", stream.data, data_at)
                anchor = (top, left)
            elif inner == _ANCHOR and anchor is None:
                top, left = struct.unpack_from("<hh", stream.data, data_at)
                anchor = (top, left)
        texts = _shape_texts(stream, at, at + size, outline)
        if anchor is not None and texts:
            cells[anchor] = " ".join(_BLANKS.sub(" ", t.text).strip() for t in texts)
    tops = sorted({top for top, _ in cells})
    lefts = sorted({left for _, left in cells})
    rows = [[cells.get((top, left), "") for left in lefts] for top in tops]
    return markdown_table(rows) if rows and any(any(row) for row in rows) else ""
