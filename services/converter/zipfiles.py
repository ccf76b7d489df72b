"""An archive's files, each converted as it would be if ingested on its own: a ZIP archive's
here, a tar archive's from `tarballs`.

markitdown's zip converter handed every member to whichever of its own converters took it:
text in a legacy code page went through its charset guess (Windows-1252 read as Windows-1250,
see `charset`), a semicolon-separated CSV was cut at commas (`delimited`), and an executable
or a font came out as a few garbled characters, which were indexed; an archive of images only,
or an empty one, became a document holding nothing but its own heading. Here each member goes
the way an uploaded file goes (`DocumentConverter.convert`, after `archive` has bounded the
whole tree); directories, macOS resource forks and members this build cannot convert or that
hold no text are left out, and an archive where no member has text is refused with
`no_text_extracted`, saying what it held. The Markdown keeps markitdown's layout: a line naming
the archive, then `## File: <path>` and the member's Markdown for each member with text, its
headings two levels lower (a member's `# Title` is `### Title`), so that each member's
chunks have the heading path `File: <path> › Title › ...` and no other member's.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Iterable, Iterator

from libs.errors import ConversionError, InvalidInputError, NoTextError, UnsupportedFormatError
from libs.formats import ARCHIVE_EXTENSIONS
from services.converter.formats import Route, extension_of, route_for
from services.converter.headings import demoted

# Why a member is left out; an archive without text names them in its refusal.
_LEFT_OUT = (NoTextError, UnsupportedFormatError, InvalidInputError, ConversionError)
_LISTED = 5  # members named in that refusal; the rest are counted


def zip_members(data: bytes) -> Iterator[tuple[str, bytes]]:
    """The files of the ZIP `data` (bounded by `archive.check_archive` first): path and bytes,
    without folders and macOS resource forks."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            if not info.is_dir() and not _is_resource_fork(info.filename):
                yield info.filename, archive.read(info)


def archive_markdown(
    members: Iterable[tuple[str, bytes]],
    name: str,
    convert: Callable[[bytes, str], str],
    kind: str = "zip file",
) -> str:
    """The Markdown of every member (path and bytes) of the archive `name` that has text,
    converted by `convert` (bytes and a member's path in, its Markdown out, or one of the
    errors above); `kind` names the archive in the first line."""
    parts = [f"Content from the {kind} `{name}`:"]
    left_out: list[tuple[str, Exception]] = []
    for path, data in members:
        if _is_resource_fork(path):
            continue
        try:
            markdown = convert(data, path)
        except _LEFT_OUT as exc:
            left_out.append((path, exc))
            continue
        # The file's own headings below its `## File:` one, so that one file's title is not
        # in the heading path of the files after it.
        parts.append(f"## File: {path}\n\n{demoted(markdown, 2)}")
    if len(parts) == 1:
        raise NoTextError(_nothing_in(name, left_out))
    return "\n\n".join(parts)


def archive_member(convert: Callable[[bytes, str], str]) -> Callable[[bytes, str], str]:
    """`convert` for an archive's files, each as on its own, except source code (left out as
    folder scans leave it out) and a tar archive or compressed file (whose expansion
    `archive.check_archive` could not bound: not opened)."""

    def member(data: bytes, path: str) -> str:
        if extension_of(path) in ARCHIVE_EXTENSIONS:
            raise UnsupportedFormatError(
                f"'{path}' is a tar archive or compressed file inside an archive, which is not "
                "opened; unpack it and ingest its files"
            )
        if route_for(path) is Route.CODE:
            raise UnsupportedFormatError(
                f"'{path}' is source code, which an archive's conversion leaves out as "
                "folder scans do; upload the file itself to index it"
            )
        return convert(data, path)

    return member


def _is_resource_fork(path: str) -> bool:
    """The `__MACOSX/` folder and `._name` files that macOS's Finder adds to archives."""
    return path.startswith("__MACOSX/") or path.rsplit("/", 1)[-1].startswith("._")


def _nothing_in(name: str, left_out: list[tuple[str, Exception]]) -> str:
    if not left_out:
        return f"no text could be extracted from '{name}': the archive holds no files"
    listed = "; ".join(
        f"{path}: {getattr(exc, 'error_code', 'error')}" for path, exc in left_out[:_LISTED]
    )
    more = f"; and {len(left_out) - _LISTED} more" if len(left_out) > _LISTED else ""
    return (
        f"no text could be extracted from '{name}': none of its {len(left_out)} files has "
        f"text ({listed}{more}); the first: {left_out[0][1]}"
    )
