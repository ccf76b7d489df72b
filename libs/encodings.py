"""Encoding labels as documents and servers declare them (an HTML `<meta charset>`, an XML
declaration, an HTTP `Content-Type: ...; charset=`), read the way browsers read them."""

from __future__ import annotations

import codecs

# A byte order mark says what a text is before anything else does.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Labels that mean Windows-1252 on the web (WHATWG Encoding): pages declaring them use its
# curly quotes, dashes and euro sign.
_WINDOWS_1252 = frozenset({"iso8859-1", "ascii"})


def canonical(encoding: str) -> str:
    """Python's own name for `encoding` ("windows-1252" -> "cp1252"); LookupError if unknown."""
    return codecs.lookup(encoding).name


def declared_codec(label: str, data: bytes) -> str | None:
    """Python's codec for `label` if it reads `data`; `iso-8859-1` and `us-ascii` as
    Windows-1252 when that reads it. None for a label Python does not know, for UTF-16 and
    UTF-32 (only a byte order mark says those), and for one that does not fit the bytes."""
    try:
        codec = canonical(label.strip())
    except LookupError:
        return None
    if codec.startswith(("utf-16", "utf-32")):
        return None
    if codec in _WINDOWS_1252 and decodes(data, "cp1252"):
        return "cp1252"
    return codec if decodes(data, codec) else None


def bom_codec(data: bytes) -> str | None:
    """The codec a byte order mark at the start of `data` names, if there is one."""
    return next((codec for bom, codec in _BOMS if data.startswith(bom)), None)


def decodes(data: bytes, codec: str) -> bool:
    try:
        data.decode(codec)
    except UnicodeDecodeError:
        return False
    return True
