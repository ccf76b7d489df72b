"""Which file types the converter takes, which it knows but cannot convert here, and why.

The file name's extension decides the route; it is checked before a worker process is
involved, so an unsupported upload costs nothing. The tool spec lists images and audio as
ingestable, but this deployment has no OCR engine and no speech-to-text: those fail with a
message that says what is missing and what to do instead.
"""

from __future__ import annotations

from enum import Enum

from libs.errors import InvalidInputError, UnsupportedFormatError
from libs.formats import (
    ARCHIVE_EXTENSIONS,
    CODE_EXTENSIONS,
    MARKUP_EXTENSIONS,
    OFFICE_VARIANTS,
    TEXT_EXTENSIONS,
    check_convertible,
)


class Route(Enum):
    PDF = "pdf"
    SLIDES = "slides"
    SHEETS = "sheets"
    TEXT = "text"
    DOCUMENT = "document"
    ARCHIVE = "archive"
    MAIL = "mail"
    CODE = "code"


ROUTES: dict[str, Route] = {
    ".pdf": Route.PDF,
    ".pptx": Route.SLIDES,
    ".ppt": Route.SLIDES,  # PowerPoint 97-2003, read by `powerpoint`
    ".xlsx": Route.SHEETS,
    ".xls": Route.SHEETS,
    ".docx": Route.DOCUMENT,
    ".doc": Route.DOCUMENT,  # Word 97-2003, read by `worddoc`
    ".epub": Route.DOCUMENT,
    ".msg": Route.DOCUMENT,  # Outlook messages (olefile, markitdown[outlook])
    ".eml": Route.MAIL,  # RFC 5322 messages (`mail`)
    ".html": Route.TEXT,
    ".htm": Route.TEXT,
    ".txt": Route.TEXT,
    ".md": Route.TEXT,
    ".csv": Route.TEXT,
    ".tsv": Route.TEXT,
    ".json": Route.TEXT,
    ".xml": Route.TEXT,
    ".ipynb": Route.TEXT,
    ".zip": Route.ARCHIVE,
    # tar archives and compressed files (`tarballs`)
    **{ext: Route.ARCHIVE for ext in ARCHIVE_EXTENSIONS},
    ".odt": Route.DOCUMENT,  # OpenDocument, read by `opendocument`
    ".ods": Route.SHEETS,
    ".odp": Route.SLIDES,
    ".fodt": Route.DOCUMENT,  # flat (single XML) OpenDocument
    ".fods": Route.SHEETS,
    ".fodp": Route.SLIDES,
    ".rtf": Route.DOCUMENT,  # Rich Text Format, read by `rtf`
    **{ext: Route.TEXT for ext in TEXT_EXTENSIONS},
    # LaTeX, Org mode, subtitles and saved web pages (`latex`, `orgmode`, `subtitles`, `mhtml`)
    **{ext: Route.TEXT for ext in MARKUP_EXTENSIONS},
    **{ext: Route.CODE for ext in CODE_EXTENSIONS},  # source code, read by `code`
}
ROUTES.update({variant: ROUTES[base] for variant, base in OFFICE_VARIANTS.items()})
# Text that is its own Markdown, decoded and nothing more (`convert`); Markdown, plain text
# and the documentation and configuration formats read as they are.
VERBATIM = frozenset({".md", ".txt", *TEXT_EXTENSIONS})


def base_name(filename: str) -> str:
    """The last path component, for Windows and POSIX paths alike."""
    return filename.replace("\\", "/").rsplit("/", 1)[-1].strip()


def extension_of(filename: str) -> str:
    name = base_name(filename)
    stem, dot, ext = name.rpartition(".")
    return f".{ext.lower()}" if dot and stem else ""


def type_of(filename: str) -> str:
    """The extension that picks the route: the name's, or `.txt` for a name without one
    (README, LICENSE, Makefile: read as plain text, refused if the bytes are binary)."""
    return extension_of(filename) or ".txt"


def route_for(filename: str) -> Route:
    """The conversion route for `filename`, or an error naming what to do instead."""
    name = base_name(filename)
    if not name:
        raise InvalidInputError("a file name is required to pick the converter (e.g. report.pdf)")
    ext = type_of(name)
    route = ROUTES.get(ext)
    if route is None:
        check_convertible(name)  # raises, with the reason (no OCR, no speech-to-text...)
        raise UnsupportedFormatError(f"cannot convert '{name}': no route for '{ext}' files")
    return route
