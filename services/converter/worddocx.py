"""Word documents (`.docx`): what markitdown (mammoth) is handed, and its notes tidied after.

markitdown reads a Word file's body as it is stored, which is not what its reader sees:

- **Hidden text** (`<w:vanish/>`: notes to the author, a worksheet's answers, internal
  remarks) is kept, glued to the text beside it. Left out here, before markitdown reads the
  file: a run hidden by its own formatting, else by its character style, else by its
  paragraph's style (styles follow `basedOn`; `w:val="0"`, `"false"` or `"off"` shows it),
  in the body, footnotes and endnotes. The run stays, less its text, tabs and breaks, so
  that fields keep their begin, separator and end marks.
- **A table of contents** repeats the headings with page numbers ("Findings 1"). Left out:
  a content control Word and LibreOffice mark as one, and the result of a `TOC` field.
- **Footnotes and endnotes** come out as links (`[[1]](#footnote-2)`) and a numbered list
  with back links (`1. text [↑](#footnote-ref-2)`); `tidy_notes` writes them as the other
  readers do: `[^1]` in the text and `[^1]: text` at the end.

Text deleted with tracked changes (`w:del`) mammoth already leaves out. A document with
nothing of this is handed on as it came (one scan of its XML for the words); one whose XML
does not parse is too, for markitdown to refuse with its own message (`packages`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from xml.etree.ElementTree import Element, register_namespace, tostring

from services.converter.packages import READ_ERRORS, opened, parsed, with_members

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
register_namespace("w", _W)  # the prefix Word writes, kept for readers that look at it
_PARTS = ("word/document.xml", "word/footnotes.xml", "word/endnotes.xml")
_STYLES = "word/styles.xml"
_MARKERS = (b"vanish", b"TOC", b"Table of Contents")
_OFF = ("0", "false", "off")


def _w(tag: str) -> str:
    return f"{{{_W}}}{tag}"


# What a run shows: text, tabs, breaks, symbols and hyphens.
_SHOWN = frozenset(map(_w, ("t", "tab", "br", "cr", "sym", "noBreakHyphen", "softHyphen")))
_NOTE_MARK = re.compile(r"\[\[(\d+)\]\]\(#(?:foot|end)note-\d+\)")
# A note at the end: its number, its text (paragraphs indented under it), its back link.
_NOTE = re.compile(
    r"^(\d+)\. ((?:(?!^\d+\. ).)*?) ?\[↑\]\(#(?:foot|end)note-ref-\d+\)$", re.M | re.S
)


def _vanish(properties: Element | None) -> bool | None:
    """Whether run properties (`w:rPr`) hide their text: None if they do not say."""
    mark = properties.find(_w("vanish")) if properties is not None else None
    if mark is None:
        return None
    return mark.get(_w("val"), "true").lower() not in _OFF


def _value(properties: Element | None, tag: str) -> str | None:
    found = properties.find(_w(tag)) if properties is not None else None
    return found.get(_w("val")) if found is not None else None


def hidden_styles(root: Element | None) -> dict[str, bool]:
    """Style id -> whether the style hides its text, for the styles that say, directly or
    through the styles they are based on."""
    own: dict[str, bool | None] = {}
    base: dict[str, str] = {}
    for style in root.iter(_w("style")) if root is not None else ():
        sid = style.get(_w("styleId"))
        if sid is None:
            continue
        own[sid] = _vanish(style.find(_w("rPr")))
        parent = _value(style, "basedOn")
        if parent:
            base[sid] = parent
    resolved: dict[str, bool] = {}
    for sid in own:
        seen, at = set(), sid
        while at in own and own[at] is None and at in base and at not in seen:
            seen.add(at)
            at = base[at]
        value = own.get(at)
        if value is not None:
            resolved[sid] = value
    return resolved


def _blank(run: Element) -> bool:
    """Remove what `run` shows; whether it showed anything."""
    shown = [child for child in run if child.tag in _SHOWN]
    for child in shown:
        run.remove(child)
    return bool(shown)


def _runs_of(paragraph: Element) -> list[Element]:
    """The runs of `paragraph` (inside hyperlinks, insertions, fields and content controls
    too), not those of the paragraphs of a text box inside one, walked on their own."""
    runs: list[Element] = []
    pending = list(paragraph)
    while pending:
        element = pending.pop()
        if element.tag == _w("r"):
            runs.append(element)
        elif element.tag != _w("p"):
            pending.extend(element)
    return runs


def _strip_hidden(root: Element, styles: dict[str, bool]) -> bool:
    changed = False
    for paragraph in root.iter(_w("p")):
        paragraph_hides = styles.get(_value(paragraph.find(_w("pPr")), "pStyle") or "", False)
        for run in _runs_of(paragraph):
            properties = run.find(_w("rPr"))
            hides = _vanish(properties)
            if hides is None:
                hides = styles.get(_value(properties, "rStyle") or "", paragraph_hides)
            if hides:
                changed = _blank(run) or changed
    return changed


@dataclass
class _Field:
    instruction: str = ""
    contents: bool = False  # past its separator, and a table of contents


def _is_toc(instruction: str) -> bool:
    return instruction.split()[:1] == ["TOC"]


def _strip_contents(root: Element) -> bool:
    """Leave out tables of contents: content controls marked as one, and `TOC` fields'
    results (fields nest, and one can span paragraphs)."""
    changed = False
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag == _w("sdt") and any(
                (gallery.get(_w("val")) or "").startswith("Table of Contents")
                for gallery in child.iter(_w("docPartGallery"))
            ):
                parent.remove(child)
                changed = True
    for simple in root.iter(_w("fldSimple")):
        if _is_toc(simple.get(_w("instr")) or ""):
            for run in simple.iter(_w("r")):
                changed = _blank(run) or changed
    fields: list[_Field] = []  # the fields open at this point, outermost first
    for run in root.iter(_w("r")):
        for child in list(run):
            if child.tag == _w("fldChar"):
                kind = child.get(_w("fldCharType"))
                if kind == "begin":
                    fields.append(_Field())
                elif kind == "separate" and fields:
                    fields[-1].contents = _is_toc(fields[-1].instruction)
                elif kind == "end" and fields:
                    fields.pop()
            elif child.tag == _w("instrText") and fields:
                fields[-1].instruction += child.text or ""
            elif child.tag in _SHOWN and any(field.contents for field in fields):
                run.remove(child)
                changed = True
    return changed


def visible_docx(data: bytes) -> bytes:
    """`data` (a .docx, already bounded by `check_archive`) without its hidden text and its
    table of contents; the same bytes when it has neither or its XML cannot be read here."""
    try:
        with opened(data) as archive:
            names = set(archive.namelist())
            parts = {n: archive.read(n) for n in _PARTS if n in names}
            raw_styles = archive.read(_STYLES) if _STYLES in names else b""
            if not any(m in raw for raw in (*parts.values(), raw_styles) for m in _MARKERS):
                return data
            styles = hidden_styles(parsed(raw_styles)) if raw_styles else {}
            rewritten: dict[str, bytes] = {}
            for name, raw in parts.items():
                root = parsed(raw)
                if root is None:
                    return data
                if _strip_hidden(root, styles) | _strip_contents(root):
                    rewritten[name] = tostring(root, encoding="utf-8", xml_declaration=True)
            if not rewritten:
                return data
            return with_members(archive, rewritten)
    except READ_ERRORS:
        return data  # markitdown reads it and says what is wrong


def tidy_notes(markdown: str) -> str:
    """mammoth's note links and back-linked list as Markdown footnotes (`[^n]`)."""
    if "note-ref-" not in markdown:
        return markdown
    markdown = _NOTE_MARK.sub(r"[^\1]", markdown)

    def note(match: re.Match[str]) -> str:
        text = re.sub(r"\n {3}(?=\S)", "\n    ", match.group(2).rstrip())
        return f"[^{match.group(1)}]: {text}"

    return _NOTE.sub(note, markdown)
