"""Which encoding to read a text file's bytes with, and the text (`read_text`).

A byte order mark decides first (or, missing, the control bytes of UTF-16 text), then UTF-8:
any text that decodes as UTF-8 is taken as UTF-8, and so is UTF-8 with a few bytes that are
not (`_UTF8_SLIPS`: a file cut in the middle of a character, one Windows-1252 byte pasted
into it), which is read with those bytes replaced (U+FFFD) instead of every other
character of the file turned into mojibake by a legacy code page. What is left is a legacy
encoding, and there the detector (`charset_normalizer`) cannot tell the single-byte Latin
code pages apart on ordinary text: French, Spanish, Portuguese, Swedish or English with
curly quotes saved as Windows-1252 (what Notepad's "ANSI" writes on a Western Windows)
scores exactly as well as Windows-1250, -1257 or ISO 8859-10, and its first pick is then
Windows-1250, which turns "crème" into "crčme" and "niño" into "nińo". So among the
detector's candidates that score as well as its first pick (the same chaos within
`_CHAOS_TIE`, and coherence within `_COHERENCE_TIE` or more of the non-ASCII characters read
as letters: a German list exported by Excel came out of the detector in the DOS code page
775 as "J³rgen;K÷ln"), the deployment's legacy encoding wins
(`TEXT_LEGACY_ENCODING`, Windows-1252 by default: set it to a host's own ANSI code page,
e.g. cp1257 for Lithuanian). Text the legacy encoding reads worse (Polish or Czech in
Windows-1250, Russian in Windows-1251, Greek, Japanese) keeps the detector's pick. Measured
on 21 short samples in 14 encodings (docs/architecture.md, "Text encodings"): 10 read right
before this rule, 17 with it. A note of a line or two gives the detector too little to
score, and it read "Fähre" as Big5 "F鄣re": a pick that puts every letter of another script
inside a word of ASCII letters, one at a time in a code page of two bytes a character, loses
to the legacy encoding when that reads them all as accented European letters
(`_misread_latin`, `_accented_latin`).

HTML and XML usually say what they are in: `<meta charset>`, the http-equiv Content-Type, the
XML declaration. After a BOM and UTF-8, that declaration decides when the bytes decode in it,
as in browsers (which read `iso-8859-1` and `us-ascii` as Windows-1252); Turkish or Hebrew
pages the detector misreads then read right.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import groupby

import charset_normalizer

from libs.encodings import bom_codec, canonical, declared_codec, decodes

DEFAULT_LEGACY = "cp1252"
# Markup that names its encoding: HTML's <meta charset> or http-equiv, the XML declaration.
# Browsers look in the first 1024 bytes; so does this.
MARKUP = frozenset({".html", ".htm", ".xml"})
_DECLARED = re.compile(rb"""(?:charset|encoding)\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)
_PRESCAN_BYTES = 1024
_WIDE_SAMPLE = 4096
# C0 control bytes that no text holds (tab, line feed, form feed and carriage return do).
_CONTROL_BYTES = frozenset(set(range(0x20)) - {0x09, 0x0A, 0x0C, 0x0D})

# UTF-8 with slips: at least this many well-formed multi-byte characters for each byte
# sequence that is not UTF-8. Text in a legacy code page has next to none (its accented
# letters are single bytes that UTF-8 does not allow on their own).
_UTF8_SLIPS = 20

# How close to the detector's first pick a candidate must score to count as a tie.
_CHAOS_TIE = 0.01
_COHERENCE_TIE = 0.02
_WORD = re.compile(r"[^\W\d_]+")  # a run of letters
# Below U+0250 every letter is a Latin one but the ordinals and the micro sign.
_BEYOND_0250 = re.compile("[^\u0000-\u024f]")
_UNLATIN_BELOW_0250 = "\u00aa\u00b5\u00ba"


def detect_charset(data: bytes, legacy: str = DEFAULT_LEGACY, *, markup: bool = False) -> str:
    """The encoding to read `data` with (see the module docstring); with `markup` (HTML,
    XML), an encoding the document declares comes before the detector, when it reads it."""
    bom = bom_codec(data) or _wide_without_bom(data)
    if bom is not None:
        return bom
    if decodes(data, "utf-8") or _utf8_with_slips(data):
        return "utf-8"
    declared = _declared(data) if markup else None
    if declared is not None:
        return declared
    legacy = canonical(legacy)
    candidates = list(charset_normalizer.from_bytes(data))
    if not candidates:
        return legacy if decodes(data, legacy) else "latin-1"
    first = candidates[0]
    misread = canonical(first.encoding) != legacy and _misread_latin(data, str(first))
    if misread and _accented_latin(data, legacy):
        return legacy  # Latin-script text, read in another script's code page
    # The detector lists once each reading that several code pages give alike.
    match = next((m for m in candidates if legacy in map(canonical, m.could_be_from_charset)), None)
    if match is not None and match.chaos <= first.chaos + _CHAOS_TIE:
        if match.coherence >= first.coherence - _COHERENCE_TIE:
            return legacy
        if _letters(str(match)) > _letters(str(first)):
            return legacy
    return canonical(first.encoding)


def _misread_latin(data: bytes, text: str) -> bool:
    """Whether `text`, the detector's reading of `data`, is Latin-script text read in another
    script's code page: every letter outside the Latin script sits in a word with ASCII
    letters ("Fähre" as "F鄣re" in Big5, "Smörgåsbord" as "Sm顤g廛bord", "Hyvää" as "Hyvﻛﻛ"
    in the Urdu code page 1006), where text written in that script has words of its own. A
    code page of two bytes a character makes one character of an accented letter and the
    ASCII letter after it, so there each such character stands alone between Latin letters;
    Chinese, Japanese or Korean joined to a Latin word runs for several ("使用Python编写程序",
    "Pythonの使い方"), and keeps its pick."""
    if not _BEYOND_0250.search(text) and not any(c in text for c in _UNLATIN_BELOW_0250):
        return False  # every letter is a Latin one (a Western text, looked at in C)
    foreign = []
    for found in _WORD.finditer(text):  # one at a time: a word of the script's own ends it
        word = found.group()
        if word.isascii() or all(map(_latin, word)):
            continue
        if not any(c.isascii() for c in word):
            return False  # a word of that script's own: it is what it reads as
        foreign.append(word)
    if not foreign:
        return False
    if len(text) == len(data):  # one byte a character
        return True
    runs = (len(list(run)) for w in foreign for latin, run in groupby(w, _latin) if not latin)
    return all(length == 1 for length in runs)


def _accented_latin(data: bytes, codec: str) -> bool:
    """Whether `data` reads in `codec` as Latin-script text whose every letter beyond ASCII is
    an accented European one (U+00C0 to U+017F: "ä", "ñ", "ø", "ł"), as Western and Central
    European text does; Japanese in Shift JIS read as Windows-1252 gives "ƒ" and "‚"."""
    if not decodes(data, codec):
        return False
    high = [c for c in data.decode(codec) if not c.isascii() and c.isalpha()]
    return bool(high) and all("\u00c0" <= c <= "\u017f" for c in high)


def _latin(letter: str) -> bool:
    return letter.isascii() or unicodedata.name(letter, "").startswith("LATIN")


def _letters(text: str) -> float:
    """The share of `text`'s non-ASCII characters that are letters. Accented letters are
    what a legacy code page's high bytes mostly hold, so a reading that turns them into
    symbols ("Jürgen" as "J³rgen" in the DOS code page 775) reads worse."""
    high = [c for c in text if ord(c) > 0x7F]
    return sum(c.isalpha() for c in high) / len(high) if high else 1.0


def read_text(data: bytes, legacy: str = DEFAULT_LEGACY, *, markup: bool = False) -> str:
    """`data` decoded in the encoding `detect_charset` picks; UTF-8 with a few slips (see the
    module docstring) with those bytes replaced. UnicodeDecodeError or LookupError if the
    picked encoding does not read it."""
    codec = detect_charset(data, legacy, markup=markup)
    return data.decode(codec, errors="replace" if codec == "utf-8" else "strict")


def _utf8_with_slips(data: bytes) -> bool:
    """UTF-8 but for a few byte sequences (see `_UTF8_SLIPS`)."""
    text = data.decode("utf-8", errors="replace")
    slips = text.count("\ufffd") - data.count("\ufffd".encode())
    wide = sum(1 for c in text if ord(c) > 0x7F) - slips
    return slips > 0 and wide >= _UTF8_SLIPS * slips


def _declared(data: bytes) -> str | None:
    """The encoding markup declares in its first bytes, if it reads `data`."""
    found = _DECLARED.search(data[:_PRESCAN_BYTES])
    return None if found is None else declared_codec(found.group(1).decode("ascii"), data)


def _wide_without_bom(data: bytes) -> str | None:
    """UTF-16 without a byte order mark, told by its control bytes: text has none, but in
    UTF-16 every Latin letter has a zero byte and every Greek or Cyrillic one a 3 or a 4, on
    the odd offsets little-endian, the even ones big-endian. Such bytes also pass as UTF-8,
    which would keep them as control characters."""
    sample = data[:_WIDE_SAMPLE]
    controls = [i for i, byte in enumerate(sample) if byte in _CONTROL_BYTES]
    if len(sample) < 4 or len(controls) < len(sample) // 4:
        return None
    odd = sum(i % 2 for i in controls)
    even = len(controls) - odd
    for codec, mine, other in (("utf-16-le", odd, even), ("utf-16-be", even, odd)):
        if mine >= 4 * other and decodes(data, codec):
            return codec
    return None
