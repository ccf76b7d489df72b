"""A ZIP archive's files, each converted as it would be if ingested on its own.

markitdown's zip converter handed every member to whichever of its own converters took it:
text in a legacy code page went through its charset guess (Windows-1252 read as Windows-1250,
see `charset`), a semicolon-separated CSV was cut at commas (`delimited`), and an executable
or a font came out as a few garbled characters, which were indexed; an archive of images only,
or an empty one, became a document holding nothing but its own heading. Here each member goes
the way an uploaded file goes (`DocumentConverter.convert`, after `archive` has bounded the
whole tree); directories, macOS resource forks and members this build cannot convert or that
hold no text are left out, and an archive where no member has text is refused with
`no_text_extracted`, saying what it held. The Markdown keeps markitdown's layout: a line naming
the archive, then `## File: <path>` and the member's Markdown for each member with text.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable

from libs.errors import ConversionError, InvalidInputError, NoTextError, UnsupportedFormatError

# Why a member is left out; an archive without text names them in its refusal.
_LEFT_OUT = (NoTextError, UnsupportedFormatError, InvalidInputError, ConversionError)
_LISTED = 5  # members named in that refusal; the rest are counted


def archive_markdown(data: bytes, name: str, convert: Callable[[bytes, str], str]) -> str:
    """The Markdown of every member of the ZIP `data` that has text, converted by `convert`
    (bytes and a member's path in, its Markdown out, or one of the errors above)."""
    parts = [f"Content from the zip file `{name}`:"]
    left_out: list[tuple[str, Exception]] = []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            path = info.filename
            if info.is_dir() or _is_resource_fork(path):
                continue
            try:
                markdown = convert(archive.read(info), path)
            except _LEFT_OUT as exc:
                left_out.append((path, exc))
                continue
            parts.append(f"## File: {path}\n\n{markdown}")
    if len(parts) == 1:
        raise NoTextError(_nothing_in(name, left_out))
    return "\n\n".join(parts)


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
