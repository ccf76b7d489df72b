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
"""

from __future__ import annotations

import codecs

import charset_normalizer

BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
DEFAULT_LEGACY = "cp1252"
# How close to the detector's first pick a candidate must score to count as a tie.
_CHAOS_TIE = 0.01
_COHERENCE_TIE = 0.02


def canonical(encoding: str) -> str:
    """Python's own name for `encoding` ("windows-1252" -> "cp1252"); LookupError if unknown."""
    return codecs.lookup(encoding).name


def detect_charset(data: bytes, legacy: str = DEFAULT_LEGACY) -> str:
    """The encoding to read `data` with (see the module docstring)."""
    for bom, encoding in BOMS:
        if data.startswith(bom):
            return encoding
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return "utf-8"
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
