"""What a file under a legacy Office name (`.doc`, `.ppt`, `.xls`) really holds when it is not
in its binary format, so it is read as what it is; its file type stays the name's.

Such names cover more than Word 97-2003 files. People rename `.docx` files; many web
applications export "Word" and "Excel" files that are a web page or tab-separated text;
Confluence's export to Word, and Word's own "Single File Web Page", are a web page saved as
one MIME file, as an `.mhtml` is; WordPad saves RTF under a `.doc` name; and older
documentation ships plain text as `.doc` (`README.doc`), which Word opens as text. A file
that is none of these is left to its format's reader, which refuses it with what to do
instead.
"""

from __future__ import annotations

import re

from libs.formats import SNIFF_BYTES, looks_like_text
from services.converter import ole
from services.converter.archive import is_zip
from services.converter.formats import ROUTES, Route

# The Office Open XML successor of each legacy format: what a renamed one is.
SUCCESSORS = {".doc": ".docx", ".ppt": ".pptx", ".xls": ".xlsx"}
_WEB_PAGE = re.compile(rb"^\s*(?:<!doctype html|<html|<head|<meta|<table)", re.IGNORECASE)
# A MIME message's header block: each line a header (`Name: value`) or its continuation.
_HEADER_LINE = re.compile(rb"^(?:[!-9;-~]+:|[ \t])")
_MIME_VERSION = re.compile(rb"^mime-version:", re.IGNORECASE | re.MULTILINE)


def real_format(data: bytes, ext: str, route: Route) -> tuple[str, Route]:
    """The extension and route to read `data`, named with the legacy Office extension `ext`,
    by: its successor's when it is a ZIP package, `.html` for a web page, `.mhtml` for a web
    page saved as one MIME file (not for `.ppt`), `.tsv` for an `.xls` of delimited text (its
    separator found as a CSV's is), and for a `.doc`, `.rtf` for RTF and `.txt` for plain
    text; else its own."""
    if is_zip(data):
        return SUCCESSORS[ext], route
    if ext == ".ppt" or data.startswith(ole.MAGIC):
        return ext, route
    head = data.lstrip(b"\xef\xbb\xbf")[:SNIFF_BYTES]
    if _WEB_PAGE.match(head[:512]):
        return ".html", Route.TEXT
    if saved_page(data):
        return ".mhtml", ROUTES[".mhtml"]
    if ext == ".xls" and b"\x00" not in data[:SNIFF_BYTES]:
        return ".tsv", Route.TEXT
    if ext == ".doc" and data.lstrip()[:5] == b"{\\rtf":
        return ".rtf", ROUTES[".rtf"]
    if ext == ".doc" and looks_like_text(head):
        return ".txt", Route.TEXT
    return ext, route


def saved_page(data: bytes) -> bool:
    """Whether `data` starts as a MIME message does (a header block naming a MIME version):
    a web page saved as one file under another name."""
    head = data[:SNIFF_BYTES].replace(b"\r\n", b"\n").split(b"\n\n", 1)[0]
    lines = head.split(b"\n")
    return bool(_MIME_VERSION.search(head)) and all(_HEADER_LINE.match(line) for line in lines)
