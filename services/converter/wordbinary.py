"""The structures of a Word 97-2003 file ([MS-DOC]) that its text and paragraphs come from.

The `WordDocument` stream starts with the File Information Block (FIB): flags, the length of
each story (the body, footnotes, headers, comments, endnotes, text boxes) and where the other
structures lie in the table stream (`0Table` or `1Table`). Read here:

- the piece table (Clx): which stream bytes hold each run of character positions, as
  Windows-1252 bytes or UTF-16 code units;
- the paragraph formatting pages (PlcBtePapx and their 512-byte FKPs): each paragraph's
  style, outline level, list and list level, and whether it is in a table or ends a row;
- the stylesheet (STSH): which styles are headings (a built-in heading, a style named
  "Heading N" or "Title", or one based on such a style);
- the list definitions (PlfLst, PlfLfo): each list's number format and start per level;
- the footnotes' and endnotes' positions (PlcffndRef, PlcffndTxt and the endnote pair).

Character formatting is not read. Everything is bounds-checked by `struct`: a damaged file
raises `struct.error`, `IndexError` or `ValueError`, which the reader turns into a clear error.
"""

from __future__ import annotations

import bisect
import struct
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field

from libs.errors import ConversionError
from services.converter.blocks import style_heading

_IDENT = 0xA5EC
_FIRST_WORD_97 = 0xC0  # nFib: Word 6 wrote 101, Word 95 104, Word 97 and later 0xC1 or more
_ENCRYPTED, _OBFUSCATED, _TABLE_1 = 0x0100, 0x8000, 0x0200
# FibRgFcLcb97 entries (fc, lcb pairs), by index.
_STSHF, _FND_REF, _FND_TXT, _CHPX, _PAPX, _CLX = 1, 2, 3, 12, 13, 33
_END_REF, _END_TXT, _LST, _LFO = 46, 47, 73, 74
# FibRgLw97 from ccpText on: body, footnotes, headers, macros, comments, endnotes, text boxes.
_CCP_FIRST, _STORIES = 3, 7
FOOTNOTES, ENDNOTES, TEXT_BOXES = 1, 5, 6
_TITLE_STI = 62
BULLET_FORMAT, NO_NUMBER_FORMAT = 23, 255
# Sprms read from a paragraph's properties, and the operand sizes by spra.
_IN_TABLE, _ROW_END, _DEPTH = 0x2416, 0x2417, 0x6649
_LIST, _LIST_LEVEL, _OUTLINE = 0x460B, 0x260A, 0x2640
_TABLE_DEFINITION, _TAB_CHANGE = 0xD608, 0xC615
_DELETED, _HIDDEN = 0x0800, 0x083C  # character sprms: a tracked deletion, hidden text
_FIELD_MARKS = frozenset("\x13\x14\x15")
_SPRA_SIZE = (1, 1, 2, 4, 2, 2, 0, 3)
_END = 1 << 62


@dataclass
class Paragraph:
    style: int = 0
    outline: int = 9
    list: int = 0  # ilfo, 1-based; 0 none
    level: int = 0
    in_table: bool = False
    row_end: bool = False


@dataclass
class WordFile:
    word: bytes
    table: bytes
    pairs: list[tuple[int, int]]
    counts: list[int]  # characters in each story: body, footnotes, headers, ..., text boxes
    pieces: list[tuple[int, int, int, bool]] = field(default_factory=list)  # cp, end, fc, 8-bit
    runs: list[tuple[int, int, Paragraph]] = field(default_factory=list)  # fc, end, properties
    hidden: list[tuple[int, int]] = field(default_factory=list)  # fc, end of hidden text
    headings: dict[int, int] = field(default_factory=dict)  # style -> level
    lists: dict[int, tuple[int, dict[int, tuple[int, int]]]] = field(default_factory=dict)

    def pair(self, index: int) -> bytes:
        fc, lcb = self.pairs[index] if index < len(self.pairs) else (0, 0)
        return self.table[fc : fc + lcb] if lcb else b""

    def text(self, start: int, end: int) -> str:
        parts = []
        first = max(bisect.bisect_right(self.pieces, (start, _END)) - 1, 0)
        for cp, stop, fc, narrow in self.pieces[first:]:
            if cp >= end:
                break
            low, high = max(cp, start), min(stop, end)
            if low >= high:
                continue
            width = 1 if narrow else 2
            position = fc + width * (low - cp)
            if narrow:
                chunk = self.word[position : position + high - low].decode("cp1252", "replace")
            else:  # code units one by one: a surrogate pair stays two characters, two CPs
                units = array("H", self.word[position : position + 2 * (high - low)])
                chunk = "".join(map(chr, units))
            parts.append(self._unhidden(chunk, position, width))
        return "".join(parts)

    def _unhidden(self, chunk: str, position: int, width: int) -> str:
        """`chunk`, read from stream position `position`, with its hidden and deleted
        characters as NULs (which the reader drops), so that character positions still count
        from the start; field marks stay, so that a field keeps its shape."""
        end = position + width * len(chunk)
        index = max(bisect.bisect_right(self.hidden, (position, _END)) - 1, 0)
        characters: list[str] | None = None
        for start, stop in self.hidden[index:]:
            if start >= end:
                break
            low, high = (
                (max(start, position) - position) // width,
                (min(stop, end) - position) // width,
            )
            if low < high:
                characters = characters or list(chunk)
                for i in range(low, high):
                    if characters[i] not in _FIELD_MARKS:
                        characters[i] = "\x00"
        return "".join(characters) if characters else chunk

    def paragraph_at(self, cp: int) -> Paragraph:
        """The properties of the paragraph whose mark is the character at `cp`."""
        index = bisect.bisect_right(self.pieces, (cp, _END)) - 1
        if index < 0:
            return Paragraph()
        start, _, fc, narrow = self.pieces[index]
        position = fc + (cp - start) * (1 if narrow else 2)
        found = bisect.bisect_right(self.runs, (position, _END)) - 1
        if found >= 0 and self.runs[found][0] <= position < self.runs[found][1]:
            return self.runs[found][2]
        return Paragraph()

    def story(self, story: int) -> tuple[int, int]:
        """The character positions of story `story` (0 the body, `FOOTNOTES`, ...)."""
        start = sum(self.counts[:story])
        return start, start + (self.counts[story] if story < len(self.counts) else 0)

    def notes(self) -> dict[int, str]:
        """Each footnote's and endnote's text by the position of its mark in the body."""
        found = {}
        for refs, texts, story in ((_FND_REF, _FND_TXT, FOOTNOTES), (_END_REF, _END_TXT, ENDNOTES)):
            marks = _cps(self.pair(refs), 2)[:-1]
            bounds = _cps(self.pair(texts), 0)
            base = self.story(story)[0]
            for n, cp in enumerate(marks[: max(len(bounds) - 1, 0)]):
                found[cp] = self.text(base + bounds[n], base + bounds[n + 1])
        return found


def _fib_base(word: bytes, name: str) -> int:
    ident, version = struct.unpack_from("<HH", word, 0)
    flags: int = struct.unpack_from("<H", word, 10)[0]
    if ident != _IDENT:
        raise ConversionError(f"could not convert '{name}': its WordDocument stream is not Word's")
    if version < _FIRST_WORD_97:
        raise ConversionError(
            f"could not convert '{name}': it is in the Word 6.0/95 format, which is not read here; "
            "open it in Word or LibreOffice, save it as .docx and ingest that"
        )
    if flags & (_ENCRYPTED | _OBFUSCATED):
        raise ConversionError(
            f"could not convert '{name}': the document is password-protected; remove the "
            "password in Word (File > Info > Protect Document) and ingest it again"
        )
    return flags


def read_word_file(word: bytes, tables: dict[str, bytes], name: str) -> WordFile:
    """The structures of the WordDocument stream `word`; `tables` holds the table streams."""
    stream = "1Table" if _fib_base(word, name) & _TABLE_1 else "0Table"
    if stream not in tables:
        raise ConversionError(f"could not convert '{name}': its {stream} stream is missing")
    table = tables[stream]
    (words,) = struct.unpack_from("<H", word, 32)
    at = 34 + 2 * words
    (longs,) = struct.unpack_from("<H", word, at)
    counts = list(struct.unpack_from(f"<{longs}i", word, at + 2))[
        _CCP_FIRST : _CCP_FIRST + _STORIES
    ]
    at += 2 + 4 * longs
    (size,) = struct.unpack_from("<H", word, at)
    pairs = [struct.unpack_from("<II", word, at + 2 + 8 * i) for i in range(size)]
    document = WordFile(word, table, pairs, [max(count, 0) for count in counts])
    document.pieces = _pieces(document.pair(_CLX))
    document.runs = _paragraph_runs(word, document.pair(_PAPX))
    document.hidden = _hidden_runs(word, document.pair(_CHPX))
    document.headings = _heading_styles(document.pair(_STSHF))
    document.lists = _lists(
        table, pairs[_LST] if len(pairs) > _LST else (0, 0), document.pair(_LFO)
    )
    return document


def _pieces(clx: bytes) -> list[tuple[int, int, int, bool]]:
    at = 0
    while at < len(clx) and clx[at] == 1:  # Prc: property modifiers, skipped
        at += 3 + struct.unpack_from("<h", clx, at + 1)[0]
    if at >= len(clx) or clx[at] != 2:
        raise ValueError("no piece table")
    (size,) = struct.unpack_from("<I", clx, at + 1)
    plc = clx[at + 5 : at + 5 + size]
    count = (len(plc) - 4) // 12
    cps = struct.unpack_from(f"<{count + 1}I", plc, 0)
    pieces = []
    for i in range(count):
        (value,) = struct.unpack_from("<I", plc, 4 * (count + 1) + 8 * i + 2)
        narrow = bool(value & 0x40000000)
        fc = value & 0x3FFFFFFF
        pieces.append((cps[i], cps[i + 1], fc // 2 if narrow else fc, narrow))
    return pieces


def _formatting_runs(word: bytes, plc: bytes, entry: int) -> Iterator[tuple[int, int, bytes, int]]:
    """(start, end, page, offset) of each run of the 512-byte formatting pages a PlcBtePapx or
    PlcBteChpx lists: its stream positions, and where in its page its properties are (0:
    none). `entry` is the size of a run's entry after the positions (13 for paragraphs, 1
    for characters)."""
    count = (len(plc) - 4) // 8
    for (page,) in struct.iter_unpack("<I", plc[4 * (count + 1) : 4 * (count + 1) + 4 * count]):
        fkp = word[512 * (page & 0x3FFFFF) : 512 * (page & 0x3FFFFF) + 512]
        crun = fkp[511]
        fcs = struct.unpack_from(f"<{crun + 1}I", fkp, 0)
        for i in range(crun):
            yield fcs[i], fcs[i + 1], fkp, 2 * fkp[4 * (crun + 1) + entry * i]


def _paragraph_runs(word: bytes, plc: bytes) -> list[tuple[int, int, Paragraph]]:
    """Paragraph properties by stream position."""
    runs = []
    for start, end, fkp, offset in _formatting_runs(word, plc, 13):
        paragraph = Paragraph()
        if offset:
            size = fkp[offset]
            at, length = (
                (offset + 2, 2 * fkp[offset + 1]) if size == 0 else (offset + 1, 2 * size - 1)
            )
            properties = fkp[at : at + length]
            paragraph.style = struct.unpack_from("<H", properties, 0)[0]
            _apply(paragraph, properties[2:])
        runs.append((start, end, paragraph))
    runs.sort(key=lambda run: run[0])
    return runs


def _hidden_runs(word: bytes, plc: bytes) -> list[tuple[int, int]]:
    """The stream positions of text formatted hidden or deleted with tracked changes."""
    runs = []
    for start, end, fkp, offset in _formatting_runs(word, plc, 1):
        if offset and any(
            sprm in (_DELETED, _HIDDEN) and operand[:1] in (b"\x01", b"\x81")
            for sprm, operand in _sprms(fkp[offset + 1 : offset + 1 + fkp[offset]])
        ):
            runs.append((start, end))
    return sorted(runs)


def _sprms(grpprl: bytes) -> list[tuple[int, bytes]]:
    found, at = [], 0
    while at + 2 <= len(grpprl):
        (sprm,) = struct.unpack_from("<H", grpprl, at)
        at += 2
        size = _SPRA_SIZE[sprm >> 13]
        if sprm == _TABLE_DEFINITION and at + 2 <= len(grpprl):
            size = struct.unpack_from("<H", grpprl, at)[0] + 1
        elif sprm == _TAB_CHANGE and at < len(grpprl) and grpprl[at] == 255:
            break  # a rare long form; nothing read here follows it in practice
        elif size == 0 and at < len(grpprl):
            size = grpprl[at] + 1
        found.append((sprm, grpprl[at : at + size]))
        at += size
    return found


def _apply(paragraph: Paragraph, grpprl: bytes) -> None:
    for sprm, operand in _sprms(grpprl):
        value = int.from_bytes(operand[:4], "little") if operand else 0
        if sprm == _IN_TABLE:
            paragraph.in_table = bool(value & 0xFF)
        elif sprm == _DEPTH:
            paragraph.in_table = paragraph.in_table or value >= 1
        elif sprm == _ROW_END:
            paragraph.row_end = bool(value & 0xFF)
        elif sprm == _LIST:
            paragraph.list = value & 0xFFFF
        elif sprm == _LIST_LEVEL:
            paragraph.level = min(value & 0xFF, 8)
        elif sprm == _OUTLINE:
            paragraph.outline = value & 0xFF


def _heading_styles(stsh: bytes) -> dict[int, int]:
    """Style index -> heading level, for the styles that are headings or descend from one."""
    if len(stsh) < 6:
        return {}
    (header,) = struct.unpack_from("<H", stsh, 0)
    count, base_size = struct.unpack_from("<HH", stsh, 2)
    own: dict[int, int] = {}
    bases: dict[int, int] = {}
    at = 2 + header
    for istd in range(count):
        (size,) = struct.unpack_from("<H", stsh, at)
        std = stsh[at + 2 : at + 2 + size]
        at += 2 + size
        if len(std) < base_size + 2:
            continue
        sti = struct.unpack_from("<H", std, 0)[0] & 0x0FFF
        bases[istd] = struct.unpack_from("<H", std, 2)[0] >> 4
        (length,) = struct.unpack_from("<H", std, base_size)
        name = std[base_size + 2 : base_size + 2 + 2 * length].decode("utf-16-le", "replace")
        if 1 <= sti <= 9 or sti == _TITLE_STI:  # Word's built-in headings and Title
            own[istd] = 1 if sti == _TITLE_STI else sti
        elif level := style_heading(name):
            own[istd] = level
    levels = {}
    for istd in bases:
        seen, style = 0, istd
        while style not in own and style in bases and seen < 10:
            style, seen = bases[style], seen + 1
        if style in own:
            levels[istd] = min(own[style], 6)
    return levels


def _lists(
    table: bytes, lst: tuple[int, int], lfo: bytes
) -> dict[int, tuple[int, dict[int, tuple[int, int]]]]:
    """ilfo -> (the list's id, level -> (number format, start number))."""
    fc, lcb = lst
    if not lcb or len(lfo) < 4:
        return {}
    (count,) = struct.unpack_from("<h", table, fc)
    levels: dict[int, dict[int, tuple[int, int]]] = {}
    at = fc + 2 + 28 * count  # the levels follow the list definitions
    for i in range(count):
        lsid = struct.unpack_from("<i", table, fc + 2 + 28 * i)[0]
        simple = table[fc + 2 + 28 * i + 26] & 1
        formats = {}
        for level in range(1 if simple else 9):
            start, number_format = struct.unpack_from("<iB", table, at)
            chpx, papx = table[at + 24], table[at + 25]
            at += 28 + papx + chpx
            (text,) = struct.unpack_from("<H", table, at)
            at += 2 + 2 * text
            formats[level] = (number_format, start)
        levels[lsid] = formats
    (overrides,) = struct.unpack_from("<I", lfo, 0)
    found = {}
    for i in range(min(overrides, (len(lfo) - 4) // 16)):
        lsid = struct.unpack_from("<i", lfo, 4 + 16 * i)[0]
        if lsid in levels:
            found[i + 1] = (lsid, levels[lsid])
    return found


def _cps(plc: bytes, data_size: int) -> list[int]:
    """The character positions of a PLC whose entries carry `data_size` bytes each."""
    count = (len(plc) - 4) // (4 + data_size) if len(plc) >= 4 else -1
    return list(struct.unpack_from(f"<{count + 1}I", plc, 0)) if count >= 0 else []
