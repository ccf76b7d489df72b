"""The converter's input guards and text repairs: file-type routing, charset detection,
archive bounds, PDF accent folding and title choice. No worker processes, no markitdown."""

from __future__ import annotations

import pytest

from libs.errors import ConversionError, InvalidInputError, TooLargeError, UnsupportedFormatError
from libs.formats import CONVERTIBLE_EXTENSIONS
from services.converter.archive import ArchiveLimits, check_archive
from services.converter.charset import detect_charset
from services.converter.convert import normalise_text
from services.converter.formats import Route, base_name, route_for
from services.converter.pdf import Box, _repair_with_boxes, sensible_title
from tests.conftest import zip_bytes

LIMITS = ArchiveLimits(max_entries=20, max_uncompressed_bytes=1_000_000, max_depth=2)


@pytest.mark.parametrize(
    ("filename", "route"),
    [
        ("report.PDF", Route.PDF),
        ("deck.pptx", Route.SLIDES),
        ("book.xls", Route.SHEETS),
        ("C:\\Users\\me\\notes.md", Route.TEXT),
        ("nb.ipynb", Route.TEXT),
        ("book.epub", Route.DOCUMENT),
        ("memo.doc", Route.DOCUMENT),
        ("deck.ppt", Route.SLIDES),
        ("files.zip", Route.ARCHIVE),
        ("Makefile", Route.TEXT),  # no extension: plain text, if the bytes are text
        ("C:\\src\\LICENSE", Route.TEXT),
    ],
)
def test_supported_files_are_routed(filename: str, route: Route) -> None:
    assert route_for(filename) is route


@pytest.mark.parametrize(
    ("filename", "words"),
    [
        ("scan.png", ["OCR", "ingest_content"]),
        ("photo.JPEG", ["OCR"]),
        ("talk.mp3", ["speech-to-text", "ingest_content"]),
        ("random.bin", ["'.bin' files are not supported", ".pdf", ".docx", ".zip"]),
    ],
)
def test_unconvertible_files_say_why_and_what_to_do(filename: str, words: list[str]) -> None:
    with pytest.raises(UnsupportedFormatError) as caught:
        route_for(filename)
    for word in words:
        assert word in caught.value.message


def test_a_file_name_is_required() -> None:
    with pytest.raises(InvalidInputError):
        route_for("some/dir/")
    assert base_name("a\\b/c d.pdf") == "c d.pdf"
    assert ".ipynb" in CONVERTIBLE_EXTENSIONS and ".epub" in CONVERTIBLE_EXTENSIONS


def test_charsets_are_detected() -> None:
    assert detect_charset("Grüße".encode()) == "utf-8"
    assert detect_charset("Grüße".encode("utf-16")) == "utf-16"
    assert detect_charset(b"\xef\xbb\xbfhello") == "utf-8-sig"
    japanese = "名前,年齢,住所\n佐藤太郎,30,東京\n三木英子,25,大阪\n髙橋淳,35,名古屋\n"
    data = japanese.encode("cp932")  # MS Kanji, as Excel writes it
    assert data.decode(detect_charset(data)) == japanese


def test_text_is_normalised() -> None:
    assert normalise_text("\ufeffa\r\nb\rc\x00 Universita\u0308t\n") == "a\nb\nc Universität"


def test_a_normal_archive_passes() -> None:
    check_archive(
        zip_bytes({"a.txt": b"hello", "inner.zip": zip_bytes({"b.txt": b"x"})}),
        "ok.zip",
        LIMITS,
        nested=True,
    )


def test_too_many_entries_are_refused() -> None:
    data = zip_bytes({f"f{i}.txt": b"x" for i in range(21)})
    with pytest.raises(TooLargeError, match="ARCHIVE_MAX_ENTRIES"):
        check_archive(data, "many.zip", LIMITS, nested=True)


def test_a_zip_bomb_is_refused_before_expansion() -> None:
    data = zip_bytes({"zeros.txt": bytes(2_000_000)})
    assert len(data) < 10_000
    with pytest.raises(TooLargeError, match="ZIP bomb"):
        check_archive(data, "bomb.zip", LIMITS, nested=True)


def test_nested_archives_count_towards_the_limits_and_depth() -> None:
    inner = zip_bytes({"zeros.txt": bytes(600_000)})
    with pytest.raises(TooLargeError):
        check_archive(zip_bytes({"a.zip": inner, "b.zip": inner}), "n.zip", LIMITS, nested=True)
    deep = zip_bytes({"l1.zip": zip_bytes({"l2.zip": zip_bytes({"x.txt": b"x"})})})
    with pytest.raises(ConversionError, match="ARCHIVE_MAX_DEPTH"):
        check_archive(deep, "deep.zip", LIMITS, nested=True)
    # Office containers are counted but not opened further.
    check_archive(deep, "doc.docx", LIMITS, nested=False)


def test_a_corrupt_archive_is_a_conversion_error() -> None:
    with pytest.raises(ConversionError, match="corrupt"):
        check_archive(b"PK\x03\x04 broken", "bad.zip", LIMITS, nested=True)


def _boxes(spec: list[tuple[str, Box]]) -> tuple[str, list[Box]]:
    return "".join(ch for ch, _ in spec), [box for _, box in spec]


def test_a_spacing_diaeresis_lands_on_the_letter_it_sits_on() -> None:
    # "Einf¨uhrung" as pdfium reports a pdfTeX umlaut: the accent before its letter.
    text, boxes = _boxes(
        [
            ("f", (100.0, 759.8, 106.1, 771.9)),
            ("\u00a8", (106.9, 769.5, 113.3, 771.3)),
            ("u", (106.3, 759.6, 113.9, 767.7)),
            ("h", (116.0, 759.8, 123.5, 771.7)),
        ]
    )
    assert normalise_text(_repair_with_boxes(text, boxes)) == "füh"


def test_a_misplaced_diaeresis_and_its_stray_spaces_are_folded() -> None:
    # "w ¨ ¨are": one accent belongs to a letter far to the left, one to the "a".
    text, boxes = _boxes(
        [
            ("a", (299.0, 713.0, 305.0, 718.4)),
            ("t", (305.1, 713.0, 309.0, 720.4)),
            (" ", (310.0, 713.1, 310.0, 713.1)),
            ("w", (467.0, 713.0, 475.1, 718.2)),
            (" ", (475.2, 713.1, 475.2, 713.1)),
            ("\u00a8", (301.3, 719.7, 304.2, 720.8)),
            (" ", (305.7, 713.0, 305.7, 713.0)),
            ("\u00a8", (476.9, 719.7, 479.8, 720.8)),
            ("a", (475.8, 713.0, 481.2, 718.4)),
            ("r", (481.7, 713.1, 485.6, 718.3)),
        ]
    )
    assert normalise_text(_repair_with_boxes(text, boxes)) == "ät wär"


def test_a_pdfium_hyphen_is_a_hyphen_on_a_line_and_nothing_at_a_line_break() -> None:
    same_line = [(0.0, 10.0, 5.0, 20.0), (5.0, 10.0, 8.0, 20.0), (8.0, 10.0, 13.0, 20.0)]
    assert _repair_with_boxes("a\ufffeb", same_line) == "a-b"
    next_line = [(0.0, 30.0, 5.0, 40.0), (5.0, 30.0, 8.0, 40.0), (0.0, 10.0, 5.0, 20.0)]
    assert _repair_with_boxes("a\ufffeb", next_line) == "ab"


@pytest.mark.parametrize(
    ("raw", "title"),
    [
        ("Zero Trust Architecture", "Zero Trust Architecture"),
        ("  Spaced\n title ", "Spaced title"),
        ("", ""),
        ("(anonymous)", ""),
        ("Microsoft Word - draft.docx", ""),
        ("untitled", ""),
        ("1234", ""),
        ("PowerPoint Presentation", ""),
        ("PowerPoint-Präsentation", ""),  # the shared Präsentation.pptx was saved with it
        ("Présentation PowerPoint", ""),
        ("PowerPoint for teachers: rules of thumb", "PowerPoint for teachers: rules of thumb"),
    ],
)
def test_metadata_titles_are_used_only_when_sensible(raw: str, title: str) -> None:
    assert sensible_title(raw) == title
