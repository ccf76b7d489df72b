"""Bounds on ZIP containers, checked before any parser expands them.

A ZIP archive (and the ZIP inside every .docx, .pptx, .xlsx and .epub) can expand to far
more than its size on the wire. The declared sizes in the central directory are what
`zipfile` enforces while decompressing, so summing them bounds the real work: too many
entries or too many bytes is refused with `TooLargeError`, archives nested deeper than
allowed or with encrypted entries with `ConversionError`.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

from libs.errors import ConversionError, TooLargeError
from services.converter.formats import extension_of


@dataclass(frozen=True)
class ArchiveLimits:
    max_entries: int
    max_uncompressed_bytes: int
    max_depth: int


@dataclass
class _Tally:
    entries: int = 0
    uncompressed: int = 0


def is_zip(data: bytes) -> bool:
    return data[:4] in (b"PK\x03\x04", b"PK\x05\x06")


def check_archive(data: bytes, name: str, limits: ArchiveLimits, *, nested: bool) -> None:
    """Refuse `data` if expanding it would exceed `limits`.

    With `nested`, ZIP files inside are opened and counted too (markitdown converts them
    recursively); without it (Office and EPUB containers) only the top level is counted.
    """
    _check(data, name, limits, nested=nested, depth=1, tally=_Tally())


def open_zip(data: bytes, name: str) -> zipfile.ZipFile:
    """`data` as a ZIP file; ConversionError naming `name` if it is not one."""
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ConversionError(
            f"'{name}' is not a readable ZIP container ({exc}); the file is corrupt or "
            "truncated. Check the file and try again"
        ) from exc


def _check(
    data: bytes, name: str, limits: ArchiveLimits, *, nested: bool, depth: int, tally: _Tally
) -> None:
    with open_zip(data, name) as archive:
        infos = archive.infolist()
        tally.entries += len(infos)
        tally.uncompressed += sum(info.file_size for info in infos)
        if tally.entries > limits.max_entries:
            raise TooLargeError(
                f"'{name}' holds more than {limits.max_entries} entries (ARCHIVE_MAX_ENTRIES); "
                "unpack it and ingest the files you need, or raise the limit"
            )
        if tally.uncompressed > limits.max_uncompressed_bytes:
            raise TooLargeError(
                f"'{name}' expands to more than {limits.max_uncompressed_bytes} bytes "
                "(ARCHIVE_MAX_UNCOMPRESSED_BYTES); it may be a ZIP bomb. Unpack it and "
                "ingest the files you need, or raise the limit"
            )
        if not nested:
            return
        for info in infos:
            if info.flag_bits & 0x1:
                raise ConversionError(
                    f"'{name}' contains the password-protected entry '{info.filename}'; "
                    "extract the files with the password and ingest them directly"
                )
            if info.is_dir() or extension_of(info.filename) != ".zip":
                continue
            if depth >= limits.max_depth:
                raise ConversionError(
                    f"'{name}' nests archives more than {limits.max_depth} deep "
                    f"('{info.filename}'; ARCHIVE_MAX_DEPTH); unpack the inner archives "
                    "and ingest their files"
                )
            try:
                inner = archive.read(info)
            except (zipfile.BadZipFile, OSError, ValueError, RuntimeError) as exc:
                raise ConversionError(
                    f"'{name}': the entry '{info.filename}' cannot be read ({exc})"
                ) from exc
            _check(inner, info.filename, limits, nested=True, depth=depth + 1, tally=tally)
