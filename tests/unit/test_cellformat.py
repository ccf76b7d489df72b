"""A number as its cell's number format shows it (`services.converter.cellformat`)."""

from __future__ import annotations

import random

import pytest

from services.converter.cellformat import displayed

ACCOUNTING = '_("$"* #,##0.00_);_("$"* \\(#,##0.00\\);_("$"* "-"??_);_(@_)'


@pytest.mark.parametrize(
    ("value", "number_format", "shown"),
    [
        (0.0625, "0.0%", "6.3%"),  # rounded half up, as Excel rounds
        (0.0625, "0%", "6%"),
        (0.0624755954705193, "0.00%", "6.25%"),
        (4, "0.00", "4.00"),
        (5.125, "0.0#", "5.13"),  # optional decimals: trailing zeros dropped
        (5.1, "0.0#", "5.1"),
        (7, "000", "007"),
        (2.5, "0", "3"),
        (-2.5, "0", "-3"),
        (-0.004, "0.00", "0.00"),  # rounds to zero: no sign
        (1200.5, "#,##0.00", "1200.50"),  # digit grouping left out
        (1234.5, "#,##0", "1235"),
        (1234567, '0.0,," M"', "1.2 M"),  # trailing commas scale by 1,000 each
        (1234567, "#,##0,", "1235"),
        (1200.5, '"€"#,##0.00', "€1200.50"),
        (1200.5, "#,##0.00\\ [$€-407]", "1200.50 €"),
        (-1200.5, "$#,##0.00", "-$1200.50"),  # the sign before the currency
        (-1200.5, "#,##0.00;(#,##0.00)", "(1200.50)"),  # the negative section shows it
        (0, '#,##0.00;(#,##0.00);"-"', "-"),
        (3.5, ACCOUNTING, "$3.50"),
        (-3.5, ACCOUNTING, "$(3.50)"),
        (0, ACCOUNTING, "$-"),
        (3.5, "[Red]0.00", "3.50"),
        (-3.5, "0.00;[Red]-0.00", "-3.50"),
        (12345.678, "0.00E+00", "1.23E+04"),
        (0.000123, "0.0E+00", "1.2E-04"),
        (9.996, "0.00E+00", "1.00E+01"),
        (5, '"Total: "0', "Total: 5"),
        (5, '0"%"', "5%"),  # a quoted % is text, not a percentage
        (5, "0\\%", "5%"),
        (0.5, '0 "kg"', "1 kg"),
        (0.5, "#.##", "0.5"),
    ],
)
def test_formats_that_change_what_a_number_says(value: float, number_format: str, shown: str):
    assert displayed(value, number_format) == shown


@pytest.mark.parametrize(
    "number_format",
    [
        "General",
        "",
        "@",  # text
        "# ?/?",  # fractions
        "d/m/yyyy",  # dates and times
        "[$-409]d-mmm-yy",
        "mm:ss",
        "[h]:mm",
        "[>=100]0;0.0",  # a condition picks the section
        '0" and "0',  # digits after text
    ],
)
def test_other_formats_are_left_to_the_general_format(number_format: str) -> None:
    assert displayed(3.5, number_format) is None


def test_numbers_that_are_not_finite_are_left_as_they_are() -> None:
    assert displayed(float("inf"), "0.00") is None
    assert displayed(float("nan"), "0%") is None


@pytest.mark.parametrize(
    ("value", "number_format", "shown"),
    [
        (1.7976931348623157e308, "0.00", "17976931348623157" + "0" * 292 + ".00"),
        (5e-324, "0.00E+00", "5.00E-324"),
        (10**400, "0.00", None),  # a whole number no float holds (a crafted file)
        (1.5, "0." + "0" * 31, None),  # more decimals than Excel allows
        (1e12, "0.0,,,,,", None),  # scaled by more than any real format
    ],
)
def test_extremes_are_written_or_left_alone(value: float, number_format: str, shown: str | None):
    assert displayed(value, number_format) == shown


def test_no_format_makes_it_fail() -> None:
    """A conversion must not fail on a number's format: random formats of the characters
    formats are made of, over extreme values, give text or None."""
    rng = random.Random(7)
    alphabet = '0#?.,%E+-;"\\[]$_* ()abcdmyhs@/<>='
    values = [0, -1, 0.5, 1e-300, -1e300, 5e-324, 1.7976931348623157e308, 2**60, 10**400]
    for _ in range(5000):
        number_format = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24)))
        for value in values:
            shown = displayed(value, number_format)
            assert shown is None or isinstance(shown, str)
