"""Which encoding to read a text file's bytes with.

A byte order mark decides first, then UTF-8 (strict: any text that decodes as UTF-8 is
taken as UTF-8). What is left is a legacy encoding, and there the detector
(`charset_normalizer`) cannot tell the single-byte Latin code pages apart on ordinary text:
French, Spanish, Portuguese, Swedish or English with curly quotes saved as Windows-1252 (what
Notepad's "ANSI" writes on a Western Windows) scores exactly as well as Windows-1250, -1257
or ISO 8859-10, and its first pick is then Windows-1250, which turns "crème" into "crčme"
and "niño" into "nińo". So among the detector's candidates that score as well as its first
pick (the same chaos within `_CHAOS_TIE`, coherence within `_COHERENCE_TIE`), the
deployment's legacy encoding wins (`TEXT_LEGACY_ENCODING`, Windows-1252 by default: set it
to a host's own ANSI code page, e.g. cp1257 for Lithuanian). Text the legacy encoding reads
badly (Polish or Czech in Windows-1250, Russian in Windows-1251, Greek, Japanese) scores
worse there, so the detector's pick stands. Measured on 21 short samples in 14 encodings
(docs/architecture.md, "Text encodings"): 10 read right before this rule, 17 with it.

HTML and XML usually say what they are in: `<meta charset>`, the http-equiv Content-Type, the
XML declaration. After a BOM and UTF-8, that declaration decides when the bytes decode in it,
as in browsers (which read `iso-8859-1` and `us-ascii` as Windows-1252); Turkish or Hebrew
pages the detector misreads then read right.
"""

from __future__ import annotations

import codecs
import re

import charset_normalizer

BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
DEFAULT_LEGACY = "cp1252"
# Markup that names its encoding: HTML's <meta charset> or http-equiv, the XML declaration.
# Browsers look in the first 1024 bytes; so does this.
MARKUP = frozenset({".html", ".htm", ".xml"})
_DECLARED = re.compile(rb"""(?:charset|encoding)\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)
_PRESCAN_BYTES = 1024
# Labels that mean Windows-1252 on the web (WHATWG Encoding): pages declaring them use
# its curly quotes, dashes and euro sign.
_WEB_WINDOWS_1252 = frozenset({"latin-1", "iso8859-1", "ascii"})
# How close to the detector's first pick a candidate must score to count as a tie.
_CHAOS_TIE = 0.01
_COHERENCE_TIE = 0.02


def canonical(encoding: str) -> str:
    """Python's own name for `encoding` ("windows-1252" -> "cp1252"); LookupError if unknown."""
    return codecs.lookup(encoding).name


def detect_charset(data: bytes, legacy: str = DEFAULT_LEGACY, *, markup: bool = False) -> str:
    """The encoding to read `data` with (see the module docstring); with `markup` (HTML,
    XML), an encoding the document declares comes before the detector, when it reads it."""
    for bom, encoding in BOMS:
        if data.startswith(bom):
            return encoding
    if _decodes(data, "utf-8"):
        return "utf-8"
    declared = _declared(data) if markup else None
    if declared is not None:
        return declared
    legacy = canonical(legacy)
    candidates = list(charset_normalizer.from_bytes(data))
    if not candidates:
        return legacy if _decodes(data, legacy) else "latin-1"
    first = candidates[0]
    for match in candidates:
        if (
            canonical(match.encoding) == legacy
            and match.chaos <= first.chaos + _CHAOS_TIE
            and match.coherence >= first.coherence - _COHERENCE_TIE
        ):
            return legacy
    return canonical(first.encoding)


def _decodes(data: bytes, encoding: str) -> bool:
    try:
        data.decode(encoding)
    except UnicodeDecodeError:
        return False
    return True


def _declared(data: bytes) -> str | None:
    """The encoding markup declares in its first bytes, if Python knows it and it reads
    `data`."""
    found = _DECLARED.search(data[:_PRESCAN_BYTES])
    if found is None:
        return None
    try:
        encoding = canonical(found.group(1).decode("ascii"))
    except (LookupError, UnicodeDecodeError):
        return None
    if encoding.startswith(("utf-16", "utf-32")):
        return None  # a byte order mark says so; a declaration in 8-bit bytes is wrong
    if encoding in _WEB_WINDOWS_1252 and _decodes(data, "cp1252"):
        encoding = "cp1252"
    return encoding if _decodes(data, encoding) else None
