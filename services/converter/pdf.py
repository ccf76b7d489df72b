"""PDF text extraction with pypdfium2, page by page.

markitdown's PDF path (pdfminer) is about fifty times slower here and loses page breaks, so
PDFs take this path instead: each page's text layer is read on its own, which keeps 1-based
page numbers for the chunks.

pdfTeX documents often draw umlauts as a base letter plus a separate spacing diaeresis
glyph placed above it, and pdfium then reports the two as unrelated characters, sometimes
far apart in reading order (`Einf¨uhrung`, `Universitat Augsburg ¨`). Where the page's
character boxes are available the accent is put back on the letter it sits on; otherwise
adjacent pairs are joined by a text rule. pdfium also reports some hyphens as U+FFFE; the
glyph boxes tell a real hyphen (same line) from an end-of-line hyphenation.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass

import pypdfium2 as pdfium

from libs.errors import ConversionError, NoTextError
from services.converter.pdfmargins import without_running_lines
from services.converter.pdfoutline import outline, with_headings, without_contents

# Spacing accent glyph -> the combining mark it stands for.
_SPACING_ACCENTS = {
    "\u00a8": "\u0308",  # diaeresis
    "\u00b4": "\u0301",  # acute
    "\u0060": "\u0300",  # grave
    "\u02c6": "\u0302",  # circumflex
    "\u02dc": "\u0303",  # tilde
    "\u02c7": "\u030c",  # caron
    "\u02d8": "\u0306",  # breve
    "\u02da": "\u030a",  # ring
    "\u00b8": "\u0327",  # cedilla
}
_LIGATURES = str.maketrans(
    {"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"}
)
_PDFIUM_HYPHEN = "\ufffe"
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufeff\uffff]")
_DIAERESIS_BEFORE = re.compile(r"\u00a8 ?([AEIOUYaeiouy])")
_DIAERESIS_AFTER = re.compile(r"([AEIOUYaeiouy])\u00a8")
_SENSELESS_TITLE = re.compile(
    r"^(\(?anonymous\)?|untitled|no title|title|document\d*|slide \d+"
    r"|microsoft (word|powerpoint) - .*)$"
    # PowerPoint's stand-in in its languages: "PowerPoint Presentation", "PowerPoint-Präsentation",
    # "Présentation PowerPoint", "Presentación de PowerPoint", ...
    r"|^(?=.*power ?point)(?=.*(pr[eéä][sz]ent|apresenta|prezenta)).{0,60}$"
    r"|\.(docx?|pptx?|xlsx?|pdf|tex|dvi|rtf|odt|indd|qxd)$",
    re.IGNORECASE,
)

Box = tuple[float, float, float, float]  # left, bottom, right, top


@dataclass(frozen=True)
class PdfText:
    pages: list[str]
    title: str


def extract_pdf(data: bytes, name: str) -> PdfText:
    """Read every page's text; refuse encrypted, corrupt and image-only PDFs clearly."""
    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        detail = str(exc)
        if "password" in detail.lower():
            raise ConversionError(
                f"'{name}' is a password-protected PDF; remove the password (save an "
                "unprotected copy) and ingest that"
            ) from exc
        raise ConversionError(
            f"'{name}' could not be opened as a PDF ({detail}); the file is corrupt or not "
            "a PDF. Check the file, or export it again as PDF"
        ) from exc
    try:
        pages = [_page_text(document, index) for index in range(len(document))]
        pages = without_contents(without_running_lines(pages))
        pages = with_headings(pages, outline(document))
        title = _metadata_title(document)
    except pdfium.PdfiumError as exc:
        raise ConversionError(f"'{name}' is a damaged PDF: reading it failed ({exc})") from exc
    finally:
        document.close()
    if not any(page.strip() for page in pages):
        raise NoTextError(
            f"no text could be extracted from '{name}': its {len(pages)} page(s) have no "
            "text layer, so the PDF looks scanned or image-only, and no OCR engine is "
            "available in the converter. Extract the text elsewhere (an OCR tool) and index "
            "it with ingest_content."
        )
    return PdfText(pages=pages, title=title)


def _page_text(document: pdfium.PdfDocument, index: int) -> str:
    page = document[index]
    textpage = page.get_textpage()
    try:
        text = textpage.get_text_range()
        needs_boxes = _PDFIUM_HYPHEN in text or any(ch in _SPACING_ACCENTS for ch in text)
        # Boxes map 1:1 to text only when pdfium neither inserted nor dropped characters.
        if needs_boxes and len(text) == textpage.count_chars():
            boxes: list[Box] = [textpage.get_charbox(i) for i in range(len(text))]
            text = _repair_with_boxes(text, boxes)
        else:
            text = _repair_without_boxes(text)
    finally:
        textpage.close()
        page.close()
    return normalise_pdf_text(text)


def normalise_pdf_text(text: str) -> str:
    """Line endings, ligatures, control characters and Unicode composition (NFC)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text.translate(_LIGATURES)
    text = _CONTROL.sub("", text)
    text = unicodedata.normalize("NFC", text)
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def _repair_without_boxes(text: str) -> str:
    text = _DIAERESIS_BEFORE.sub(lambda m: m.group(1) + "\u0308", text)
    text = _DIAERESIS_AFTER.sub(lambda m: m.group(1) + "\u0308", text)
    return text.replace(_PDFIUM_HYPHEN, "-")


def _same_line(a: Box, b: Box) -> bool:
    return min(a[3], b[3]) - max(a[1], b[1]) > 0


def _height(box: Box) -> float:
    return max(box[3] - box[1], 0.1)


def _repair_with_boxes(text: str, boxes: list[Box]) -> str:
    chars = list(text)
    removed: set[int] = set()
    marks: dict[int, list[str]] = {}

    for i, ch in enumerate(chars):
        if ch != _PDFIUM_HYPHEN:
            continue
        before, after = i - 1, i + 1
        # A hyphen that ended a line (the next glyph sits lower) was a hyphenation point.
        if before >= 0 and after < len(chars) and not _same_line(boxes[before], boxes[after]):
            chars[i] = ""
        else:
            chars[i] = "-"

    letters = sorted(
        (boxes[j][0], j)
        for j, ch in enumerate(chars)
        if ch.isalpha() and boxes[j][2] > boxes[j][0] and boxes[j][3] > boxes[j][1]
    )
    lefts = [left for left, _ in letters]
    for i, ch in enumerate(chars):
        mark = _SPACING_ACCENTS.get(ch)
        if mark is None:
            continue
        target = _letter_below(boxes[i], boxes, letters, lefts)
        if target is not None:
            removed.add(i)
            marks.setdefault(target, []).append(mark)

    if not removed:
        return "".join(chars)
    dropped = _drop_split_spaces(chars, boxes, removed)
    return "".join(
        ch + "".join(marks.get(j, ()))
        for j, ch in enumerate(chars)
        if j not in removed and j not in dropped
    )


def _letter_below(
    accent: Box, boxes: list[Box], letters: list[tuple[float, int]], lefts: list[float]
) -> int | None:
    """The letter whose glyph the accent sits on: horizontally over it, just above its top."""
    centre = (accent[0] + accent[2]) / 2
    best: tuple[float, int] | None = None
    # Glyphs are narrower than 30 pt, so only letters starting a little left of the accent
    # centre can lie under it.
    lo = bisect.bisect_left(lefts, centre - 30.0)
    hi = bisect.bisect_right(lefts, centre + 1.0)
    for _, j in letters[lo:hi]:
        box = boxes[j]
        height = _height(box)
        tolerance = 0.15 * (box[2] - box[0])
        if not box[0] - tolerance <= centre <= box[2] + tolerance:
            continue
        if not box[1] + 0.5 * height <= accent[1] <= box[3] + 0.6 * height:
            continue
        score = abs(accent[1] - box[3]) + abs(centre - (box[0] + box[2]) / 2)
        if best is None or score < best[0]:
            best = (score, j)
    return None if best is None else best[1]


def _drop_split_spaces(chars: list[str], boxes: list[Box], removed: set[int]) -> set[int]:
    """Spaces pdfium inserted around a misplaced accent, inside one word, are dropped."""
    dropped: set[int] = set()
    for i in removed:
        left = i - 1
        while left >= 0 and (left in removed or chars[left] == " "):
            left -= 1
        right = i + 1
        while right < len(chars) and (right in removed or chars[right] == " "):
            right += 1
        if left < 0 or right >= len(chars):
            continue
        if not (chars[left].isalpha() and chars[right].isalpha()):
            continue
        a, b = boxes[left], boxes[right]
        gap = b[0] - a[2]
        if _same_line(a, b) and -0.5 <= gap <= 0.25 * max(_height(a), _height(b)):
            dropped.update(j for j in range(left + 1, right) if chars[j] == " ")
    return dropped


def _metadata_title(document: pdfium.PdfDocument) -> str:
    raw = document.get_metadata_dict(skip_empty=True).get("Title", "")
    return sensible_title(raw)


def sensible_title(raw: str) -> str:
    """A metadata title worth showing, or "" for generic stand-ins ("Untitled",
    "Microsoft Word - x.docx") and file names."""
    title = " ".join(unicodedata.normalize("NFC", raw).split())
    if not 2 <= len(title) <= 300 or not any(ch.isalpha() for ch in title):
        return ""
    if _SENSELESS_TITLE.search(title):
        return ""
    return title
