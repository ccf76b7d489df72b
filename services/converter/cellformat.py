"""A spreadsheet number as its cell's number format shows it, for the formats that change
what the number says: percentages (`0.0%`: 0.0625 is `6.3%`), a fixed count of decimals
(`0.00`: 4 is `4.00`), scientific notation (`0.00E+00`), and the text a format puts around
the number (`€`, `"kg"`, `[$USD]`). Digit grouping (`#,##0`) is left out, so that a search
for 1200 finds `1200.50` however the author's locale groups it; a format's trailing commas
scale the number as Excel does (`0.0,,` shows millions).

Sections (`positive;negative;zero`), colours and conditions in brackets, padding (`_)`)
and fill (`* `) are read as Excel reads them. Dates and times, fractions, the text format
and anything else not read here give None: the caller writes the number in the General
format then.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal, localcontext

# Pieces of a format: quoted text, an escaped character, a bracketed part, padding or fill
# with the character after it, or one character.
_PIECE = re.compile(r'"[^"]*"|\\.|\[[^\]]*\]|[_*].|.', re.DOTALL)
_CURRENCY = re.compile(r"^\[\$([^-\]]*)(?:-[0-9A-Fa-f]+)?\]$")
_NOT_NUMBERS = frozenset("dmyhsbgDMYHSBG/@")  # date and time tokens, fractions, text
_MANTISSA = re.compile(r"^([0#?,]*)(?:\.([0#?]*))?(,*)$")
_EXPONENT = re.compile(r"^[eE][+-]([0#?]+)$")
_MAX_DECIMALS = 30  # Excel's own limit
_MAX_SCALING = 4  # percent signs, or trailing commas: more than any real format has
# Digits enough for any float written in full (1e308) with the most decimals.
_PRECISION = 400


def displayed(value: float, number_format: str) -> str | None:
    """`value` as `number_format` shows it, or None where the format is not one read here."""
    if not number_format or number_format.lower() == "general" or not _finite(value):
        return None
    sections = _sections(number_format)
    if sections is None:
        return None
    sign = ""
    pieces = sections[0]
    if value < 0 and len(sections) > 1:
        pieces, value = sections[1], -value  # this section writes the sign, if any
    elif value == 0 and len(sections) > 2:
        pieces = sections[2]
    elif value < 0:
        sign, value = "-", -value
    with localcontext() as context:
        context.prec = _PRECISION
        shown = _render(value, pieces)
    if shown is None:
        return None
    if sign and any(ch.isdigit() and ch != "0" for ch in shown):
        return sign + shown  # "-$5.00"; a value that rounds to zero shows no sign
    return shown


def _finite(value: float) -> bool:
    """A float's range: a whole number too large for one (a crafted file) is not read."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _sections(number_format: str) -> list[list[str]] | None:
    """The format's sections as their pieces; the fourth is for text, not numbers."""
    sections: list[list[str]] = [[]]
    for piece in _PIECE.findall(number_format):
        if piece == ";":
            sections.append([])
        else:
            sections[-1].append(piece)
    return sections[:3] if len(sections) <= 4 else None


def _render(value: float, pieces: list[str]) -> str | None:
    """The number laid out by one section: its digit pattern, and the text before and after
    it (a format with text between its digit symbols is not read here)."""
    before: list[str] = []
    after: list[str] = []
    pattern = ""
    percents = pieces.count("%")  # a quoted or escaped % is text, not a percentage
    for piece in pieces:
        if piece in _NOT_NUMBERS:
            return None
        is_pattern = (
            piece in "0#?.,"
            or (piece in "eE" and pattern)
            or (piece in "+-" and pattern[-1:] in ("e", "E"))
        )
        if is_pattern:
            if after:
                return None
            pattern += piece
            continue
        if piece.startswith("[") and piece[1:2] in "<>=":
            return None  # a condition picks the section: not read here
        if piece.startswith("["):
            currency = _CURRENCY.match(piece)
            text = currency.group(1) if currency else ""  # a colour, a locale
        elif piece.startswith('"'):
            text = piece[1:-1]
        elif piece.startswith("\\"):
            text = piece[1:]
        elif piece[0] in "_*":
            text = ""  # padding to a character's width, or a fill to the cell's width
        else:
            text = piece
        (after if pattern else before).append(text)
    if not pattern:
        return "".join(before)  # text alone ("-" for zero in accounting formats)
    if percents > _MAX_SCALING:
        return None
    number = _number(Decimal(repr(value)).scaleb(2 * percents), pattern)
    return None if number is None else "".join(before) + number + "".join(after)


def _number(value: Decimal, pattern: str) -> str | None:
    mantissa, *rest = re.split(r"(?=[eE])", pattern, maxsplit=1)
    exponent = rest[0] if rest else ""  # "E+00"
    if exponent and not _EXPONENT.match(exponent):
        return None
    match = _MANTISSA.match(mantissa)
    if match is None:
        return None
    integer, fraction, scale = match[1], match[2] or "", match[3]
    # Commas between digit symbols group digits (left out); those at the integer
    # part's end, or after the decimals, divide by 1,000 each.
    scale += integer[len(integer.rstrip(",")) :]
    integer = integer.replace(",", "")
    if len(fraction) > _MAX_DECIMALS or len(scale) > _MAX_SCALING:
        return None
    value = value.scaleb(-3 * len(scale))
    power = 0
    if exponent:
        power = value.adjusted() if value else 0
        value = value.scaleb(-power)
    text = _fixed(value, integer, fraction)
    if exponent and text.lstrip("0.") and abs(Decimal(text)) >= 10:  # 9.996 rounded to 10.00
        power += 1
        text = _fixed(value.scaleb(-1), integer, fraction)
    if not exponent:
        return text
    digits = exponent[2:].count("0")
    exponent_sign = "-" if power < 0 else ("+" if exponent[1] == "+" else "")
    return f"{text}E{exponent_sign}{str(abs(power)).rjust(digits, '0')}"


def _fixed(value: Decimal, integer: str, fraction: str) -> str:
    """`value` (not negative) with the decimals `fraction` asks for: as many as it has
    digit symbols, the trailing zeros of the optional ones (`#`, `?`) dropped."""
    places = len(fraction)
    rounded = value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    whole, _, decimals = f"{rounded:f}".partition(".")
    required = len(fraction.rstrip("#?"))
    decimals = decimals[:required] + decimals[required:].rstrip("0")
    whole = whole.lstrip("0").rjust(integer.count("0"), "0")
    if not whole and (decimals or not integer):
        whole = "0"  # "#.##" shows 0.5 as .5, and "." alone; written 0.5 here
    return f"{whole}.{decimals}" if decimals else whole
