"""Tar archives and compressed files (`services.converter.tarballs`): a tar archive's files
are converted as a ZIP archive's are, in any of the compressions (`.tar`, `.tar.gz`, `.tgz`,
`.tar.bz2`, `.tar.xz`...); one compressed file is converted under its own name
(`notes.txt.gz`); links and devices, archives inside, source code and files without text are
left out; a compression bomb, too many entries and a corrupt file are refused by what they
are."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import random
import tarfile

import pytest

from libs.errors import ConversionError, NoTextError, TooLargeError, UnsupportedFormatError
from libs.formats import is_scanned, unnamed_inside
from services.converter.archive import ArchiveLimits
from services.converter.convert import DocumentConverter
from tests.conftest import zip_bytes

LIMITS = ArchiveLimits(max_entries=20, max_uncompressed_bytes=2_000_000, max_depth=3)
FRENCH = "Le garçon a mangé une crème brûlée à la fenêtre."
COMPRESS = {
    "gz": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
}


@pytest.fixture(scope="module")
def converter() -> DocumentConverter:
    return DocumentConverter(LIMITS)


def tar_bytes(files: dict[str, bytes], *, link: bool = False) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        if link:
            outside = tarfile.TarInfo("notes/secret.txt")
            outside.type, outside.linkname = tarfile.SYMTYPE, "/etc/passwd"
            archive.addfile(outside)
            device = tarfile.TarInfo("dev/zero")
            device.type = tarfile.CHRTYPE
            archive.addfile(device)
    return buffer.getvalue()


FILES = {
    "paper/notes.txt": FRENCH.encode("cp1252"),
    "paper/prices.csv": "item;price\ncrème brûlée;4,50\n".encode("cp1252"),
    "paper/README": b"Field notes on otters of the upper reach.",
    "paper/build.py": b"print('code is left out')",
    "paper/inner.zip": zip_bytes({"deep.md": b"# Deep\n\nnot opened"}),
    "paper/inner.tar.gz": gzip.compress(tar_bytes({"x.md": b"# not opened either"})),
    "paper/setup.exe": b"MZ\x90\x00\x03",
}


@pytest.mark.parametrize(
    ("name", "pack"),
    [
        ("bundle.tar", lambda data: data),
        ("bundle.tar.gz", gzip.compress),
        ("bundle.tgz", gzip.compress),
        ("bundle.tar.bz2", bz2.compress),
        ("bundle.tbz2", bz2.compress),
        ("bundle.tar.xz", lzma.compress),
        ("bundle.txz", lzma.compress),
    ],
)
def test_a_tar_archives_files_are_converted_as_on_their_own(
    converter: DocumentConverter, name: str, pack: object
) -> None:
    data = pack(tar_bytes(FILES, link=True))  # type: ignore[operator]
    document = converter.convert(data, name)
    markdown = document.markdown
    assert markdown.startswith(f"Content from the tar archive `{name}`:")
    assert f"## File: paper/notes.txt\n\n{FRENCH}" in markdown
    assert "| crème brûlée | 4,50 |" in markdown
    assert "## File: paper/README\n\nField notes on otters of the upper reach." in markdown
    for left_out in ("build.py", "inner.zip", "not opened", "setup.exe", "secret", "passwd"):
        assert left_out not in markdown
    assert document.file_type == name.rsplit(".", 1)[1]
    assert is_scanned(name)


@pytest.mark.parametrize("kind", sorted(COMPRESS))
def test_one_compressed_file_is_converted_under_its_own_name(
    converter: DocumentConverter, kind: str
) -> None:
    data = COMPRESS[kind](b"id,river\n1,Wye\n2,Usk\n")
    document = converter.convert(data, f"rivers.csv.{kind}")
    assert "| 2 | Usk |" in document.markdown
    assert (document.title, document.file_type) == ("rivers", kind)
    assert is_scanned(f"rivers.csv.{kind}") and not is_scanned(f"syslog.2.{kind}")


@pytest.mark.parametrize("kind", sorted(COMPRESS))
def test_a_compressed_file_without_an_extension_inside_is_read_as_text(
    converter: DocumentConverter, kind: str
) -> None:
    """Unix documentation's `changelog.gz`: plain text, as `changelog` is, and taken by
    folder scans when it reads as text (`unnamed_inside`)."""
    text = b"dpkg (1.21.22) bookworm; urgency=medium\n\n  * Otters now counted twice.\n"
    document = converter.convert(COMPRESS[kind](text), f"changelog.{kind}")
    assert "Otters now counted twice." in document.markdown
    assert document.file_type == kind
    assert unnamed_inside(f"changelog.{kind}") == "changelog"


def test_what_a_compressed_file_cannot_be_is_said(converter: DocumentConverter) -> None:
    with pytest.raises(UnsupportedFormatError, match=r"'logo\.png': it is an image"):
        converter.convert(gzip.compress(b"\x89PNG\r\n\x1a\n"), "logo.png.gz")
    with pytest.raises(UnsupportedFormatError, match=r"'data\.zip' is an archive inside"):
        converter.convert(gzip.compress(zip_bytes({"a.md": b"# a"})), "data.zip.gz")
    with pytest.raises(ConversionError, match=r"could not decompress 'notes\.txt\.gz'"):
        converter.convert(b"not gzip at all", "notes.txt.gz")
    with pytest.raises(ConversionError, match="could not decompress"):
        converter.convert(gzip.compress(random.Random(1).randbytes(5000))[:1000], "cut.txt.gz")
    with pytest.raises(ConversionError, match="not a readable tar archive"):
        converter.convert(b"plain text, not a tar archive" * 30, "fake.tar")


def test_a_tar_archive_inside_a_zip_archive_is_left_out(converter: DocumentConverter) -> None:
    inner = gzip.compress(tar_bytes({"x.md": b"# hidden heron"}))
    archive = zip_bytes({"notes.md": b"# Notes\n\nthe visible otter", "more.tar.gz": inner})
    markdown = converter.convert(archive, "outer.zip").markdown
    assert "the visible otter" in markdown and "heron" not in markdown


def test_a_compression_bomb_is_refused_without_expanding_it(
    converter: DocumentConverter,
) -> None:
    bomb = gzip.compress(bytes(50_000_000), 9)  # 50 MB of zeros in about 50 KB
    assert len(bomb) < 100_000
    with pytest.raises(TooLargeError, match="ARCHIVE_MAX_UNCOMPRESSED_BYTES"):
        converter.convert(bomb, "bomb.tar.gz")
    with pytest.raises(TooLargeError, match="compression bomb"):
        converter.convert(lzma.compress(bytes(50_000_000)), "zeros.txt.xz")


def test_too_many_entries_and_no_text_are_refused(converter: DocumentConverter) -> None:
    many = tar_bytes({f"n{i}.md": b"# note" for i in range(25)})
    with pytest.raises(TooLargeError, match="more than 20 entries"):
        converter.convert(many, "many.tar")
    with pytest.raises(NoTextError, match=r"a\.exe: unsupported_format"):
        converter.convert(tar_bytes({"a.exe": b"MZ"}), "tools.tar")
    with pytest.raises(NoTextError, match="holds no files"):
        converter.convert(tar_bytes({}, link=True), "links.tar")
