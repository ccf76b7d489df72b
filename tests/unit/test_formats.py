"""The gateway's view of file formats (libs.formats) matches what the converter routes."""

from __future__ import annotations

from libs import formats
from services.converter.formats import ROUTES


def test_convertible_extensions_are_exactly_the_converter_routes() -> None:
    assert set(ROUTES) == formats.CONVERTIBLE_EXTENSIONS


def test_known_but_unavailable_formats_match() -> None:
    assert set(formats.UNAVAILABLE) == formats.KNOWN_EXTENSIONS - formats.CONVERTIBLE_EXTENSIONS


def test_every_spec_extension_is_known() -> None:
    assert set(formats.SPEC_EXTENSIONS) <= formats.KNOWN_EXTENSIONS
