"""Tar archives and compressed files: `.tar`, `.tgz`, `.tbz2`, `.txz`, and `.gz`, `.bz2`,
`.xz` (a compressed tar archive, as `report.tar.gz`, or one compressed file, as
`notes.txt.gz`).

A compressed file is decompressed in memory, never past `ARCHIVE_MAX_UNCOMPRESSED_BYTES`
(read to one byte more, so a compression bomb is refused with `too_large` having expanded no
further). A tar archive's regular files are its members, at most `ARCHIVE_MAX_ENTRIES`,
each converted as it would be if ingested alone (`zipfiles.archive_markdown`, the layout of a
ZIP archive's Markdown); links, devices and folders are left out, and so is an archive
inside it (a ZIP, a tar or a compressed file: unpack it and ingest its files), so that one
upload expands once. One compressed file that is not a tar archive is converted under its
name without the compression suffix (`notes.txt.gz` as `notes.txt`); a compressed archive
inside (`data.zip.gz`) is not opened.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Iterator

from libs.errors import ConversionError, TooLargeError, UnsupportedFormatError
from libs.formats import (
    ARCHIVES,
    COMPRESSED_EXTENSIONS,
    DECOMPRESSION_ERRORS,
    compression_of,
    decompressing,
)
from services.converter.archive import ArchiveLimits, is_zip
from services.converter.formats import extension_of


def is_tar(data: bytes) -> bool:
    """A POSIX (ustar) or GNU tar archive: the magic at offset 257."""
    return data[257:262] == b"ustar"


def decompressed(data: bytes, name: str, limits: ArchiveLimits) -> bytes:
    """`data` decompressed as `name`'s extension says (a `.tar` as it is), within the
    uncompressed-bytes limit."""
    kind = compression_of(name)
    if kind is None:
        return data
    limit = limits.max_uncompressed_bytes
    try:
        with decompressing(io.BytesIO(data), name) as stream:
            expanded = stream.read(limit + 1)
    except DECOMPRESSION_ERRORS as exc:
        raise ConversionError(
            f"could not decompress '{name}' ({exc}); the file is corrupt, truncated or not "
            f"{kind} data"
        ) from exc
    if len(expanded) > limit:
        raise TooLargeError(
            f"'{name}' expands to more than {limit} bytes (ARCHIVE_MAX_UNCOMPRESSED_BYTES); it "
            "may be a compression bomb. Decompress it and ingest the files you need, or raise "
            "the limit"
        )
    return expanded


def inner_name(name: str) -> str:
    """The name of the one file a compressed file holds: `notes.txt.gz` -> `notes.txt`."""
    return name.rpartition(".")[0] or name


def single_file(expanded: bytes, name: str) -> tuple[bytes, str] | None:
    """The one file a `.gz`, `.bz2` or `.xz` holds, as its bytes and its name without the
    suffix; None when `expanded` is a tar archive. An archive inside is refused."""
    if extension_of(name) not in COMPRESSED_EXTENSIONS or is_tar(expanded):
        return None
    inner = inner_name(name)
    refused = nested_archive(inner, expanded)
    if refused is not None:
        raise refused
    return expanded, inner


def members(data: bytes, name: str, limits: ArchiveLimits) -> Iterator[tuple[str, bytes]]:
    """The regular files of the tar archive `data` (already decompressed): path and bytes.
    Too many entries is too_large."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for entries, info in enumerate(archive, start=1):
                if entries > limits.max_entries:
                    raise TooLargeError(
                        f"'{name}' holds more than {limits.max_entries} entries "
                        "(ARCHIVE_MAX_ENTRIES); unpack it and ingest the files you need, or "
                        "raise the limit"
                    )
                extracted = archive.extractfile(info) if info.isreg() else None
                if extracted is not None:
                    yield info.name, extracted.read()
    except tarfile.TarError as exc:
        raise ConversionError(f"'{name}' is not a readable tar archive ({exc})") from exc


def unnested(convert: Callable[[bytes, str], str]) -> Callable[[bytes, str], str]:
    """`convert` for a tar archive's members: one that is an archive itself is refused, and
    so left out with the reason."""

    def member(data: bytes, path: str) -> str:
        refused = nested_archive(path, data)
        if refused is not None:
            raise refused
        return convert(data, path)

    return member


def nested_archive(path: str, data: bytes) -> UnsupportedFormatError | None:
    """Why a member of a tar archive is left out when it is an archive itself."""
    if extension_of(path) in ARCHIVES or is_zip(data) or is_tar(data):
        return UnsupportedFormatError(
            f"'{path}' is an archive inside a tar archive, which is not opened; unpack it and "
            "ingest its files"
        )
    return None
