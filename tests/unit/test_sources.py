"""Path and URL policies of the gateway."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
from pathlib import Path

import pytest

from libs.errors import FetchError, FileAccessError, InvalidInputError, PathNotAllowedError
from services.gateway.fetch import UrlPolicy, _filename_for, _is_public
from services.gateway.sources import FolderScan, PathPolicy, read_file, scan_folder


def test_without_roots_any_path_resolves(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    assert PathPolicy.from_roots([]).resolve(str(tmp_path / "a.txt")) == (tmp_path / "a.txt")


def test_roots_refuse_escapes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "ok.txt").write_text("x")
    (tmp_path / "secret.txt").write_text("s")
    os.symlink(tmp_path / "secret.txt", root / "link.txt")
    policy = PathPolicy.from_roots([root])
    assert policy.resolve(str(root / "ok.txt")) == root / "ok.txt"
    assert policy.resolve("ok.txt") == root / "ok.txt"
    for bad in (str(root / ".." / "secret.txt"), str(tmp_path / "secret.txt"), "/etc/passwd"):
        with pytest.raises(PathNotAllowedError, match="outside"):
            policy.resolve(bad)
    with pytest.raises(PathNotAllowedError):
        policy.resolve(str(root / "link.txt"))
    with pytest.raises(InvalidInputError):
        policy.resolve("   ")


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.1", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("::1", False),
        ("fd00::1", False),
        ("fe80::1", False),
        ("::ffff:127.0.0.1", False),
        ("0.0.0.0", False),
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
    ],
)
def test_public_addresses(address: str, public: bool) -> None:
    assert _is_public(address) is public


async def test_url_policy_refuses_schemes_and_loopback() -> None:
    policy = UrlPolicy([])
    for bad in ("file:///etc/passwd", "ftp://example.com/x", "gopher://x"):
        with pytest.raises(InvalidInputError, match="http"):
            await policy.check(bad)
    with pytest.raises(PathNotAllowedError, match="URL_ALLOW_HOSTS"):
        await policy.check("http://127.0.0.1:8000/x")
    with pytest.raises(PathNotAllowedError):
        await policy.check("http://localhost/x")


async def test_url_allow_list_admits_a_named_host() -> None:
    await UrlPolicy(["127.0.0.1:9999"]).check("http://127.0.0.1:9999/doc")
    with pytest.raises(PathNotAllowedError):
        await UrlPolicy(["127.0.0.1:9999"]).check("http://127.0.0.1:9998/doc")


def test_filenames_follow_content_type() -> None:
    assert _filename_for("https://x.org/paper", "application/pdf") == "paper.pdf"
    assert _filename_for("https://x.org/", "text/html; charset=utf-8") == "x.org.html"
    assert _filename_for("https://x.org/a/report.pdf", "application/pdf") == "report.pdf"
    raw = "https://raw.githubusercontent.com/o/r/main/src/app.py"
    assert _filename_for(raw, "text/plain; charset=utf-8") == "app.py"  # code, not .txt
    assert _filename_for("https://x.org/notes", "text/plain") == "notes.txt"
    # LaTeX, Org and subtitles served as text/plain are read as their names say.
    for name in ("paper.tex", "journal.org", "talk.srt", "guide.rst"):
        assert _filename_for(f"https://x.org/{name}", "text/plain; charset=utf-8") == name
    assert _filename_for("https://x.org/talk", "text/vtt") == "talk.vtt"
    assert _filename_for("https://x.org/page", "multipart/related") == "page.mhtml"
    assert _filename_for("https://x.org/saved.mht", "message/rfc822") == "saved.mht"
    assert _filename_for("https://x.org/mail", "message/rfc822") == "mail.eml"
    # Tar archives and compressed files under the types servers give them.
    assert _filename_for("https://x.org/site.tar.gz", "application/gzip") == "site.tar.gz"
    assert _filename_for("https://x.org/site.tgz", "application/x-gzip") == "site.tgz"
    assert _filename_for("https://x.org/src.txz", "application/x-gtar") == "src.txz"
    assert _filename_for("https://x.org/dump", "application/x-tar") == "dump.tar"
    assert _filename_for("https://x.org/log.txt.xz", "application/x-xz") == "log.txt.xz"
    with pytest.raises(FetchError, match="content type"):
        _filename_for("https://x.org/blob", "application/octet-stream")


def test_paths_that_cannot_exist_are_invalid_input_not_os_errors(tmp_path: Path) -> None:
    policy = PathPolicy.from_roots([tmp_path])
    for bad in ("a" * 300 + ".txt", "x/" * 2100, "\ud800.txt"):
        with pytest.raises(InvalidInputError, match=r"too long|not valid text"):
            policy.resolve(bad)


def test_os_errors_while_looking_at_a_path_are_file_access_errors(tmp_path: Path) -> None:
    too_long = tmp_path / ("a" * 300)  # stat fails with ENAMETOOLONG, not "missing"
    with pytest.raises(FileAccessError, match="cannot look at"):
        read_file(too_long, 100)
    with pytest.raises(FileAccessError, match="cannot look at"):
        scan_folder(too_long, recursive=True)


def test_a_home_folder_of_an_unknown_user_is_the_callers_mistake() -> None:
    with pytest.raises(InvalidInputError, match="home folder"):
        PathPolicy.from_roots([]).resolve("~no-such-user-here/notes.txt")


def test_a_folder_scan_leaves_source_code_out(tmp_path: Path) -> None:
    """Source code converts when named (an upload, ingest_file), but ingest_folder picks the
    documents it picked before: a project folder does not bring in its code."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("def main():\n    pass\n")
    (tmp_path / "README.md").write_text("# Readme\n")
    (tmp_path / "photo.png").write_bytes(b"\x89PNG")
    found = scan_folder(tmp_path, recursive=True)
    assert [p.name for p in found.files] == ["README.md"]
    assert [p.name for p in found.ignored] == ["photo.png"]  # known, not convertible here


def test_a_folder_scan_takes_include_and_exclude_patterns(tmp_path: Path) -> None:
    """`include` picks the files it matches, source code too; `exclude` leaves files and
    whole folders out (a folder pattern at any depth)."""
    for relative in ("README.md", "src/app.py", "src/util.py", "reports/q3.pdf",
                     "node_modules/pkg/index.js", "drafts/old.md", "photo.png"):  # fmt: skip
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")

    def names(found: FolderScan) -> list[str]:
        return [p.relative_to(tmp_path).as_posix() for p in found.files]

    assert names(scan_folder(tmp_path, True)) == ["README.md", "drafts/old.md", "reports/q3.pdf"]
    picked = scan_folder(tmp_path, True, include=["*.py", "*.js"], exclude=["node_modules/"])
    assert names(picked) == ["src/app.py", "src/util.py"]
    assert names(scan_folder(tmp_path, True, exclude=["drafts/**", "*.pdf"])) == ["README.md"]
    only_pdf = scan_folder(tmp_path, True, include=["reports/**", "*.png"])
    assert names(only_pdf) == ["reports/q3.pdf"]
    assert [p.name for p in only_pdf.ignored] == ["photo.png"]  # matched, but no OCR here


def test_a_folder_scan_takes_text_files_without_an_extension(tmp_path: Path) -> None:
    """README, LICENSE and notes without an extension are text documents; a program, an
    empty file, a build file and a script are not taken unless `include` names them."""
    (tmp_path / "README").write_text("Read me first.\n")
    (tmp_path / "notes").write_bytes("Überlegungen zur Planung\r\n".encode("latin-1"))
    (tmp_path / "program").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(64))
    (tmp_path / "empty").write_bytes(b"")
    (tmp_path / "Makefile").write_text("all:\n\tcc main.c\n")
    (tmp_path / "deploy").write_text("#!/bin/sh\necho deploying\n")
    (tmp_path / ".envrc").write_text("export A=1\n")
    found = scan_folder(tmp_path, recursive=True)
    assert sorted(p.name for p in found.files) == ["README", "notes"]
    assert found.ignored == []  # unknown types are not reported as known ones are
    named = scan_folder(tmp_path, True, include=["Makefile", "deploy", "program", "README"])
    assert sorted(p.name for p in named.files) == ["Makefile", "README", "deploy"]


def test_a_folder_scan_takes_compressed_text_files_without_an_extension(tmp_path: Path) -> None:
    """Unix documentation ships `changelog.gz` and `NEWS.bz2`: taken when what they hold reads
    as text, as `changelog` is. Compressed binary data, corrupt data, a build file and a
    rotated log (`syslog.2.gz`, an extension inside) are not; the known `.gz`, `.bz2` and
    `.xz` among them are reported as ignored."""
    (tmp_path / "changelog.gz").write_bytes(gzip.compress(b"dpkg (1.21.22) bookworm\n"))
    (tmp_path / "NEWS.bz2").write_bytes(bz2.compress(b"Version 2: faster scans.\n"))
    (tmp_path / "notes.xz").write_bytes(lzma.compress("Überlegungen\r\n".encode("latin-1")))
    (tmp_path / "data.gz").write_bytes(gzip.compress(bytes(range(256)) * 4))
    (tmp_path / "broken.gz").write_bytes(b"not gzip data at all")
    (tmp_path / "Makefile.gz").write_bytes(gzip.compress(b"all:\n\tcc main.c\n"))
    (tmp_path / "syslog.2.gz").write_bytes(gzip.compress(b"Nov 29 kernel: up\n"))
    (tmp_path / ".hidden.gz").write_bytes(gzip.compress(b"secret\n"))
    found = scan_folder(tmp_path, recursive=True)
    assert sorted(p.name for p in found.files) == ["NEWS.bz2", "changelog.gz", "notes.xz"]
    assert sorted(p.name for p in found.ignored) == [
        "Makefile.gz", "broken.gz", "data.gz", "syslog.2.gz"
    ]  # fmt: skip
    named = scan_folder(tmp_path, True, include=["Makefile.gz"])
    assert [p.name for p in named.files] == ["Makefile.gz"]


def test_a_folder_scan_leaves_offices_lock_files_out(tmp_path: Path) -> None:
    """While a document is open in Word, Excel or PowerPoint, a `~$` file of a few bytes
    beside it names who has it open: never a document, whatever its extension, even when
    `include` matches it (it would only fail to convert)."""
    (tmp_path / "report.docx").write_bytes(b"PK\x03\x04")
    owner = b"\x05alice" + b" " * 48 + "\x05alice".encode("utf-16-le")
    (tmp_path / "~$report.docx").write_bytes(owner)
    (tmp_path / "~$dget.xlsx").write_bytes(owner)
    assert [p.name for p in scan_folder(tmp_path, True).files] == ["report.docx"]
    named = scan_folder(tmp_path, True, include=["*.docx", "*.xlsx"])
    assert [p.name for p in named.files] == ["report.docx"]
    assert named.ignored == []
