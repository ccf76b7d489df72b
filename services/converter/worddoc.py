"""Word 97-2003 documents (`.doc`) as Markdown.

`wordbinary` reads the file's structures; this walks the body's characters in order with them:

- paragraphs (`\\r`) with their heading level, list marker and nesting, written by `blocks`;
  bullets as `- `, numbers as `N. ` counted per list and level as Word counts them;
- table cells and row ends (`\\x07`, told apart by the row end's paragraph properties), so an
  empty cell keeps its place;
- fields (`\\x13` instruction `\\x14` result `\\x15`) as the result they show, a hyperlink as
  `[text](url)`; a table of contents is left out (it repeats the headings);
- footnote and endnote marks (`\\x02`) as `[^n]` with their text at the end; the text of
  text boxes as paragraphs after the body;
- the title from the summary information (in the code page it names).

Headers, footers, comments, pictures and drawings are left out, and so is text formatted
hidden or deleted with tracked changes (`wordbinary`). A `.doc` that is really RTF
(WordPad), a web page or plain text never reaches this module (`renamed`); a
password-protected file, the Word 6/95 format and a damaged file are refused with what to do
instead.
"""

from __future__ import annotations

import io
import re
import struct
from dataclasses import dataclass, field

import olefile

from libs.errors import ConversionError
from services.converter.blocks import Blocks
from services.converter.ole import MAGIC, summary_title
from services.converter.wordbinary import (
    BULLET_FORMAT,
    NO_NUMBER_FORMAT,
    TEXT_BOXES,
    Paragraph,
    WordFile,
    read_word_file,
)

_HYPERLINK = re.compile(r'^HYPERLINK\s+"([^"]+)"')
_TOKENS = re.compile(r"[^\x00-\x1f]+|[\x00-\x1f]")
_CHARACTERS = {"\t": "\t", "\x0b": "\n", "\x0e": " ", "\x1e": "-"}
_FIELD_CODE = re.compile(r"\x13[^\x13\x14\x15]*\x14|\x13[^\x13\x14\x15]*\x15")


def word_markdown(data: bytes, name: str) -> tuple[str, str]:
    """The Markdown of the Word 97-2003 document `data` and its title ('' when it has none)."""
    if not data.startswith(MAGIC):
        raise ConversionError(
            f"could not convert '{name}': it is not a Word 97-2003 document (no OLE compound "
            "file header); check that it opens in Word, or ingest it under its real extension"
        )
    try:
        with olefile.OleFileIO(io.BytesIO(data)) as ole:
            if not ole.exists("WordDocument"):
                raise ConversionError(
                    f"could not convert '{name}': the compound file has no WordDocument stream, "
                    "so it is not a Word document (an Excel or PowerPoint file renamed?)"
                )
            tables = {t: ole.openstream(t).read() for t in ("0Table", "1Table") if ole.exists(t)}
            word = read_word_file(ole.openstream("WordDocument").read(), tables, name)
            title = summary_title(ole)
        return _markdown(word), title
    except ConversionError:
        raise
    except (OSError, struct.error, IndexError, ValueError, KeyError) as exc:
        raise ConversionError(
            f"could not convert '{name}': the Word file is damaged ({exc}); open it in Word or "
            "LibreOffice, save it again (as .docx) and ingest that"
        ) from None


@dataclass
class _Field:
    instruction: list[str] = field(default_factory=list)
    shown: bool = False  # past the separator: the field's result
    skip: bool = False  # a table of contents
    link: str = ""
    mark: int = 0  # where the result's text starts


class _Walker:
    """The body's characters in order, written as blocks."""

    def __init__(self, word: WordFile, notes: dict[int, str]) -> None:
        self.word, self.notes = word, notes
        self.out = Blocks()
        self.text: list[str] = []
        self.fields: list[_Field] = []
        self.numbers: dict[int, list[int]] = {}  # list id -> the last number at each level

    def walk(self, body: str) -> None:
        for match in _TOKENS.finditer(body):
            token = match.group()
            if token == "\x13":
                self.fields.append(_Field(mark=len(self.text)))
            elif token == "\x14" and self.fields:
                self.separate(self.fields[-1])
            elif token == "\x15" and self.fields:
                self.close(self.fields.pop())
            elif any(f.skip for f in self.fields):
                continue
            elif self.fields and not self.fields[-1].shown:
                self.fields[-1].instruction.append(token)
            elif token[0] >= " ":
                self.text.append(token)
            elif token in "\r\x0c":
                self.paragraph(match.start())
            elif token == "\x07":
                self.cell(match.start())
            elif token == "\x02":
                self.text.append(self.out.note(self.notes.get(match.start(), "")))
            else:
                self.text.append(_CHARACTERS.get(token, ""))

    def separate(self, found: _Field) -> None:
        found.shown = True
        instruction = "".join(found.instruction).strip()
        if instruction.upper().startswith("TOC"):
            found.skip = True  # the table of contents repeats the headings
        elif link := _HYPERLINK.match(instruction):
            found.link, found.mark = link.group(1), len(self.text)

    def close(self, found: _Field) -> None:
        shown = "".join(self.text[found.mark :]).strip()
        if found.link and shown:
            self.text[found.mark :] = [f"[{shown}]({found.link})"]

    def paragraph(self, cp: int) -> None:
        properties = self.word.paragraph_at(cp)
        text = "".join(self.text)
        self.text.clear()
        heading = properties.outline + 1 if properties.outline <= 5 else 0
        self.out.paragraph(
            text,
            heading=heading or self.word.headings.get(properties.style, 0),
            marker=self.marker(properties),
            level=properties.level,
            in_table=properties.in_table,
        )

    def cell(self, cp: int) -> None:
        text = "".join(self.text)
        self.text.clear()
        if self.word.paragraph_at(cp).row_end:
            self.out.row()
        else:
            self.out.cell(text)

    def marker(self, properties: Paragraph) -> str:
        """`- `, `N. ` (counted as Word counts) or '' for the paragraph's list, if any."""
        if not properties.list:
            return ""
        if properties.list not in self.word.lists:
            return "- "
        lsid, formats = self.word.lists[properties.list]
        level = properties.level
        number_format, start = formats.get(level, formats.get(0, (BULLET_FORMAT, 1)))
        if number_format == NO_NUMBER_FORMAT:
            return ""
        if number_format == BULLET_FORMAT:
            return "- "
        numbers = self.numbers.setdefault(lsid, [0] * 9)
        numbers[level] = numbers[level] + 1 if numbers[level] else start
        numbers[level + 1 :] = [0] * (8 - level)
        return f"{numbers[level]}. "


def _markdown(word: WordFile) -> str:
    notes = {cp: _plain(text) for cp, text in word.notes().items()}
    walker = _Walker(word, notes)
    walker.walk(word.text(*word.story(0)))
    walker.paragraph(word.counts[0])  # text after the last mark, if any
    for paragraph in _plain(word.text(*word.story(TEXT_BOXES))).split("\n"):
        walker.out.block(paragraph)
    return walker.out.markdown()


def _plain(text: str) -> str:
    """A note's or a text box's text: fields as their results, paragraphs as lines."""
    text = re.sub(r"[\r\x07\x0b\x0c]", "\n", _FIELD_CODE.sub("", text))
    return "".join(c for c in text if c >= " " or c in "\t\n")
