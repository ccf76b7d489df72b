"""A ZIP archive's files are converted as each would be on its own
(`services.converter.zipfiles`): legacy text and semicolon tables inside read right, nested
archives are opened, and what has no text (images, binaries, macOS resource forks, empty or
broken files) is left out; an archive with nothing left is refused with `no_text_extracted`,
naming its files."""

from __future__ import annotations

import pytest

from libs.errors import NoTextError
from services.converter.archive import ArchiveLimits
from services.converter.convert import DocumentConverter
from tests.conftest import zip_bytes

LIMITS = ArchiveLimits(max_entries=50, max_uncompressed_bytes=10_000_000, max_depth=3)
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154"
    "78da63f8ffff3f0005fe02fea7d6a4f30000000049454e44ae426082"
)
FRENCH = "Le garçon a mangé une crème brûlée à la fenêtre."


@pytest.fixture(scope="module")
def converter() -> DocumentConverter:
    return DocumentConverter(LIMITS)


def test_each_file_is_converted_as_on_its_own(converter: DocumentConverter) -> None:
    archive = zip_bytes(
        {
            "notes/fr.txt": FRENCH.encode("cp1252"),
            "prix.csv": "article;prix\ncrème brûlée;4,50\n".encode("cp1252"),
            "__MACOSX/notes/._fr.txt": b"\x00\x05\x16\x07Mac OS X        ATTR",
            "logo.png": PNG,
            "setup.exe": b"MZ\x90\x00\x03",
            "broken.docx": b"PK\x03\x04 not really a document",
            "empty.md": b"",
            "inner.zip": zip_bytes({"deep/readme.md": b"# Deep\n\nwalrus facts inside"}),
        }
    )
    document = converter.convert(archive, "bundle.zip")
    markdown = document.markdown
    assert markdown.startswith("Content from the zip file `bundle.zip`:")
    assert f"## File: notes/fr.txt\n\n{FRENCH}" in markdown
    assert "| crème brûlée | 4,50 |" in markdown
    assert "## File: inner.zip" in markdown and "walrus facts inside" in markdown
    for left_out in ("__MACOSX", "._fr", "logo.png", "setup.exe", "MZ", "broken.docx", "empty.md"):
        assert left_out not in markdown
    assert (document.title, document.file_type, document.page_count) == ("bundle", "zip", 0)


@pytest.mark.parametrize(
    ("files", "said"),
    [
        ({}, "holds no files"),
        ({"folder/": b"", "__MACOSX/._a.txt": b"\x00\x05"}, "holds no files"),
        ({"a.png": PNG, "b.png": PNG}, "a.png: unsupported_format; b.png: unsupported_format"),
        ({"tool.exe": b"MZ", "blank.txt": b"  \n"}, "tool.exe: unsupported_format; blank.txt"),
    ],
)
def test_an_archive_without_text_is_refused_naming_its_files(
    converter: DocumentConverter, files: dict[str, bytes], said: str
) -> None:
    with pytest.raises(NoTextError) as refused:
        converter.convert(zip_bytes(files), "nothing.zip")
    assert "no text could be extracted from 'nothing.zip'" in refused.value.message
    assert said in refused.value.message


def test_the_refusal_names_a_few_files_and_counts_the_rest(converter: DocumentConverter) -> None:
    images = {f"scan-{i:02}.png": PNG for i in range(8)}
    with pytest.raises(NoTextError) as refused:
        converter.convert(zip_bytes(images), "scans.zip")
    message = refused.value.message
    assert "none of its 8 files has text" in message and "and 3 more" in message
    assert "scan-04.png" in message and "scan-05.png" not in message
    assert "needs OCR" in message  # the first file's own reason, with what to do


def test_each_files_headings_stay_under_its_own_file(converter: DocumentConverter) -> None:
    """A file's title is not in the heading path of the files after it: each file's headings
    sit two levels below its `## File:` heading."""
    from services.converter.chunk import Chunker

    words = " ".join(["word"] * 60)  # each section a chunk of its own
    archive = zip_bytes(
        {
            "a.md": f"# Otters\n\nOtters hold hands {words}.\n\n## Diet\n\nFish {words}.".encode(),
            "b.md": f"Herons\n======\n\nHerons stand still {words}.".encode(),
            "c.txt": f"Plain notes {words}.".encode(),
        }
    )
    markdown = converter.convert(archive, "animals.zip").markdown
    assert "## File: a.md\n\n### Otters\n\nOtters hold hands" in markdown
    paths = {
        chunk.text.split("\n")[-1].split(" word")[0]: tuple(chunk.headings)
        for chunk in Chunker.bundled(80, 0).chunk(markdown)
    }
    assert paths["Otters hold hands"] == ("File: a.md", "Otters")
    assert paths["Herons stand still"] == ("File: b.md", "Herons")
    assert paths["Plain notes"] == ("File: c.txt",)  # was ("Herons", "File: c.txt")
