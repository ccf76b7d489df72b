"""Rich Text Format (`.rtf`: WordPad, TextEdit, Word's and LibreOffice's "Save as RTF") as
Markdown.

RTF is text with control words in nested groups. The reader keeps what a reader of the
document sees, in order:

- paragraphs (`\\par`), line breaks, tabs; headings where a paragraph's style is named
  "Heading N" or "Title" in the stylesheet, or has an outline level (`\\outlinelevelN`);
- list items with the marker their list text shows (`- ` for bullets, `1. ` for numbers);
- tables (`\\cell`, `\\row`) as Markdown tables whose first row is the header;
- characters as written: `\\'hh` in the code page of the font's character set
  (`\\fcharsetN`) or else the document's (`\\ansicpgN`, Windows-1252 when none is given),
  `\\uN` Unicode with the fallback characters it says to skip (`\\ucN`), and the named ones
  (dashes, quotes, bullets, non-breaking spaces);
- hyperlinks as `[text](url)`, footnotes as `[^n]` marks with their text at the end, the text
  of text boxes as paragraphs;
- the title from the document's information group (`{\\info{\\title ...}}`).

Font, colour and style tables, pictures, objects, headers and footers, tables of contents,
other fields' instructions and every `{\\* ...}` destination a reader does not know are
skipped, as the format says; so are hidden text (`\\v`) and tracked deletions (`\\deleted`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from libs.encodings import canonical
from libs.errors import ConversionError
from services.converter.blocks import Blocks, list_marker, style_heading

_TOKEN = re.compile(
    rb"\\([a-zA-Z]{1,32})(-?\d{1,10})? ?|\\'([0-9a-fA-F]{2})|\\(.)|([{}])|[\r\n]+|([^\\{}\r\n]+)",
    re.DOTALL,
)
# Destinations whose text is not the document's (a `{\\* ...}` one a reader does not know is
# skipped too).
_SKIPPED = frozenset(
    b"fonttbl colortbl stylesheet listtable listoverridetable revtbl rsidtbl generator "
    b"pict object header headerl headerr headerf footer footerl footerr footerf "
    b"datafield themedata colorschememapping latentstyles xmlnstbl mmathPr bkmkstart bkmkend "
    b"filetbl pgdsctbl info".split()
)
# Destinations whose text goes somewhere of its own: the title, a style's name, a field's
# instruction (a table of contents, a link), a list item's shown marker, a footnote, the text
# of a shape (a text box). Groups inside them belong to them.
_TITLE, _STYLE, _FIELD = b"title", b"style-name", b"fldinst"
_MARKER, _NOTE, _BOX = b"listtext", b"footnote", b"shptxt"
_TEXT_DESTINATIONS = frozenset({_TITLE, _STYLE, _FIELD, _MARKER, _NOTE, _BOX})
_CHARACTERS = {
    b"emdash": "\u2014", b"endash": "\u2013", b"bullet": "\u2022", b"lquote": "\u2018",
    b"rquote": "\u2019", b"ldblquote": "\u201c", b"rdblquote": "\u201d", b"emspace": " ",
    b"enspace": " ", b"qmspace": " ", b"tab": "\t", b"line": "\n",
}  # fmt: skip
_SYMBOLS = {b"~": "\u00a0", b"_": "\u2011", b"{": "{", b"}": "}", b"\\": "\\", b"-": ""}
_CODE_PAGES = {b"mac": "mac_roman", b"pc": "cp437", b"pca": "cp850"}
# A font's character set (\\fcharsetN) as the Windows code page its `\\'hh` bytes are in
# (0, ANSI, 1, the default, and 2, symbols, leave the document's code page).
_CHARSET_CODE_PAGES = {
    77: 10000, 128: 932, 129: 949, 130: 1361, 134: 936, 136: 950, 161: 1253,
    162: 1254, 163: 1258, 177: 1255, 178: 1256, 186: 1257, 204: 1251, 222: 874, 238: 1250,
}  # fmt: skip
_HYPERLINK = re.compile(r'^HYPERLINK\s+"([^"]+)"')


@dataclass
class _Group:
    skip: bool = False
    uc: int = 1
    destination: bytes = b""
    link: str = ""  # a hyperlink field's target, and where its shown text starts
    mark: int = 0
    font: int = -1  # the font in use (\\fN): its character set decodes `\\'hh`
    hidden: bool = False  # hidden text (\\v) or a tracked deletion (\\deleted)


@dataclass
class _Reader:
    codec: str = "cp1252"
    fonts: dict[int, str] = field(default_factory=dict)  # font -> code page (\\fcharsetN)
    defining: int = -1  # the font table's entry being read
    default_font: int = -1  # \\deffN
    styles: dict[int, str] = field(default_factory=dict)
    title: str = ""
    out: Blocks = field(default_factory=Blocks)
    text: list[str] = field(default_factory=list)
    side: dict[bytes, list[str]] = field(default_factory=dict)  # marker, note, box, field
    style: int = 0
    outline: int = -1
    level: int = 0  # a list item's nesting (\\ilvlN)
    in_table: bool = False
    pending: bytearray = field(default_factory=bytearray)  # `\\'hh` bytes not yet decoded

    def take(self, destination: bytes) -> str:
        return "".join(self.side.pop(destination, []))

    def paragraph(self) -> None:
        text = "".join(self.text)
        self.text.clear()
        marker = list_marker(self.take(_MARKER))
        self.out.paragraph(
            text, heading=self.heading_level(), marker=marker, level=self.level,
            in_table=self.in_table,
        )  # fmt: skip

    def heading_level(self) -> int:
        if 0 <= self.outline <= 5:
            return self.outline + 1
        return style_heading(self.styles.get(self.style, ""))

    def cell(self) -> None:
        self.out.cell("".join(self.text))
        self.text.clear()
        self.side.pop(_MARKER, None)

    def row(self) -> None:
        self.out.row()
        self.in_table = False

    def markdown(self) -> str:
        self.paragraph()
        return self.out.markdown()


def rtf_markdown(data: bytes, name: str) -> tuple[str, str]:
    """The Markdown of the RTF document `data` and its title ('' when it has none)."""
    if data.lstrip()[:5] != b"{\\rtf":
        raise ConversionError(
            f"could not convert '{name}': it does not start with '{{\\rtf', so it is not an "
            "RTF document; check that it opens in WordPad or Word"
        )
    reader = _Reader()
    stack = [_Group()]
    skip_chars = 0  # fallback characters after \\uN still to pass over
    position = 0
    while position < len(data) and stack:
        match = _TOKEN.match(data, position)
        if match is None:  # a lone backslash at the end
            break
        position = match.end()
        word, number, hexa, symbol, brace, text = match.groups()
        group = stack[-1]
        readable = not group.skip or group.destination in _TEXT_DESTINATIONS
        if hexa is not None:
            if skip_chars:
                skip_chars -= 1
            elif readable:
                reader.pending.append(int(hexa, 16))
            continue
        _flush(stack, reader)
        if brace == b"{":
            inherited = group.destination if group.destination in _TEXT_DESTINATIONS else b""
            stack.append(
                _Group(group.skip, group.uc, inherited, font=group.font, hidden=group.hidden)
            )
        elif brace == b"}":
            _close(stack.pop(), stack, reader)
        elif word is not None:
            if word == b"bin" and number:  # raw bytes follow: never parsed as RTF
                position += max(int(number), 0)
                continue
            skip_chars = _word(word, number, stack, reader)
        elif symbol == b"*":
            group.skip = True
        elif symbol in (b"\n", b"\r"):  # a backslash ending a line is a \\par
            skip_chars = _word(b"par", None, stack, reader)
        elif symbol is not None:
            if skip_chars:
                skip_chars -= 1
            elif readable:
                _emit(_SYMBOLS.get(symbol, ""), stack, reader)
        elif text:
            if skip_chars:
                take = min(skip_chars, len(text))
                skip_chars, text = skip_chars - take, text[take:]
            if text and readable:
                _emit(text.decode(_codec(stack, reader), "replace"), stack, reader)
    _flush(stack or [_Group()], reader)
    return reader.markdown(), reader.title.strip()


def _flush(stack: list[_Group], reader: _Reader) -> None:
    """Decode the `\\'hh` bytes read so far together (a double-byte code page's character
    takes two)."""
    if reader.pending:
        text = bytes(reader.pending).decode(_codec(stack, reader), "replace")
        reader.pending.clear()
        _emit(text, stack, reader)


def _codec(stack: list[_Group], reader: _Reader) -> str:
    """The code page of the font in use, else the document's."""
    font = stack[-1].font
    return reader.fonts.get(font if font >= 0 else reader.default_font, reader.codec)


def _word(word: bytes, number: bytes | None, stack: list[_Group], reader: _Reader) -> int:
    """Apply control word `word`; how many fallback characters follow (for `\\u`)."""
    group = stack[-1]
    value = int(number) if number else None
    destination = group.destination
    if word == b"u" and value is not None:
        if not group.skip or destination in _TEXT_DESTINATIONS:
            _emit(chr(value % 65536), stack, reader)
        return group.uc
    if word == b"uc" and value is not None:
        group.uc = max(value, 0)
    elif word == b"deff" and value is not None:
        reader.default_font = value
    elif word == b"ansicpg" and value:
        reader.codec = _code_page(value) or reader.codec
    elif word in _CODE_PAGES:
        reader.codec = _CODE_PAGES[word]
    elif word in _SKIPPED:
        group.skip, group.destination = True, word
    elif word == b"title" and _inside(stack, b"info"):
        group.destination = _TITLE
    elif word in (_NOTE, _BOX) and not any(g.destination in _SKIPPED for g in stack):
        group.skip, group.destination = False, word  # read even inside `{\\* ...}`
    elif word in (_MARKER, b"pntext"):
        group.destination = _MARKER
    elif word == _FIELD:
        group.destination = _FIELD
    elif destination in (_MARKER, _NOTE, _BOX, _FIELD):
        # Text of its own: characters, and paragraphs as spaces or lines.
        if word in _CHARACTERS:
            _emit(_CHARACTERS[word], stack, reader)
        elif word == b"par":
            _emit("\n" if destination == _BOX else " ", stack, reader)
    elif group.skip:
        if word == b"f" and value is not None and _inside(stack, b"fonttbl"):
            reader.defining = value
        elif word == b"fcharset" and value is not None and _inside(stack, b"fonttbl"):
            if codec := _code_page(_CHARSET_CODE_PAGES.get(value, 0)):
                reader.fonts[reader.defining] = codec
        elif word == b"s" and value is not None and _inside(stack, b"stylesheet"):
            group.destination, reader.style = _STYLE, value
            reader.styles[value] = ""
    elif word in (b"par", b"sect", b"page"):
        reader.paragraph()
    elif word == b"pard":
        reader.style, reader.outline, reader.level, reader.in_table = 0, -1, 0, False
    elif word == b"s" and value is not None:
        reader.style = value
    elif word == b"f" and value is not None:
        group.font = value
    elif word == b"plain":
        group.font, group.hidden = -1, False
    elif word in (b"v", b"deleted"):
        group.hidden = value != 0
    elif word == b"outlinelevel" and value is not None:
        reader.outline = value
    elif word == b"ilvl" and value is not None:
        reader.level = min(max(value, 0), 8)
    elif word == b"intbl":
        reader.in_table = True
    elif word in (b"cell", b"nestcell"):
        reader.cell()
    elif word == b"row":
        reader.row()
    elif word in _CHARACTERS:
        _emit(_CHARACTERS[word], stack, reader)
    return 0


def _code_page(number: int) -> str | None:
    """Python's codec for Windows code page `number`; None for one it does not know."""
    try:
        return canonical(f"cp{number}") if number else None
    except LookupError:
        return None


def _inside(stack: list[_Group], destination: bytes) -> bool:
    return any(g.destination == destination for g in stack)


def _emit(text: str, stack: list[_Group], reader: _Reader) -> None:
    group = stack[-1]
    if group.hidden and group.destination not in (_TITLE, _STYLE):
        return
    if group.destination == _TITLE:
        reader.title += text
    elif group.destination == _STYLE:
        reader.styles[reader.style] += text
    elif group.destination in _TEXT_DESTINATIONS:
        reader.side.setdefault(group.destination, []).append(text)
    elif not group.skip:
        reader.text.append(text)


def _close(group: _Group, stack: list[_Group], reader: _Reader) -> None:
    """The end of a group: a destination's text goes where it belongs once its outermost
    group ends."""
    if group.link:
        shown = "".join(reader.text[group.mark :]).strip()
        if shown:
            reader.text[group.mark :] = [f"[{shown}]({group.link})"]
    if not group.destination or (stack and stack[-1].destination == group.destination):
        return
    if group.destination == _STYLE:
        reader.styles[reader.style] = reader.styles[reader.style].split(";")[0].strip()
        reader.style = 0
    elif group.destination == _NOTE:
        reader.text.append(reader.out.note(reader.take(_NOTE)))
    elif group.destination == _BOX:
        reader.out.block(reader.take(_BOX))
    elif group.destination == _FIELD and stack:
        instruction = reader.take(_FIELD).strip()
        if instruction.startswith("TOC"):
            stack[-1].skip = True  # the table of contents repeats the headings
        elif link := _HYPERLINK.match(instruction):
            stack[-1].link, stack[-1].mark = link.group(1), len(reader.text)
