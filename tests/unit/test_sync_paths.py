"""The sync client's naming of files, Windows included (`PureWindowsPath` on any platform):
drive letters, UNC paths, backslashes, non-ASCII and very long names, case-only duplicates;
and the folder scan on a real temporary folder."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import unicodedata
from pathlib import Path, PurePosixPath, PureWindowsPath

import pytest

from libs import formats
from libs.formats import SCANNED_EXTENSIONS
from mcpvectordb_sync.paths import (
    CODE_EXTENSIONS,
    SUPPORTED_EXTENSIONS,
    casefold_duplicates,
    clean_prefix,
    long_path,
    source_of,
)
from mcpvectordb_sync.scan import Filters, ScanError, scan


def test_the_client_sends_what_the_gateway_converts() -> None:
    assert frozenset(SUPPORTED_EXTENSIONS) == SCANNED_EXTENSIONS
    assert frozenset(formats.CODE_EXTENSIONS) == CODE_EXTENSIONS
    assert SCANNED_EXTENSIONS | CODE_EXTENSIONS == formats.CONVERTIBLE_EXTENSIONS
    for name in ("~$report.docx", "~$dget.xlsx", "report.docx", "a~$b.docx", "$report.docx"):
        wanted = Filters().wants(f"folder/{name}")
        assert wanted is not formats.is_office_lock(name), name  # the same lock files


@pytest.mark.parametrize(
    ("folder", "file", "prefix", "expected"),
    [
        (
            "C:\\Users\\me\\Docs",
            "C:\\Users\\me\\Docs\\Projects\\Q3\\report.pdf",
            "",
            "Projects/Q3/report.pdf",
        ),
        ("c:/Users/me/Docs", "C:\\Users\\me\\Docs\\Q4\\report.pdf", "", "Q4/report.pdf"),
        (
            "\\\\fileserver\\share\\team",
            "\\\\fileserver\\share\\team\\a\\b.docx",
            "Team",
            "Team/a/b.docx",
        ),
        ("D:\\", "D:\\Überblick\\Grüße — 2025.md", "", "Überblick/Grüße — 2025.md"),
        ("D:\\data", "D:\\data\\日本語\\資料.txt", "jp", "jp/日本語/資料.txt"),
    ],
)
def test_windows_sources_are_relative_and_slash_separated(
    folder: str, file: str, prefix: str, expected: str
) -> None:
    relative = PureWindowsPath(file).relative_to(PureWindowsPath(folder))
    assert source_of(relative, prefix) == expected
    assert "\\" not in source_of(relative, prefix)


def test_sources_are_nfc_whatever_the_platform_reports() -> None:
    decomposed = unicodedata.normalize("NFD", "Grüße.md")
    assert source_of(PurePosixPath("a", decomposed)) == unicodedata.normalize("NFC", "a/Grüße.md")


@pytest.mark.parametrize("bad", [PureWindowsPath("C:\\x\\a.md"), PureWindowsPath("..\\a.md")])
def test_only_relative_paths_below_the_folder_have_sources(bad: PureWindowsPath) -> None:
    with pytest.raises(ValueError):
        source_of(bad)


def test_prefixes_are_cleaned() -> None:
    assert clean_prefix("\\Team\\Reports\\") == "Team/Reports"
    assert clean_prefix("/a/./b/") == "a/b"
    assert clean_prefix("") == ""
    with pytest.raises(ValueError, match=r"\.\."):
        clean_prefix("a/../b")


def test_long_windows_paths_get_the_extended_prefix() -> None:
    deep = "C:\\Users\\me\\" + "\\".join(["a-rather-long-folder-name"] * 12) + "\\file.pdf"
    assert len(deep) > 260
    assert long_path(deep, windows=True) == "\\\\?\\" + deep
    unc = "\\\\server\\share\\" + "x" * 300 + ".md"
    assert long_path(unc, windows=True) == "\\\\?\\UNC\\server\\share\\" + "x" * 300 + ".md"
    assert long_path("C:\\short.md", windows=True) == "C:\\short.md"
    assert long_path("\\\\?\\" + deep, windows=True) == "\\\\?\\" + deep
    assert long_path("/" + "y" * 300, windows=False) == "/" + "y" * 300


def test_case_only_duplicates_are_found() -> None:
    groups = casefold_duplicates(["A/Report.pdf", "a/report.pdf", "b.md", "Ä.md", "ä.md"])
    assert groups == [["A/Report.pdf", "a/report.pdf"], ["Ä.md", "ä.md"]]


def _tree(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def test_scan_takes_supported_files_under_their_sources(tmp_path: Path) -> None:
    long_name = "n" * 200 + ".md"
    _tree(
        tmp_path,
        {
            "Q3/report.md": b"q3",
            "Q4/report.md": b"q4",
            "Q4/Report.MD": b"case",
            "Grüße/über.txt": b"u",
            "deep/" + "/".join(["level"] * 30) + "/" + long_name: b"deep",
            "image.png": b"png",
            "binary.bin": b"bin",
            "~$report.docx": b"lock",
            "Archive/old.md": b"old",
        },
    )
    (tmp_path / "loop").symlink_to(tmp_path, target_is_directory=True)
    found = scan(str(tmp_path), "P", Filters(exclude=("Archive/*",)))
    sources = [f.source for f in found.files]
    assert "P/Q3/report.md" in sources and "P/Grüße/über.txt" in sources
    assert any(s.endswith(long_name) and s.count("/") == 32 for s in sources)
    assert not any("Archive" in s or "~$" in s or "loop" in s for s in sources)
    assert found.ignored == 2  # .png (no OCR here) and .bin
    assert found.duplicates == [["P/Q4/Report.MD", "P/Q4/report.md"]]
    assert found.complete
    assert sources == sorted(sources)

    only_q = scan(str(tmp_path), "", Filters(include=("q3/*", "*.TXT")))
    assert [f.source for f in only_q.files] == ["Grüße/über.txt", "Q3/report.md"]


def test_a_folder_that_cannot_be_read_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ScanError, match="does not exist"):
        scan(str(tmp_path / "missing"))
    (tmp_path / "file.md").write_text("x")
    with pytest.raises(ScanError, match="not a folder"):
        scan(str(tmp_path / "file.md"))


@pytest.mark.skipif(os.name == "nt", reason="builds a path longer than Linux's PATH_MAX")
def test_an_unreadable_subfolder_makes_the_scan_incomplete(tmp_path: Path) -> None:
    # A folder nested deeper than PATH_MAX (4096 bytes) exists but cannot be listed by its
    # path, whoever runs the test (root reads through permissions): built with dir_fd.
    _tree(tmp_path, {"ok/a.md": b"a"})
    name = "d" * 250
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(18):
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    found = scan(str(tmp_path))
    assert not found.complete
    assert found.unreadable and found.unreadable[0].startswith(name)
    assert [f.source for f in found.files] == ["ok/a.md"]


def test_source_code_is_synced_only_when_an_include_glob_names_it(tmp_path: Path) -> None:
    """A synced folder picks the same files as before source code converted; `--include
    "*.py"` adds the Python files (and only what the globs match)."""
    _tree(tmp_path, {"notes.md": b"n", "tool/app.py": b"def main(): pass\n", "ui/app.ts": b"x"})
    assert [f.source for f in scan(str(tmp_path)).files] == ["notes.md"]
    assert scan(str(tmp_path)).ignored == 2
    wanted = scan(str(tmp_path), "", Filters(include=("*.py", "*.md")))
    assert [f.source for f in wanted.files] == ["notes.md", "tool/app.py"]


UNNAMED = [
    ("README", b"Read me first.\n"),
    ("notes", "Überlegungen\r\n".encode("latin-1")),
    ("LICENSE", "Copyright © 2026\n\fpage two".encode()),
    ("program", b"\x7fELF\x02\x01\x01\x00" + bytes(32)),
    ("noise", bytes(range(1, 32)) * 4),
    ("empty", b""),
    ("Makefile", b"all:\n\tcc main.c\n"),
    ("deploy", b"#!/bin/sh\necho hi\n"),
    (".envrc", b"export A=1\n"),
    ("report.txt", b"has an extension"),
]


@pytest.mark.parametrize("code", [False, True])
def test_the_client_takes_the_files_without_an_extension_the_gateway_takes(code: bool) -> None:
    from mcpvectordb_sync import paths

    assert paths.BUILD_FILE_NAMES == formats.BUILD_FILE_NAMES
    assert paths.SNIFF_BYTES == formats.SNIFF_BYTES
    for name, head in UNNAMED:
        expected = formats.unnamed_text(name, head, code=code)
        assert paths.is_unnamed_text(name, head, code=code) == expected, name
    taken = {name for name, head in UNNAMED if formats.unnamed_text(name, head, code=code)}
    assert taken == {"README", "notes", "LICENSE"} | ({"Makefile", "deploy"} if code else set())


def test_scan_takes_text_files_without_an_extension(tmp_path: Path) -> None:
    _tree(tmp_path, dict(UNNAMED))
    found = scan(str(tmp_path))
    assert [f.source for f in found.files] == ["LICENSE", "README", "notes", "report.txt"]
    named = scan(str(tmp_path), "", Filters(include=("Makefile", "deploy", "program")))
    assert [f.source for f in named.files] == ["Makefile", "deploy"]


def test_scan_takes_compressed_text_files_without_an_extension(tmp_path: Path) -> None:
    """As the gateway's folder scan: `changelog.gz` holding text is sent, compressed binary
    or corrupt data and a build file (without `--include`) are not."""
    _tree(
        tmp_path,
        {
            "changelog.gz": gzip.compress(b"dpkg (1.21.22) bookworm\n"),
            "NEWS.bz2": bz2.compress(b"Version 2: faster scans.\n"),
            "notes.xz": lzma.compress("Überlegungen\r\n".encode("latin-1")),
            "data.gz": gzip.compress(bytes(range(256)) * 4),
            "broken.gz": b"not gzip data at all",
            "Makefile.gz": gzip.compress(b"all:\n\tcc main.c\n"),
            "syslog.2.gz": gzip.compress(b"Nov 29 kernel: up\n"),
        },
    )
    found = scan(str(tmp_path))
    assert [f.source for f in found.files] == ["NEWS.bz2", "changelog.gz", "notes.xz"]
    assert found.ignored == 4
    named = scan(str(tmp_path), "", Filters(include=("Makefile.gz",)))
    assert [f.source for f in named.files] == ["Makefile.gz"]


@pytest.mark.parametrize(
    "name",
    ["changelog.gz", "NEWS.BZ2", "notes.xz", "syslog.2.gz", "a.txt.gz", ".envrc.gz", "gz",
     "README", "x.tar.gz", "changelog.Debian.gz"],
)  # fmt: skip
def test_the_client_looks_inside_the_compressed_files_the_gateway_looks_inside(name: str) -> None:
    from mcpvectordb_sync.paths import unnamed_inside

    assert unnamed_inside(name) == formats.unnamed_inside(name)


@pytest.mark.parametrize(
    "name",
    ["site.tar.gz", "notes.txt.gz", "rivers.CSV.xz", "a.tgz", "b.tbz2", "syslog.2.gz", "x.gz",
     "data.zip.gz", "twice.gz.gz", "k.tbz2.xz", "plain.tar", "report.pdf.bz2"],
)  # fmt: skip
def test_the_client_sends_the_compressed_files_the_gateway_scans(name: str) -> None:
    from mcpvectordb_sync.paths import is_supported

    assert is_supported(name) == formats.is_scanned(name)
